package io.partfs.bench;

import io.partfs.cli.ClickHouseServer;
import io.partfs.engine.testing.TempDirs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.stream.Stream;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * ClickHouse reading a table through each filesystem: one MergeTree table made on local disk,
 * copied onto PartFS (Redis metadata, S3 behind the latency proxy), and a full scan of its
 * columns timed with the page cache dropped before each query, for local disk, PartFS with its
 * block cache holding the data (as after ClickHouse wrote or merged it), PartFS reading
 * everything from S3 ({@code --cache-size 0}), and two modes that remount with an empty block
 * cache before every scan, as a new replica or a lost cache disk would: the first scan filling
 * the cache as it goes ({@code partfs-cold}), and {@code partfs warmup} of the table first,
 * timed on its own ({@code partfs-warmup}), followed by a scrub of what it fetched ({@code
 * partfs warmup --verify --check}, page cache dropped first), timed too.
 */
@Command(name = "scan-bench", mixinStandardHelpOptions = true,
        description = "ClickHouse full scans of one table on local disk and on PartFS (block cache warm, and S3 only), page cache dropped.")
public final class ScanBench implements Callable<Integer> {
    @Option(names = "--rows", defaultValue = "20000000", description = "Rows in the table (default: ${DEFAULT-VALUE}).")
    long rows;

    @Option(names = "--runs", defaultValue = "3", description = "Scans per mode; the median is reported (default: ${DEFAULT-VALUE}).")
    int runs;

    @Option(names = "--latency", defaultValue = "0", description = "S3 request latency in ms (default: ${DEFAULT-VALUE}).")
    double latency;

    @Option(names = "--modes", split = ",", defaultValue = "local,partfs,partfs-s3",
            description = "Default: ${DEFAULT-VALUE}. partfs: block cache holds the table; partfs-s3: --cache-size 0;"
                    + " partfs-cold: an empty block cache before each scan; partfs-warmup: the same, then partfs warmup of the table.")
    List<String> modes;

    @Option(names = "--warmup-threads", defaultValue = "16", description = "partfs warmup -p in partfs-warmup (default: ${DEFAULT-VALUE}).")
    int warmupThreads;

    @Option(names = "--partfs-option", description = "Extra option for partfs mount, one per use.")
    List<String> partfsOptions = new ArrayList<>();

    @Option(names = "--out", defaultValue = "benchmarks/results/scan-bench.md",
            description = "The markdown report: a file, or a directory to write scan-bench.md in (default: ${DEFAULT-VALUE}).")
    Path out;

    /** Reads every column: the bytes read are the table's size on disk. */
    static final String QUERY = "SELECT count(), sum(k), sum(v), sum(length(s)) FROM bench.scan";

    public static void main(String[] args) {
        Procs.main(new ScanBench(), args);
    }

    @Override
    public Integer call() throws Exception {
        if (runs < 1 || rows < 1) {
            throw new IllegalArgumentException("--runs and --rows must be at least 1");
        }
        Stack.checkModes(modes, List.of("local", "partfs", "partfs-s3", "partfs-cold", "partfs-warmup"));
        out = Stack.reportFile(out, "scan-bench.md");
        Path work = Files.createTempDirectory("partfs-scan-bench-");
        Path local = work.resolve("local");
        Path mnt = Files.createDirectories(work.resolve("mnt"));
        Map<String, double[]> results = new LinkedHashMap<>();
        Map<String, double[]> warmups = new LinkedHashMap<>();
        Map<String, double[]> scrubs = new LinkedHashMap<>();
        long bytes;
        String expected;
        var started = new java.util.concurrent.atomic.AtomicReference<Stack>();
        BenchCleanup.onExit("scan-bench", started::get, mnt, work, true);
        try (Stack stack = new Stack(work)) {
            started.set(stack);
            stack.proxy.setDelayMillis(latency);
            expected = makeTable(work, local);
            bytes = sizeOf(local.resolve("data/bench/scan"));
            Stack.progress("table: %d rows, %.1f MiB on disk", rows, bytes / 1048576.0);
            stack.formatPartFs();
            stack.mountPartFs(mnt, partfsOptions);
            long t0 = System.nanoTime();
            ParallelCopy.copy(local, mnt, 16);
            stack.umountPartFs(mnt);
            Stack.progress("copied onto PartFS in %.1f s", (System.nanoTime() - t0) / 1e9);
            for (String mode : modes) {
                if (mode.equals("partfs-cold") || mode.equals("partfs-warmup")) {
                    double[][] r = emptyCacheScans(stack, work, mnt, mode, expected, bytes);
                    results.put(mode, r[0]);
                    if (mode.equals("partfs-warmup")) {
                        warmups.put(mode, r[1]);
                        scrubs.put(mode, r[2]);
                    }
                    continue;
                }
                Path data = mnt;
                List<String> options = new ArrayList<>(partfsOptions);
                switch (mode) {
                    case "local" -> data = local;
                    case "partfs" -> stack.mountPartFs(mnt, options);
                    case "partfs-s3" -> {
                        options.addAll(List.of("--cache-size", "0"));
                        stack.mountPartFs(mnt, options);
                    }
                    default -> throw new IllegalArgumentException("unknown mode " + mode
                            + ": use local, partfs, partfs-s3, partfs-cold, partfs-warmup");
                }
                try (ClickHouseServer ch = new ClickHouseServer(work.resolve("conf-" + mode), data)) {
                    ch.start();
                    double[] seconds = new double[runs];
                    for (int r = 0; r < runs; r++) {
                        seconds[r] = scan(ch, mode, expected, bytes, r);
                    }
                    ch.stop();
                    results.put(mode, seconds);
                } finally {
                    if (mode.startsWith("partfs")) {
                        stack.umountPartFs(mnt);
                    }
                }
            }
        } finally {
            Procs.unmount(mnt);
            TempDirs.deleteRecursively(work);
        }
        String md = markdown(results, warmups, scrubs, bytes);
        Stack.report(out, md);
        return 0;
    }

    /** One scan with the page cache dropped first: its seconds, after checking its answer. */
    private double scan(ClickHouseServer ch, String mode, String expected, long bytes, int run) throws Exception {
        io.partfs.cli.PageCache.drop();
        long q0 = System.nanoTime();
        String got = ch.query(QUERY).trim();
        double seconds = (System.nanoTime() - q0) / 1e9;
        if (!got.equals(expected)) {
            throw new IllegalStateException(mode + " read " + got + ", expected " + expected);
        }
        Stack.progress("%s scan %d/%d: %.2f s, %.0f MiB/s", mode, run + 1, runs, seconds, bytes / 1048576.0 / seconds);
        return seconds;
    }

    /**
     * Each run on a fresh mount whose block cache directory is new and empty: for
     * partfs-warmup, {@code partfs warmup} of the table's directory first (timed) and a scrub of
     * the blocks it cached (timed, page cache dropped first); then ClickHouse starts and scans
     * once. Returns {scan seconds, warmup seconds, scrub seconds}.
     */
    private double[][] emptyCacheScans(Stack stack, Path work, Path mnt, String mode, String expected, long bytes) throws Exception {
        double[] scans = new double[runs];
        double[] warm = new double[runs];
        double[] scrub = new double[runs];
        for (int r = 0; r < runs; r++) {
            List<String> options = new ArrayList<>(partfsOptions);
            options.addAll(List.of("--cache-dir", work.resolve("cache-" + mode + "-" + r).toString()));
            stack.mountPartFs(mnt, options);
            try {
                if (mode.equals("partfs-warmup")) {
                    warm[r] = timedWarmup(stack, mnt, "warmup", r);
                    io.partfs.cli.PageCache.drop();
                    scrub[r] = timedWarmup(stack, mnt, "scrub", r, "--verify", "--check"); // exits 1 on a damaged block
                }
                try (ClickHouseServer ch = new ClickHouseServer(work.resolve("conf-" + mode + "-" + r), mnt)) {
                    ch.start();
                    scans[r] = scan(ch, mode, expected, bytes, r);
                    ch.stop();
                }
            } finally {
                stack.umountPartFs(mnt);
            }
        }
        return new double[][] {scans, warm, scrub};
    }

    /** partfs warmup of the table's directory through the mount's sidecar, with {@code options}; its seconds, shown as {@code what}. */
    private double timedWarmup(Stack stack, Path mnt, String what, int run, String... options) throws Exception {
        List<String> args = new ArrayList<>(List.of("warmup", "--sidecar", "127.0.0.1:" + stack.httpPort, "-p", Integer.toString(warmupThreads)));
        args.addAll(List.of(options));
        args.add(mnt.resolve("data/bench/scan").toString());
        long t0 = System.nanoTime();
        String o = Procs.ok(Procs.partfs(args.toArray(String[]::new)), stack.env);
        double seconds = (System.nanoTime() - t0) / 1e9;
        Stack.progress("partfs-warmup %s %d/%d: %.2f s: %s", what, run + 1, runs, seconds, o.trim());
        return seconds;
    }

    /** Makes bench.scan on local disk as one part; returns the scan's answer. */
    private String makeTable(Path work, Path local) throws Exception {
        Stack.progress("creating a %d-row table with ClickHouse on local disk", rows);
        try (ClickHouseServer ch = new ClickHouseServer(work.resolve("conf-load"), Files.createDirectories(local))) {
            ch.start();
            ch.query("CREATE DATABASE bench");
            ch.query("CREATE TABLE bench.scan (k UInt64, v Float64, s String) ENGINE = MergeTree ORDER BY k");
            ch.query("INSERT INTO bench.scan SELECT number, number * 0.5, toString(cityHash64(number)) FROM system.numbers LIMIT " + rows);
            ch.query("OPTIMIZE TABLE bench.scan FINAL");
            String answer = ch.query(QUERY).trim();
            ch.stop();
            return answer;
        }
    }

    private static long sizeOf(Path dir) throws Exception {
        try (Stream<Path> s = Files.walk(dir)) {
            return s.filter(Files::isRegularFile).mapToLong(p -> p.toFile().length()).sum();
        }
    }

    private String markdown(Map<String, double[]> results, Map<String, double[]> warmups, Map<String, double[]> scrubs, long bytes) {
        StringBuilder b = new StringBuilder(String.format(Locale.ROOT,
                "ClickHouse full scan (%s), %d rows, %.1f MiB on disk, S3 latency %.0f ms, page cache dropped before each; median of %d%n%n"
                        + "| mode | scan (median) | min - max | throughput | vs local | partfs warmup before (median) |"
                        + " warmup --verify --check (median) |%n"
                        + "|---|---|---|---|---|---|---|%n",
                QUERY, rows, bytes / 1048576.0, latency, runs));
        double[] base = results.get("local");
        double localMedian = base == null ? Double.NaN : median(base);
        results.forEach((mode, s) -> {
            double m = median(s);
            b.append(String.format(Locale.ROOT, "| %s | %.2f s | %.2f - %.2f | %.0f MiB/s | %s | %s | %s |%n", mode, m,
                    Arrays.stream(s).min().orElse(m), Arrays.stream(s).max().orElse(m), bytes / 1048576.0 / m,
                    Double.isNaN(localMedian) ? "-" : String.format(Locale.ROOT, "%.2fx", m / localMedian),
                    rate(warmups.get(mode), bytes), rate(scrubs.get(mode), bytes)));
        });
        return b.toString();
    }

    /** "1.20 s (850 MiB/s)": the median of {@code seconds} over {@code bytes}, or "-" when not measured. */
    private static String rate(double[] seconds, long bytes) {
        return seconds == null ? "-" : String.format(Locale.ROOT, "%.2f s (%.0f MiB/s)", median(seconds), bytes / 1048576.0 / median(seconds));
    }

    private static double median(double[] s) {
        double[] c = s.clone();
        Arrays.sort(c);
        return c.length % 2 == 1 ? c[c.length / 2] : (c[c.length / 2 - 1] + c[c.length / 2]) / 2;
    }
}
