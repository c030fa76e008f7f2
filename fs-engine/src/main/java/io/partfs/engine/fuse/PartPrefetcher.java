package io.partfs.engine.fuse;

import io.partfs.engine.DirEntry;
import io.partfs.engine.FileType;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Metadata readahead for MergeTree: when a directory holding parts is listed (ClickHouse
 * loading a table), loads the parts' listings from the metadata engine in batches (a few
 * requests for {@link #BATCH} parts, not two per part) and lists every part directory through
 * the mount on threads of its own, so the kernel caches each file's name and attributes from
 * one READDIRPLUS per part instead of asking for them one stat at a time while ClickHouse
 * checks the part. Each part listed is then handed to a {@link PartListed} on another thread
 * (the kernel driver stores the part's cached metadata files into the page cache there).
 *
 * <p>A part directory is a name {@code <partition>_<min>_<max>_<level>[_<mutation>]}; tmp_*,
 * detached and everything else are left alone. A table directory is prefetched at most once
 * in {@link #MIN_INTERVAL_SECONDS} (or the entry timeout if longer): ClickHouse lists its table
 * directories again and again while it runs (cleanup of temporary directories), and parts do
 * not change once named, so readahead is for startup, not for every listing. Listing through the
 * mount keeps the kernel's own rules: nothing is cached that a lookup would not have cached.
 *
 * <p>One exception: a listing that is the same as the last one this mount served for the
 * directory. The kernel keeps a listing it read (FOPEN_CACHE_DIR) until the directory changes,
 * so the same listing asked for again means the kernel dropped it (memory pressure, a drop of
 * the caches) and with it, most likely, what the last readahead gave it: ClickHouse restarted
 * then, against a sidecar that kept running, would load every part without readahead. The
 * kernel also drops listings of idle tables while ClickHouse runs, which needs no readahead (a
 * running ClickHouse holds its parts' metadata itself), so such a table is read ahead again only
 * when one of its parts is then listed too, as ClickHouse does loading a table, within
 * {@link #DROPPED_WAIT_NANOS}. A listing that changed (a new part, a temporary directory) keeps
 * the rule above.
 */
final class PartPrefetcher implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(PartPrefetcher.class);
    static final long MIN_INTERVAL_SECONDS = 600;
    /** Parts whose listings are loaded from the metadata engine together. */
    static final int BATCH = 16;
    static final Pattern PART = Pattern.compile("[A-Za-z0-9-]+_\\d+_\\d+_\\d+(_\\d+)?");

    /** Loads directory listings (with their entries' attributes) into the metadata cache. */
    interface ListingLoader {
        void load(List<Long> dirs) throws IOException;
    }

    /** Told about each part directory once the kernel has its listing. */
    interface PartListed {
        void listed(String path, long ino);
    }

    private final Path mountPoint;
    private final ListingLoader loader;
    private final PartListed partListed;
    private final long minIntervalNanos;
    private final ExecutorService pool;
    /**
     * Runs {@link PartListed} on a thread of its own: what it does (reading cached files) must
     * not hold up the listings, which are what keeps ClickHouse's lookups away. Parts it cannot
     * take up fast enough are dropped.
     */
    private final ExecutorService afterListing;
    /** By table directory: its last readahead and the last listing served. */
    private final Map<Long, Table> tables = new ConcurrentHashMap<>();
    private volatile boolean closed;
    /** Each prefetch thread's listing process, and all of them, to stop at close. */
    private final ThreadLocal<ChildLister> listers = new ThreadLocal<>();
    private final java.util.Queue<ChildLister> allListers = new java.util.concurrent.ConcurrentLinkedQueue<>();

    PartPrefetcher(Path mountPoint, double entryTimeoutSeconds, int threads, ListingLoader loader, PartListed partListed) {
        this.mountPoint = mountPoint;
        this.loader = loader;
        this.partListed = partListed;
        this.minIntervalNanos = (long) (Math.max(entryTimeoutSeconds, MIN_INTERVAL_SECONDS) * 1e9);
        this.pool = new java.util.concurrent.ThreadPoolExecutor(threads, threads, 0, TimeUnit.SECONDS,
                new java.util.concurrent.PriorityBlockingQueue<>(), r -> {
                    Thread t = new Thread(r, "partfs-prefetch");
                    t.setDaemon(true);
                    return t;
                });
        this.afterListing = new java.util.concurrent.ThreadPoolExecutor(1, 1, 0, TimeUnit.SECONDS,
                new java.util.concurrent.LinkedBlockingQueue<>(10_000), r -> {
                    Thread t = new Thread(r, "partfs-prefetch-store");
                    t.setDaemon(true);
                    return t;
                }, new java.util.concurrent.ThreadPoolExecutor.DiscardPolicy());
    }

    /** A directory at mount-relative {@code path} (inode {@code ino}) was listed with these entries. */
    void listed(String path, long ino, List<DirEntry> entries) {
        if (closed || path == null) {
            return;
        }
        partOfDroppedListing(path);
        List<DirEntry> parts = new ArrayList<>();
        for (DirEntry e : entries) {
            if (e.type() == FileType.DIRECTORY && PART.matcher(e.name()).matches()) {
                parts.add(e);
            }
        }
        if (parts.isEmpty()) {
            return;
        }
        long now = System.nanoTime();
        long listing = fingerprint(entries);
        Table t = tables.computeIfAbsent(ino, k -> new Table());
        synchronized (t) {
            boolean same = t.lastListing == listing;
            t.lastListing = listing;
            t.dropped = null;
            if (t.prefetchedAt != 0 && now - t.prefetchedAt < minIntervalNanos) {
                if (same && t.batchesLeft.get() == 0) {
                    t.dropped = new Dropped(path, parts, now); // read ahead again if its parts are loaded
                    dropped.put(path, t);
                }
                return;
            }
            t.prefetchedAt = now;
            t.batchesLeft.addAndGet(batches(parts));
        }
        prefetch(path, parts, t);
    }

    /**
     * {@code path} is being listed: if it is a part directory of a table whose listing the
     * kernel dropped, that table's parts are being loaded (ClickHouse restarted), and they are
     * read ahead again. This prefetcher lists the parts of a table only while it reads it ahead,
     * and a table's listing counts as dropped only once that is over, so the lister is someone else.
     */
    private void partOfDroppedListing(String path) {
        int slash = path.lastIndexOf('/');
        if (dropped.isEmpty() || slash < 0 || !PART.matcher(path.substring(slash + 1)).matches()) {
            return;
        }
        Table t = dropped.remove(path.substring(0, slash));
        if (t == null) {
            return;
        }
        Dropped d;
        synchronized (t) {
            d = t.dropped;
            t.dropped = null;
            if (d == null || System.nanoTime() - d.atNanos > DROPPED_WAIT_NANOS) {
                return;
            }
            t.prefetchedAt = System.nanoTime();
            t.batchesLeft.addAndGet(batches(d.parts));
        }
        prefetch(d.path, d.parts, t);
    }

    private static int batches(List<DirEntry> parts) {
        return (parts.size() + BATCH - 1) / BATCH;
    }

    private void prefetch(String path, List<DirEntry> parts, Table t) {
        for (int i = 0; i < parts.size(); i += BATCH) {
            pool.execute(new Task(i / BATCH, sequence.getAndIncrement(), path, parts.subList(i, Math.min(parts.size(), i + BATCH)), t));
        }
    }

    /**
     * How long after its listing came back unchanged a table waits for one of its parts to be
     * listed; ClickHouse loading a table lists its parts right after the table.
     */
    static final long DROPPED_WAIT_NANOS = TimeUnit.SECONDS.toNanos(60);

    /** Tables whose listing came back unchanged, by path, until one of their parts is listed. */
    private final Map<String, Table> dropped = new ConcurrentHashMap<>();

    /** A table listing the kernel asked for again unchanged: its parts, for a readahead. */
    private record Dropped(String path, List<DirEntry> parts, long atNanos) {
    }

    /** A table directory's readahead state; guarded by itself. */
    private static final class Table {
        /** When its last readahead began (0: never). */
        long prefetchedAt;
        /** {@link #fingerprint} of the last listing served. */
        long lastListing;
        /** Its listing came back unchanged: read it ahead when one of its parts is listed. */
        Dropped dropped;
        /** Batches of its readahead not yet done (dropped ones count as done). */
        final java.util.concurrent.atomic.AtomicInteger batchesLeft = new java.util.concurrent.atomic.AtomicInteger();
    }

    /** A hash of a listing's names and inodes, in the order served: equal for the same listing. */
    static long fingerprint(List<DirEntry> entries) {
        long h = entries.size();
        for (DirEntry e : entries) {
            h = h * 1_000_003L + e.name().hashCode();
            h = h * 1_000_003L + e.ino();
        }
        return h;
    }

    private final java.util.concurrent.atomic.AtomicLong sequence = new java.util.concurrent.atomic.AtomicLong();

    /**
     * A batch of parts to load and list. The k-th batch of every listed directory goes before
     * the (k+1)-th of any: ClickHouse loads its tables side by side, each part by part in name
     * order, so every table gets its next parts ahead of it instead of one table getting all of
     * them first.
     */
    private final class Task implements Runnable, Comparable<Task> {
        final int index;
        final long seq;
        final String dir;
        final List<DirEntry> parts;
        final Table table;

        Task(int index, long seq, String dir, List<DirEntry> parts, Table table) {
            this.index = index;
            this.seq = seq;
            this.dir = dir;
            this.parts = parts;
            this.table = table;
        }

        @Override
        public void run() {
            try {
                prefetch();
            } finally {
                table.batchesLeft.decrementAndGet();
            }
        }

        private void prefetch() {
            if (closed) {
                return;
            }
            try {
                loader.load(parts.stream().map(DirEntry::ino).toList());
            } catch (IOException | RuntimeException e) {
                log.debug("loading the listings of {} parts in {} failed: {}", parts.size(), dir, e.toString());
            }
            for (DirEntry part : parts) {
                String path = dir.isEmpty() ? part.name() : dir + "/" + part.name();
                if (list(mountPoint.resolve(path)) && !closed) {
                    afterListing.execute(() -> {
                        if (!closed) {
                            partListed.listed(path, part.ino());
                        }
                    });
                }
            }
        }

        @Override
        public int compareTo(Task o) {
            return index != o.index ? Integer.compare(index, o.index) : Long.compare(seq, o.seq);
        }
    }

    /**
     * Lists {@code dir} through the mount, in this thread's {@link ChildLister} (never in this
     * process: see there); false when it could not be (removed or renamed meanwhile). The kernel
     * caches what READDIRPLUS returned.
     */
    private boolean list(Path dir) {
        if (closed) {
            return false;
        }
        try {
            ChildLister l = listers.get();
            if (l == null || !l.alive()) {
                l = new ChildLister();
                listers.set(l);
                allListers.add(l);
            }
            return l.list(dir);
        } catch (IOException | RuntimeException e) {
            log.debug("prefetch of {} skipped: {}", dir, e.toString());
            ChildLister l = listers.get();
            if (l != null) {
                l.close();
                listers.remove();
            }
            return false;
        }
    }

    /** Stops prefetching and waits (briefly) for listings in flight, so the mount can go. */
    @Override
    public void close() {
        closed = true;
        pool.shutdownNow();
        afterListing.shutdownNow();
        try {
            pool.awaitTermination(10, TimeUnit.SECONDS);
            afterListing.awaitTermination(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            allListers.forEach(ChildLister::close);
        }
    }
}
