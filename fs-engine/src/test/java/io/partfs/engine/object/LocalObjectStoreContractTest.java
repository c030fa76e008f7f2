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

    @Test
    void deleteRemovesDirectoriesLeftEmpty() throws Exception {
        store.put("v/chunks/0/1/5_0_10", new byte[10]);
        store.delete("v/chunks/0/1/5_0_10");
        assertEquals(0, Files.list(dir.resolve("objects")).count());
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
        assertEquals(0, Files.list(dir.resolve("objects")).count());
    }

    @Test
    void aFileWhereTheDirectoryShouldBeIsAClearError() throws Exception {
        Files.writeString(dir.resolve("file"), "x");
        ObjectStoreException e = assertThrows(ObjectStoreException.class, () -> new LocalObjectStore(dir.resolve("file")));
        org.junit.jupiter.api.Assertions.assertTrue(e.getMessage().contains("not a directory"), e.getMessage());
    }
}
