package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.cache.PartMetadataStore;
import io.partfs.engine.fuse.Mounts;
import io.partfs.engine.testing.TempDirs;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** partfs cache stats/verify/warmup/drop and both corruption modes, through scripts/partfs. */
class MetadataCacheCommandIT {
    private Path dir;
    private Path mnt;
    private Partfs partfs;
    private Path cacheDir;

    @BeforeEach
    void setUp() throws Exception {
        dir = Files.createTempDirectory("partfs-cachecmd-");
        mnt = dir.resolve("mnt");
        partfs = new Partfs(dir.resolve("home"));
        cacheDir = dir.resolve("home/default/metadata-cache");
    }

    @AfterEach
    void tearDown() throws Exception {
        if (Mounts.isMounted(mnt)) {
            partfs.run("umount", mnt.toString());
        }
        Partfs.ensureUnmounted(mnt);
        TempDirs.deleteRecursively(dir);
    }

    private void mount(String... extra) throws Exception {
        String[] args = new String[3 + extra.length];
        args[0] = "mount";
        args[1] = mnt.toString();
        args[2] = "--background";
        System.arraycopy(extra, 0, args, 3, extra.length);
        Partfs.Result r = partfs.run(args);
        assertEquals(0, r.exit(), r.all());
    }

    /** A part written as ClickHouse writes it: in tmp_insert_*, then renamed. */
    private void writePart() throws Exception {
        Path tmp = Files.createDirectories(mnt.resolve("data/db/t/tmp_insert_all_1_1_0"));
        Files.writeString(tmp.resolve("checksums.txt"), "checksums format version: 4\n");
        Files.writeString(tmp.resolve("columns.txt"), "columns format version: 1\n1 columns:\n`k` UInt64\n");
        Files.writeString(tmp.resolve("count.txt"), "3");
        Files.write(tmp.resolve("primary.idx"), new byte[] {0, 1, 2, (byte) 0xff});
        Files.write(tmp.resolve("k.bin"), new byte[4096]);
        Files.move(tmp, mnt.resolve("data/db/t/all_1_1_0"), StandardCopyOption.ATOMIC_MOVE);
    }

    @Test
    void statsVerifyPlantedMismatchDropAndWarmup() throws Exception {
        mount("--metadata-cache-tables", "db.*");
        writePart();
        assertEquals("3", Files.readString(mnt.resolve("data/db/t/all_1_1_0/count.txt")));
        assertEquals(0, partfs.run("umount", mnt.toString()).exit());

        Partfs.Result stats = partfs.run("cache", "stats");
        assertEquals(0, stats.exit(), stats.all());
        assertTrue(stats.out().contains("entries: 4"), "checksums, columns, count, primary.idx: " + stats.out());

        Partfs.Result clean = partfs.run("cache", "verify");
        assertEquals(0, clean.exit(), clean.all());
        assertTrue(clean.out().contains("4 match"), clean.out());

        String key = "default:data/db/t/all_1_1_0/checksums.txt";
        try (PartMetadataStore store = PartMetadataStore.open(cacheDir, 8 << 20, false)) {
            PartMetadataStore.Entry e = store.peek(key).orElseThrow();
            byte[] wrong = "checksums format version: X\n".getBytes(StandardCharsets.UTF_8);
            store.put(key, new PartMetadataStore.Entry(e.ino(), e.size(), e.version(), wrong));
        }
        Partfs.Result bad = partfs.run("cache", "verify", "db.t");
        assertEquals(1, bad.exit(), bad.all());
        assertTrue(bad.out().contains("MISMATCH " + key), bad.out());

        Partfs.Result drop = partfs.run("cache", "drop", "db.t");
        assertEquals(0, drop.exit(), drop.all());
        assertTrue(drop.out().contains("dropped 4 entries"), drop.out());
        assertTrue(partfs.run("cache", "stats").out().contains("entries: 0"));

        int port = io.partfs.engine.testing.RedisServer.freePort();
        String sidecar = "127.0.0.1:" + port;
        mount("--metadata-cache-tables", "db.*", "--http-address", sidecar);
        Partfs.Result warm = partfs.run("cache", "warmup", mnt.toString());
        assertEquals(0, warm.exit(), warm.all());
        assertTrue(warm.out().contains("read 4 metadata files"), warm.out());
        Partfs.Result info = partfs.run("info", "--sidecar", sidecar, mnt.resolve("data/db/t/all_1_1_0/count.txt").toString(),
                mnt.resolve("data/db/t/all_1_1_0/k.bin").toString());
        assertEquals(0, info.exit(), info.all());
        assertTrue(info.out().contains("part-metadata cache: cached, current (key default:data/db/t/all_1_1_0/count.txt)"), info.out());
        assertTrue(info.out().contains("part-metadata cache: not a part-metadata file"), "k.bin: " + info.out());
        assertTrue(info.out().contains("size 4.0 KiB (4096 bytes)"), info.out());
        Partfs.Result noSidecar = partfs.run("cache", "drop", "--sidecar", "127.0.0.1:" + io.partfs.engine.testing.RedisServer.freePort());
        assertEquals(1, noSidecar.exit(), "the cache is in use and no sidecar answers: " + noSidecar.all());
        Partfs.Result mountedDrop = partfs.run("cache", "drop", "db.t", "--sidecar", "127.0.0.1:" + port);
        assertEquals(0, mountedDrop.exit(), mountedDrop.all());
        assertTrue(mountedDrop.out().contains("dropped 4 entries") && mountedDrop.out().contains("through the mount"), mountedDrop.out());
        Partfs.Result dropped = partfs.run("info", "--sidecar", sidecar, mnt.resolve("data/db/t/all_1_1_0/count.txt").toString());
        assertEquals(0, dropped.exit(), dropped.all());
        assertTrue(dropped.out().contains("part-metadata cache: not cached yet"), dropped.out());
        // The mount may have stored the files' content into the kernel's page cache (a listing of the
        // table, racing the warmup's reads), and then the reads below would not reach it: drop that.
        Files.writeString(Path.of("/proc/sys/vm/drop_caches"), "3");
        for (String f : new String[] {"checksums.txt", "columns.txt", "count.txt", "primary.idx"}) {
            Files.readAllBytes(mnt.resolve("data/db/t/all_1_1_0/" + f)); // a miss: read and stored again
        }
        assertEquals(0, partfs.run("umount", mnt.toString()).exit());
        Partfs.Result after = partfs.run("cache", "verify");
        assertTrue(after.out().contains("4 match"), after.out());
    }

    /** Garbage over MANIFEST and CURRENT: RocksDB cannot open the directory. */
    private void corruptCache() throws Exception {
        try (Stream<Path> files = Files.list(cacheDir)) {
            for (Path f : files.toList()) {
                String n = f.getFileName().toString();
                if (n.startsWith("MANIFEST") || n.equals("CURRENT")) {
                    Files.write(f, "not rocksdb\n".repeat(50).getBytes(StandardCharsets.UTF_8));
                }
            }
        }
    }

    @Test
    void corruptedCacheRefusesToMountUnlessContinueIfCorrupted() throws Exception {
        mount("--metadata-cache-tables", "all");
        writePart();
        byte[] columns = Files.readAllBytes(mnt.resolve("data/db/t/all_1_1_0/columns.txt"));
        assertEquals(0, partfs.run("umount", mnt.toString()).exit());
        corruptCache();

        Partfs.Result refused = partfs.run("mount", mnt.toString(), "--background", "--metadata-cache-tables", "all");
        assertEquals(1, refused.exit(), refused.all());
        assertTrue(refused.err().contains("no table data is lost"), refused.err());
        assertFalse(Mounts.isMounted(mnt));

        mount("--metadata-cache-tables", "all", "--continue-if-corrupted");
        assertArrayEquals(columns, Files.readAllBytes(mnt.resolve("data/db/t/all_1_1_0/columns.txt")), "data intact, cache refilled");
        try (Stream<Path> siblings = Files.list(cacheDir.getParent())) {
            assertTrue(siblings.anyMatch(p -> p.getFileName().toString().matches("metadata-cache\\.corrupted\\.\\d+")));
        }
        String log = Files.readString(new RunFiles(partfs.home()).logFile(mnt));
        assertEquals(1, log.lines().filter(l -> l.contains("WARN") && l.contains("moved it to")).count(), log);
    }
}
