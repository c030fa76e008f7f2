package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.Stream;

/**
 * Numbered INSERTs into one MergeTree table {@code t}, for the tests that break something
 * under ClickHouse (a killed sidecar, an object store or Redis gone) and then check what the
 * table holds: each batch is one INSERT of {@value #ROWS} rows, one part, and reads back as a
 * row count and two sums that only the whole batch gives.
 */
final class Batches {
    static final int ROWS = 20_000;

    private Batches() {
    }

    static void createTable(ClickHouseServer ch) throws IOException {
        ch.query("CREATE TABLE t (batch UInt32, i UInt32, s String) ENGINE = MergeTree"
                + " PARTITION BY batch % 3 ORDER BY (batch, i)");
    }

    static void insert(ClickHouseServer ch, int batch) throws IOException {
        ch.query("INSERT INTO t SELECT " + batch + ", toUInt32(number), toString(number * " + batch
                + ") FROM system.numbers LIMIT " + ROWS);
    }

    /** A table {@code pad} of hashes in hex, which compress only to half: for filling a disk. */
    static void createPad(ClickHouseServer ch) throws IOException {
        ch.query("CREATE TABLE pad (k UInt64, h String) ENGINE = MergeTree ORDER BY k");
    }

    /** 20,000 rows of {@code pad} from key {@code from} on: ~0.6 MiB on disk. */
    static void insertPad(ClickHouseServer ch, long from) throws IOException {
        ch.query("INSERT INTO pad SELECT number, concat(hex(MD5(toString(number))), hex(MD5(toString(number + 1))))"
                + " FROM system.numbers LIMIT " + from + ", 20000");
    }

    /** The row count and a sum of hashes of {@code pad}: equal only if every row reads back as written. */
    static String padSum(ClickHouseServer ch) throws IOException {
        return ch.query("SELECT count(), sum(cityHash64(h)) FROM pad");
    }

    /** What a whole batch reads back as (see {@link #read}). */
    static String whole(int batch) {
        long sumI = (long) ROWS * (ROWS - 1) / 2;
        return ROWS + " " + sumI + " " + sumI * batch;
    }

    /** The batches given, each whole. */
    static TreeMap<Integer, String> wholeBatches(int... batches) {
        TreeMap<Integer, String> m = new TreeMap<>();
        for (int b : batches) {
            m.put(b, whole(b));
        }
        return m;
    }

    /** Each batch in the table: its row count, sum of i and sum of s read as numbers. */
    static TreeMap<Integer, String> read(ClickHouseServer ch) throws IOException {
        TreeMap<Integer, String> m = new TreeMap<>();
        for (String line : ch.query("SELECT batch, count(), sum(i), sum(toUInt64(s)) FROM t GROUP BY batch").split("\n")) {
            if (!line.isBlank()) {
                String[] f = line.split("\t");
                m.put(Integer.parseInt(f[0]), f[1] + " " + f[2] + " " + f[3]);
            }
        }
        return m;
    }

    /** ClickHouse set no part of {@code t} aside (18.16 moves a part it finds broken into detached/). */
    static void assertNothingDetached(Path clickhouseData, String what) throws IOException {
        Path detached = clickhouseData.resolve("data/default/t/detached");
        try (Stream<Path> s = Files.exists(detached) ? Files.list(detached) : Stream.empty()) {
            assertEquals(List.of(), s.map(p -> p.getFileName().toString()).toList(), "no part found broken: " + what);
        }
    }

    /** INSERTs of batch 1, 2, 3, ... one after another on a thread of their own, until stopped or one fails. */
    static final class Writer {
        final Set<Integer> acknowledged = new ConcurrentSkipListSet<>();
        /** The batch being inserted, or the last one tried. */
        final AtomicInteger attempted = new AtomicInteger();
        private final AtomicBoolean stop = new AtomicBoolean();
        private final CompletableFuture<String> done;

        Writer(ClickHouseServer ch) {
            done = CompletableFuture.supplyAsync(() -> {
                for (int batch = 1; !stop.get(); batch++) {
                    attempted.set(batch);
                    try {
                        insert(ch, batch);
                    } catch (Exception e) {
                        return "batch " + batch + " failed: " + e.getMessage();
                    }
                    acknowledged.add(batch);
                }
                return "stopped";
            });
        }

        /** Polls until {@code count} INSERTs are acknowledged; fails after 180 s or when the writer ended. */
        void awaitAcknowledged(int count) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(180);
            while (acknowledged.size() < count) {
                assertTrue(!done.isDone(), "the INSERTs stopped: " + (done.isDone() ? done.join() : ""));
                assertTrue(System.nanoTime() < deadline, "only " + acknowledged.size() + " INSERTs acknowledged in 180 s");
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5)); // poll interval
            }
        }

        /** Stops after the INSERT under way; returns "stopped", or which batch failed and why. */
        String stop() throws Exception {
            stop.set(true);
            return done.get(150, TimeUnit.SECONDS);
        }

        /** The batches acknowledged so far. */
        int[] acknowledgedBatches() {
            return acknowledged.stream().mapToInt(Integer::intValue).toArray();
        }
    }
}
