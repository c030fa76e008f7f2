package io.partfs.engine.testing;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/** Runs one body on several threads at once and rethrows the first failure. */
public final class Concurrently {
    private Concurrently() {
    }

    /** What each thread runs, given its number. */
    @FunctionalInterface
    public interface Body {
        void run(int thread) throws Exception;
    }

    public static void run(int threads, Body body) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> futures = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int thread = t;
                futures.add(pool.submit(() -> {
                    body.run(thread);
                    return null;
                }));
            }
            for (Future<?> f : futures) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
    }
}
