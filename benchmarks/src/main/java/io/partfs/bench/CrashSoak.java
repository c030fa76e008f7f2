package io.partfs.bench;

import io.partfs.cli.ClickHouseServer;
import io.partfs.engine.testing.TempDirs;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * ClickHouse under a mixed load on PartFS, the sidecar killed in the middle of it, again and
 * again: each round runs, for {@code --seconds}, two INSERT loops into a table of seven daily
 * partitions, a loop of mutations (ALTER DELETE), DROP/DETACH/ATTACH PARTITION and OPTIMIZE
 * FINAL, a loop of FREEZE (hard links into shadow/) whose shadow directory is removed again,
 * and a loop that creates, fills, renames and drops tables; then the sidecar gets SIGKILL
 * (the out-of-memory killer), ClickHouse after it (its pod restarted), and both start again,
 * ClickHouse once the unfinished parts it left are removed ({@link #removeTemporaryParts}: a
 * ClickHouse 18.16 race, not the disk's). After each restart:
 * <ul>
 * <li>every INSERT ClickHouse acknowledged is in the table, and at most the ones in flight
 *     more (ClickHouse does not make an INSERT across partitions atomic, on any disk);</li>
 * <li>no part is detached as broken, and every column of every table reads;</li>
 * <li>ClickHouse logged no checksum or read error;</li>
 * </ul>
 * and at the end, after a clean stop, {@code partfs fsck} finds every block in S3. Any failure
 * before the kill fails the round too. Redis metadata (or RocksDB, {@code --meta-engine}),
 * s3proxy behind the latency proxy.
 */
@Command(name = "crash-soak", mixinStandardHelpOptions = true,
        description = {"ClickHouse inserting, merging, mutating, freezing and renaming on PartFS while the sidecar is",
                "killed (SIGKILL) and restarted, round after round; checks that nothing acknowledged is lost,",
                "nothing reads broken, no cached block fails its checksum, and fsck is clean. Needs root,",
                "clickhouse-server and redis-server."})
public final class CrashSoak implements Callable<Integer> {
    @Option(names = "--rounds", defaultValue = "3", description = "Kill-and-restart rounds (default: ${DEFAULT-VALUE}).")
    int rounds;

    @Option(names = "--seconds", defaultValue = "120", description = "Load before each kill, in seconds (default: ${DEFAULT-VALUE}).")
    int seconds;

    @Option(names = "--rows", defaultValue = "5000", description = "Rows per INSERT (default: ${DEFAULT-VALUE}).")
    int rows;

    @Option(names = "--latency", defaultValue = "0", description = "S3 request latency in ms (default: ${DEFAULT-VALUE}).")
    double latency;

    @Option(names = "--meta-engine", defaultValue = "redis",
            description = "redis, or rocksdb (embedded, as the Kubernetes sidecar keeps it) (default: ${DEFAULT-VALUE}).")
    String metaEngine;

    @Option(names = "--partfs-option", description = "Extra option for partfs mount, one per use (e.g. --writeback).")
    List<String> partfsOptions = new ArrayList<>();

    @Option(names = "--keep-work", description = "Keep the work directory (logs, data) when a round fails, to look into it.")
    boolean keepWork;

    @Option(names = "--keep-tmp-parts", description = {"Start ClickHouse again on the tmp_ directories the killed one left, as they are,",
            "to reproduce ClickHouse 18.16's race between removing them and the mutations it resumes."})
    boolean keepTmpParts;

    @Option(names = "--out", defaultValue = "benchmarks/results/crash-soak.md",
            description = "The markdown report: a file, or a directory to write crash-soak.md in (default: ${DEFAULT-VALUE}).")
    Path out;

    /** INSERT loops: at most this many INSERTs are in flight when the sidecar is killed. */
    private static final int INSERTERS = 2;

    public static void main(String[] args) {
        Procs.main(new CrashSoak(), args);
    }

    /** What one round did and found; {@code failures} is empty when every check held. */
    record Round(int n, long inserts, long mutations, long freezes, long renames, long rowsBefore, long rowsAfter,
                 double restartSeconds, String partsLoaded, long sidecarPeakRss, List<String> failures, long nextPid) {
    }

    @Override
    public Integer call() throws Exception {
        if (rounds < 1 || seconds < 1 || rows < 7) {
            throw new IllegalArgumentException("--rounds and --seconds must be at least 1, --rows at least 7 (one per partition)");
        }
        out = Stack.reportFile(out, "crash-soak.md");
        if (!metaEngine.equals("redis") && !metaEngine.equals("rocksdb")) {
            throw new IllegalArgumentException("--meta-engine is redis or rocksdb, not " + metaEngine);
        }
        if (!Procs.installed("clickhouse-server") || !Procs.installed("redis-server")) {
            throw new IllegalStateException("clickhouse-server and redis-server are needed: apt-get install clickhouse-server redis-server");
        }
        Path work = Files.createTempDirectory("partfs-crash-soak-");
        Path mnt = Files.createDirectories(work.resolve("mnt"));
        List<Round> done = new ArrayList<>();
        String fsck = "";
        var started = new java.util.concurrent.atomic.AtomicReference<Stack>();
        BenchCleanup.onExit("crash-soak", started::get, mnt, work, !keepWork);
        try (Stack stack = new Stack(work)) {
            started.set(stack);
            stack.proxy.setDelayMillis(latency);
            if (metaEngine.equals("rocksdb")) {
                stack.useRocksDb();
            }
            stack.formatPartFs();
            Stack.progress("%d rounds of %d s of load, then SIGKILL to the sidecar and ClickHouse; %d rows per INSERT, S3 at %.0f ms,"
                    + " metadata in %s%s", rounds, seconds, rows, latency, metaEngine,
                    partfsOptions.isEmpty() ? "" : ", mount " + String.join(" ", partfsOptions));
            long pid = stack.mountPartFs(mnt, partfsOptions);
            long rowsSoFar = 0;
            for (int n = 1; n <= rounds; n++) {
                Round r = round(stack, work, mnt, pid, n, rowsSoFar);
                done.add(r);
                rowsSoFar = r.rowsAfter;
                pid = r.nextPid; // the restarted sidecar, still mounted
                if (!r.failures.isEmpty()) {
                    break;
                }
            }
            stack.umountPartFs(mnt);
            fsck = Procs.run(Procs.partfs("fsck", "--meta", stack.metaUrl()), stack.env).out().lines()
                    .filter(l -> l.startsWith("fsck: ")).reduce((a, b) -> b).orElse("fsck said nothing");
            Stack.progress("%s", fsck);
        } finally {
            Procs.unmount(mnt);
            if (keepWork && !done.stream().allMatch(r -> r.failures.isEmpty())) {
                Stack.progress("work directory kept: %s", work);
            } else {
                TempDirs.deleteRecursively(work);
            }
        }
        Stack.report(out, markdown(done, fsck));
        boolean ok = done.size() == rounds && done.stream().allMatch(r -> r.failures.isEmpty()) && fsck.startsWith("fsck: OK");
        return ok ? 0 : 1;
    }

    private Round round(Stack stack, Path work, Path mnt, long pid, int n, long rowsBefore) throws Exception {
        Stack.progress("round %d/%d", n, rounds);
        List<String> failures = new ArrayList<>();
        Load load = new Load(n);
        ClickHouseServer ch = new ClickHouseServer(work.resolve("conf"), mnt.resolve("data"), "trace"); // names every part it makes
        long rss;
        try {
            ch.start();
            if (n == 1) {
                ch.query("CREATE DATABASE soak");
                for (String t : new String[] {"ins", "mut", "frz"}) {
                    ch.query(createTable("soak." + t));
                }
            }
            load.start(ch, mnt.resolve("data/shadow"));
            long deadline = System.nanoTime() + seconds * 1_000_000_000L;
            while (System.nanoTime() < deadline && load.firstError() == null) {
                java.util.concurrent.locks.LockSupport.parkNanos(100_000_000L); // the load runs meanwhile
            }
            if (load.firstError() != null) {
                failures.add("before the kill: " + load.firstError());
            }
            rss = Procs.peakRss(pid);
            load.killed = true;
            Procs.ok(List.of("kill", "-KILL", Long.toString(pid)), java.util.Map.of());
            java.util.concurrent.locks.LockSupport.parkNanos(500_000_000L); // ClickHouse meets the dead mount, as in a pod
            ch.kill();
        } finally {
            load.stop();
            ch.close();
        }
        Stack.progress("  killed after %d INSERTs, %d mutation steps, %d freezes, %d renames acknowledged; sidecar peak RSS %d MiB",
                load.inserts.get(), load.mutations.get(), load.freezes.get(), load.renames.get(), rss >> 20);
        long t0 = System.nanoTime();
        long newPid = stack.mountPartFs(mnt, partfsOptions); // takes the dead mount down first
        if (!keepTmpParts) {
            int leftovers = removeTemporaryParts(mnt.resolve("data/data"));
            Stack.progress("  removed %d tmp_ directories the killed ClickHouse left (ClickHouse 18.16 races its own removal of them"
                    + " against the mutations it resumes)", leftovers);
        }
        int copies = removeDetachedCopiesOfLoadedParts(mnt.resolve("data/data"));
        if (copies > 0) {
            Stack.progress("  removed %d copies in detached/ of parts still in their table (a DETACH PARTITION the kill cut short)", copies);
        }
        long rowsAfter = -1;
        double restart = Double.NaN;
        String partsLoaded = "-";
        try (ClickHouseServer again = new ClickHouseServer(work.resolve("conf"), mnt.resolve("data"), "trace")) {
            int errorsBefore = again.errors().size();
            try {
                again.start();
            } catch (IOException e) {
                List<String> errors = again.errors();
                failures.add("ClickHouse did not start again: " + (errors.size() > errorsBefore
                        ? errors.get(errors.size() - 1).replaceAll("^.*?<Error> ", "") : firstLine(e.getMessage())));
                Stack.progress("  FAILED: %s", failures.get(0));
                return new Round(n, load.inserts.get(), load.mutations.get(), load.freezes.get(), load.renames.get(), rowsBefore, -1,
                        restart, "-", rss, failures, newPid);
            }
            restart = (System.nanoTime() - t0) / 1e9;
            // what the start loaded: active parts, and all of them, the ones merges replaced included,
            // which ClickHouse keeps for old_parts_lifetime (480 s), longer than a round
            String[] parts = again.query("SELECT countIf(active), count() FROM system.parts WHERE database = 'soak'").trim().split("\t");
            partsLoaded = parts.length == 2 ? parts[1] + " (" + parts[0] + " active)" : "-";
            rowsAfter = Long.parseLong(again.query("SELECT count() FROM soak.ins").trim());
            long low = rowsBefore + load.inserts.get() * rows;
            long high = rowsBefore + (load.inserts.get() + INSERTERS) * rows;
            if (rowsAfter < low || rowsAfter > high) {
                failures.add(String.format(Locale.ROOT, "soak.ins has %d rows, expected %d to %d", rowsAfter, low, high));
            }
            for (String t : again.query("SELECT name FROM system.tables WHERE database = 'soak'").trim().split("\n")) {
                try {
                    again.query("SELECT sum(cityHash64(*)) FROM soak." + t); // every column of every part
                } catch (IOException e) {
                    failures.add("soak." + t + " does not read: " + firstLine(e.getMessage()));
                }
            }
            // a killed sidecar leaves no cached block damaged (the kernel keeps what was written): a block
            // the checks dropped means sums that do not describe what the cache holds
            double dropped = SidecarMetrics.scrape(stack.httpPort).getOrDefault("partfs_block_cache_corrupt_blocks_total", 0.0);
            if (dropped > 0) {
                failures.add(String.format(Locale.ROOT, "%.0f cached blocks did not match their checksums", dropped));
            }
            List<String> broken = brokenParts(mnt.resolve("data/data/soak"));
            if (!broken.isEmpty()) {
                failures.add("parts detached as broken: " + broken);
            }
            List<String> errors = again.errors();
            errors.subList(Math.min(errorsBefore, errors.size()), errors.size()).stream()
                    .filter(l -> l.contains("CHECKSUM_DOESNT_MATCH") || l.contains("Checksum doesn't match") || l.contains("Cannot read all data")
                            || l.contains("broken"))
                    .findFirst().ifPresent(l -> failures.add("ClickHouse logged: " + l.substring(Math.max(0, l.indexOf("<Error>")))));
            if (!failures.isEmpty()) {
                explain(again, failures);
            }
            again.stop();
        }
        Stack.progress("  restarted in %.1f s, %s parts loaded: soak.ins has %d rows (%d before the round)%s", restart, partsLoaded,
                rowsAfter, rowsBefore,
                failures.isEmpty() ? "; every check held" : "; FAILED: " + String.join("; ", failures));
        return new Round(n, load.inserts.get(), load.mutations.get(), load.freezes.get(), load.renames.get(), rowsBefore, rowsAfter,
                restart, partsLoaded, rss, failures, newPid);
    }

    /**
     * Removes the {@code tmp*} directories (unfinished INSERTs, merges and mutations) in every
     * table directory under {@code data}, before ClickHouse starts on it again. ClickHouse 18.16
     * starts a table's merges and mutations first and removes these directories after
     * (StorageMergeTree::startup), while a mutation it resumes writes into the very
     * {@code tmp_mut_} directory the killed one left: the removal can then unlink files the
     * mutation has open, and the part it renames into place lacks them (checksums.txt still lists
     * them, so reads fail with "File not found"). This happens on any disk; a FUSE filesystem's
     * slower removal only widens the window. ClickHouse 21.10 and later never remove a directory
     * a merge or mutation uses (upstream pull request 28760); an operator on an older ClickHouse
     * removes them before starting it, as this does. Returns how many it removed.
     */
    static int removeTemporaryParts(Path data) throws IOException {
        int n = 0;
        for (Path table : tables(data)) {
            try (Stream<Path> entries = Files.list(table)) {
                for (Path tmp : entries.filter(e -> e.getFileName().toString().startsWith("tmp")
                        && Files.isDirectory(e, java.nio.file.LinkOption.NOFOLLOW_LINKS)).toList()) {
                    TempDirs.deleteRecursively(tmp);
                    n++;
                }
            }
        }
        return n;
    }

    /**
     * Removes the copies in a table's {@code detached/} of parts whose own directory is still in
     * the table, before ClickHouse starts on it again. ClickHouse 18.16 detaches a partition by
     * hard-linking each part's files into {@code detached/<part>} one by one, and only then lets
     * go of the parts, whose directories stay until its background cleanup: a kill in between
     * leaves a copy, whole or cut short (no {@code count.txt} yet), of a part that the restarted
     * server loads again from its own directory. The soak's next {@code ATTACH PARTITION} would
     * take that copy too: an error for a cut one, the rows twice for a whole one. Any disk does
     * this; an operator removes such copies after a crash, as this does. Returns how many.
     */
    static int removeDetachedCopiesOfLoadedParts(Path data) throws IOException {
        int n = 0;
        for (Path table : tables(data)) {
            Path detached = table.resolve("detached");
            if (!Files.isDirectory(detached, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
                continue;
            }
            try (Stream<Path> copies = Files.list(detached)) {
                for (Path copy : copies.filter(c -> Files.isDirectory(c, java.nio.file.LinkOption.NOFOLLOW_LINKS)
                        && Files.isDirectory(table.resolve(c.getFileName().toString()), java.nio.file.LinkOption.NOFOLLOW_LINKS)).toList()) {
                    TempDirs.deleteRecursively(copy);
                    n++;
                }
            }
        }
        return n;
    }

    /** The table directories under ClickHouse's {@code data} (database/table), none when it does not exist yet. */
    private static List<Path> tables(Path data) throws IOException {
        List<Path> out = new ArrayList<>();
        if (!Files.isDirectory(data)) {
            return out;
        }
        try (Stream<Path> dbs = Files.list(data)) {
            for (Path db : dbs.filter(Files::isDirectory).toList()) {
                try (Stream<Path> tables = Files.list(db)) {
                    out.addAll(tables.filter(Files::isDirectory).toList());
                }
            }
        }
        return out;
    }

    /** Prints what ClickHouse logged about each part a failure names, to tell its own doing from the disk's. */
    private static void explain(ClickHouseServer ch, List<String> failures) throws IOException {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("/(\\d{6,8}_\\d+_\\d+_\\d+(?:_\\d+)?)/")
                .matcher(String.join("\n", failures));
        java.util.Set<String> parts = new java.util.LinkedHashSet<>();
        while (m.find()) {
            parts.add(m.group(1));
        }
        for (String part : parts) {
            Stack.progress("  what ClickHouse logged about %s:", part);
            for (String line : ch.logLines(part, 60)) {
                Stack.progress("    %s", line.length() > 400 ? line.substring(0, 400) : line);
            }
        }
    }

    private static String firstLine(String s) {
        return String.valueOf(s).lines().findFirst().orElse("");
    }

    /** A MergeTree table of daily partitions, with a column of each kind ClickHouse writes differently. */
    private static String createTable(String name) {
        return "CREATE TABLE " + name + " (day Date, id UInt64, s String, a Array(UInt32), n Nullable(Float64), lc String)"
                + " ENGINE = MergeTree PARTITION BY day ORDER BY id SETTINGS index_granularity = 1024";
    }

    /** Parts ClickHouse moved to a table's detached/ as broken (or unexpected) when it loaded the table. */
    private static List<String> brokenParts(Path db) throws IOException {
        List<String> out = new ArrayList<>();
        if (!Files.isDirectory(db)) {
            return out;
        }
        try (Stream<Path> tables = Files.list(db)) {
            for (Path t : tables.toList()) {
                Path detached = t.resolve("detached");
                if (Files.isDirectory(detached)) {
                    try (Stream<Path> parts = Files.list(detached)) {
                        parts.map(p -> p.getFileName().toString()).filter(p -> p.startsWith("broken") || p.startsWith("unexpected"))
                                .forEach(p -> out.add(t.getFileName() + "/" + p));
                    }
                }
            }
        }
        return out;
    }

    /** The round's load: one thread per loop, each counting what ClickHouse acknowledged. */
    private final class Load {
        final AtomicLong inserts = new AtomicLong();
        final AtomicLong mutations = new AtomicLong();
        final AtomicLong freezes = new AtomicLong();
        final AtomicLong renames = new AtomicLong();
        /** Set before the kill: errors from then on are expected, not failures. */
        volatile boolean killed;
        private volatile boolean stopping;
        private volatile String firstError;
        private final List<Thread> threads = new ArrayList<>();
        private final int round;

        Load(int round) {
            this.round = round;
        }

        String firstError() {
            return firstError;
        }

        void start(ClickHouseServer ch, Path shadow) {
            for (int i = 0; i < INSERTERS; i++) {
                int w = i;
                spawn("insert-" + i, k -> {
                    ch.query("INSERT INTO soak.ins SELECT toDate('2020-01-01') + number % 7, number + " + (round * 100L + w) * 1_000_000_000L
                            + " + " + k * 100_000L + ", toString(rand()), [number, 1], if(number % 3 = 0, NULL, number / 3),"
                            + " substring('" + "x".repeat(50) + "', 1, number % 50) FROM numbers(" + rows + ")");
                    inserts.incrementAndGet();
                });
            }
            spawn("mutate", k -> {
                ch.query("INSERT INTO soak.mut SELECT toDate('2020-02-01') + number % 5, number, toString(number), [number], number, 'y'"
                        + " FROM numbers(" + rows + ")");
                switch ((int) (k % 6)) {
                    case 1 -> ch.query("ALTER TABLE soak.mut DELETE WHERE id % 7 = " + k % 7);
                    case 2 -> ch.query("ALTER TABLE soak.mut DROP PARTITION '2020-02-0" + (1 + k % 5) + "'");
                    case 3 -> ch.query("OPTIMIZE TABLE soak.mut FINAL");
                    case 4 -> {
                        ch.query("ALTER TABLE soak.mut DETACH PARTITION '2020-02-03'");
                        ch.query("ALTER TABLE soak.mut ATTACH PARTITION '2020-02-03'");
                    }
                    default -> ch.query("SELECT sum(cityHash64(s)), count() FROM soak.mut");
                }
                mutations.incrementAndGet();
            });
            spawn("freeze", k -> {
                ch.query("INSERT INTO soak.frz SELECT toDate('2020-03-01') + number % 3, number, toString(number), [], NULL, ''"
                        + " FROM numbers(" + rows + ")");
                if (k % 3 == 1) {
                    ch.query("ALTER TABLE soak.frz FREEZE");
                    freezes.incrementAndGet();
                } else if (k % 3 == 2) {
                    ch.query("OPTIMIZE TABLE soak.frz FINAL");
                }
                if (k % 6 == 5) {
                    TempDirs.deleteRecursively(shadow); // the frozen copies go; the parts' files keep their other link
                }
            });
            spawn("rename", k -> {
                String tmp = "soak.tmp_" + round + "_" + k;
                String kept = "soak.done_" + round + "_" + k;
                ch.query(createTable(tmp));
                ch.query("INSERT INTO " + tmp + " SELECT toDate('2020-04-01') + number % 4, number, 'z', [1, 2], 1.5, 'q' FROM numbers(1000)");
                ch.query("RENAME TABLE " + tmp + " TO " + kept);
                if (k >= 3) {
                    ch.query("DROP TABLE soak.done_" + round + "_" + (k - 3));
                }
                renames.incrementAndGet();
            });
        }

        /** A step of a loop, run with the loop's step number until the load stops. */
        interface Step {
            void run(long k) throws Exception;
        }

        private void spawn(String name, Step step) {
            Thread t = new Thread(() -> {
                for (long k = 0; !stopping; k++) {
                    try {
                        step.run(k);
                    } catch (Exception e) {
                        if (killed || stopping) {
                            return; // the kill cut it short
                        }
                        if (firstError == null) {
                            firstError = name + ": " + firstLine(e.getMessage());
                        }
                        return;
                    }
                }
            }, "soak-" + name);
            t.setDaemon(true);
            threads.add(t);
            t.start();
        }

        void stop() throws InterruptedException {
            stopping = true;
            for (Thread t : threads) {
                t.join(180_000); // an HTTP query waits at most 120 s
            }
        }
    }

    private String markdown(List<Round> rs, String fsck) {
        StringBuilder b = new StringBuilder(String.format(Locale.ROOT,
                "ClickHouse on PartFS, the sidecar killed (SIGKILL) after %d s of load, then ClickHouse, both restarted; %d rows per INSERT,"
                        + " S3 latency %.0f ms, metadata in %s%s%n%n"
                        + "| round | INSERTs acked | mutation steps | FREEZEs | table renames | soak.ins rows after restart (before) | restart to SELECT 1 | parts loaded | sidecar peak RSS | checks |%n"
                        + "|---|---|---|---|---|---|---|---|---|---|%n",
                seconds, rows, latency, metaEngine, partfsOptions.isEmpty() ? "" : "; mount " + String.join(" ", partfsOptions)));
        for (Round r : rs) {
            b.append(String.format(Locale.ROOT, "| %d | %d | %d | %d | %d | %d (%d) | %.1f s | %s | %d MiB | %s |%n", r.n, r.inserts, r.mutations,
                    r.freezes, r.renames, r.rowsAfter, r.rowsBefore, r.restartSeconds, r.partsLoaded, r.sidecarPeakRss >> 20,
                    r.failures.isEmpty() ? "all held" : String.join("; ", r.failures)));
        }
        b.append(String.format(Locale.ROOT, "%nAfter the last round, unmounted cleanly: `%s`%n", fsck));
        return b.toString();
    }
}
