package io.partfs.engine.testing;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/** Waiting for a condition in tests: checked every 10 ms until it holds or a deadline passes, never a fixed sleep. */
public final class Poll {
    private Poll() {
    }

    /** Returns once {@code condition} holds; fails with {@code what} after 30 s. */
    public static void until(BooleanSupplier condition, String what) {
        until(condition, Duration.ofSeconds(30), what);
    }

    /** Returns once {@code condition} holds; fails with {@code what} after {@code limit}. */
    public static void until(BooleanSupplier condition, Duration limit, String what) {
        long deadline = System.nanoTime() + limit.toNanos();
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, what + ": not within " + limit.toSeconds() + " s");
            LockSupport.parkNanos(10_000_000);
        }
    }
}
