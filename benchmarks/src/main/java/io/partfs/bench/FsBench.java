package io.partfs.bench;

import io.partfs.engine.testing.TempDirs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code partfs bench} side by side on local disk, PartFS (Redis metadata, S3 data), rclone
 * mount and s3fs, all three over the same s3proxy behind the same latency proxy; prints one
 * markdown table per measure and writes it to --out. bindfs, a C FUSE filesystem passing every
 * call through to a local directory, measures what FUSE itself costs on the same disk.
 */
@Command(name = "fs-bench", mixinStandardHelpOptions = true,
        description = {"partfs bench on local disk, PartFS, rclone mount and s3fs over one S3 server, side by side;",
                "bindfs over local disk shows what FUSE itself costs."})
public final class FsBench implements Callable<Integer> {
    @Option(names = "--big-file-size", defaultValue = "256M", description = "Default: ${DEFAULT-VALUE}.")
    String bigFileSize;

    @Option(names = "--small-file-count", defaultValue = "100", description = "Small files per thread (default: ${DEFAULT-VALUE}).")
    int smallFiles;

    @Option(names = "--list-entries", defaultValue = "5000",
            description = {"Entries of the directory listed (ls -l) per thread, in passes after the others; 0: not listed",
                    "(default: ${DEFAULT-VALUE})."})
    int listEntries;

    @Option(names = "-p", defaultValue = "1", description = "Threads (default: ${DEFAULT-VALUE}).")
    int threads;

    @Option(names = "--latency", defaultValue = "0", description = "S3 request latency in ms (default: ${DEFAULT-VALUE}).")
    double latency;

    @Option(names = "--filesystems", split = ",", defaultValue = "local,bindfs,partfs,partfs-writeback,rclone,s3fs",
            description = {"Default: ${DEFAULT-VALUE}. partfs-writeback mounts with --writeback --upload-delay 5,",
                    "rclone's own write-back delay in its default VFS mode. bindfs (-o big_writes) passes every call",
                    "through to a local directory: the floor for any FUSE filesystem on this disk. bindfs, rclone and",
                    "s3fs are skipped when not installed."})
    List<String> filesystems;

    @Option(names = "--partfs-option", description = "Extra option for partfs mount, one per use.")
    List<String> partfsOptions = new ArrayList<>();

    @Option(names = "--objbench", description = "Also run partfs objbench (-p threads) against the same S3 server.")
    boolean objbench;

    @Option(names = "--passes", defaultValue = "5",
            description = {"partfs bench runs per filesystem on one mount (default: ${DEFAULT-VALUE}). The main table is the",
                    "median of the passes after the first, line by line: a mount that has run a while, as in production",
                    "(the first pass also times the JVMs of PartFS and s3proxy compiling their code), and no single",
                    "100-file sample deciding a line. The first pass has a table of its own, every pass one per line."})
    int passes;

    @Option(names = "--warmup-small-files", paramLabel = "N", defaultValue = "0",
            description = {"Small files written, read and deleted on each filesystem before its first pass, untimed",
                    "(default: ${DEFAULT-VALUE}). A PartFS sidecar's small-file costs settle only after its JVM has",
                    "compiled the paths of some 1,500 files (round 53 in RESULTS.md); every filesystem gets the same."})
    int warmupSmallFiles;

    @Option(names = "--out", defaultValue = "benchmarks/results/fs-bench.md",
            description = "The markdown report: a file, or a directory to write fs-bench.md in (default: ${DEFAULT-VALUE}).")
    Path out;

    public static void main(String[] args) {
        Procs.main(new FsBench(), args);
    }

    @Override
    public Integer call() throws Exception {
        if (passes < 1) {
            throw new IllegalArgumentException("--passes must be at least 1");
        }
        if (warmupSmallFiles < 0) {
            throw new IllegalArgumentException("--warmup-small-files must be 0 or more");
        }
        out = Stack.reportFile(out, "fs-bench.md");
        Path work = Files.createTempDirectory("partfs-fs-bench-");
        Path mnt = Files.createDirectories(work.resolve("mnt"));
        Map<String, List<Map<String, String[]>>> results = new LinkedHashMap<>();
        Map<String, Long> peakRss = new LinkedHashMap<>();
        String objTable = "";
        var started = new java.util.concurrent.atomic.AtomicReference<Stack>();
        BenchCleanup.onExit("fs-bench", started::get, mnt, work, true);
        try (Stack stack = new Stack(work)) {
            started.set(stack);
            stack.proxy.setDelayMillis(latency);
            stack.formatPartFs();
            try (var plain = stack.plainStore()) {
                plain.ensureBucket();
            }
            for (String fs : filesystems) {
                if (TOOLS.contains(fs) && !Procs.installed(fs)) {
                    Stack.progress("%s is not installed: skipped (apt-get install %s)", fs, fs);
                    continue;
                }
                Stack.progress("partfs bench on %s", fs);
                Process tool = null;
                long sidecar = -1;
                Path dir = mnt;
                try {
                    switch (fs) {
                        case "local" -> dir = Files.createDirectories(work.resolve("local"));
                        case "bindfs" -> tool = stack.startBindfs(Files.createDirectories(work.resolve("bindfs-source")), mnt);
                        case "partfs" -> sidecar = stack.mountPartFs(mnt, partfsOptions);
                        case "partfs-writeback" -> sidecar = stack.mountPartFs(mnt, writeBack());
                        case "rclone" -> tool = stack.startRclone(mnt);
                        case "s3fs" -> tool = stack.startS3fs(mnt);
                        default -> throw new IllegalArgumentException("unknown filesystem " + fs);
                    }
                    List<Map<String, String[]>> runs = new ArrayList<>();
                    results.put(fs, runs);
                    if (warmupSmallFiles > 0) {
                        Stack.progress("  warmup: %d small files, untimed", warmupSmallFiles);
                        // in runs short enough that their files are deleted before the 5 s write-back
                        // delay of PartFS and rclone ends: uploads of the warmup's files would compete
                        // with the passes that follow
                        for (int done = 0; done < warmupSmallFiles; done += WARMUP_RUN_FILES) {
                            Procs.ok(Procs.partfs("bench", dir.toString(), "--big-file-size", "0", "--small-file-count",
                                    String.valueOf(Math.min(WARMUP_RUN_FILES, warmupSmallFiles - done)), "-p",
                                    String.valueOf(threads)), stack.env);
                        }
                    }
                    for (int pass = 1; pass <= passes; pass++) {
                        Stack.progress("  pass %d of %d", pass, passes);
                        String table = Procs.ok(Procs.partfs("bench", dir.toString(), "--big-file-size", bigFileSize,
                                "--small-file-count", String.valueOf(smallFiles), "-p", String.valueOf(threads)), stack.env);
                        System.err.println(table);
                        runs.add(parse(table));
                    }
                    // Listings in passes of their own: creating and removing thousands of files in
                    // the passes above would stretch them past the 5 s write-back delay of PartFS and
                    // rclone, whose uploads of a pass's big file then compete with the next pass.
                    for (int pass = 1; listEntries > 0 && pass <= passes; pass++) {
                        Stack.progress("  listing, pass %d of %d", pass, passes);
                        String table = Procs.ok(Procs.partfs("bench", dir.toString(), "--big-file-size", "0", "--small-file-count", "0",
                                "--list-entries", String.valueOf(listEntries), "-p", String.valueOf(threads)), stack.env);
                        System.err.println(table);
                        runs.get(pass - 1).putAll(parse(table));
                    }
                } catch (Exception e) {
                    Stack.progress("  %s failed: %s", fs, e.getMessage());
                    results.putIfAbsent(fs, new ArrayList<>());
                } finally {
                    long pid = sidecar > 0 ? sidecar : tool != null ? tool.pid() : -1;
                    if (pid > 0) {
                        peakRss.put(fs, Procs.peakRss(pid));
                    }
                    if (fs.startsWith("partfs")) {
                        stack.umountPartFs(mnt);
                    } else if (tool != null) {
                        Stack.stopTool(tool, mnt);
                    }
                }
            }
            if (objbench) {
                Stack.progress("partfs objbench on s3proxy at %.0f ms", latency);
                objTable = Procs.ok(Procs.partfs("objbench", "--storage", "s3://partfs/objbench?endpoint=http://127.0.0.1:"
                        + stack.proxy.port() + "&path-style=true&region=us-east-1", "-p", String.valueOf(threads)), stack.env);
            }
        } finally {
            Procs.unmount(mnt);
            TempDirs.deleteRecursively(work);
        }
        Map<String, Map<String, String[]>> steady = steady(results);
        String md = String.format("partfs bench, %d thread(s), big file %s, %d small files of 128K per thread,%s S3 latency %.0f ms%s%n%n",
                threads, bigFileSize, smallFiles, listEntries > 0 ? " a directory of " + listEntries + " entries listed," : "", latency,
                warmupSmallFiles > 0 ? ", each filesystem warmed up by " + warmupSmallFiles + " small files (untimed)" : "")
                + (passes > 1 ? "Median of passes 2-" + passes + " on each mount:\n\n" : "")
                + markdown(steady) + "\n" + ratios(steady) + memory(peakRss)
                + (passes > 1 ? "\nFirst pass after mounting:\n\n" + markdown(pass(results, 0)) + "\n" + ratios(pass(results, 0))
                        + "\nEvery pass:\n\n" + everyPass(results) : "")
                + (objTable.isEmpty() ? "" : "\n```\n" + objTable.trim() + "\n```\n");
        Stack.report(out, md);
        return 0;
    }

    /** A line with each filesystem's process's peak RSS over its passes (the PartFS sidecar's, rclone's, ...). */
    static String memory(Map<String, Long> peakRss) {
        List<String> each = new ArrayList<>();
        peakRss.forEach((fs, rss) -> each.add(fs + " " + (rss > 0 ? (rss >> 20) + " MiB" : "unknown")));
        return each.isEmpty() ? "" : "\nPeak RSS of each filesystem's process (for PartFS: the sidecar) over its passes: "
                + String.join(", ", each) + ".\n";
    }

    private List<String> writeBack() {
        List<String> o = new ArrayList<>(partfsOptions);
        o.addAll(List.of("--writeback", "--upload-delay", "5"));
        return o;
    }

    /** ITEM -> {VALUE, COST} from partfs bench's table. */
    static Map<String, String[]> parse(String table) {
        Map<String, String[]> m = new LinkedHashMap<>();
        for (String line : table.split("\n")) {
            String[] f = line.split("\\|");
            if (f.length >= 4 && !f[1].trim().equals("ITEM") && !f[1].isBlank()) {
                m.put(f[1].trim(), new String[] {f[2].trim(), f[3].trim()});
            }
        }
        return m;
    }

    private static final List<String> TOOLS = List.of("bindfs", "rclone", "s3fs");

    /** Small files per warmup run: ~1 s of them on a write-back mount, well inside the 5 s upload delay. */
    private static final int WARMUP_RUN_FILES = 300;

    private static final List<String> ITEMS = List.of("Write big file", "Read big file", "Write small file", "Read small file", "Stat file",
            "List directory");

    /** The items some filesystem has a result for (--list-entries 0 measures no listing). */
    private static List<String> measured(Map<String, Map<String, String[]>> results) {
        return ITEMS.stream().filter(item -> results.values().stream().anyMatch(r -> r.containsKey(item))).toList();
    }

    /** Each filesystem's results of pass {@code index} (none when it failed before that pass). */
    private static Map<String, Map<String, String[]>> pass(Map<String, List<Map<String, String[]>>> results, int index) {
        Map<String, Map<String, String[]>> m = new LinkedHashMap<>();
        results.forEach((fs, runs) -> m.put(fs, index < runs.size() ? runs.get(index) : Map.of()));
        return m;
    }

    /**
     * Each filesystem's median of the passes after the first (the only one when there is one),
     * item by item: the median rate, and the median cost beside it. Of an even number of passes
     * the two middle ones are averaged. An item missing from a pass (the filesystem failed in it)
     * is missing from the median.
     */
    static Map<String, Map<String, String[]>> steady(Map<String, List<Map<String, String[]>>> results) {
        Map<String, Map<String, String[]>> m = new LinkedHashMap<>();
        results.forEach((fs, runs) -> {
            List<Map<String, String[]>> steady = runs.size() > 1 ? runs.subList(1, runs.size()) : runs;
            Map<String, String[]> medians = new LinkedHashMap<>();
            for (String item : ITEMS) {
                List<String[]> values = steady.stream().map(r -> r.get(item)).toList();
                if (!values.isEmpty() && values.stream().allMatch(v -> v != null && rate(v) > 0)) {
                    medians.put(item, new String[] {median(values, 0), median(values, 1)});
                }
            }
            m.put(fs, medians);
        });
        return m;
    }

    /** The median of the numbers in field {@code field} ("123.45 unit") of {@code values}, with the unit. */
    private static String median(List<String[]> values, int field) {
        double[] x = values.stream().mapToDouble(v -> Double.parseDouble(v[field].split(" ")[0])).sorted().toArray();
        double med = x.length % 2 == 1 ? x[x.length / 2] : (x[x.length / 2 - 1] + x[x.length / 2]) / 2;
        String unit = values.get(0)[field].substring(values.get(0)[field].indexOf(' ') + 1);
        return String.format("%.2f %s", med, unit);
    }

    /** A table per item: each filesystem's value in each pass, to show how much the passes differ. */
    static String everyPass(Map<String, List<Map<String, String[]>>> results) {
        int passes = results.values().stream().mapToInt(List::size).max().orElse(0);
        StringBuilder b = new StringBuilder();
        for (String item : measured(pass(results, 0))) {
            b.append("| ").append(item).append(" |");
            for (int p = 1; p <= passes; p++) {
                b.append(" pass ").append(p).append(" |");
            }
            b.append("\n|---|").append("---|".repeat(passes)).append('\n');
            results.forEach((fs, runs) -> {
                b.append("| ").append(fs).append(" |");
                for (int p = 0; p < passes; p++) {
                    String[] v = p < runs.size() ? runs.get(p).get(item) : null;
                    b.append(' ').append(v == null ? "-" : v[1]).append(" |");
                }
                b.append('\n');
            });
            b.append('\n');
        }
        return b.toString();
    }

    /**
     * PartFS's columns (and bindfs's, the FUSE floor) over rclone's and s3fs's, item by item (every
     * item is a rate: more is better).
     */
    static String ratios(Map<String, Map<String, String[]>> results) {
        List<String> ours = new ArrayList<>(results.keySet().stream().filter(fs -> fs.startsWith("partfs")).toList());
        if (results.containsKey("bindfs")) {
            ours.add("bindfs");
        }
        List<String> theirs = results.keySet().stream().filter(fs -> fs.equals("rclone") || fs.equals("s3fs")).toList();
        if (ours.isEmpty() || theirs.isEmpty()) {
            return "";
        }
        StringBuilder b = new StringBuilder("| ratio |");
        for (String o : ours) {
            theirs.forEach(t -> b.append(' ').append(o).append(" / ").append(t).append(" |"));
        }
        b.append("\n|---|").append("---|".repeat(ours.size() * theirs.size())).append('\n');
        for (String item : measured(results)) {
            b.append("| ").append(item).append(" |");
            for (String o : ours) {
                for (String t : theirs) {
                    double a = rate(results.get(o).get(item));
                    double c = rate(results.get(t).get(item));
                    b.append(' ').append(a > 0 && c > 0 ? String.format("%.2fx", a / c) : "-").append(" |");
                }
            }
            b.append('\n');
        }
        return b.toString();
    }

    /** The number of a "123.45 MiB/s" or "678.90 files/s" value, 0 when missing. */
    private static double rate(String[] v) {
        if (v == null) {
            return 0;
        }
        try {
            return Double.parseDouble(v[0].split(" ")[0]);
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    private String markdown(Map<String, Map<String, String[]>> results) {
        StringBuilder b = new StringBuilder("| item |");
        results.keySet().forEach(fs -> b.append(' ').append(fs).append(" |"));
        b.append("\n|---|");
        results.keySet().forEach(fs -> b.append("---|"));
        b.append('\n');
        for (String item : measured(results)) {
            b.append("| ").append(item).append(" |");
            for (Map<String, String[]> r : results.values()) {
                String[] v = r.get(item);
                b.append(' ').append(v == null ? "failed" : v[0] + " (" + v[1] + ")").append(" |");
            }
            b.append('\n');
        }
        return b.toString();
    }
}
