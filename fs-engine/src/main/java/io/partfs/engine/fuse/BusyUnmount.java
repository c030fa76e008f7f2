package io.partfs.engine.fuse;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Unmounting a mount that may still be in use. The kernel refuses a plain unmount while a
 * process has a file or its working directory there. Detaching it lazily at once would take it
 * out of the namespace while ClickHouse still runs: its files open now keep working, but its
 * next open of an absolute path would reach the directory beneath the mount (guarded with mode
 * 000, which root passes). So the mount stays attached, and serving, while a plain unmount is
 * retried for a grace period; only a mount still busy after it is detached lazily.
 */
final class BusyUnmount {
    private static final Logger log = LoggerFactory.getLogger(BusyUnmount.class);
    private static final long RETRY_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
    /** Plain unmounts refused as busy, in this process (tests wait on it). */
    static final java.util.concurrent.atomic.AtomicLong REFUSED = new java.util.concurrent.atomic.AtomicLong();

    /** One way of unmounting; returns null when done, or why not (as the tool or errno said it). */
    interface Attempt {
        String run() throws IOException;
    }

    private BusyUnmount() {}

    /**
     * Unmounts {@code mp} with {@code plain}, retried for {@code grace} while it fails, then with
     * {@code lazy}. Returns whether the mount had to be detached lazily.
     */
    static boolean unmount(Path mp, Duration grace, Attempt plain, Attempt lazy) throws IOException {
        long start = System.nanoTime();
        long deadline = start + grace.toNanos();
        String busy = null;
        while (Mounts.isMounted(mp)) {
            String why = plain.run();
            if (why == null) {
                if (busy != null) {
                    log.info("{}: the files open there were closed; unmounted after {} ms", mp,
                            TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
                }
                return false;
            }
            REFUSED.incrementAndGet();
            if (busy == null) {
                busy = why;
                java.util.List<String> holders = Mounts.holders(mp, 5);
                log.warn("{} is busy ({}: {}): it keeps serving while waiting up to {} for the files open there to close",
                        mp, why, holders.isEmpty() ? "lsof " + mp : "used by " + String.join(", ", holders), text(grace));
            }
            if (System.nanoTime() - deadline >= 0) {
                log.warn("{} is still busy after {}; detaching it lazily: the files open there keep working until they "
                        + "are closed, new opens no longer reach PartFS", mp, text(grace));
                String failed = lazy.run();
                if (failed != null && Mounts.isMounted(mp)) {
                    throw new IOException("cannot unmount " + mp + ": " + failed + "; close what uses it (lsof " + mp + ")");
                }
                return true;
            }
            LockSupport.parkNanos(RETRY_NANOS); // poll interval
        }
        return false;
    }

    /**
     * Cuts off a lazily detached mount whose files are still open after they were served for
     * {@code served}: aborts its FUSE connection ({@code connection}, its fusectl directory), so
     * the threads serving it end and those files get errors (ENOTCONN) from now on, rather than
     * reaching a volume that its owner closes next (and whose buffered writes it flushes then).
     */
    static void cutOff(Path mp, Path connection, Duration served) {
        if (connection == null) { // not found in mountinfo at mount time
            log.warn("{}: files are still open on the detached mount after another {}; its FUSE connection is unknown, so it "
                    + "ends only when this process exits", mp, text(served));
            return;
        }
        log.warn("{}: files are still open on the detached mount after another {}; its FUSE connection is aborted: they get "
                + "errors from now on", mp, text(served));
        try {
            Mounts.abort(connection, mp.toString());
        } catch (IOException e) {
            log.warn("{}", e.getMessage());
        }
    }

    private static String text(Duration d) {
        return d.toMillis() % 1000 == 0 ? d.toSeconds() + " s" : d.toMillis() + " ms";
    }
}
