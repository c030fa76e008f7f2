package io.partfs.engine.testing;

import io.partfs.engine.object.ObjectStore;
import java.io.IOException;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;

/** Passes every call to a real object store and records the keys it was asked to GET. */
public final class CountingObjectStore implements ObjectStore {
    private final ObjectStore real;
    private final List<String> gets = new CopyOnWriteArrayList<>();

    public CountingObjectStore(ObjectStore real) {
        this.real = real;
    }

    /** Keys read since creation or the last {@link #reset()}, in order. */
    public List<String> gets() {
        return List.copyOf(gets);
    }

    public void reset() {
        gets.clear();
    }

    @Override
    public void put(String key, byte[] data) throws IOException {
        real.put(key, data);
    }

    @Override
    public byte[] get(String key, long offset, int length) throws IOException {
        gets.add(key);
        return real.get(key, offset, length);
    }

    @Override
    public Optional<ObjectInfo> head(String key) throws IOException {
        return real.head(key);
    }

    @Override
    public void delete(String key) throws IOException {
        real.delete(key);
    }

    @Override
    public List<ObjectInfo> list(String prefix, String startAfter, int limit) throws IOException {
        return real.list(prefix, startAfter, limit);
    }

    @Override
    public String describe() {
        return real.describe();
    }

    @Override
    public void close() throws IOException {
        real.close();
    }
}
