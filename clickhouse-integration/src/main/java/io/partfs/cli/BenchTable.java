package io.partfs.cli;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/** What {@code partfs bench} and {@code partfs objbench} share: parallel timed steps and the result table. */
final class BenchTable {
    /** One step's work for one thread. */
    @FunctionalInterface
    interface Work {
        void run(int thread) throws Exception;
    }

    private final List<String[]> rows = new ArrayList<>();
    private final int threads;

    BenchTable(int threads) {
        if (threads < 1 || threads > 256) {
            throw new IllegalArgumentException("-p must be between 1 and 256, not " + threads);
        }
        this.threads = threads;
    }

    /** Runs {@code work} on every thread at once and returns the wall time in seconds. */
    double time(Work work) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            long t0 = System.nanoTime();
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int thread = t;
                fs.add(pool.submit(() -> {
                    work.run(thread);
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                try {
                    f.get();
                } catch (java.util.concurrent.ExecutionException e) {
                    throw e.getCause() instanceof Exception ex ? ex : e;
                }
            }
            return (System.nanoTime() - t0) / 1e9;
        } finally {
            pool.shutdownNow();
        }
    }

    /**
     * Adds a line: throughput as {@code units} per second (MiB/s for bytes), and the cost of one
     * operation as seen by one thread (wall time x threads / operations).
     */
    void add(String item, double seconds, double units, String unit, long ops, String opName) {
        String value = String.format(Locale.ROOT, "%.2f %s/s", units / seconds, unit);
        String cost = String.format(Locale.ROOT, "%.2f ms/%s", seconds * threads * 1000 / ops, opName);
        rows.add(new String[] {item, value, cost});
    }

    void print(PrintWriter out) {
        String[] head = {"ITEM", "VALUE", "COST"};
        int[] w = {head[0].length(), head[1].length(), head[2].length()};
        for (String[] r : rows) {
            for (int i = 0; i < 3; i++) {
                w[i] = Math.max(w[i], r[i].length());
            }
        }
        String line = String.format("+-%s-+-%s-+-%s-+", "-".repeat(w[0]), "-".repeat(w[1]), "-".repeat(w[2]));
        String fmt = "| %-" + w[0] + "s | %" + w[1] + "s | %" + w[2] + "s |%n";
        out.println(line);
        out.printf(fmt, (Object[]) head);
        out.println(line);
        for (String[] r : rows) {
            out.printf(fmt, (Object[]) r);
        }
        out.println(line);
        out.flush();
    }
}
