package io.partfs.engine.meta;

import java.io.IOException;
import java.util.List;
import java.util.Map;

/**
 * A transaction that passes every call to another one: extend it and override what to watch
 * or change (the batched reads included, so the store still answers them in one request).
 */
public abstract class ForwardingWriter implements KvStore.Writer {
    protected final KvStore.Writer tx;

    protected ForwardingWriter(KvStore.Writer tx) {
        this.tx = tx;
    }

    @Override
    public byte[] get(String key) throws IOException {
        return tx.get(key);
    }

    @Override
    public long counter(String key) throws IOException {
        return tx.counter(key);
    }

    @Override
    public byte[] hget(String hash, String field) throws IOException {
        return tx.hget(hash, field);
    }

    @Override
    public byte[][] getAndHget(String key, String hash, String field) throws IOException {
        return tx.getAndHget(key, hash, field);
    }

    @Override
    public Map<String, byte[]> hgetAll(String hash) throws IOException {
        return tx.hgetAll(hash);
    }

    @Override
    public long hlen(String hash) throws IOException {
        return tx.hlen(hash);
    }

    @Override
    public List<Map<String, byte[]>> hgetAllMany(List<String> hashes) throws IOException {
        return tx.hgetAllMany(hashes);
    }

    @Override
    public List<byte[]> hmget(String hash, List<String> fields) throws IOException {
        return tx.hmget(hash, fields);
    }

    @Override
    public List<byte[]> getAll(List<String> keys) throws IOException {
        return tx.getAll(keys);
    }

    @Override
    public void put(String key, byte[] value) {
        tx.put(key, value);
    }

    @Override
    public void delete(String key) {
        tx.delete(key);
    }

    @Override
    public void hset(String hash, String field, byte[] value) {
        tx.hset(hash, field, value);
    }

    @Override
    public void hdel(String hash, String field) {
        tx.hdel(hash, field);
    }

    @Override
    public void hdelAll(String hash) {
        tx.hdelAll(hash);
    }

    @Override
    public void add(String counter, long delta) {
        tx.add(counter, delta);
    }

    @Override
    public void believe(String key, byte[] value) {
        tx.believe(key, value);
    }

    @Override
    public void believeField(String hash, String field, byte[] value) {
        tx.believeField(hash, field, value);
    }
}
