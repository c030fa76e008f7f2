package io.partfs.engine.fuse;

import io.partfs.engine.Errno;
import io.partfs.engine.meta.MetaEngine;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * flock(2) calls that wait for a lock another mount (or another open file) holds: a blocking
 * LOCK_SH or LOCK_EX (FUSE_SETLKW). The worker that got the request hands it over here and
 * goes on serving; one thread tries each waiting lock again, 10 ms after the last try at
 * first and at most 200 ms later, and replies once it is taken. No mount tells another when
 * it unlocks, so a waiter learns of it only by asking. A signal to the waiting process
 * (FUSE_INTERRUPT) ends its wait with EINTR, as flock(2) does.
 */
final class FlockWaits implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(FlockWaits.class);
    private static final long FIRST_RETRY_MILLIS = 10, LAST_RETRY_MILLIS = 200;

    /** Sends the reply to a request; called from the waiting thread. */
    @FunctionalInterface
    interface Replier {
        void reply(long unique, int error);
    }

    private record Wait(long unique, long ino, long owner, MetaEngine.Flock what) {
    }

    private final MetaEngine meta;
    private final Replier replier;
    /** Requests waiting, by their unique id. Removing one is what answers it: only its remover replies. */
    private final Map<Long, Wait> waiting = new ConcurrentHashMap<>();
    private final ScheduledThreadPoolExecutor timer = new ScheduledThreadPoolExecutor(1, r -> {
        Thread t = new Thread(r, "partfs-flock-wait");
        t.setDaemon(true);
        return t;
    });

    FlockWaits(MetaEngine meta, Replier replier) {
        this.meta = meta;
        this.replier = replier;
    }

    /** Waits for {@code what} on {@code ino} for {@code owner}; request {@code unique} is answered when it is taken. */
    void await(long unique, long ino, long owner, MetaEngine.Flock what) {
        Wait w = new Wait(unique, ino, owner, what);
        waiting.put(unique, w);
        schedule(w, FIRST_RETRY_MILLIS);
    }

    private void schedule(Wait w, long delayMillis) {
        try {
            timer.schedule(() -> retry(w, delayMillis), delayMillis, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.RejectedExecutionException closed) {
            answer(w, Errno.EINTR.code());
        }
    }

    private void retry(Wait w, long lastDelay) {
        if (waiting.get(w.unique()) != w) {
            return; // interrupted, or its file released
        }
        boolean taken;
        try {
            taken = meta.flock(w.ino(), w.owner(), w.what());
        } catch (Exception e) {
            log.warn("flock of inode {} failed while waiting: {}", w.ino(), e.toString());
            answer(w, Errno.EIO.code());
            return;
        }
        if (taken && !answer(w, 0)) {
            // interrupted between the try and the answer: the process was told EINTR, so it holds nothing
            unlock(w.ino(), w.owner());
        } else if (!taken) {
            schedule(w, Math.min(lastDelay * 2, LAST_RETRY_MILLIS));
        }
    }

    /** Replies to {@code w} if no one else has; false if someone had. */
    private boolean answer(Wait w, int error) {
        if (!waiting.remove(w.unique(), w)) {
            return false;
        }
        replier.reply(w.unique(), error);
        return true;
    }

    /** FUSE_INTERRUPT for request {@code unique}: a waiting flock(2) ends with EINTR. Others are not ours. */
    void interrupt(long unique) {
        Wait w = waiting.get(unique);
        if (w != null) {
            answer(w, Errno.EINTR.code());
        }
    }

    /**
     * The last close of a file that flock(2) locked (FUSE_RELEASE with FLOCK_UNLOCK): its lock on
     * {@code ino} goes, and so does a wait of its owner still pending.
     */
    void release(long ino, long owner) {
        for (Wait w : waiting.values()) {
            if (w.ino() == ino && w.owner() == owner) {
                answer(w, Errno.EINTR.code());
            }
        }
        unlock(ino, owner);
    }

    private void unlock(long ino, long owner) {
        try {
            meta.flock(ino, owner, MetaEngine.Flock.UNLOCK);
        } catch (Exception e) {
            // the lock stays until this mount's session ends; another mount's LOCK_NB fails meanwhile
            log.warn("dropping the flock lock on inode {} failed: {}", ino, e.toString());
        }
    }

    /** Stops waiting: the mount is going, and with it every request the kernel still waits for. */
    @Override
    public void close() {
        timer.shutdownNow();
        waiting.clear();
    }

    /** Requests waiting now (for tests). */
    int waiting() {
        return waiting.size();
    }
}
