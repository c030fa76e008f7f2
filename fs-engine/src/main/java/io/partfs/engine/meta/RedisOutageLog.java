package io.partfs.engine.meta;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What the sidecar's log says while Redis is out of reach, in place of lettuce's line per failed
 * reconnect attempt (its {@code ConnectionWatchdog} is set to ERROR in the sidecar's logging):
 * a line when the connection drops, a line a minute while it stays down, a line when it is back
 * and how long it was away. Fed by the events of the client's reads connection, which lettuce
 * reconnects on its own whether or not anything is asked of it. Thread-safe.
 */
final class RedisOutageLog {
    private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(RedisKvStore.class);
    private static final Duration STILL_DOWN_EVERY = Duration.ofMinutes(1);

    private final String description;
    private final Duration timeout;
    /** When the connection dropped ({@link System#nanoTime}), or 0 while it is up. */
    private final AtomicLong downSince = new AtomicLong();
    /** When the last "still down" line was logged, or when the connection dropped. */
    private final AtomicLong lastLine = new AtomicLong();

    RedisOutageLog(String description, Duration timeout) {
        this.description = description;
        this.timeout = timeout;
    }

    void disconnected() {
        long now = System.nanoTime() | 1; // never 0, which means up
        if (downSince.compareAndSet(0, now)) {
            lastLine.set(now);
            log.warn("lost the connection to Redis at {}: reconnecting (every second at most); metadata operations "
                    + "wait for it up to {} (the URL's ?timeout=), then fail with EIO", description, RedisKvStore.seconds(timeout));
        }
    }

    void reconnectFailed(Throwable cause) {
        long since = downSince.get();
        long last = lastLine.get();
        long now = System.nanoTime();
        if (since != 0 && now - last >= STILL_DOWN_EVERY.toNanos() && lastLine.compareAndSet(last, now)) {
            log.warn("Redis at {} still unreachable after {} ({}): check that it runs; reconnecting", description,
                    away(since, now), cause == null ? "no answer" : cause.getMessage());
        }
    }

    /** Says the connection is back if it was down; returns whether it was, once per outage. */
    boolean connected() {
        long since = downSince.getAndSet(0);
        if (since != 0) {
            log.warn("reconnected to Redis at {} after {} away", description, away(since, System.nanoTime()));
        }
        return since != 0;
    }

    /** How long from {@code since} to {@code now} (nanoTime), to a tenth of a second: "95.3 s". */
    private static String away(long since, long now) {
        return RedisKvStore.seconds(Duration.ofMillis((now - since) / 100_000_000 * 100));
    }
}
