package io.partfs.engine.testing;

import io.partfs.engine.object.ObjectStore;
import java.io.IOException;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * Passes every call to a real object store and records the keys it was asked to GET and how
 * many PUTs it saw; {@link #failPuts} makes it act as a store that is down for writes.
 */
public final class CountingObjectStore implements ObjectStore {
    private final ObjectStore real;
    private final List<String> gets = new CopyOnWriteArrayList<>();
    private final java.util.concurrent.atomic.AtomicInteger puts = new java.util.concurrent.atomic.AtomicInteger();
    private final java.util.concurrent.atomic.AtomicInteger deletes = new java.util.concurrent.atomic.AtomicInteger();
    private final java.util.concurrent.atomic.AtomicInteger deleteRequests = new java.util.concurrent.atomic.AtomicInteger();
    private volatile boolean failPuts;
    private volatile boolean unreachable;
    private final java.util.concurrent.atomic.AtomicReference<java.util.concurrent.CountDownLatch[]> held =
            new java.util.concurrent.atomic.AtomicReference<>();

    public CountingObjectStore(ObjectStore real) {
        this.real = real;
    }

    /** Keys read since creation or the last {@link #reset()}, in order. */
    public List<String> gets() {
        return List.copyOf(gets);
    }

    public void reset() {
        gets.clear();
        puts.set(0);
        deletes.set(0);
        deleteRequests.set(0);
    }

    /** PUTs tried since creation or the last {@link #reset()}, failed ones included. */
    public int puts() {
        return puts.get();
    }

    /** DELETEs asked for since creation or the last {@link #reset()}. */
    public int deletes() {
        return deletes.get();
    }

    /** Requests that deleted objects (one DeleteObjects of many keys counts once) since creation or the last {@link #reset()}. */
    public int deleteRequests() {
        return deleteRequests.get();
    }

    /** Reports the store unreachable (true), as an S3 store does once a request failed all its attempts, or not. */
    public void unreachable(boolean down) {
        unreachable = down;
    }

    @Override
    public boolean unreachable() {
        return unreachable;
    }

    private final java.util.concurrent.atomic.AtomicInteger probes = new java.util.concurrent.atomic.AtomicInteger();
    private final java.util.concurrent.atomic.AtomicInteger heads = new java.util.concurrent.atomic.AtomicInteger();

    /** HEAD requests so far. */
    public int heads() {
        return heads.get();
    }

    /** Calls of {@link #answers} made while the store was {@link #unreachable}: the probes an S3 store would send. */
    public int probes() {
        return probes.get();
    }

    @Override
    public boolean answers() {
        if (unreachable) {
            probes.incrementAndGet();
        }
        return !unreachable;
    }

    /** From now on every deleteAll of some keys fails (true) or goes through again (false). */
    public void failDeletes(boolean fail) {
        failDeletes = fail;
    }

    private volatile boolean failDeletes;

    /** From now on every PUT fails (true) or goes through again (false). */
    public void failPuts(boolean fail) {
        failPuts = fail;
    }

    /**
     * The next PUT waits in the store until {@code release} opens (at most 60 s); the latch
     * returned opens when that PUT has arrived.
     */
    public java.util.concurrent.CountDownLatch holdNextPut(java.util.concurrent.CountDownLatch release) {
        java.util.concurrent.CountDownLatch arrived = new java.util.concurrent.CountDownLatch(1);
        held.set(new java.util.concurrent.CountDownLatch[] {arrived, release});
        return arrived;
    }

    @Override
    public void put(String key, byte[] data) throws IOException {
        puts.incrementAndGet();
        java.util.concurrent.CountDownLatch[] hold = held.getAndSet(null);
        if (hold != null) {
            hold[0].countDown();
            try {
                hold[1].await(60, java.util.concurrent.TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new java.io.InterruptedIOException("held PUT interrupted");
            }
        }
        if (failPuts) {
            throw new io.partfs.engine.object.ObjectStoreException(io.partfs.engine.object.ObjectStoreException.Kind.UNAVAILABLE,
                    "put " + key + " failed: the test store is down", null);
        }
        real.put(key, data);
    }

    @Override
    public byte[] get(String key, long offset, int length) throws IOException {
        gets.add(key);
        return real.get(key, offset, length);
    }

    @Override
    public Optional<ObjectInfo> head(String key) throws IOException {
        heads.incrementAndGet();
        return real.head(key);
    }

    @Override
    public void delete(String key) throws IOException {
        deletes.incrementAndGet();
        deleteRequests.incrementAndGet();
        real.delete(key);
    }

    @Override
    public void deleteAll(List<String> keys) throws IOException {
        if (failDeletes && !keys.isEmpty()) {
            throw new IOException("delete of " + keys.size() + " objects failed: the test store refuses deletions");
        }
        if (!keys.isEmpty()) {
            deletes.addAndGet(keys.size());
            deleteRequests.incrementAndGet();
        }
        real.deleteAll(keys);
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
