package io.partfs.engine.object;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What every {@link ObjectStore} promises. Each implementation runs this suite through a
 * subclass that supplies a fresh, empty store.
 */
abstract class ObjectStoreContract {
    protected ObjectStore store;

    /** A new, empty store. */
    protected abstract ObjectStore newStore() throws Exception;

    @BeforeEach
    void open() throws Exception {
        store = newStore();
    }

    @AfterEach
    void closeStore() throws IOException {
        store.close();
    }

    private static byte[] bytes(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    @Test
    void scanHandsOverEveryObjectUnderThePrefixWithItsAgeAndMayDeleteAsItGoes() throws Exception {
        long before = System.currentTimeMillis() - 2000; // S3 keeps whole seconds
        for (int i = 0; i < 5; i++) {
            store.put("s/d" + (i % 2) + "/k" + i, new byte[i + 1]);
        }
        store.put("t/other", new byte[1]);
        java.util.List<String> seen = new java.util.ArrayList<>();
        store.scan("s/", o -> {
            seen.add(o.key() + " " + o.size());
            assertTrue(o.modifiedMillis() >= before && o.modifiedMillis() <= System.currentTimeMillis() + 2000, o.toString());
            store.delete(o.key());
        });
        assertEquals(java.util.List.of("s/d0/k0 1", "s/d0/k2 3", "s/d0/k4 5", "s/d1/k1 2", "s/d1/k3 4"), seen.stream().sorted().toList());
        assertEquals(java.util.List.of("t/other"), store.listAll("").stream().map(ObjectStore.ObjectInfo::key).toList());
    }

    @Test
    void scanByDirectoriesHandsOverEveryObjectOnceOnTheCallingThread() throws Exception {
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < 1005; i++) { // more than a page in one directory
            keys.add("v/chunks/0/1/" + i + "_0_1");
        }
        keys.addAll(List.of("v/chunks/0/2/7_0_1", "v/chunks/0/10/3_0_1", "v/chunks/12/12000/12000001_0_1",
                "v/chunks/stray", "v/chunks/0/stray", "v/chunks/0/1/deeper/x"));
        io.partfs.engine.testing.StoreFill.putAll(store, keys, new byte[1]);
        store.put("v/other", new byte[1]);
        store.put("w/chunks/0/1/1_0_1", new byte[1]);
        Thread caller = Thread.currentThread();
        List<String> seen = new ArrayList<>();
        store.scan("v/chunks/", 2, 4, o -> {
            assertSame(caller, Thread.currentThread());
            seen.add(o.key());
        });
        assertEquals(keys.stream().sorted().toList(), seen.stream().sorted().toList(), "each once, nothing else");

        IOException e = assertThrows(IOException.class, () -> store.scan("v/chunks/", 2, 4, o -> {
            throw new IOException("the consumer failed");
        }));
        assertEquals("the consumer failed", e.getMessage());
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (Thread.getAllStackTraces().keySet().stream().anyMatch(t -> t.getName().equals("partfs-list"))) {
            assertTrue(System.nanoTime() < deadline, "listing threads outlived the scan");
            Thread.onSpinWait();
        }
    }

    @Test
    void deleteAllRemovesEveryKeyAndIgnoresMissingOnes() throws Exception {
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < 1003; i++) { // more than one request's worth on S3
            keys.add("d/" + (i % 3) + "/k" + i);
        }
        io.partfs.engine.testing.StoreFill.putAll(store, keys, new byte[1]);
        store.put("d/kept", new byte[1]);
        List<String> doomed = new ArrayList<>(keys);
        doomed.add("d/never-written");
        store.deleteAll(doomed);
        assertEquals(List.of("d/kept"), store.listAll("d/").stream().map(ObjectStore.ObjectInfo::key).toList());
        store.deleteAll(List.of());
    }

    @Test
    void putThenGetReturnsTheSameBytes() throws IOException {
        byte[] data = bytes(100_000, 1);
        store.put("vol/chunks/0/0/1_0_100000", data);
        assertArrayEquals(data, store.get("vol/chunks/0/0/1_0_100000", 0, -1));
    }

    @Test
    void emptyObjectRoundTrips() throws IOException {
        store.put("empty", new byte[0]);
        assertEquals(0, store.get("empty", 0, -1).length);
        assertEquals(Optional.of("empty 0"), store.head("empty").map(i -> i.key() + " " + i.size()));
    }

    @Test
    void rangedGetReturnsTheRange() throws IOException {
        byte[] data = bytes(10_000, 2);
        store.put("k", data);
        assertArrayEquals(java.util.Arrays.copyOfRange(data, 100, 1100), store.get("k", 100, 1000));
        assertArrayEquals(java.util.Arrays.copyOfRange(data, 9_000, 10_000), store.get("k", 9_000, -1));
        assertArrayEquals(java.util.Arrays.copyOfRange(data, 9_990, 10_000), store.get("k", 9_990, 100),
                "a range past the end returns what exists");
        assertEquals(0, store.get("k", 10_000, 10).length, "a range starting at the end is empty");
    }

    @Test
    void getOfMissingKeyIsNotFound() {
        assertThrows(ObjectNotFoundException.class, () -> store.get("missing/key", 0, -1));
    }

    @Test
    void headReportsSizeOrEmpty() throws IOException {
        store.put("a/b", bytes(1234, 3));
        assertEquals(Optional.of("a/b 1234"), store.head("a/b").map(i -> i.key() + " " + i.size()));
        assertEquals(Optional.empty(), store.head("a/c"));
    }

    @Test
    void deleteRemovesAndIsIdempotent() throws IOException {
        store.put("d/x", bytes(10, 4));
        store.delete("d/x");
        assertEquals(Optional.empty(), store.head("d/x"));
        store.delete("d/x");
        store.delete("never/existed");
    }

    @Test
    void putReplacesWholeObject() throws IOException {
        store.put("r", bytes(5000, 5));
        byte[] second = bytes(10, 6);
        store.put("r", second);
        assertArrayEquals(second, store.get("r", 0, -1));
    }

    @Test
    void listReturnsKeysUnderPrefixInOrderAndPages() throws IOException {
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < 25; i++) {
            String k = "vol/chunks/0/" + (i % 3) + "/" + String.format("%04d", i) + "_0_1";
            keys.add(k);
            store.put(k, new byte[] {(byte) i});
        }
        store.put("other/x", new byte[1]);
        store.put("vol-sibling/y", new byte[1]);
        keys.sort(null);
        List<String> listed = new ArrayList<>();
        String after = null;
        while (true) {
            List<ObjectStore.ObjectInfo> page = store.list("vol/", after, 10);
            page.forEach(o -> listed.add(o.key()));
            if (page.size() < 10) {
                break;
            }
            after = page.get(page.size() - 1).key();
        }
        assertEquals(keys, listed);
        assertEquals(1, store.listAll("vol/chunks/0/1/0001").size());
        assertEquals(0, store.listAll("nothing/").size());
        assertTrue(store.listAll("").size() >= 27);
    }

    @Test
    void keysWithUnusualCharactersRoundTrip() throws IOException {
        String key = "vol/dir with space/ключ_+=&.dat";
        store.put(key, "x".getBytes(StandardCharsets.UTF_8));
        assertArrayEquals("x".getBytes(StandardCharsets.UTF_8), store.get(key, 0, -1));
        assertEquals(1, store.listAll("vol/dir with space/").size());
    }

    @Test
    void invalidKeysAreRejected() {
        for (String bad : new String[] {"", "/abs", "a/../b", "../x", "a//b", "dir/"}) {
            assertThrows(IllegalArgumentException.class, () -> store.put(bad, new byte[1]), bad);
        }
    }

    @Test
    void concurrentPutsAndGetsOfDistinctKeys() throws Exception {
        io.partfs.engine.testing.Concurrently.run(8, thread -> {
            for (int i = 0; i < 20; i++) {
                String k = "c/" + thread + "/" + i;
                byte[] data = bytes(4096 + i, thread * 100L + i);
                store.put(k, data);
                assertArrayEquals(data, store.get(k, 0, -1));
            }
        });
        assertEquals(160, store.listAll("c/").size());
    }
}
