package io.partfs.engine.testing;

import io.partfs.engine.meta.KvStore;
import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Passes every call to a real metadata store and counts requests: each read (get, hget,
 * hgetAll, hlen, getAll) of a read-only view and each transaction is one round trip.
 */
public final class CountingKvStore implements KvStore {
    private final KvStore real;
    private final AtomicLong reads = new AtomicLong();
    private final AtomicLong transactions = new AtomicLong();
    private final Map<String, AtomicLong> byKind = new java.util.concurrent.ConcurrentHashMap<>();

    /** Reads by operation and key kind (the key's leading letters), for diagnosing where requests go. */
    public Map<String, Long> readsByKind() {
        Map<String, Long> out = new java.util.TreeMap<>();
        byKind.forEach((k, v) -> out.put(k, v.get()));
        return out;
    }

    private void count(String op, String key) {
        beforeRequest.accept(op);
        reads.incrementAndGet();
        byKind.computeIfAbsent(op + ":" + key.replaceAll("[0-9_].*$", ""), k -> new AtomicLong()).incrementAndGet();
    }

    private volatile Runnable afterCommit = () -> { };

    /** Runs {@code hook} on the committing thread after each transaction commits, before the caller continues. */
    public void afterCommit(Runnable hook) {
        this.afterCommit = hook;
    }

    private volatile Runnable afterRead = () -> { };
    private volatile java.util.function.Consumer<String> beforeRequest = op -> { };

    /**
     * Runs {@code hook} with the operation's name (get, hgetAll, getAll, ...) before each request
     * a read makes, on the reading thread: for changes another client makes between two requests
     * of one read.
     */
    public void beforeRequest(java.util.function.Consumer<String> hook) {
        this.beforeRequest = hook;
    }
    private volatile boolean failUpdates;

    private final AtomicLong refusedUpdates = new AtomicLong();

    /** Transactions refused while {@link #failUpdates} was on. */
    public long refusedUpdates() {
        return refusedUpdates.get();
    }

    /** Fails every transaction from now on (as an engine that does not answer), or no more. */
    public void failUpdates(boolean fail) {
        this.failUpdates = fail;
    }

    /** Runs {@code hook} on the reading thread after each read, before the caller gets what it read. */
    public void afterRead(Runnable hook) {
        this.afterRead = hook;
    }

    public CountingKvStore(KvStore real) {
        this.real = real;
    }

    public long reads() {
        return reads.get();
    }

    public long transactions() {
        return transactions.get();
    }

    private final Map<Long, AtomicLong> transactionsByThread = new java.util.concurrent.ConcurrentHashMap<>();

    /** Transactions run on the calling thread since the last {@link #reset}: not the background's. */
    public long transactionsOnThisThread() {
        AtomicLong n = transactionsByThread.get(Thread.currentThread().getId());
        return n == null ? 0 : n.get();
    }

    public void reset() {
        byKind.clear();
        txnReads.clear();
        transactionsByThread.clear();
        reads.set(0);
        transactions.set(0);
    }

    private final Map<String, AtomicLong> txnReads = new java.util.concurrent.ConcurrentHashMap<>();

    /**
     * Reads made inside transactions, by operation (get, hget, getAndHget, getAll, ...), each a
     * request to the store; a retried transaction's reads count again.
     */
    public Map<String, Long> transactionReads() {
        Map<String, Long> out = new java.util.TreeMap<>();
        txnReads.forEach((k, v) -> out.put(k, v.get()));
        return out;
    }

    @Override
    public <T> T update(Txn<T> body) throws IOException {
        if (failUpdates) {
            refusedUpdates.incrementAndGet();
            throw new IOException("the metadata engine does not answer (CountingKvStore.failUpdates)");
        }
        transactions.incrementAndGet();
        transactionsByThread.computeIfAbsent(Thread.currentThread().getId(), k -> new AtomicLong()).incrementAndGet();
        T result = real.update(tx -> body.run(new CountingWriter(tx)));
        afterCommit.run();
        return result;
    }

    /** A transaction whose reads are counted in {@link #transactionReads()}. */
    private final class CountingWriter extends io.partfs.engine.meta.ForwardingWriter {
        CountingWriter(Writer tx) {
            super(tx);
        }

        private void count(String op) {
            txnReads.computeIfAbsent(op, k -> new AtomicLong()).incrementAndGet();
        }

        @Override
        public byte[] get(String key) throws IOException {
            count("get");
            return tx.get(key);
        }

        @Override
        public long counter(String key) throws IOException {
            count("counter");
            return tx.counter(key);
        }

        @Override
        public byte[] hget(String hash, String field) throws IOException {
            count("hget");
            return tx.hget(hash, field);
        }

        @Override
        public byte[][] getAndHget(String key, String hash, String field) throws IOException {
            count("getAndHget");
            return tx.getAndHget(key, hash, field);
        }

        @Override
        public Map<String, byte[]> hgetAll(String hash) throws IOException {
            count("hgetAll");
            return tx.hgetAll(hash);
        }

        @Override
        public long hlen(String hash) throws IOException {
            count("hlen");
            return tx.hlen(hash);
        }

        @Override
        public List<Map<String, byte[]>> hgetAllMany(List<String> hashes) throws IOException {
            count("hgetAllMany");
            return tx.hgetAllMany(hashes);
        }

        @Override
        public List<byte[]> hmget(String hash, List<String> fields) throws IOException {
            count("hmget");
            return tx.hmget(hash, fields);
        }

        @Override
        public List<byte[]> getAll(List<String> keys) throws IOException {
            count("getAll");
            return tx.getAll(keys);
        }
    }

    @Override
    public <T> T read(ReadBody<T> body) throws IOException {
        T got = readCounted(body);
        afterRead.run();
        return got;
    }

    private <T> T readCounted(ReadBody<T> body) throws IOException {
        return real.read(r -> body.run(new Reader() {
            @Override
            public byte[] get(String key) throws IOException {
                count("get", key);
                return r.get(key);
            }

            @Override
            public long counter(String key) throws IOException {
                count("counter", key);
                return r.counter(key);
            }

            @Override
            public byte[] hget(String hash, String field) throws IOException {
                count("hget", hash);
                return r.hget(hash, field);
            }

            @Override
            public byte[][] getAndHget(String key, String hash, String field) throws IOException {
                count("getAndHget", key); // one request where the store pipelines the two (Redis)
                return r.getAndHget(key, hash, field);
            }

            @Override
            public Map<String, byte[]> hgetAll(String hash) throws IOException {
                count("hgetAll", hash);
                return r.hgetAll(hash);
            }

            @Override
            public long hlen(String hash) throws IOException {
                count("hlen", hash);
                return r.hlen(hash);
            }

            @Override
            public boolean holdsAnyKey() throws IOException {
                count("holdsAnyKey", "");
                return r.holdsAnyKey();
            }

            @Override
            public void scanKeys(String prefix, KeyPage each) throws IOException {
                count("scanKeys", prefix);
                r.scanKeys(prefix, each);
            }

            @Override
            public List<Map<String, byte[]>> hgetAllMany(List<String> hashes) throws IOException {
                count("hgetAllMany", hashes.isEmpty() ? "" : hashes.get(0));
                return r.hgetAllMany(hashes);
            }

            @Override
            public List<byte[]> hmget(String hash, List<String> fields) throws IOException {
                count("hmget", hash);
                return r.hmget(hash, fields);
            }

            @Override
            public List<byte[]> getAll(List<String> keys) throws IOException {
                count("getAll", keys.isEmpty() ? "" : keys.get(0));
                return r.getAll(keys);
            }
        }));
    }

    @Override
    public long increment(String key, long delta) throws IOException {
        transactions.incrementAndGet();
        return real.increment(key, delta);
    }

    @Override
    public void sync() throws IOException {
        real.sync();
    }

    @Override
    public String describe() {
        return real.describe();
    }

    @Override
    public String durabilityProblem() {
        return real.durabilityProblem();
    }

    @Override
    public java.util.OptionalLong serverTimeMillis() throws IOException {
        return real.serverTimeMillis();
    }

    @Override
    public boolean exclusive() {
        return real.exclusive();
    }

    @Override
    public void close() throws IOException {
        real.close();
    }
}
