package io.partfs.bench;

import io.partfs.cli.ClickHouseServer;
import io.partfs.engine.object.S3ObjectStore;
import io.partfs.engine.testing.TempDirs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * ClickHouse writing through each filesystem: a run of INSERTs into one MergeTree table, each
 * its own part (ClickHouse writes the part's files into a temporary directory and renames it),
 * with ClickHouse's background merges running as they would, then everything merged into one
 * part (the merges running awaited, then OPTIMIZE FINAL), timed from the last INSERT. Each INSERT is timed on its own. Afterwards ClickHouse is stopped,
 * the filesystem unmounted and mounted again, and the table read back: its answer must be the
 * one computed from the same rows in SQL, or the mode fails. Modes: local disk, PartFS by
 * default (a file's data goes to S3 when it is closed), PartFS write-back (to local disk,
 * uploaded in the background), rclone mount (VFS cache full) and s3fs, all over one s3proxy
 * behind the latency proxy, Redis for PartFS's metadata.
 */
@Command(name = "insert-bench", mixinStandardHelpOptions = true,
        description = {"ClickHouse INSERTs (one part each) and a merge on local disk, PartFS (default and write-back),"
                + " rclone mount and s3fs, side by side; every mode's table is read back after a remount and checked."})
public final class InsertBench implements Callable<Integer> {
    @Option(names = "--inserts", defaultValue = "50", description = "INSERTs per mode, one part each (default: ${DEFAULT-VALUE}).")
    int inserts;

    @Option(names = "--rows", defaultValue = "10000", description = "Rows per INSERT (default: ${DEFAULT-VALUE}).")
    int rows;

    @Option(names = "--columns", defaultValue = "20", description = "String columns besides the key (default: ${DEFAULT-VALUE}).")
    int columns;

    @Option(names = "--latency", defaultValue = "0", description = "S3 request latency in ms (default: ${DEFAULT-VALUE}).")
    double latency;

    @Option(names = "--modes", split = ",", defaultValue = "local,bindfs,partfs,partfs-writeback,rclone,s3fs",
            description = {"Default: ${DEFAULT-VALUE}; bindfs, rclone and s3fs are skipped when not installed.",
                    "partfs: a file's data is in S3 when close(2) returns; partfs-writeback: on local disk, uploaded after;",
                    "bindfs: a C FUSE filesystem passing each call to local disk (what FUSE itself costs)."})
    List<String> modes;

    @Option(names = "--partfs-option", description = "Extra option for partfs mount, one per use.")
    List<String> partfsOptions = new ArrayList<>();

    @Option(names = "--out", defaultValue = "benchmarks/results/insert-bench.md",
            description = "The markdown report: a file, or a directory to write insert-bench.md in (default: ${DEFAULT-VALUE}).")
    Path out;

    public static void main(String[] args) {
        Procs.main(new InsertBench(), args);
    }

    /** What one mode measured; {@code error} is empty when it ran to the end and read back right. */
    record Row(String mode, double[] insertSeconds, double optimizeSeconds, long partBytes, long sidecarPeakRss, String error) {
    }

    @Override
    public Integer call() throws Exception {
        if (inserts < 1 || rows < 1 || columns < 1) {
            throw new IllegalArgumentException("--inserts, --rows and --columns must be at least 1");
        }
        Stack.checkModes(modes, List.of("local", "bindfs", "partfs", "partfs-writeback", "rclone", "s3fs"));
        out = Stack.reportFile(out, "insert-bench.md");
        if (!Procs.installed("clickhouse-server") || !Procs.installed("redis-server")) {
            throw new IllegalStateException("clickhouse-server and redis-server are needed: apt-get install clickhouse-server redis-server");
        }
        List<String> skipped = modes.stream().filter(m -> List.of("bindfs", "rclone", "s3fs").contains(m) && !Procs.installed(m)).toList();
        skipped.forEach(m -> Stack.progress("%s is not installed: skipped", m));
        Path work = Files.createTempDirectory("partfs-insert-bench-");
        Path mnt = Files.createDirectories(work.resolve("mnt"));
        List<Row> rowsOut = new ArrayList<>();
        var started = new java.util.concurrent.atomic.AtomicReference<Stack>();
        BenchCleanup.onExit("insert-bench", started::get, mnt, work, true);
        try (Stack stack = new Stack(work)) {
            started.set(stack);
            stack.proxy.setDelayMillis(latency);
            stack.formatPartFs();
            if (modes.contains("rclone") || modes.contains("s3fs")) {
                try (S3ObjectStore plain = stack.plainStore()) {
                    plain.ensureBucket();
                }
            }
            Stack.progress("%d INSERTs of %d rows x %d String columns per mode, S3 at %.0f ms; modes %s", inserts, rows, columns, latency, modes);
            for (String mode : modes) {
                if (!skipped.contains(mode)) {
                    rowsOut.add(measure(stack, work, mnt, mode));
                }
            }
        } finally {
            Procs.unmount(mnt);
            TempDirs.deleteRecursively(work);
        }
        Stack.report(out, markdown(rowsOut, skipped));
        // another filesystem failing is a result; local disk or PartFS failing is this benchmark's failure
        return rowsOut.stream().allMatch(r -> r.error.isEmpty() || !(r.mode.equals("local") || r.mode.startsWith("partfs"))) ? 0 : 1;
    }

    /** The table: a key and {@link #columns} String columns; the rows of INSERT {@code i} come from SQL. */
    private String createTable() {
        return "CREATE TABLE bench.ins (k UInt64, " + IntStream.rangeClosed(1, columns).mapToObj(c -> "c" + c + " String")
                .collect(Collectors.joining(", ")) + ") ENGINE = MergeTree ORDER BY k";
    }

    private String insert(int i) {
        return "INSERT INTO bench.ins SELECT number AS k, " + IntStream.rangeClosed(1, columns)
                .mapToObj(c -> "toString(cityHash64(number, " + c + "))").collect(Collectors.joining(", "))
                + " FROM system.numbers LIMIT " + rows + " OFFSET " + (long) i * rows;
    }

    /** Counts the rows and hashes every value: the same for every mode, or the data is not what was written. */
    private String check() {
        return "SELECT count(), sum(cityHash64(k, " + IntStream.rangeClosed(1, columns).mapToObj(c -> "c" + c)
                .collect(Collectors.joining(", ")) + ")) FROM bench.ins";
    }

    /** What {@link #check} must answer, computed from the same rows without a table. */
    private String expected(ClickHouseServer ch) throws Exception {
        return ch.query("SELECT count(), sum(cityHash64(number, " + IntStream.rangeClosed(1, columns)
                .mapToObj(c -> "toString(cityHash64(number, " + c + "))").collect(Collectors.joining(", "))
                + ")) FROM (SELECT number FROM system.numbers LIMIT " + (long) inserts * rows + ")").trim();
    }

    private Row measure(Stack stack, Path work, Path mnt, String mode) throws Exception {
        Stack.progress("%s", mode);
        double[] seconds = new double[inserts];
        double optimize = Double.NaN;
        long bytes = -1;
        Mounted m = null;
        Path conf = work.resolve("conf-" + mode);
        try {
            m = mount(stack, work, mnt, mode);
            String want;
            try (ClickHouseServer ch = new ClickHouseServer(conf, m.data)) {
                ch.start();
                want = expected(ch);
                ch.query("CREATE DATABASE bench");
                ch.query(createTable());
                Map<String, Double> before = m.pid > 0 ? SidecarMetrics.scrape(stack.httpPort) : Map.of();
                double chCpu0 = Procs.cpuSeconds(ch.pid());
                double sidecarCpu0 = m.pid > 0 ? Procs.cpuSeconds(m.pid) : Double.NaN;
                for (int i = 0; i < inserts; i++) {
                    long t0 = System.nanoTime();
                    ch.query(insert(i));
                    seconds[i] = (System.nanoTime() - t0) / 1e9;
                    if ((i + 1) % Math.max(1, inserts / 10) == 0 || i + 1 == inserts) {
                        Stack.progress("  %d/%d INSERTs, last %.3f s, %s parts active", i + 1, inserts, seconds[i],
                                ch.query("SELECT count() FROM system.parts WHERE active AND table = 'ins'").trim());
                    }
                }
                // on shared cores, CPU the filesystem spends is time ClickHouse waits for
                Stack.progress("  CPU per INSERT: ClickHouse %.3f s%s", (Procs.cpuSeconds(ch.pid()) - chCpu0) / inserts,
                        m.pid > 0 ? String.format(Locale.ROOT, ", sidecar %.3f s", (Procs.cpuSeconds(m.pid) - sidecarCpu0) / inserts) : "");
                if (m.pid > 0) {
                    Stack.progress("  during the INSERTs%s", SidecarMetrics.summary(SidecarMetrics.delta(before, SidecarMetrics.scrape(stack.httpPort))));
                }
                long t0 = System.nanoTime();
                mergeToOnePart(ch);
                optimize = (System.nanoTime() - t0) / 1e9;
                bytes = Long.parseLong(ch.query("SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND table = 'ins'").trim());
                Stack.progress("  merged into one part in %.2f s, %.1f MiB", optimize, bytes / 1048576.0);
                ch.stop();
            }
            // everything written must be there after the filesystem is mounted again
            long rss = m.pid > 0 ? Procs.peakRss(m.pid) : -1;
            Mounted first = m;
            m = null; // unmounted: if mounting again fails, the finally below has nothing to unmount
            unmount(stack, mnt, first);
            m = mount(stack, work, mnt, mode);
            String got;
            try (ClickHouseServer ch = new ClickHouseServer(conf, m.data)) {
                ch.start();
                got = ch.query(check()).trim();
                ch.stop();
            }
            String error = got.equals(want) ? "" : "read back " + got + " after a remount, expected " + want;
            Stack.progress("  %s", error.isEmpty() ? "read back after a remount: right" : error);
            return new Row(mode, seconds, optimize, bytes, rss, error);
        } catch (Exception e) {
            String msg = String.valueOf(e.getMessage()).lines().findFirst().orElse("");
            Stack.progress("  failed: %s", msg);
            return new Row(mode, seconds, optimize, bytes, -1, msg);
        } finally {
            if (m != null) {
                unmount(stack, mnt, m);
            }
        }
    }

    /**
     * Merges the table into one part: waits for the background merges running (OPTIMIZE does
     * nothing with parts they hold), then OPTIMIZE FINAL, until one active part is left.
     */
    private static void mergeToOnePart(ClickHouseServer ch) throws Exception {
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.MINUTES.toNanos(10);
        for (int optimizes = 0; ; ) {
            while (!ch.query("SELECT count() FROM system.merges WHERE table = 'ins'").trim().equals("0")) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("background merges still running after 10 minutes");
                }
                java.util.concurrent.locks.LockSupport.parkNanos(10_000_000L); // poll interval
            }
            String parts = ch.query("SELECT count() FROM system.parts WHERE active AND table = 'ins'").trim();
            if (parts.equals("1")) {
                return;
            }
            if (++optimizes > 5) { // ClickHouse 18.16 returns without merging when, e.g., it cannot read a part
                String why = ch.errors().stream().filter(l -> l.contains("Exception")).reduce((x, y) -> y).orElse("no error logged");
                throw new IllegalStateException("OPTIMIZE FINAL left " + parts + " parts: " + why.substring(Math.max(0, why.indexOf("Code:"))));
            }
            ch.query("OPTIMIZE TABLE bench.ins FINAL");
        }
    }

    /** A mode's filesystem as mounted: ClickHouse's data directory, the sidecar's pid (or -1), rclone's or s3fs's process. */
    private record Mounted(String mode, Path data, long pid, Process tool) {
    }

    /** Mounts the mode's filesystem at {@code mnt} (nothing for local). */
    private Mounted mount(Stack stack, Path work, Path mnt, String mode) throws Exception {
        List<String> options = new ArrayList<>(partfsOptions);
        long pid = -1;
        Process tool = null;
        switch (mode) {
            case "local" -> {
                return new Mounted(mode, Files.createDirectories(work.resolve("local")), -1, null);
            }
            case "partfs" -> pid = stack.mountPartFs(mnt, options);
            case "partfs-writeback" -> {
                options.addAll(List.of("--writeback", "--cache-dir", work.resolve("cache-writeback").toString()));
                pid = stack.mountPartFs(mnt, options);
            }
            case "bindfs" -> tool = stack.startBindfs(Files.createDirectories(work.resolve("bindfs-source")), mnt);
            case "rclone" -> tool = stack.startRclone(mnt);
            case "s3fs" -> tool = stack.startS3fs(mnt);
            default -> throw new IllegalArgumentException("unknown mode " + mode + ": use local, bindfs, partfs, partfs-writeback, rclone, s3fs");
        }
        return new Mounted(mode, Files.createDirectories(mnt.resolve(mode)), pid, tool);
    }

    private static void unmount(Stack stack, Path mnt, Mounted m) throws Exception {
        if (m.pid > 0) {
            stack.umountPartFs(mnt);
        } else if (m.tool != null) {
            Stack.stopTool(m.tool, mnt);
        }
    }

    private String markdown(List<Row> rs, List<String> skipped) {
        StringBuilder b = new StringBuilder(String.format(Locale.ROOT,
                "ClickHouse INSERTs: %d INSERTs of %d rows (a UInt64 key and %d String columns, one part each, background merges on),"
                        + " then merged into one part (background merges awaited, then OPTIMIZE FINAL); S3 latency %.0f ms; each table read back and checked after a remount%n%n"
                        + "| mode | INSERT median | p90 | max | INSERTs/s | merge to one part | merged part | vs local (INSERT, merge) | sidecar peak RSS | error |%n"
                        + "|---|---|---|---|---|---|---|---|---|---|%n",
                inserts, rows, columns, latency));
        Row local = rs.stream().filter(r -> r.mode.equals("local") && r.error.isEmpty()).findFirst().orElse(null);
        for (Row r : rs) {
            double[] s = sorted(r.insertSeconds);
            double median = quantile(s, 0.5);
            double total = Arrays.stream(s).sum();
            String vs = local == null || !r.error.isEmpty() ? "-" : String.format(Locale.ROOT, "%.2fx, %.2fx",
                    median / quantile(sorted(local.insertSeconds), 0.5), r.optimizeSeconds / local.optimizeSeconds);
            b.append(String.format(Locale.ROOT, "| %s | %.3f s | %.3f s | %.3f s | %.1f | %.2f s | %s | %s | %s | %s |%n", r.mode, median,
                    quantile(s, 0.9), s[s.length - 1], inserts / total, r.optimizeSeconds,
                    r.partBytes < 0 ? "-" : String.format(Locale.ROOT, "%.1f MiB", r.partBytes / 1048576.0), vs,
                    r.sidecarPeakRss > 0 ? (r.sidecarPeakRss >> 20) + " MiB" : "-", r.error.isEmpty() ? "" : r.error.replace('|', '/')));
        }
        skipped.forEach(m -> b.append("| ").append(m).append(" | not installed: skipped |||||||||\n"));
        return b.toString();
    }

    private static double[] sorted(double[] s) {
        double[] c = s.clone();
        Arrays.sort(c);
        return c;
    }

    /** The q-quantile of sorted values (nearest rank). */
    private static double quantile(double[] sorted, double q) {
        int rank = (int) Math.ceil(q * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank))];
    }
}
