package io.partfs.engine.metrics;

import io.partfs.engine.object.ObjectNotFoundException;
import io.partfs.engine.object.ObjectStore;
import java.io.IOException;
import java.util.List;
import java.util.Optional;

/**
 * An object store that counts what passes through it: requests by operation, their latency,
 * failures and bytes moved. A missing key on get is the caller's business, not an error.
 */
public final class MeteredObjectStore implements ObjectStore {
    private final ObjectStore inner;
    private final OperationMetrics ops;
    private final Metrics.Counter bytes;

    public MeteredObjectStore(ObjectStore inner, Metrics metrics) {
        this.inner = inner;
        this.ops = new OperationMetrics(metrics, "partfs_object_requests", "Object store requests");
        this.bytes = metrics.counter("partfs_object_bytes_total", "Bytes uploaded (put) and downloaded (get).", "op");
        metrics.gauge("partfs_object_store_unreachable", "1 while the object store is unreachable: a request failed all "
                + "its attempts and none succeeded since (requests are then tried once each), else 0.",
                () -> inner.unreachable() ? 1 : 0);
    }

    /** A missing key is an answer, not a failed request. */
    private <T> T timed(String op, OperationMetrics.IoCall<T> call) throws IOException {
        return ops.time(op, call, ObjectNotFoundException.class);
    }

    @Override
    public void put(String key, byte[] data) throws IOException {
        timed("put", () -> {
            inner.put(key, data);
            return null;
        });
        bytes.add(data.length, "put");
    }

    @Override
    public byte[] get(String key, long offset, int length) throws IOException {
        byte[] b = timed("get", () -> inner.get(key, offset, length));
        bytes.add(b.length, "get");
        return b;
    }

    @Override
    public Optional<ObjectInfo> head(String key) throws IOException {
        return timed("head", () -> inner.head(key));
    }

    @Override
    public void delete(String key) throws IOException {
        timed("delete", () -> {
            inner.delete(key);
            return null;
        });
    }

    @Override
    public void deleteAll(List<String> keys) throws IOException {
        timed("delete", () -> {
            inner.deleteAll(keys);
            return null;
        });
    }

    /** The store's own scan (parallel listings, or one walk of a local directory); its listings are not timed. */
    @Override
    public void scan(String prefix, int depth, int threads, IoConsumer<ObjectInfo> each) throws IOException {
        inner.scan(prefix, depth, threads, each);
    }

    @Override
    public List<ObjectInfo> list(String prefix, String startAfter, int limit) throws IOException {
        return timed("list", () -> inner.list(prefix, startAfter, limit));
    }

    @Override
    public String describe() {
        return inner.describe();
    }

    @Override
    public Optional<LocalSpace> localSpace() {
        return inner.localSpace();
    }

    @Override
    public boolean unreachable() {
        return inner.unreachable();
    }

    @Override
    public boolean answers() {
        return inner.answers();
    }

    @Override
    public java.nio.file.Path localFile(String key) {
        return inner.localFile(key);
    }

    @Override
    public void close() throws IOException {
        inner.close();
    }
}
