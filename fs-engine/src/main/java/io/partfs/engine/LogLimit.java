package io.partfs.engine;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * Keeps a warning that recurs from flooding the log: at most one line an interval, and that
 * line says how many were left out since the one before. An object store that is down or a
 * disk that is full fails every request the same way; a line for each staged block, file or
 * FUSE operation would fill the log, and the disk it is on, with one message.
 *
 * <pre>{@code
 * uploadFailures.warn(log, "upload of {} failed: {}", key, e.getMessage());
 * }</pre>
 */
public final class LogLimit {
    private final long intervalNs;
    private final LongSupplier clock;
    /** When the last line was let through ({@link #clock}, ns), or 0. */
    private final AtomicLong last = new AtomicLong();
    private final AtomicLong leftOut = new AtomicLong();

    public LogLimit(Duration interval) {
        this(interval, System::nanoTime);
    }

    LogLimit(Duration interval, LongSupplier clock) {
        this.intervalNs = interval.toNanos();
        this.clock = clock;
    }

    /** Logs a warning unless one was logged less than an interval ago; the line says how many were left out. */
    public void warn(org.slf4j.Logger log, String format, Object... args) {
        String more = admit();
        if (more != null) {
            log.warn(format + "{}", withMore(args, more));
        }
    }

    /** As {@link #warn}, at level ERROR. */
    public void error(org.slf4j.Logger log, String format, Object... args) {
        String more = admit();
        if (more != null) {
            log.error(format + "{}", withMore(args, more));
        }
    }

    private static Object[] withMore(Object[] args, String more) {
        Object[] all = java.util.Arrays.copyOf(args, args.length + 1);
        all[args.length] = more;
        return all;
    }

    /**
     * Whether to log this occurrence: null if not (it is counted); otherwise what to append to
     * the line, empty or saying how many were left out since the last one logged.
     */
    String admit() {
        long now = clock.getAsLong();
        long before = last.get();
        if ((before != 0 && now - before < intervalNs) || !last.compareAndSet(before, Math.max(1, now))) {
            leftOut.incrementAndGet();
            return null;
        }
        long n = leftOut.getAndSet(0);
        return n == 0 ? "" : " (and " + n + " more like it not logged since " + seconds(now - before) + " s ago)";
    }

    private static String seconds(long nanos) {
        return String.format("%.0f", nanos / 1e9);
    }
}
