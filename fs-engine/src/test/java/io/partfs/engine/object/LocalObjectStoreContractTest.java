package io.partfs.engine.object;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The object store contract on a local directory. */
class LocalObjectStoreContractTest extends ObjectStoreContract {
    @TempDir
    Path dir;

    @Override
    protected ObjectStore newStore() throws Exception {
        return new LocalObjectStore(dir.resolve("objects"));
    }

    private static long entries(java.nio.file.Path d) throws java.io.IOException {
        try (var s = Files.list(d)) {
            return s.count();
        }
    }

    @Test
    void deleteRemovesDirectoriesLeftEmpty() throws Exception {
        store.put("v/chunks/0/1/5_0_10", new byte[10]);
        store.delete("v/chunks/0/1/5_0_10");
        assertEquals(0, entries(dir.resolve("objects")));
    }

    @Test
    void putsSucceedWhileDeletesRemoveTheirDirectory() throws Exception {
        // each delete removes the directory it leaves empty, which a put into it may be about to use
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(2);
        try {
            java.util.List<java.util.concurrent.Future<?>> done = new java.util.ArrayList<>();
            for (int t = 0; t < 2; t++) {
                int thread = t;
                done.add(pool.submit(() -> {
                    for (int i = 0; i < 2000; i++) {
                        String key = "v/chunks/7/" + thread + "_" + i;
                        store.put(key, new byte[] {(byte) i});
                        store.delete(key);
                    }
                    return null;
                }));
            }
            for (java.util.concurrent.Future<?> f : done) {
                f.get(60, java.util.concurrent.TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals(0, entries(dir.resolve("objects")));
    }

    @Test
    void aWholeBlockLeavesNoBlockSizedDirectBufferOnItsThread() throws Exception {
        // The JDK copies a heap buffer through a direct one of the same size and keeps it on the
        // thread: 4 MiB blocks put and read by two dozen FUSE and upload threads used up the
        // sidecar's 128 MiB of direct memory, and writes failed with EIO.
        byte[] block = new byte[4 << 20];
        new java.util.Random(7).nextBytes(block);
        long[] grew = {-1};
        Throwable[] failed = new Throwable[1];
        Thread t = new Thread(() -> {
            try {
                long before = directMemoryUsed();
                store.put("v/chunks/0/0/1_0_4194304", block);
                org.junit.jupiter.api.Assertions.assertArrayEquals(block, store.get("v/chunks/0/0/1_0_4194304", 0, -1));
                grew[0] = directMemoryUsed() - before;
            } catch (Throwable e) {
                failed[0] = e;
            }
        });
        t.start();
        t.join();
        if (failed[0] != null) {
            throw new AssertionError(failed[0]);
        }
        org.junit.jupiter.api.Assertions.assertTrue(grew[0] >= 0 && grew[0] < (1 << 20), "the thread keeps " + grew[0] + " bytes of direct memory");
    }

    private static long directMemoryUsed() {
        return java.lang.management.ManagementFactory.getPlatformMXBeans(java.lang.management.BufferPoolMXBean.class).stream()
                .filter(p -> p.getName().equals("direct")).mapToLong(java.lang.management.BufferPoolMXBean::getMemoryUsed).sum();
    }

    @Test
    void aFileWhereTheDirectoryShouldBeIsAClearError() throws Exception {
        Files.writeString(dir.resolve("file"), "x");
        ObjectStoreException e = assertThrows(ObjectStoreException.class, () -> new LocalObjectStore(dir.resolve("file")));
        org.junit.jupiter.api.Assertions.assertTrue(e.getMessage().contains("not a directory"), e.getMessage());
    }
}
