package io.partfs.engine.meta;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** A transaction's batched reads see its own writes and ask the store only for the rest, once. */
class TxnBufferTest {
    private static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** A store holding a few values that records the batched reads it is asked. */
    private static final class Stored implements KvStore.Reader {
        final Map<String, byte[]> keys = new HashMap<>(Map.of("a", b("A"), "b", b("B"), "c", b("C")));
        final Map<String, byte[]> hash = new HashMap<>(Map.of("f", b("F")));
        final List<List<String>> getAlls = new ArrayList<>();
        int getAndHgets;

        @Override
        public byte[] get(String key) {
            throw new AssertionError("one key at a time: " + key);
        }

        @Override
        public long counter(String key) {
            return 0;
        }

        @Override
        public byte[] hget(String h, String field) {
            throw new AssertionError("one field at a time: " + field);
        }

        @Override
        public Map<String, byte[]> hgetAll(String h) {
            return Map.copyOf(hash);
        }

        @Override
        public long hlen(String h) {
            return hash.size();
        }

        @Override
        public List<byte[]> getAll(List<String> ks) {
            getAlls.add(ks);
            return ks.stream().map(keys::get).toList();
        }

        @Override
        public byte[][] getAndHget(String key, String h, String field) {
            getAndHgets++;
            return new byte[][] {keys.get(key), hash.get(field)};
        }
    }

    @Test
    void getAllAnswersWrittenKeysItselfAndAsksTheStoreOnceForTheRest() throws Exception {
        Stored stored = new Stored();
        TxnBuffer tx = new TxnBuffer(stored);
        tx.put("a", b("A2"));
        tx.delete("b");
        List<byte[]> got = tx.getAll(List.of("a", "b", "c", "missing", "c"));
        assertArrayEquals(b("A2"), got.get(0));
        assertNull(got.get(1), "deleted in the transaction");
        assertArrayEquals(b("C"), got.get(2));
        assertNull(got.get(3));
        assertArrayEquals(b("C"), got.get(4));
        assertEquals(List.of(List.of("c", "missing")), stored.getAlls, "one request, each unwritten key once");
        assertEquals(2, tx.getAll(List.of("a", "b")).size());
        assertEquals(1, stored.getAlls.size(), "nothing to ask when every key was written");
    }

    @Test
    void getAndHgetGoesToTheStoreOnlyWhenTheTransactionWroteNeither() throws Exception {
        Stored stored = new Stored();
        TxnBuffer tx = new TxnBuffer(stored);
        byte[][] both = tx.getAndHget("a", "d1", "f");
        assertArrayEquals(b("A"), both[0]);
        assertArrayEquals(b("F"), both[1]);
        assertEquals(1, stored.getAndHgets);
        tx.hset("d1", "f", b("F2"));
        stored.keys.clear(); // a plain get would now fail the test: the written field answers itself
        tx.put("a", b("A3"));
        both = tx.getAndHget("a", "d1", "f");
        assertArrayEquals(b("A3"), both[0]);
        assertArrayEquals(b("F2"), both[1]);
        assertEquals(1, stored.getAndHgets);
    }

    @Test
    void trustedBeliefsAnswerReadsWithoutTheStoreAndAreListedOnceForTheCommit() throws Exception {
        Stored stored = new Stored();
        TxnBuffer tx = new TxnBuffer(stored, true);
        tx.believe("a", b("believed-A"));
        tx.believe("gone", null);
        tx.believeField("d1", "f", null);
        byte[][] both = tx.getAndHget("a", "d1", "f");
        assertArrayEquals(b("believed-A"), both[0], "the belief, not the store's A");
        assertNull(both[1], "believed missing");
        List<byte[]> all = tx.getAll(List.of("a", "gone", "c"));
        assertArrayEquals(b("believed-A"), all.get(0));
        assertNull(all.get(1));
        assertArrayEquals(b("C"), all.get(2));
        assertEquals(0, stored.getAndHgets);
        assertEquals(List.of(List.of("c")), stored.getAlls, "only the key nobody believed anything of");
        List<TxnBuffer.Belief> used = new ArrayList<>(tx.beliefsUsed());
        assertEquals(3, used.size(), "each belief once, though read twice: " + used);
        assertEquals("a", used.get(0).key());
        assertArrayEquals(b("believed-A"), used.get(0).value());
        assertEquals("f", used.get(1).field());
        assertNull(used.get(2).value());
    }

    @Test
    void aWrittenKeyAnswersItselfAndAnUntrustingTransactionIgnoresBeliefs() throws Exception {
        Stored stored = new Stored();
        TxnBuffer tx = new TxnBuffer(stored, true);
        tx.believe("a", b("believed-A"));
        tx.put("a", b("A2"));
        assertArrayEquals(b("A2"), tx.getAll(List.of("a")).get(0));
        assertEquals(0, tx.beliefsUsed().size(), "a key the transaction wrote needs no check");

        TxnBuffer untrusting = new TxnBuffer(stored);
        untrusting.believe("a", b("believed-A"));
        assertArrayEquals(b("A"), untrusting.getAll(List.of("a")).get(0));
        assertEquals(0, untrusting.beliefsUsed().size());
    }
}
