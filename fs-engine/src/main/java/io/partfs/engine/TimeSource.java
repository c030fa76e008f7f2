package io.partfs.engine;

/** Wall-clock time in nanoseconds since the epoch; injected so tests can control timestamps. */
@FunctionalInterface
public interface TimeSource {
    long nowNanos();

    /** The system clock at the precision the JVM offers. */
    TimeSource SYSTEM = () -> {
        java.time.Instant now = java.time.Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    };
}
