package io.partfs.bench;

import io.partfs.cli.ClickHouseServer;
import io.partfs.engine.object.S3ObjectStore;
import io.partfs.engine.testing.LatencyProxy;
import io.partfs.engine.testing.TempDirs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * ClickHouse startup time on local disk, on PartFS with and without the part-metadata cache,
 * and on other FUSE filesystems over the same S3 server: the classic test of ClickHouse's
 * metadata-cache feature (2000 tables x 350 parts x 50 String columns), scaled by options.
 *
 * <p>One dataset is made by ClickHouse on local disk, then copied onto a PartFS volume (Redis
 * metadata, S3 data) and uploaded as plain objects for rclone and s3fs. S3 is an s3proxy
 * behind a {@link LatencyProxy}; loading runs at 0 ms, startups at each --latency. Every
 * startup is timed from process start until {@code SELECT 1} answers (18.16 loads all tables
 * before it listens), with the page cache dropped first; the parts are counted afterwards.
 */
@Command(name = "startup-bench", mixinStandardHelpOptions = true,
        description = {"ClickHouse startup time: local disk, PartFS without/with the part-metadata cache,",
                "PartFS with an empty cache after 'partfs cache warmup', rclone mount and s3fs, side by side.",
                "Writes results.md, results.csv and startup.png into --out."})
public final class StartupBench implements Callable<Integer> {
    @Option(names = "--tables", defaultValue = "4", description = "Tables (classic test: 2000; default: ${DEFAULT-VALUE}).")
    int tables;

    @Option(names = "--parts", defaultValue = "350", description = "Parts per table, one per day partition (default: ${DEFAULT-VALUE}).")
    int parts;

    @Option(names = "--columns", defaultValue = "50", description = "String columns per table (default: ${DEFAULT-VALUE}).")
    int columns;

    @Option(names = "--rows", defaultValue = "10", description = "Rows per part (default: ${DEFAULT-VALUE}).")
    int rowsPerPart;

    @Option(names = "--runs", defaultValue = "3", description = "Startups per mode and latency; the median is reported (default: ${DEFAULT-VALUE}).")
    int runs;

    @Option(names = "--latency", split = ",", defaultValue = "0,20",
            description = "S3 request latencies to measure at, in ms (default: ${DEFAULT-VALUE}).")
    List<Double> latencies;

    @Option(names = "--modes", split = ",", defaultValue = "local,partfs-nocache,partfs-cache,partfs-blockcache,partfs-warmup,rclone,s3fs",
            description = {"Modes to run (default: ${DEFAULT-VALUE}); rclone and s3fs are skipped when not installed.",
                    "PartFS modes mount without a block cache (--cache-size 0), so that the part-metadata cache is what is",
                    "measured; partfs-blockcache is partfs-cache with the mount's default block cache on local disk, filled",
                    "by the copy and kept across sidecar restarts, as rclone's VFS cache is."})
    List<String> modes;

    @Option(names = "--partfs-option", description = "Extra option for partfs mount, one per use (e.g. --partfs-option=--attr-cache=1).")
    List<String> partfsOptions = new ArrayList<>();

    @Option(names = "--sidecar-jvm", paramLabel = "NAME=OPTIONS",
            description = {"Also runs partfs-cache with the sidecar's JVM options replaced (PARTFS_JAVA_OPTS), as mode",
                    "partfs-cache:NAME, side by side with the others; one per use, e.g.",
                    "--sidecar-jvm='g1=-Xmx512m -XX:+UseG1GC' (JIT and GC choices cost startup CPU: benchmarks/RESULTS.md)."})
    Map<String, String> sidecarJvms = new java.util.LinkedHashMap<>();

    @Option(names = "--work", description = "Scratch directory (default: a new temp directory, deleted at the end).")
    Path work;

    @Option(names = "--out", defaultValue = "benchmarks/results/startup", description = "Where the reports go (default: ${DEFAULT-VALUE}).")
    Path out;

    @Option(names = "--startup-timeout", defaultValue = "600", description = "Seconds a startup may take before it counts as failed (default: ${DEFAULT-VALUE}).")
    int startupTimeout;

    private Stack stack;
    private Path local;
    private Path mnt;
    private boolean pageCacheDropped = true;
    private final List<StartupReport.Row> rows = new ArrayList<>();

    public static void main(String[] args) {
        Procs.main(new StartupBench(), args);
    }

    private static void progress(String fmt, Object... args) {
        Stack.progress(fmt, args);
    }

    @Override
    public Integer call() throws Exception {
        if (tables < 1 || parts < 1 || columns < 1 || rowsPerPart < 1 || runs < 1 || startupTimeout < 1) {
            throw new IllegalArgumentException("--tables, --parts, --columns, --rows, --runs and --startup-timeout must be at least 1");
        }
        if (latencies.stream().anyMatch(l -> l < 0)) {
            throw new IllegalArgumentException("--latency takes milliseconds from 0 up, not " + latencies);
        }
        Stack.checkModes(modes, List.of("local", "partfs-nocache", "partfs-cache", "partfs-blockcache", "partfs-warmup", "rclone", "s3fs"));
        if (!Procs.installed("clickhouse-server") || !Procs.installed("redis-server")) {
            throw new IllegalStateException("clickhouse-server and redis-server are needed: apt-get install clickhouse-server redis-server");
        }
        try {
            Files.createDirectories(out); // before the run: a bad --out fails now, not after an hour
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException("--out " + out + ": cannot make the reports' directory (" + e + ")");
        }
        List<String> skipped = new ArrayList<>();
        for (String tool : List.of("rclone", "s3fs")) {
            if (modes.contains(tool) && !Procs.installed(tool)) {
                skipped.add(tool + " (not installed)");
            }
        }
        modes = modes.stream().filter(m -> skipped.stream().noneMatch(s -> s.startsWith(m + " "))).toList();
        if (!sidecarJvms.isEmpty()) {
            List<String> all = new ArrayList<>(modes);
            sidecarJvms.keySet().forEach(name -> all.add("partfs-cache:" + name));
            modes = all;
        }
        boolean ownWork = work == null;
        work = ownWork ? Files.createTempDirectory("partfs-startup-bench-") : Files.createDirectories(work);
        local = work.resolve("local");
        mnt = work.resolve("mnt");
        Files.createDirectories(mnt);
        long started = System.nanoTime();
        BenchCleanup.onExit("startup-bench", () -> stack, mnt, work, ownWork);
        try {
            stack = new Stack(work);
            progress("profile: %d tables x %d parts x %d String columns, %d rows per part; %d runs per mode at %s ms; modes %s",
                    tables, parts, columns, rowsPerPart, runs, latencies, modes);
            makeDataset();
            loadPartFs();
            if (modes.contains("rclone") || modes.contains("s3fs")) {
                uploadPlain();
            }
            for (double latency : latencies) {
                stack.proxy.setDelayMillis(latency);
                java.util.Set<String> gaveUp = new java.util.HashSet<>();
                for (int run = 1; run <= runs; run++) {
                    for (String mode : modes) {
                        if (gaveUp.contains(mode)) {
                            continue; // it failed (or timed out) at this latency: repeating it tells nothing new
                        }
                        StartupReport.Row row = measure(mode, latency, run);
                        rows.add(row);
                        if (Double.isNaN(row.seconds())) {
                            gaveUp.add(mode);
                        }
                    }
                }
            }
            StartupReport report = new StartupReport(rows, tables, parts, columns, rowsPerPart, pageCacheDropped, skipped);
            Files.createDirectories(out);
            report.write(out);
            System.out.println(report.markdown());
            progress("done in %.0f s; reports in %s", (System.nanoTime() - started) / 1e9, out.toAbsolutePath());
            return 0;
        } finally {
            Procs.unmount(mnt);
            if (stack != null) {
                stack.close();
            }
            if (ownWork) {
                TempDirs.deleteRecursively(work);
            }
        }
    }

    // ---- the dataset ----

    private void makeDataset() throws Exception {
        progress("creating the dataset with ClickHouse on local disk (%s)", local);
        try (ClickHouseServer ch = new ClickHouseServer(work.resolve("conf-load"), Files.createDirectories(local))) {
            ch.start();
            ch.query("CREATE DATABASE bench");
            StringBuilder cols = new StringBuilder();
            StringBuilder values = new StringBuilder();
            for (int c = 0; c < columns; c++) {
                cols.append(", c").append(c).append(" String");
                values.append(", toString(number * ").append(c + 1).append(")");
            }
            for (int t = 0; t < tables; t++) {
                ch.query("CREATE TABLE bench.t" + t + " (day Date, k UInt64" + cols + ") ENGINE = MergeTree "
                        + "PARTITION BY toYYYYMMDD(day) ORDER BY k");
                ch.query("INSERT INTO bench.t" + t + " SELECT toDate('2000-01-01') + (number % " + parts + "), number" + values
                        + " FROM system.numbers LIMIT " + ((long) parts * rowsPerPart));
                if ((t + 1) % Math.max(1, tables / 10) == 0 || t + 1 == tables) {
                    progress("  %d/%d tables", t + 1, tables);
                }
            }
            String count = ch.query("SELECT count() FROM system.parts WHERE active AND database = 'bench'").trim();
            if (Long.parseLong(count) != (long) tables * parts) {
                throw new IllegalStateException("expected " + tables * parts + " parts, ClickHouse made " + count);
            }
            ch.stop();
        }
        long[] files = {0, 0};
        try (Stream<Path> s = Files.walk(local)) {
            s.forEach(p -> files[Files.isDirectory(p) ? 0 : 1]++);
        }
        progress("dataset: %d parts, %d directories, %d files", (long) tables * parts, files[0], files[1]);
    }

    /**
     * Options of a mount: no block cache (what is measured is the part-metadata cache), or with
     * {@code blockCache} the mount's default block cache in a directory kept across mounts, as a
     * sidecar restarted in place keeps it.
     */
    private List<String> mountOptions(boolean cache, boolean blockCache) {
        List<String> a = new ArrayList<>(blockCache ? List.of("--cache-dir", work.resolve("block-cache").toString()) : List.of("--cache-size", "0"));
        if (cache) {
            a.addAll(List.of("--metadata-cache-tables", "all"));
        } else {
            a.add("--no-metadata-cache");
        }
        a.addAll(partfsOptions);
        return a;
    }

    private long mountPartFs(boolean cache) throws Exception {
        return mountPartFs(cache, false);
    }

    /** How long the last mount took: the sidecar's own restart, before ClickHouse starts. */
    private double lastMountSeconds = Double.NaN;

    private long mountPartFs(boolean cache, boolean blockCache) throws Exception {
        long t0 = System.nanoTime();
        long pid = stack.mountPartFs(mnt, mountOptions(cache, blockCache));
        lastMountSeconds = (System.nanoTime() - t0) / 1e9;
        progress("  mounted in %.2f s", lastMountSeconds);
        return pid;
    }

    /** A cache-on mount whose sidecar JVM runs with {@code javaOptions} instead of scripts/partfs's. */
    private long mountPartFsWithJvm(String javaOptions) throws Exception {
        stack.env.put("PARTFS_JAVA_OPTS", javaOptions);
        try {
            return mountPartFs(true);
        } finally {
            stack.env.remove("PARTFS_JAVA_OPTS");
        }
    }

    private void umountPartFs() throws Exception {
        stack.umountPartFs(mnt);
    }

    private void loadPartFs() throws Exception {
        progress("formatting a PartFS volume (Redis metadata, S3 data) and copying the dataset onto it");
        stack.formatPartFs();
        mountPartFs(true, modes.contains("partfs-blockcache")); // the copy fills the block cache, as ClickHouse writing its parts would
        long t0 = System.nanoTime();
        ParallelCopy.copy(local, mnt, 16);
        umountPartFs();
        progress("copied onto PartFS in %.1f s (block uploads, Redis transactions and the cache fill included)",
                (System.nanoTime() - t0) / 1e9);
    }

    /** Uploads the dataset as plain objects (key = path) for rclone and s3fs, 32 at a time. */
    private void uploadPlain() throws Exception {
        progress("uploading the dataset as plain objects for rclone and s3fs");
        List<Path> files;
        try (Stream<Path> s = Files.walk(local)) {
            files = s.filter(Files::isRegularFile).toList();
        }
        AtomicLong done = new AtomicLong();
        ExecutorService pool = Executors.newFixedThreadPool(32);
        try (S3ObjectStore store = stack.plainStore()) {
            store.ensureBucket();
            List<Future<?>> fs = new ArrayList<>();
            for (Path f : files) {
                fs.add(pool.submit(() -> {
                    store.put(local.relativize(f).toString(), Files.readAllBytes(f));
                    long n = done.incrementAndGet();
                    if (n % 20000 == 0) {
                        progress("  %d/%d objects", n, files.size());
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
        progress("uploaded %d objects", files.size());
    }

    // ---- one startup ----

    /**
     * Where the CPU of one startup went, for finding what a slower start waits for on two shared
     * cores: ClickHouse's own (its whole life so far: the startup), the sidecar's by kind of
     * thread, and redis-server's.
     */
    private static String cpuSplit(double clickhouse, Map<String, Double> threadsBefore, Map<String, Double> threadsAfter, double redis) {
        StringBuilder b = new StringBuilder(String.format(java.util.Locale.ROOT, "; CPU: clickhouse %.2f s", clickhouse));
        if (!threadsAfter.isEmpty()) {
            b.append(" (sidecar:");
            threadsAfter.forEach((kind, after) -> b.append(String.format(java.util.Locale.ROOT, " %s %.2f", kind,
                    after - threadsBefore.getOrDefault(kind, 0.0))));
            b.append(')');
        }
        if (!Double.isNaN(redis)) {
            b.append(String.format(java.util.Locale.ROOT, ", redis-server %.2f s", redis));
        }
        return b.toString();
    }

    private StartupReport.Row measure(String mode, double latency, int run) throws Exception {
        progress("%s at %.0f ms, run %d/%d", mode, latency, run, runs);
        long pid = -1;
        Process tool = null;
        double warmup = Double.NaN;
        lastMountSeconds = Double.NaN;
        Path data = mnt;
        try {
            switch (mode) {
                case "local" -> data = local;
                case "partfs-nocache" -> pid = mountPartFs(false);
                case "partfs-cache" -> pid = mountPartFs(true);
                case "partfs-blockcache" -> pid = mountPartFs(true, true);
                case "partfs-warmup" -> {
                    Procs.ok(Procs.partfs("cache", "drop", "--meta", stack.metaUrl()), stack.env);
                    pid = mountPartFs(true);
                    long t0 = System.nanoTime();
                    Procs.ok(Procs.partfs("cache", "warmup", mnt.toString()), stack.env);
                    warmup = (System.nanoTime() - t0) / 1e9;
                }
                case "rclone" -> tool = stack.startRclone(mnt);
                case "s3fs" -> tool = stack.startS3fs(mnt);
                default -> {
                    if (!mode.startsWith("partfs-cache:")) {
                        throw new IllegalArgumentException("unknown mode " + mode);
                    }
                    pid = mountPartFsWithJvm(sidecarJvms.get(mode.substring("partfs-cache:".length())));
                }
            }
            pageCacheDropped &= io.partfs.cli.PageCache.drop();
            Path conf = work.resolve("conf-" + mode);
            TempDirs.deleteRecursively(conf);
            try (ClickHouseServer ch = new ClickHouseServer(conf, data)) {
                Map<String, Double> before = mode.startsWith("partfs") ? SidecarMetrics.scrape(stack.httpPort) : Map.of();
                double cpu0 = pid > 0 ? Procs.cpuSeconds(pid) : Double.NaN;
                Map<String, Double> threads0 = pid > 0 ? Procs.cpuByThread(pid) : Map.of();
                double redis0 = Procs.cpuSeconds(stack.redis.pid());
                long t0 = System.nanoTime();
                ch.start(java.time.Duration.ofSeconds(startupTimeout));
                double seconds = (System.nanoTime() - t0) / 1e9;
                double cpu = pid > 0 ? Procs.cpuSeconds(pid) - cpu0 : Double.NaN;
                String cpuSplit = cpuSplit(Procs.cpuSeconds(ch.pid()), threads0, pid > 0 ? Procs.cpuByThread(pid) : Map.of(),
                        mode.startsWith("partfs") ? Procs.cpuSeconds(stack.redis.pid()) - redis0 : Double.NaN);
                Map<String, Double> during = mode.startsWith("partfs") ? SidecarMetrics.delta(before, SidecarMetrics.scrape(stack.httpPort)) : Map.of();
                long partsLoaded = Long.parseLong(ch.query("SELECT count() FROM system.parts WHERE active AND database = 'bench'").trim());
                ch.stop();
                long rss = pid > 0 ? Procs.peakRss(pid) : -1;
                String sidecar = (Double.isNaN(cpu) ? "" : String.format(java.util.Locale.ROOT, "; sidecar CPU %.2f s", cpu))
                        + cpuSplit + SidecarMetrics.summary(during);
                progress("  %.2f s, %d parts%s%s%s", seconds, partsLoaded, Double.isNaN(warmup) ? "" : String.format(", warmup %.2f s", warmup),
                        rss > 0 ? String.format(", sidecar peak RSS %d MiB", rss >> 20) : "", sidecar);
                String error = partsLoaded == (long) tables * parts ? "" : "loaded " + partsLoaded + " of " + (long) tables * parts + " parts";
                return new StartupReport.Row(mode, latency, run, seconds, partsLoaded, rss, warmup, lastMountSeconds, error, sidecar);
            }
        } catch (Exception e) {
            progress("  failed: %s", e.getMessage());
            return new StartupReport.Row(mode, latency, run, Double.NaN, 0, -1, warmup, lastMountSeconds, String.valueOf(e.getMessage()).lines().findFirst().orElse(""), "");
        } finally {
            if (mode.startsWith("partfs")) {
                umountPartFs();
            } else if (tool != null) {
                Stack.stopTool(tool, mnt);
            }
        }
    }
}
