package io.partfs.engine.meta;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The writes of one transaction before commit, so its reads can see them. Shared by every
 * {@link KvStore}: each store reads through it and then applies {@link #ops()} in its own way.
 * Not thread-safe: one transaction, one thread.
 */
final class TxnBuffer {
    /** A buffered write, replayed in order at commit. */
    sealed interface Op permits Put, Delete, HSet, HDel, HDelAll, Add {
    }

    record Put(String key, byte[] value) implements Op {
    }

    record Delete(String key) implements Op {
    }

    record HSet(String hash, String field, byte[] value) implements Op {
    }

    record HDel(String hash, String field) implements Op {
    }

    record HDelAll(String hash) implements Op {
    }

    record Add(String counter, long delta) implements Op {
    }

    private static final byte[] DELETED = new byte[0];

    private final java.util.List<Op> ops = new java.util.ArrayList<>();
    private final Map<String, byte[]> keys = new HashMap<>();
    /** Per hash: fields written (DELETED marks a removed field). */
    private final Map<String, Map<String, byte[]>> hashes = new HashMap<>();
    /** Hashes deleted whole in this transaction; their stored fields are invisible. */
    private final java.util.Set<String> clearedHashes = new java.util.HashSet<>();
    private final Map<String, Long> added = new HashMap<>();

    java.util.List<Op> ops() {
        return ops;
    }

    boolean isEmpty() {
        return ops.isEmpty();
    }

    void put(String key, byte[] value) {
        ops.add(new Put(key, value));
        keys.put(key, value);
    }

    void delete(String key) {
        ops.add(new Delete(key));
        keys.put(key, DELETED);
    }

    void hset(String hash, String field, byte[] value) {
        ops.add(new HSet(hash, field, value));
        hashes.computeIfAbsent(hash, h -> new LinkedHashMap<>()).put(field, value);
    }

    void hdel(String hash, String field) {
        ops.add(new HDel(hash, field));
        hashes.computeIfAbsent(hash, h -> new LinkedHashMap<>()).put(field, DELETED);
    }

    void hdelAll(String hash) {
        ops.add(new HDelAll(hash));
        hashes.remove(hash);
        clearedHashes.add(hash);
    }

    void add(String counter, long delta) {
        ops.add(new Add(counter, delta));
        added.merge(counter, delta, Long::sum);
    }

    /** True when the key was written here; then {@link #get} is the answer. */
    boolean hasKey(String key) {
        return keys.containsKey(key);
    }

    byte[] get(String key) {
        byte[] v = keys.get(key);
        return v == DELETED ? null : v;
    }

    long addedTo(String counter) {
        return added.getOrDefault(counter, 0L);
    }

    /** True when the answer for this field is decided here; then {@link #hget} is it. */
    boolean hasField(String hash, String field) {
        Map<String, byte[]> h = hashes.get(hash);
        return (h != null && h.containsKey(field)) || clearedHashes.contains(hash);
    }

    byte[] hget(String hash, String field) {
        Map<String, byte[]> h = hashes.get(hash);
        byte[] v = h == null ? null : h.get(field);
        return v == DELETED ? null : v;
    }

    /** Overlays this transaction's writes on the stored fields of a hash. */
    Map<String, byte[]> mergeHash(String hash, Map<String, byte[]> stored) {
        Map<String, byte[]> out = clearedHashes.contains(hash) ? new HashMap<>() : new HashMap<>(stored);
        Map<String, byte[]> h = hashes.get(hash);
        if (h != null) {
            for (Map.Entry<String, byte[]> e : h.entrySet()) {
                if (e.getValue() == DELETED) {
                    out.remove(e.getKey());
                } else {
                    out.put(e.getKey(), e.getValue());
                }
            }
        }
        return out;
    }

    /** Whether stored fields of the hash still count (it was not deleted whole here). */
    boolean hashCleared(String hash) {
        return clearedHashes.contains(hash);
    }

    /** True when the transaction wrote any field of the hash, so a stored count is not the answer. */
    boolean touchesHash(String hash) {
        return hashes.containsKey(hash) || clearedHashes.contains(hash);
    }
}
