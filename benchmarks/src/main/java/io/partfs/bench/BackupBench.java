package io.partfs.bench;

import io.partfs.engine.FileType;
import io.partfs.engine.VolumeFormat;
import io.partfs.engine.data.MetaBackup;
import io.partfs.engine.meta.KvStore;
import io.partfs.engine.meta.MetaDump;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.MetaUrl;
import io.partfs.engine.object.LocalObjectStore;
import io.partfs.engine.object.ObjectStore;
import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.TempDirs;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.zip.GZIPInputStream;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * What a mount's metadata backup ({@link MetaBackup}) costs: a volume shaped like ClickHouse's
 * (parts of 106 files in directories) is created through the metadata engine (no FUSE, no
 * data), on embedded RocksDB and on Redis, then backed up several times into a local object
 * store, timing each backup (wall and this thread's CPU) and the restore of the last one into
 * empty metadata of the same engine.
 */
@Command(name = "backup-bench", mixinStandardHelpOptions = true,
        description = "Cost of a metadata backup (mount --backup-meta) and of its restore, on RocksDB and Redis.")
public final class BackupBench implements Callable<Integer> {
    @Option(names = "--files", defaultValue = "300000", description = "Files in the RocksDB volume (default: ${DEFAULT-VALUE}).")
    int files;

    @Option(names = "--redis-files", defaultValue = "50000", description = "Files in the Redis volume (default: ${DEFAULT-VALUE}).")
    int redisFiles;

    @Option(names = "--runs", defaultValue = "3", description = "Backups of each volume (default: ${DEFAULT-VALUE}).")
    int runs;

    @Option(names = "--out", defaultValue = "benchmarks/results/backup-bench.md",
            description = "The markdown report: a file, or a directory to write backup-bench.md in (default: ${DEFAULT-VALUE}).")
    Path out;

    /** Files per part directory, as a 50-column MergeTree part has. */
    private static final int PER_PART = 106;

    public static void main(String[] args) {
        Procs.main(new BackupBench(), args);
    }

    @Override
    public Integer call() throws Exception {
        if (files < 1 || redisFiles < 0 || runs < 1) {
            throw new IllegalArgumentException("--files and --runs must be at least 1, --redis-files at least 0");
        }
        out = Stack.reportFile(out, "backup-bench.md");
        Path dir = Files.createTempDirectory("partfs-backup-bench-");
        StringBuilder md = new StringBuilder(String.format(Locale.ROOT,
                "Metadata backup (dump, gzip, pieces into a local object store) and restore; %d run(s) each%n%n"
                        + "| engine | files | backup wall s | backup CPU s | size | restore s |%n|---|---|---|---|---|---|%n", runs));
        try (ObjectStore store = new LocalObjectStore(dir.resolve("objects"))) {
            md.append(row("RocksDB", MetaUrl.parse(dir.resolve("rocks").toString()).openOrCreate(),
                    () -> MetaUrl.parse(dir.resolve("rocks-restored").toString()).openOrCreate(), files, store));
            if (redisFiles > 0) {
                try (RedisServer redis = RedisServer.start()) {
                    md.append(row("Redis", MetaUrl.parse(redis.url(1)).open(), () -> MetaUrl.parse(redis.url(2)).open(),
                            redisFiles, store));
                }
            }
        } finally {
            TempDirs.deleteRecursively(dir);
        }
        Stack.report(out, md);
        return 0;
    }

    @FunctionalInterface
    private interface StoreMaker {
        KvStore make() throws Exception;
    }

    private String row(String engine, KvStore kv, StoreMaker target, int n, ObjectStore store) throws Exception {
        ThreadMXBean cpu = ManagementFactory.getThreadMXBean();
        try (MetaEngine meta = new MetaEngine(kv)) {
            meta.format(VolumeFormat.create(engine.toLowerCase(Locale.ROOT), VolumeFormat.DEFAULT_BLOCK_SIZE, "file:///objects"), 0, 0);
            long t0 = System.nanoTime();
            long part = 0;
            for (int i = 0; i < n; i++) {
                if (i % PER_PART == 0) {
                    part = meta.mknod(MetaEngine.ROOT, "all_" + i + "_" + i + "_0", FileType.DIRECTORY, 0755, 0, 0, 0, null).ino();
                }
                meta.mknod(part, "column_" + (i % PER_PART) + ".bin", FileType.FILE, 0644, 0, 0, 0, null);
                if ((i + 1) % 100_000 == 0) {
                    Stack.progress("%s: %d files created", engine, i + 1);
                }
            }
            Stack.progress("%s: %d files created in %.1f s", engine, n, (System.nanoTime() - t0) / 1e9);
            MetaBackup backups = new MetaBackup(kv, store, meta.volumeFormat().name());
            double[] wall = new double[runs];
            double[] cpuSecs = new double[runs];
            MetaBackup.Backup last = null;
            for (int r = 0; r < runs; r++) {
                long c0 = cpu.getCurrentThreadCpuTime();
                long w0 = System.nanoTime();
                last = backups.write(Instant.now(), () -> false);
                wall[r] = (System.nanoTime() - w0) / 1e9;
                cpuSecs[r] = (cpu.getCurrentThreadCpuTime() - c0) / 1e9;
                Stack.progress("%s: backup %d: %.2f s wall, %.2f s CPU, %d KiB", engine, r + 1, wall[r], cpuSecs[r], last.bytes() >> 10);
            }
            MetaBackup.Backup b = last;
            MetaDump.Source source = () -> new BufferedReader(new InputStreamReader(new GZIPInputStream(backups.open(b)),
                    StandardCharsets.UTF_8));
            long l0 = System.nanoTime();
            try (KvStore restored = target.make()) {
                MetaDump.Counts c = MetaDump.load(source, MetaDump.check(source), restored, 0, x -> { });
                if (c.inodes() < n) {
                    throw new IllegalStateException("restored " + c.inodes() + " inodes of " + n + " files");
                }
            }
            double restore = (System.nanoTime() - l0) / 1e9;
            Stack.progress("%s: restore %.2f s", engine, restore);
            return String.format(Locale.ROOT, "| %s | %d | %s | %s | %.1f MiB | %.2f |%n", engine, n, range(wall), range(cpuSecs),
                    last.bytes() / 1048576.0, restore);
        }
    }

    private static String range(double[] v) {
        double lo = Double.MAX_VALUE;
        double hi = 0;
        for (double x : v) {
            lo = Math.min(lo, x);
            hi = Math.max(hi, x);
        }
        return v.length == 1 ? String.format(Locale.ROOT, "%.2f", lo) : String.format(Locale.ROOT, "%.2f-%.2f", lo, hi);
    }
}
