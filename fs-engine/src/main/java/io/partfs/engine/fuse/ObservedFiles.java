package io.partfs.engine.fuse;

import io.partfs.engine.Attr;
import io.partfs.engine.PartFs;
import io.partfs.engine.spi.PathObserver;
import java.io.IOException;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What both FUSE drivers do for a {@link PathObserver}: tell it about committed content and
 * changed names, and answer whole-file reads of the files it caches. Paths are mount-relative,
 * without a leading '/'. The observer's failures are logged and never fail an operation; with
 * no observer every method is a no-op.
 */
final class ObservedFiles {
    private static final Logger log = LoggerFactory.getLogger(ObservedFiles.class);
    private static final int MAX_OBSERVED_FILE = 64 << 20;

    private final PartFs fs;
    private final PathObserver observer;
    /** Handles that wrote since their last flush, to tell the observer about committed content. */
    private final Map<Long, Boolean> dirty = new ConcurrentHashMap<>();

    ObservedFiles(PartFs fs, PathObserver observer) {
        this.fs = fs;
        this.observer = observer;
    }

    boolean active() {
        return observer != null;
    }

    interface Notice {
        void run() throws Exception;
    }

    /** Tells the observer something; its failures never fail the filesystem operation. */
    void notice(String what, String path, Notice n) {
        if (observer == null || path == null) {
            return;
        }
        try {
            n.run();
        } catch (Exception | Error e) {
            log.warn("observer failed on {} {}: {}", what, path, e.toString());
        }
    }

    void removed(String path) {
        notice("remove", path, () -> observer.removed(path));
    }

    void renamed(String from, String to) {
        if (from != null && to != null) {
            notice("rename", from, () -> observer.renamed(from, to));
        } else {
            removed(from); // the new name is not known here: forgetting the old one is always safe
        }
    }

    void linked(String existing, String added, Attr a) {
        if (existing != null) {
            notice("link", added, () -> observer.linked(existing, added, a));
        }
    }

    boolean observed(String path) {
        if (observer == null || path == null) {
            return false;
        }
        try {
            return observer.caches(path);
        } catch (RuntimeException e) {
            log.warn("observer failed on {}: {}", path, e.toString());
            return false;
        }
    }

    /** The observer's copy of a file with attributes {@code a}, or null when it has none that is current. */
    byte[] cachedContent(String path, Attr a) {
        try {
            return observer.cached(path, a);
        } catch (RuntimeException e) {
            log.warn("observer failed on read {}: {}", path, e.toString());
            return null;
        }
    }

    /** A handle wrote: its next flush commits content the observer should see. */
    void wrote(long fh) {
        if (observer != null) {
            dirty.put(fh, Boolean.TRUE);
        }
    }

    /** A handle is gone. */
    void released(long fh) {
        dirty.remove(fh);
    }

    /** After a flush that committed writes of an observed file, hands its content over. */
    void committed(String path, long fh) {
        if (dirty.remove(fh) == null || !observed(path)) {
            return;
        }
        notice("commit", path, () -> {
            fs.flushNow(fh); // a close in a temporary part directory only started the flush: the entry needs the committed version
            Attr a = fs.getattr(fs.inodeOf(fh));
            if (a.size() <= MAX_OBSERVED_FILE) {
                byte[] content = fs.readWhole(a);
                if (content.length == a.size()) {
                    observer.store(path, a, content);
                }
            }
        });
    }

    /**
     * The whole content of an observed file: the observer's copy when it is current, else read
     * here (after flushing this handle's writes) and handed to the observer. Null when too large
     * or written through this handle since its last flush.
     */
    byte[] content(String path, long fh) throws IOException {
        fs.flushNow(fh);
        Attr a = fs.getattr(fs.inodeOf(fh));
        if (a.size() > MAX_OBSERVED_FILE || dirty.containsKey(fh)) {
            return null;
        }
        byte[] hit = cachedContent(path, a);
        if (hit != null) {
            return hit;
        }
        byte[] content = fs.readWhole(a);
        if (content.length == a.size()) {
            notice("fill", path, () -> observer.store(path, a, content));
        }
        return content;
    }
}
