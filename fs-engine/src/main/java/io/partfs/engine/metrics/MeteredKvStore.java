package io.partfs.engine.metrics;

import io.partfs.engine.meta.KvStore;
import java.io.IOException;

/**
 * A metadata store that counts transactions (update), reads, counter increments and syncs,
 * with their latency and failures. A transaction retried after a conflict counts once.
 */
public final class MeteredKvStore implements KvStore {
    private final KvStore inner;
    private final OperationMetrics ops;

    public MeteredKvStore(KvStore inner, Metrics metrics) {
        this.inner = inner;
        this.ops = new OperationMetrics(metrics, "partfs_meta_transactions",
                "Metadata engine calls (update is a write transaction; read, increment, sync)");
    }

    @Override
    public <T> T update(Txn<T> body) throws IOException {
        return ops.time("update", () -> inner.update(body));
    }

    @Override
    public <T> T read(ReadBody<T> body) throws IOException {
        return ops.time("read", () -> inner.read(body));
    }

    @Override
    public long increment(String key, long delta) throws IOException {
        return ops.time("increment", () -> inner.increment(key, delta));
    }

    @Override
    public void sync() throws IOException {
        ops.time("sync", () -> {
            inner.sync();
            return null;
        });
    }

    @Override
    public String describe() {
        return inner.describe();
    }

    @Override
    public String durabilityProblem() {
        return inner.durabilityProblem();
    }

    @Override
    public void onReconnect(Runnable action) {
        inner.onReconnect(action);
    }

    @Override
    public java.util.OptionalLong serverTimeMillis() throws IOException {
        return inner.serverTimeMillis();
    }

    @Override
    public boolean exclusive() {
        return inner.exclusive();
    }

    @Override
    public void close() throws IOException {
        inner.close();
    }
}
