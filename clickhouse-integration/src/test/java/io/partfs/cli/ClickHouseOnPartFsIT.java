package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.PartFs;
import io.partfs.engine.fuse.FuseOptions;
import io.partfs.engine.fuse.FuseMount;
import io.partfs.engine.testing.Backends;
import io.partfs.engine.testing.TempDirs;
import io.partfs.engine.testing.TestVolume;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * ClickHouse 18.16 with its whole {@code <path>} on a PartFS mount runs a MergeTree workload
 * (partitioned inserts, merges, mutations, freeze, detach/attach, rename, drop), is restarted,
 * and restarted again after PartFS is unmounted and mounted. Every answer must equal the
 * answers of the same workload on a local directory, and the server logs no errors.
 */
class ClickHouseOnPartFsIT {
    /** The two backends the issue asks for. */
    enum Backend {
        EMBEDDED(TestVolume.Meta.ROCKSDB, TestVolume.Store.LOCAL),
        REDIS_S3(TestVolume.Meta.REDIS, TestVolume.Store.S3);

        final TestVolume.Meta meta;
        final TestVolume.Store store;

        Backend(TestVolume.Meta meta, TestVolume.Store store) {
            this.meta = meta;
            this.store = store;
        }
    }

    private static Path work;
    private static List<String> expected;
    /** The active parts after each restart of the local-disk run, for a failure message. */
    private static final List<String> expectedParts = new ArrayList<>();

    @BeforeAll
    static void runOnLocalDisk() throws Exception {
        work = Files.createTempDirectory("partfs-ch-");
        Path data = Files.createDirectories(work.resolve("local-data"));
        try (ClickHouseServer ch = new ClickHouseServer(work.resolve("local-conf"), data)) {
            expected = workload(ch, data, expectedParts);
            assertEquals(List.of(), ch.errors(), "ClickHouse on local disk logged errors");
        }
    }

    @AfterAll
    static void cleanUp() throws Exception {
        TempDirs.deleteRecursively(work);
    }

    @ParameterizedTest
    @EnumSource(Backend.class)
    void workloadOnPartFsMatchesLocalDisk(Backend backend) throws Exception {
        Path dir = Files.createDirectories(work.resolve(backend.name()));
        Path mnt = Files.createDirectories(dir.resolve("mnt"));
        try (Backends servers = Backends.start(backend.meta, backend.store)) {
            TestVolume volume = new TestVolume(backend.meta, backend.store, dir, servers.redis, servers.s3,
                    TestVolume.defaultConfig(dir));
            Mount mount = new Mount(volume, mnt);
            try (ClickHouseServer ch = new ClickHouseServer(dir.resolve("conf"), mnt, "trace")) { // trace: parts' history for a failure message
                List<String> parts = new ArrayList<>();
                List<String> got = workload(ch, mnt, parts);
                assertSameAnswers(expected, got, "answers on " + backend + partsAndTheirHistory(ch, parts));
                mount.fs.compactor().awaitIdle();
                assertTrue(mount.fs.compactor().compacted() >= 2, "the Log table's two column files were compacted: "
                        + mount.fs.compactor().compacted());
                mount.remount();
                ch.start();
                assertSameAnswers(afterRestart(expected), checks(ch), "after unmount, mount and restart on " + backend);
                ch.stop();
                assertEquals(List.of(), withoutKnownRaces(ch.errors()), "ClickHouse on PartFS (" + backend
                        + ") logged errors; its log up to the first:\n" + ch.errorContext());
            } finally {
                mount.close();
            }
        }
    }

    /**
     * The errors less one ClickHouse 18.16 logs by itself. It removes an outdated part by renaming
     * it to {@code tmp_delete_<part>} and unlinking its files, while its removal of temporary
     * directories (every {@code tmp*} one at a table's startup) may take the same directory:
     * whichever comes second finds a file gone ("File not found: .../tmp_delete_.../d.bin").
     * ClickHouse issues #3531 and #3995, fixed by #4378 in 2019 (after 18.16) by naming such
     * directories {@code delete_tmp_*}. The slower the filesystem, the wider the window: seen
     * once in CI, on Redis + S3, with every answer right.
     */
    static List<String> withoutKnownRaces(List<String> errors) {
        return errors.stream()
                .filter(e -> !(e.contains("File not found: ") && e.contains("/tmp_delete_")))
                .toList();
    }

    private static void assertSameAnswers(List<String> want, List<String> got, String what) {
        for (int i = 0; i < Math.min(want.size(), got.size()); i++) {
            assertEquals(want.get(i), got.get(i), what + ": answer " + i);
        }
        assertEquals(want.size(), got.size(), what + ": number of answers");
    }

    /** A PartFS volume mounted in this JVM that can be unmounted and mounted again. */
    private static final class Mount implements AutoCloseable {
        private final TestVolume volume;
        private final Path mnt;
        private PartFs fs;
        private FuseMount fuse;

        Mount(TestVolume volume, Path mnt) throws Exception {
            this.volume = volume;
            this.mnt = mnt;
            open();
        }

        private void open() throws Exception {
            fs = volume.open();
            fuse = FuseMount.create(fs, null, FuseOptions.builder().build());
            fuse.mountAndWait(mnt, FuseOptions.builder().build());
        }

        void remount() throws Exception {
            close();
            open();
        }

        @Override
        public void close() throws Exception {
            if (fuse != null) {
                fs.syncAll();
                fuse.unmount();
                fuse = null;
            }
            if (fs != null) {
                fs.close();
                fs = null;
            }
        }
    }

    private static final String TABLE = "w.events";

    /**
     * For a failure message: the active parts after each restart here and on local disk, and
     * what the server logged about each part active here and not there (a part ClickHouse had
     * removed that came back, say).
     */
    private static String partsAndTheirHistory(ClickHouseServer ch, List<String> parts) throws java.io.IOException {
        StringBuilder out = new StringBuilder("\nactive parts after each restart: " + parts + "\non local disk: " + expectedParts);
        List<String> errors = ch.errors();
        out.append("\nerrors logged: ").append(errors.size()).append("\n").append(String.join("\n", errors.subList(0, Math.min(10, errors.size()))));
        java.util.Set<String> surplus = new java.util.TreeSet<>();
        for (String p : parts) {
            surplus.addAll(List.of(p.split("\\s+")));
        }
        for (String p : expectedParts) {
            List.of(p.split("\\s+")).forEach(surplus::remove);
        }
        for (String part : surplus) {
            // A mutated part is named after its source and the mutation (202002_32_32_0_37): the source's history too.
            String[] fields = part.split("_");
            String source = fields.length == 5 ? String.join("_", java.util.Arrays.copyOf(fields, 4)) : part;
            out.append("\nserver log on ").append(source).append(":\n").append(String.join("\n", ch.logLines(source, 80)));
        }
        return out.toString();
    }

    /** Runs the workload, restarting the server once; returns every answer in order, and the active parts after each restart in {@code parts}. */
    private static List<String> workload(ClickHouseServer ch, Path data, List<String> parts) throws Exception {
        List<String> answers = new ArrayList<>();
        ch.start();
        ch.query("CREATE DATABASE w");
        ch.query("CREATE TABLE " + TABLE + " (d Date, k UInt32, s String) ENGINE = MergeTree "
                + "PARTITION BY toYYYYMM(d) ORDER BY k SETTINGS index_granularity = 8192, "
                // Outdated parts are removed within seconds, so what a restart loads is deterministic
                // (18.16 would otherwise bring back a pre-mutation part that an ATTACH left uncovered).
                + "old_parts_lifetime = 1, cleanup_delay_period = 1");
        for (int i = 0; i < 12; i++) {
            ch.query("INSERT INTO " + TABLE + " SELECT toDate('2020-01-01') + (number % 90), number + " + (i * 100_000)
                    + ", concat('v', toString(number % 1000)) FROM system.numbers LIMIT " + (2000 + i * 500));
        }
        answers.add(ch.query("SELECT count(), sum(k), uniqExact(s), min(d), max(d) FROM " + TABLE));
        answers.add(ch.query("SELECT partition, sum(rows) > 0 FROM system.parts WHERE database = 'w' AND active "
                + "GROUP BY partition ORDER BY partition"));
        answers.add(ch.query("SELECT toYYYYMM(d) AS m, count(), sum(k), avg(length(s)) FROM " + TABLE + " GROUP BY m ORDER BY m"));
        for (String partition : new String[] {"202001", "202002", "202003"}) {
            optimizeToOnePart(ch, partition);
        }
        answers.add(ch.query("SELECT partition, count() FROM system.parts WHERE database = 'w' AND active "
                + "GROUP BY partition ORDER BY partition"));
        ch.query("ALTER TABLE " + TABLE + " DELETE WHERE k % 7 = 0");
        awaitMutations(ch);
        answers.add(ch.query("SELECT count(), sum(k) FROM " + TABLE));
        ch.query("ALTER TABLE " + TABLE + " FREEZE PARTITION 202001");
        answers.add("frozen hard links: " + frozenFilesShareInodes(data));
        ch.query("ALTER TABLE " + TABLE + " DETACH PARTITION 202002");
        answers.add(ch.query("SELECT count() FROM " + TABLE));
        ch.query("ALTER TABLE " + TABLE + " ATTACH PARTITION 202002");
        answers.add(ch.query("SELECT count(), sum(k) FROM " + TABLE));
        // a Log table: each INSERT appends to every column's file, a slice each, compacted past 32
        ch.query("CREATE TABLE w.log (k UInt32, s String) ENGINE = Log");
        for (int i = 0; i < LOG_INSERTS; i++) {
            ch.query("INSERT INTO w.log SELECT number + " + (i * 1000) + ", toString(number) FROM system.numbers LIMIT " + (10 + i));
        }
        answers.add(ch.query("SELECT count(), sum(k), uniqExact(s) FROM w.log"));
        ch.query("RENAME TABLE " + TABLE + " TO w.renamed");
        ch.query("CREATE TABLE w.scratch (x UInt64) ENGINE = MergeTree ORDER BY x");
        ch.query("INSERT INTO w.scratch SELECT number FROM system.numbers LIMIT 1000");
        answers.add(ch.query("SELECT sum(x) FROM w.scratch"));
        ch.query("DROP TABLE w.scratch");
        answers.add(ch.query("SHOW TABLES FROM w"));
        awaitNoOutdatedParts(ch);
        answers.addAll(checks(ch));
        parts.add(activeParts(ch));
        ch.stop();
        ch.start();
        answers.addAll(checks(ch));
        parts.add(activeParts(ch));
        ch.stop();
        return answers;
    }

    private static String activeParts(ClickHouseServer ch) throws Exception {
        return ch.query("SELECT name FROM system.parts WHERE database = 'w' AND active ORDER BY name").trim();
    }

    /** INSERTs into the Log table: more than {@link io.partfs.engine.meta.MetaEngine#COMPACT_AT}. */
    private static final int LOG_INSERTS = 40;

    /** What must hold after any restart. */
    private static List<String> checks(ClickHouseServer ch) throws Exception {
        return List.of(
                ch.query("SELECT count(), sum(k), uniqExact(s) FROM w.renamed"),
                ch.query("SELECT count(), sum(k), uniqExact(s), sum(length(s)) FROM w.log"),
                ch.query("SELECT toYYYYMM(d) AS m, count(), sum(k) FROM w.renamed GROUP BY m ORDER BY m"),
                ch.query("SELECT partition, count() FROM system.parts WHERE database = 'w' AND active "
                        + "GROUP BY partition ORDER BY partition"),
                ch.query("SHOW TABLES FROM w"));
    }

    private static List<String> afterRestart(List<String> all) {
        return all.subList(all.size() - 5, all.size());
    }

    /**
     * OPTIMIZE ... FINAL until the partition is one part. ClickHouse 18.16 returns from an
     * OPTIMIZE without merging when a background merge holds some of the partition's parts (it
     * once left 12 parts on local disk, and the answers then differed from PartFS's 1).
     */
    private static void optimizeToOnePart(ClickHouseServer ch, String partition) throws Exception {
        long deadline = System.nanoTime() + 120_000_000_000L;
        while (true) {
            ch.query("OPTIMIZE TABLE " + TABLE + " PARTITION " + partition + " FINAL");
            if ("1".equals(ch.query("SELECT count() FROM system.parts WHERE database = 'w' AND table = 'events' AND active"
                    + " AND partition = '" + partition + "'").trim())) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("partition " + partition + " is not one part within 120 s of OPTIMIZE FINAL");
            }
            java.util.concurrent.locks.LockSupport.parkNanos(100_000_000L); // poll interval
        }
    }

    private static void awaitMutations(ClickHouseServer ch) throws Exception {
        long deadline = System.nanoTime() + 120_000_000_000L;
        while (!"0".equals(ch.query("SELECT count() FROM system.mutations WHERE is_done = 0").trim())) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("mutation did not finish within 120 s");
            }
            java.util.concurrent.locks.LockSupport.parkNanos(50_000_000L); // poll interval
        }
    }

    private static void awaitNoOutdatedParts(ClickHouseServer ch) throws Exception {
        long deadline = System.nanoTime() + 120_000_000_000L;
        while (!"0".equals(ch.query("SELECT count() FROM system.parts WHERE database = 'w' AND NOT active").trim())) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("outdated parts were not removed within 120 s");
            }
            java.util.concurrent.locks.LockSupport.parkNanos(100_000_000L); // poll interval
        }
    }

    /** True when every file under shadow/ has more than one link (FREEZE hard-links, never copies). */
    private static boolean frozenFilesShareInodes(Path data) throws Exception {
        List<Path> files;
        try (Stream<Path> s = Files.walk(data.resolve("shadow"))) {
            files = s.filter(Files::isRegularFile).filter(f -> !f.getFileName().toString().equals("increment.txt")).toList();
        }
        assertTrue(files.size() > 3, "FREEZE produced files: " + files);
        for (Path f : files) {
            if ((Integer) Files.getAttribute(f, "unix:nlink") < 2) {
                return false;
            }
        }
        return true;
    }
}
