package io.partfs.engine.metrics;

import java.io.IOException;

/**
 * Calls of one component counted by operation: {@code <prefix>_total}, {@code <prefix>_errors_total}
 * and the latency histogram {@code <prefix>_seconds}, all labelled {@code op}.
 */
public final class OperationMetrics {
    /** A call that may fail with an I/O error. */
    @FunctionalInterface
    public interface IoCall<T> {
        T run() throws IOException;
    }

    private final Metrics.Counter calls;
    private final Metrics.Counter errors;
    private final Metrics.Histogram latency;
    /** Per operation, the series to record into: one map lookup per call (FUSE calls are many). */
    private final java.util.Map<String, Series> byOp = new java.util.concurrent.ConcurrentHashMap<>();

    private record Series(java.util.concurrent.atomic.LongAdder calls, Metrics.Buckets latency) {
    }

    public OperationMetrics(Metrics metrics, String prefix, String what) {
        this.calls = metrics.counter(prefix + "_total", what + " by operation.", "op");
        this.errors = metrics.counter(prefix + "_errors_total", what + " that failed, by operation.", "op");
        this.latency = metrics.histogram(prefix + "_seconds", what + ": latency by operation.", "op");
    }

    /** Runs {@code call}, counting it, its time and (when it throws) an error. */
    public <T> T time(String op, IoCall<T> call) throws IOException {
        return time(op, call, null);
    }

    /** As {@link #time(String, IoCall)}, but an exception of type {@code answer} is a result, not an error. */
    public <T> T time(String op, IoCall<T> call, Class<? extends Exception> answer) throws IOException {
        long start = System.nanoTime();
        try {
            return call.run();
        } catch (IOException | RuntimeException e) {
            if (answer == null || !answer.isInstance(e)) {
                errors.inc(op);
            }
            throw e;
        } finally {
            record(op, System.nanoTime() - start, false);
        }
    }

    /** Records a call that took {@code nanos}; {@code failed} counts an error too. */
    public void record(String op, long nanos, boolean failed) {
        Series s = byOp.computeIfAbsent(op, o -> new Series(calls.series(o), latency.series(o)));
        s.calls().increment();
        s.latency().observeNanos(nanos);
        if (failed) {
            errors.inc(op);
        }
    }
}
