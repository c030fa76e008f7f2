package io.partfs.engine.meta;

import io.partfs.engine.TimeSource;
import java.io.IOException;

/**
 * The volume's clock: the metadata store's (Redis's TIME), read as this machine's clock plus
 * the difference last measured. Heartbeats are written and judged by it, and trash hours
 * named and expired by it, so that mounts on machines whose clocks disagree still agree on
 * which mount is alive and which trash is due: a mount five minutes behind is no longer taken
 * for crashed by the others. Measured at every heartbeat ({@link #sync}) and, in processes
 * without one (gc, status), before the first judgment ({@link #fresh}); between measurements a
 * step of this machine's clock shows until the next. An embedded store has no clock of its own:
 * there the volume's clock is this machine's.
 */
final class StoreClock implements TimeSource {
    private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(StoreClock.class);

    /** How old a measurement {@link #fresh} accepts: the heartbeat interval. */
    static final long FRESH_NANOS = MetaEngine.HEARTBEAT.toNanos();

    private final KvStore kv;
    private final TimeSource local;
    private final boolean follow;
    /** The store's clock minus {@code local}, in nanoseconds, as last measured. */
    private volatile long offsetNanos;
    /** {@code local} reading of the last measurement; {@link Long#MIN_VALUE} before the first. */
    private volatile long measuredAt = Long.MIN_VALUE;

    /** {@code local} corrected to the store's clock when {@code follow}; {@code local} as it is otherwise (tests' fake clocks). */
    StoreClock(KvStore kv, TimeSource local, boolean follow) {
        this.kv = kv;
        this.local = local;
        this.follow = follow;
    }

    @Override
    public long nowNanos() {
        return local.nowNanos() + offsetNanos;
    }

    long nowMillis() {
        return nowNanos() / 1_000_000;
    }

    /**
     * Measures the store's clock against this machine's (against the middle of the round trip)
     * and returns the difference in milliseconds, or empty where the store has no clock (or it
     * is not followed). Fails as the store does: the caller's next request would too.
     */
    java.util.OptionalLong sync() throws IOException {
        if (!follow) {
            return java.util.OptionalLong.empty();
        }
        java.util.OptionalLong measured = measure(kv, local);
        long after = local.nowNanos();
        if (measured.isEmpty()) {
            measuredAt = after;
            return measured;
        }
        long offset = measured.getAsLong();
        if (measuredAt != Long.MIN_VALUE && Math.abs(offset - offsetNanos) > 10_000_000_000L) {
            log.info("this machine's clock moved {} s against the clock of {}, which heartbeats and the trash follow",
                    String.format(java.util.Locale.ROOT, "%.1f", (offsetNanos - offset) / 1e9), kv.describe());
        }
        offsetNanos = offset;
        measuredAt = after;
        return java.util.OptionalLong.of(offset / 1_000_000);
    }

    /**
     * {@code kv}'s clock minus {@code local}, in nanoseconds, against the middle of the round
     * trip; empty where the store has no clock of its own.
     */
    static java.util.OptionalLong measure(KvStore kv, TimeSource local) throws IOException {
        long before = local.nowNanos();
        java.util.OptionalLong server = kv.serverTimeMillis();
        long after = local.nowNanos();
        return server.isEmpty() ? server : java.util.OptionalLong.of(server.getAsLong() * 1_000_000 - (before + (after - before) / 2));
    }

    /** {@link #sync} unless measured within {@link #FRESH_NANOS}. */
    void fresh() throws IOException {
        long at = measuredAt;
        if (follow && (at == Long.MIN_VALUE || Math.abs(local.nowNanos() - at) > FRESH_NANOS)) {
            sync();
        }
    }
}
