package io.partfs.engine.meta;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A transaction of any {@link KvStore}: reads go to the store's {@code stored} reader unless
 * this transaction wrote the key, writes are buffered until the store applies {@link #ops()}
 * in its own way at commit. Not thread-safe: one transaction, one thread.
 *
 * <p>Beliefs ({@link #believe}): when the store trusts them, a read of a believed key that the
 * transaction did not write is answered with the belief and listed in {@link #beliefsUsed()};
 * the store must then check at commit that each still holds, and commit nothing otherwise.
 */
final class TxnBuffer implements KvStore.Writer {
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
    private final KvStore.Reader stored;
    private final boolean trustBeliefs;
    /** Believed values of plain keys (MISSING: believed absent), and of hash fields by hash. */
    private final Map<String, byte[]> believedKeys = new HashMap<>();
    private final Map<String, Map<String, byte[]>> believedFields = new HashMap<>();
    private final java.util.Set<Belief> used = new java.util.LinkedHashSet<>();

    /** A belief a read was answered with: a plain key ({@code field} null) or a hash field; {@code value} null: missing. */
    record Belief(String key, String field, byte[] value) {
        @Override
        public boolean equals(Object o) {
            return o instanceof Belief b && key.equals(b.key) && java.util.Objects.equals(field, b.field);
        }

        @Override
        public int hashCode() {
            return key.hashCode() * 31 + java.util.Objects.hashCode(field);
        }
    }

    private static final byte[] MISSING = new byte[0];

    /** A transaction that ignores beliefs: every read it cannot answer itself goes to {@code stored}. */
    TxnBuffer(KvStore.Reader stored) {
        this(stored, false);
    }

    /** @param trustBeliefs answer reads of believed keys with the beliefs (the store checks them at commit) */
    TxnBuffer(KvStore.Reader stored, boolean trustBeliefs) {
        this.stored = stored;
        this.trustBeliefs = trustBeliefs;
    }

    @Override
    public void believe(String key, byte[] value) {
        if (trustBeliefs) {
            believedKeys.put(key, value == null ? MISSING : value);
        }
    }

    @Override
    public void believeField(String hash, String field, byte[] value) {
        if (trustBeliefs) {
            believedFields.computeIfAbsent(hash, h -> new HashMap<>()).put(field, value == null ? MISSING : value);
        }
    }

    /** The beliefs reads were answered with, each once, in the order first used: what the commit must check. */
    java.util.Collection<Belief> beliefsUsed() {
        return used;
    }

    private boolean believed(String key) {
        return !hasKey(key) && believedKeys.containsKey(key);
    }

    private byte[] useBelief(String key) {
        byte[] v = believedKeys.get(key);
        byte[] value = v == MISSING ? null : v;
        used.add(new Belief(key, null, value));
        return value;
    }

    private boolean believedField(String hash, String field) {
        Map<String, byte[]> h = believedFields.get(hash);
        return !hasField(hash, field) && h != null && h.containsKey(field);
    }

    private byte[] useFieldBelief(String hash, String field) {
        byte[] v = believedFields.get(hash).get(field);
        byte[] value = v == MISSING ? null : v;
        used.add(new Belief(hash, field, value));
        return value;
    }

    // ---- KvStore.Writer ----

    @Override
    public byte[] get(String key) throws java.io.IOException {
        if (hasKey(key)) {
            return bufferedGet(key);
        }
        return believed(key) ? useBelief(key) : stored.get(key);
    }

    @Override
    public long counter(String key) throws java.io.IOException {
        return stored.counter(key) + addedTo(key);
    }

    @Override
    public byte[] hget(String hash, String field) throws java.io.IOException {
        if (hasField(hash, field)) {
            return bufferedHget(hash, field);
        }
        return believedField(hash, field) ? useFieldBelief(hash, field) : stored.hget(hash, field);
    }

    @Override
    public byte[][] getAndHget(String key, String hash, String field) throws java.io.IOException {
        if (hasKey(key) || believed(key) || hasField(hash, field) || believedField(hash, field)) {
            return new byte[][] {get(key), hget(hash, field)};
        }
        return stored.getAndHget(key, hash, field);
    }

    /** Keys this transaction wrote or believes are answered from it; the rest in one request to the store. */
    @Override
    public java.util.List<byte[]> getAll(java.util.List<String> keys) throws java.io.IOException {
        java.util.List<String> unwritten = keys.stream().filter(k -> !hasKey(k) && !believed(k)).distinct().toList();
        java.util.List<byte[]> fetched = unwritten.isEmpty() ? java.util.List.of() : stored.getAll(unwritten);
        Map<String, byte[]> byKey = new HashMap<>();
        for (int i = 0; i < unwritten.size(); i++) {
            byKey.put(unwritten.get(i), fetched.get(i));
        }
        java.util.List<byte[]> out = new java.util.ArrayList<>(keys.size());
        for (String k : keys) {
            out.add(hasKey(k) ? bufferedGet(k) : believed(k) ? useBelief(k) : byKey.get(k));
        }
        return out;
    }

    @Override
    public Map<String, byte[]> hgetAll(String hash) throws java.io.IOException {
        return mergeHash(hash, clearedHashes.contains(hash) ? Map.of() : stored.hgetAll(hash));
    }

    @Override
    public long hlen(String hash) throws java.io.IOException {
        return touchesHash(hash) ? hgetAll(hash).size() : stored.hlen(hash);
    }

    java.util.List<Op> ops() {
        return ops;
    }

    boolean isEmpty() {
        return ops.isEmpty();
    }

    @Override
    public void put(String key, byte[] value) {
        ops.add(new Put(key, value));
        keys.put(key, value);
    }

    @Override
    public void delete(String key) {
        ops.add(new Delete(key));
        keys.put(key, DELETED);
    }

    @Override
    public void hset(String hash, String field, byte[] value) {
        ops.add(new HSet(hash, field, value));
        hashes.computeIfAbsent(hash, h -> new LinkedHashMap<>()).put(field, value);
    }

    @Override
    public void hdel(String hash, String field) {
        ops.add(new HDel(hash, field));
        hashes.computeIfAbsent(hash, h -> new LinkedHashMap<>()).put(field, DELETED);
    }

    @Override
    public void hdelAll(String hash) {
        ops.add(new HDelAll(hash));
        hashes.remove(hash);
        clearedHashes.add(hash);
    }

    @Override
    public void add(String counter, long delta) {
        ops.add(new Add(counter, delta));
        added.merge(counter, delta, Long::sum);
    }

    /** True when the key was written here; then {@link #get} is the answer. */
    private boolean hasKey(String key) {
        return keys.containsKey(key);
    }

    private byte[] bufferedGet(String key) {
        byte[] v = keys.get(key);
        return v == DELETED ? null : v;
    }

    private long addedTo(String counter) {
        return added.getOrDefault(counter, 0L);
    }

    /** True when the answer for this field is decided here; then {@link #hget} is it. */
    private boolean hasField(String hash, String field) {
        Map<String, byte[]> h = hashes.get(hash);
        return (h != null && h.containsKey(field)) || clearedHashes.contains(hash);
    }

    private byte[] bufferedHget(String hash, String field) {
        Map<String, byte[]> h = hashes.get(hash);
        byte[] v = h == null ? null : h.get(field);
        return v == DELETED ? null : v;
    }

    /** Overlays this transaction's writes on the stored fields of a hash. */
    private Map<String, byte[]> mergeHash(String hash, Map<String, byte[]> stored) {
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

    /** True when the transaction wrote any field of the hash, so a stored count is not the answer. */
    private boolean touchesHash(String hash) {
        return hashes.containsKey(hash) || clearedHashes.contains(hash);
    }
}
