package io.partfs.bench;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * Writes scripts/partfs-classes.lst, the classes scripts/partfs archives for class data sharing:
 * those a sidecar loads while it mounts a Redis + S3 volume, serves a restart's reads of
 * MergeTree parts (part-metadata cache on), writes and renames a new part, deletes old ones,
 * answers a metrics scrape and unmounts. Run it again when dependencies change; classes missing
 * from the list are loaded from the jars as usual, just not sped up.
 * {@code scripts/cds-classlist [OUT]}.
 */
public final class CdsClassList {
    private CdsClassList() {
    }

    public static void main(String[] args) throws Exception {
        Path out = Path.of(args.length > 0 ? args[0] : Procs.ROOT.resolve("scripts/partfs-classes.lst").toString()).toAbsolutePath();
        Path work = Files.createTempDirectory("partfs-classlist");
        Path mnt = Files.createDirectories(work.resolve("mnt"));
        try (Stack stack = new Stack(work)) {
            stack.formatPartFs();
            List<String> options = List.of("--metadata-cache-tables", "all", "--attr-cache", "60", "--entry-cache", "60",
                    "--dir-entry-cache", "60");
            Stack.progress("writing parts through a first mount");
            stack.mountPartFs(mnt, options);
            try {
                for (int p = 1; p <= 20; p++) {
                    writePart(mnt.resolve("data/db/t"), "all_" + p + "_" + p + "_0", p);
                }
            } finally {
                stack.umountPartFs(mnt);
            }
            Stack.progress("recording the classes of a second mount: a restart's reads, a merge, deletions");
            Path list = work.resolve("classes.lst");
            List<String> cmd = new ArrayList<>(Procs.partfs("mount", mnt.toString(), "--meta", stack.metaUrl(),
                    "--http-address", "127.0.0.1:" + stack.httpPort));
            cmd.addAll(options);
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(work.resolve("mount.log").toFile());
            Map<String, String> env = new HashMap<>(stack.env);
            env.put("PARTFS_NO_CDS", "1"); // classes from an archive would not all be listed
            env.put("PARTFS_JAVA_EXTRA_OPTS", "-XX:DumpLoadedClassList=" + list);
            pb.environment().putAll(env);
            Process mount = pb.start();
            try {
                Procs.awaitMounted(mnt, true, mount);
                restartAndMerge(mnt.resolve("data/db/t"));
                SidecarMetrics.scrape(stack.httpPort);
                stack.umountPartFs(mnt);
                if (mount.waitFor() != 0) {
                    throw new IllegalStateException("the mount exited with " + mount.exitValue() + ": see " + work.resolve("mount.log"));
                }
            } finally {
                if (mount.isAlive()) {
                    mount.destroy();
                }
                Procs.unmount(mnt);
            }
            Path tmp = out.resolveSibling(out.getFileName() + ".tmp");
            Files.copy(list, tmp, StandardCopyOption.REPLACE_EXISTING);
            Files.move(tmp, out, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            try (Stream<String> lines = Files.lines(out)) {
                Stack.progress("wrote %s: %d classes", out, lines.filter(l -> !l.startsWith("#") && !l.startsWith("@")).count());
            }
        } finally {
            io.partfs.engine.testing.TempDirs.deleteRecursively(work);
        }
    }

    /** A part as ClickHouse writes it: into tmp_insert_*, each file fsynced, then renamed. */
    private static void writePart(Path table, String name, int seed) throws Exception {
        Path tmp = Files.createDirectories(table.resolve("tmp_insert_" + name));
        Map<String, byte[]> files = new HashMap<>();
        files.put("columns.txt", ("columns format version: 1\n2 columns:\n`day` Date\n`s` String\n").getBytes(StandardCharsets.UTF_8));
        files.put("count.txt", String.valueOf(seed * 10).getBytes(StandardCharsets.UTF_8));
        files.put("partition.dat", new byte[] {(byte) seed, 0, 0, 0});
        files.put("minmax_day.idx", new byte[] {(byte) seed, 0, (byte) seed, 0});
        files.put("primary.idx", new byte[2 * seed + 2]);
        files.put("s.bin", new byte[4096 + seed]);
        files.put("s.mrk2", new byte[24]);
        files.put("day.bin", new byte[512]);
        files.put("day.mrk2", new byte[24]);
        StringBuilder checksums = new StringBuilder("checksums format version: 4\n");
        for (Map.Entry<String, byte[]> f : files.entrySet()) {
            Files.write(tmp.resolve(f.getKey()), f.getValue(), StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE, StandardOpenOption.SYNC);
            checksums.append(f.getKey()).append(' ').append(f.getValue().length).append('\n');
        }
        Files.writeString(tmp.resolve("checksums.txt"), checksums);
        Files.move(tmp, table.resolve(name), StandardCopyOption.ATOMIC_MOVE);
    }

    /**
     * What a restarted ClickHouse and its first merge do: list the table, stat and read every
     * part's files, merge the parts into one (hard-linking a column, as mutations do), and delete
     * the merged parts.
     */
    private static void restartAndMerge(Path table) throws Exception {
        List<Path> parts;
        try (Stream<Path> s = Files.list(table)) {
            parts = s.sorted().toList();
        }
        for (Path part : parts) {
            try (Stream<Path> s = Files.list(part)) {
                for (Path f : s.toList()) {
                    Files.readAttributes(f, java.nio.file.attribute.BasicFileAttributes.class);
                    Files.readAllBytes(f);
                }
            }
        }
        writePart(table, "all_1_20_1", 99);
        Files.createLink(table.resolve("all_1_20_1").resolve("s.bin.link"), table.resolve("all_1_20_1").resolve("s.bin"));
        for (Path part : parts) {
            try (Stream<Path> s = Files.list(part)) {
                for (Path f : s.toList()) {
                    Files.delete(f);
                }
            }
            Files.delete(part);
        }
        Files.createSymbolicLink(table.resolve("latest"), table.resolve("all_1_20_1"));
    }
}
