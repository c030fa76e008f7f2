package io.partfs.engine.meta;

import java.io.IOException;
import java.util.Map;

/**
 * The storage beneath the metadata engine: plain keys, decimal counters and hashes (a key
 * holding field/value pairs), changed only in serializable transactions.
 *
 * <p>{@link #update} runs its body until it commits: an implementation may run it again after a
 * conflict with another client, so a body must have no effect outside the transaction it is
 * given. If the body throws, nothing it wrote is applied. {@link #read} gives no isolation
 * across calls on the reader, only each single read is atomic.
 *
 * <p>Implementations are thread-safe and wrap their library's exceptions in {@link IOException}
 * with a message that names the store but never its password.
 */
public interface KvStore extends java.io.Closeable {

    <T> T update(Txn<T> body) throws IOException;

    <T> T read(ReadBody<T> body) throws IOException;

    /**
     * Atomically adds {@code delta} to a counter outside any transaction; returns the new value.
     * A request a dropped connection cut off is sent again, so the counter may have grown by
     * {@code delta} more than once: for ids (some skipped, none given twice), not for counts.
     */
    long increment(String key, long delta) throws IOException;

    /** Makes every committed transaction durable (fsync of the log, or a no-op where the store decides). */
    void sync() throws IOException;

    /** Where the metadata lives, without credentials. */
    String describe();

    /**
     * The store's own clock (Redis's TIME), in epoch milliseconds, where clients on several
     * machines share the store; empty for an embedded store, whose only clock is this machine's.
     */
    default java.util.OptionalLong serverTimeMillis() throws IOException {
        return java.util.OptionalLong.empty();
    }

    /**
     * Runs {@code action} each time the store's connection is back after it dropped (a Redis
     * restarted, a network cut healed), on a thread of the store's: it must not block. Nothing
     * for an embedded store, which has no connection.
     */
    default void onReconnect(Runnable action) {
    }

    /**
     * Why committed transactions may not survive a restart of the store as it is configured (a
     * Redis without an append-only file), for a warning; null when they do.
     */
    default String durabilityProblem() {
        return null;
    }

    /** True when no other process can change this store while it is open (an embedded database). */
    default boolean exclusive() {
        return false;
    }

    @Override
    void close() throws IOException;

    /** Reads shared by transactions and read-only views. */
    interface Reader {
        /** The value of a plain key, or null. */
        byte[] get(String key) throws IOException;

        /** A counter's value; 0 when it was never set. */
        long counter(String key) throws IOException;

        /** One field of a hash, or null. */
        byte[] hget(String hash, String field) throws IOException;

        /** Fields of one hash (null where missing), in the order asked, in one request where the store allows. */
        default java.util.List<byte[]> hmget(String hash, java.util.List<String> fields) throws IOException {
            java.util.List<byte[]> out = new java.util.ArrayList<>(fields.size());
            for (String f : fields) {
                out.add(hget(hash, f));
            }
            return out;
        }

        /** All fields of a hash (empty when none), in no particular order. */
        Map<String, byte[]> hgetAll(String hash) throws IOException;

        /**
         * At most {@code limit} fields of a hash (all of them when it has fewer), in no particular
         * order, reading no more of a large hash than that where the store allows: for work
         * lists taken a batch at a time.
         */
        default Map<String, byte[]> hgetSome(String hash, int limit) throws IOException {
            Map<String, byte[]> all = hgetAll(hash);
            if (all.size() <= limit) {
                return all;
            }
            Map<String, byte[]> some = new java.util.HashMap<>();
            for (Map.Entry<String, byte[]> e : all.entrySet()) {
                if (some.size() >= limit) {
                    break;
                }
                some.put(e.getKey(), e.getValue());
            }
            return some;
        }

        /** Number of fields in a hash. */
        long hlen(String hash) throws IOException;

        /** All fields of several hashes, in the order asked, in as few requests as the store allows. */
        default java.util.List<Map<String, byte[]>> hgetAllMany(java.util.List<String> hashes) throws IOException {
            java.util.List<Map<String, byte[]>> out = new java.util.ArrayList<>(hashes.size());
            for (String h : hashes) {
                out.add(hgetAll(h));
            }
            return out;
        }

        /**
         * A plain key's value and one field of a hash (null where missing), in one request where
         * the store allows: a directory's inode and one of its entries, as creating a name needs.
         */
        default byte[][] getAndHget(String key, String hash, String field) throws IOException {
            return new byte[][] {get(key), hget(hash, field)};
        }

        /**
         * Whether the store holds anything at all, of any kind: {@code partfs format} refuses a
         * Redis database another program uses, whose keys a volume's could collide with.
         */
        default boolean holdsAnyKey() throws IOException {
            throw new UnsupportedOperationException(getClass().getSimpleName() + " cannot tell whether it is empty");
        }

        /**
         * Hands every plain key that starts with {@code prefix} to {@code each}, a page at a time,
         * in no particular order: a key that exists for the whole scan is handed over at least
         * once; one created or deleted meanwhile may or may not be. A store that keeps hashes
         * and counters among its keys (Redis) hands those over too: callers tell their keys by
         * format. For {@code fsck} and {@code gc}, which read every file's slices whatever
         * directory it is in.
         */
        default void scanKeys(String prefix, KeyPage each) throws IOException {
            throw new UnsupportedOperationException(getClass().getSimpleName() + " cannot scan keys");
        }

        /**
         * Hands every field of a hash with its value to {@code each}, a page at a time, in no
         * particular order, holding no more than a page in memory where the store allows: a
         * field that exists for the whole scan is handed over at least once (Redis may hand one
         * over twice); one set or deleted meanwhile may or may not be. For hashes too long to
         * read whole (the trash and the deletion list, for {@code fsck}, {@code gc} and dumps).
         */
        default void scanHash(String hash, FieldPage each) throws IOException {
            java.util.List<Map.Entry<String, byte[]>> all = new java.util.ArrayList<>(hgetAll(hash).entrySet());
            for (int from = 0; from < all.size(); from += 1000) {
                Map<String, byte[]> page = new java.util.HashMap<>();
                for (Map.Entry<String, byte[]> e : all.subList(from, Math.min(all.size(), from + 1000))) {
                    page.put(e.getKey(), e.getValue());
                }
                each.accept(page);
            }
        }

        /**
         * Hands every field of several hashes to {@code each} as {@link #scanHash} does, hash by
         * hash and a page at a time, in as few requests as the store allows and, where it allows,
         * holding no more than about {@value #SCAN_PAGE_FIELDS} fields in memory: for dumps, which
         * read every directory (most small, some with a million entries). A page never mixes two
         * hashes.
         */
        default void scanHashes(java.util.List<String> hashes, HashPage each) throws IOException {
            for (String h : hashes) {
                scanHash(h, page -> each.accept(h, page));
            }
        }

        /** Values of several plain keys in one request (null where missing), in the order asked. */
        default java.util.List<byte[]> getAll(java.util.List<String> keys) throws IOException {
            java.util.List<byte[]> out = new java.util.ArrayList<>(keys.size());
            for (String k : keys) {
                out.add(get(k));
            }
            return out;
        }
    }

    /** A transaction: reads see the transaction's own writes; writes apply at commit, all or none. */
    interface Writer extends Reader {
        void put(String key, byte[] value);

        void delete(String key);

        void hset(String hash, String field, byte[] value);

        void hdel(String hash, String field);

        /** Deletes a whole hash. */
        void hdelAll(String hash);

        /** Adds to a counter without reading it; the transaction does not conflict on it. */
        void add(String counter, long delta);

        /**
         * Tells the transaction what the caller believes plain key {@code key} holds ({@code null}:
         * missing), from a cache of its own. A store whose reads cost a round trip may answer
         * the transaction's reads of the key with it instead of asking, and then commits only if
         * the key still holds exactly that: when it does not, nothing is written and the body
         * runs again with real reads. So a wrong belief costs a round trip, never correctness.
         * Other stores ignore it. Call it before reading the key.
         */
        default void believe(String key, byte[] value) {
        }

        /** As {@link #believe}, for one field of a hash. */
        default void believeField(String hash, String field, byte[] value) {
        }
    }

    /** About how many fields {@link Reader#scanHashes} holds at once. */
    int SCAN_PAGE_FIELDS = 10_000;

    /** A page of the fields of one of several hashes, from {@link Reader#scanHashes}. */
    @FunctionalInterface
    interface HashPage {
        void accept(String hash, Map<String, byte[]> fields) throws IOException;
    }

    /** A page of a hash's fields and their values, from {@link Reader#scanHash}. */
    @FunctionalInterface
    interface FieldPage {
        void accept(Map<String, byte[]> fields) throws IOException;
    }

    /** A page of keys found by {@link Reader#scanKeys}. */
    @FunctionalInterface
    interface KeyPage {
        void accept(java.util.List<String> keys) throws IOException;
    }

    @FunctionalInterface
    interface Txn<T> {
        T run(Writer tx) throws IOException;
    }

    @FunctionalInterface
    interface ReadBody<T> {
        T run(Reader r) throws IOException;
    }
}
