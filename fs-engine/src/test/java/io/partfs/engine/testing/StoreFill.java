package io.partfs.engine.testing;

import io.partfs.engine.object.ObjectStore;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/** Fills an object store with many small objects quickly, for tests and benchmarks of listing and deleting. */
public final class StoreFill {
    private StoreFill() {
    }

    /** Puts {@code data} under every key of {@code keys}, eight puts at once; returns when all are stored. */
    public static void putAll(ObjectStore store, List<String> keys, byte[] data) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
            List<Future<?>> puts = new ArrayList<>(keys.size());
            for (String k : keys) {
                puts.add(pool.submit(() -> {
                    store.put(k, data);
                    return null;
                }));
            }
            for (Future<?> f : puts) {
                f.get();
            }
        } finally {
            pool.shutdown();
        }
    }
}
