package io.partfs.cli;

import io.partfs.engine.Attr;
import io.partfs.engine.DirEntry;
import io.partfs.engine.FsException;
import io.partfs.engine.PartFs;
import io.partfs.engine.meta.MetaEngine;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * Runs what ClickHouse does to a disk when it inserts, freezes and drops a part, on an embedded
 * volume, then reopens the volume and checks every byte. Needs no FUSE, Redis or S3.
 */
@Command(name = "demo", mixinStandardHelpOptions = true,
        description = {"Insert, freeze and drop a MergeTree part the way ClickHouse does, then reopen",
                "the volume and verify every byte. Embedded defaults: RocksDB metadata and local",
                "objects under --home; no Redis, S3 or FUSE needed."})
final class DemoCommand implements Callable<Integer> {
    private static final long ROOT = MetaEngine.ROOT;

    @Spec
    CommandSpec spec;

    @Option(names = "--home", description = "Data home of embedded volumes (default: $PARTFS_HOME or ~/.partfs).")
    Path home;

    @Option(names = "--name", defaultValue = "demo", description = "Volume name (default: ${DEFAULT-VALUE}).")
    String name;

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        Path h = home != null ? home : EmbeddedVolume.defaultHome();
        long start = System.nanoTime();
        Map<String, byte[]> files = partFiles();
        try (PartFs fs = EmbeddedVolume.open(h, name)) {
            out.printf("volume '%s' at %s (RocksDB metadata, local objects)%n", name, h.resolve(name));
            long table = mkdirs(fs, "data", "demo_db", "events");
            cleanup(fs, table);
            Attr tmp = fs.mkdir(table, "tmp_insert_20200101_1_1_0", 0755, 0, 0);
            for (Map.Entry<String, byte[]> f : files.entrySet()) {
                PartFs.Created c = fs.create(tmp.ino(), f.getKey(), 0644, PartFs.O_WRONLY, 0, 0);
                fs.write(c.fh(), 0, f.getValue(), 0, f.getValue().length);
                fs.fsync(c.fh());
                fs.release(c.fh());
            }
            fs.rename(table, "tmp_insert_20200101_1_1_0", table, "20200101_1_1_0", 0);
            out.printf("inserted part data/demo_db/events/20200101_1_1_0: %d files, %d bytes%n",
                    files.size(), files.values().stream().mapToLong(b -> b.length).sum());
            long shadow = mkdirs(fs, "shadow", "1", "data", "demo_db", "events", "20200101_1_1_0");
            long part = fs.lookup(table, "20200101_1_1_0").ino();
            for (DirEntry e : fs.readdir(part)) {
                fs.link(e.ino(), shadow, e.name());
            }
            out.printf("froze it: %d hard links in shadow/1/ (nlink of data.bin is %d)%n",
                    files.size(), fs.lookup(part, "data.bin").nlink());
            fs.rename(table, "20200101_1_1_0", table, "delete_tmp_20200101_1_1_0", 0);
            removeTree(fs, table, "delete_tmp_20200101_1_1_0");
            out.println("dropped the part (rename to delete_tmp_*, then remove); the frozen copy remains");
        }
        try (PartFs fs = EmbeddedVolume.open(h, name)) {
            Attr part = fs.resolve("/shadow/1/data/demo_db/events/20200101_1_1_0");
            for (Map.Entry<String, byte[]> f : files.entrySet()) {
                Attr a = fs.lookup(part.ino(), f.getKey());
                byte[] got = new byte[(int) a.size()];
                long fh = fs.open(a.ino(), PartFs.O_RDONLY);
                int n = fs.read(fh, 0, got, 0, got.length);
                fs.release(fh);
                if (n != got.length || !java.util.Arrays.equals(got, f.getValue())) {
                    throw new IllegalStateException("verification failed for " + f.getKey() + " after reopening the volume");
                }
            }
            MetaEngine.Usage u = fs.meta().usage();
            out.printf("reopened the volume and verified every byte of the frozen part; %d inodes, %d bytes in use%n",
                    u.inodes(), u.usedBytes());
        }
        out.printf("demo OK in %d ms%n", (System.nanoTime() - start) / 1_000_000);
        return 0;
    }

    /** The files of a small part, with a 4 MiB column so data spans more than one block. */
    private static Map<String, byte[]> partFiles() {
        Map<String, byte[]> files = new LinkedHashMap<>();
        files.put("columns.txt", "columns format version: 1\n2 columns:\n`day` Date\n`value` String\n".getBytes(StandardCharsets.UTF_8));
        files.put("count.txt", "8192".getBytes(StandardCharsets.UTF_8));
        byte[] data = new byte[(4 << 20) + 4096];
        new Random(1).nextBytes(data);
        files.put("data.bin", data);
        files.put("data.mrk2", new byte[24 * 2]);
        files.put("primary.idx", new byte[] {0x4d, 0x47, 0, 0});
        files.put("checksums.txt", "checksums format version: 4\n".getBytes(StandardCharsets.UTF_8));
        return files;
    }

    private static long mkdirs(PartFs fs, String... names) throws Exception {
        long cur = ROOT;
        for (String n : names) {
            try {
                cur = fs.mkdir(cur, n, 0755, 0, 0).ino();
            } catch (FsException.Exists e) {
                cur = fs.lookup(cur, n).ino();
            }
        }
        return cur;
    }

    /** Removes what an earlier run left, so the demo can run again. */
    private static void cleanup(PartFs fs, long table) throws Exception {
        for (DirEntry e : fs.readdir(table)) {
            removeTree(fs, table, e.name());
        }
        try {
            removeTree(fs, ROOT, "shadow");
        } catch (FsException.NoSuchEntry e) {
            // first run
        }
    }

    private static void removeTree(PartFs fs, long parent, String name) throws Exception {
        Attr a = fs.lookup(parent, name);
        if (a.isDirectory()) {
            for (DirEntry e : fs.readdir(a.ino())) {
                removeTree(fs, a.ino(), e.name());
            }
            fs.rmdir(parent, name);
        } else {
            fs.unlink(parent, name);
        }
    }
}
