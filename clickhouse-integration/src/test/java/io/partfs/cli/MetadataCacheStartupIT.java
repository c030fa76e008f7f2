package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.cache.MergeTreePaths;
import io.partfs.cache.PartMetadataCache;
import io.partfs.cache.PartMetadataStore;
import io.partfs.cache.TableSelector;
import io.partfs.engine.Attr;
import io.partfs.engine.DirEntry;
import io.partfs.engine.PartFs;
import io.partfs.engine.PartFsConfig;
import io.partfs.engine.fuse.FuseOptions;
import io.partfs.engine.fuse.FuseMount;
import io.partfs.engine.meta.Slice;
import io.partfs.engine.testing.Backends;
import io.partfs.engine.testing.CountingKvStore;
import io.partfs.engine.testing.CountingObjectStore;
import io.partfs.engine.testing.TempDirs;
import io.partfs.engine.testing.TestVolume;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The point of the part-metadata cache: ClickHouse 18.16 on Redis + S3 creates tables and
 * parts; then the sidecar (PartFS and its cache) and ClickHouse restart, and loading the tables
 * makes no object-store GET for any part-metadata file, nor for the tables' own DDL and
 * {@code format_version.txt}. The block cache is off, so every byte
 * not in the part-metadata cache would have to come from S3.
 */
class MetadataCacheStartupIT {
    private Path dir;

    @BeforeEach
    void setUp() throws Exception {
        dir = Files.createTempDirectory("partfs-mdcache-");
    }

    @AfterEach
    void tearDown() throws Exception {
        TempDirs.deleteRecursively(dir);
    }

    /** The tables, selected by name; ClickHouse keeps the third in data/w/t%2D2 (its file-name escaping). */
    private static final String[] TABLES = {"t0", "t1", "t-2"};

    /** PartFS mounted in this JVM with a part-metadata cache, as the sidecar runs it. */
    private static final class Sidecar implements AutoCloseable {
        final PartFs fs;
        final PartMetadataCache cache;
        final FuseMount fuse;

        final CountingKvStore metaRequests;

        Sidecar(TestVolume volume, Path mnt, Path cacheDir, CountingObjectStore[] counter) throws Exception {
            CountingKvStore[] kv = new CountingKvStore[1];
            fs = volume.open(o -> counter[0] = new CountingObjectStore(o), k -> kv[0] = new CountingKvStore(k));
            metaRequests = kv[0];
            cache = new PartMetadataCache(PartMetadataStore.open(cacheDir, 64 << 20, false), "default",
                    TableSelector.parse("w.t0,w.t1,w.t-2"), PartMetadataCache.reader(fs));
            fuse = FuseMount.create(fs, cache, FuseOptions.builder().build());
            fuse.mountAndWait(mnt, FuseOptions.builder().build());
        }

        @Override
        public void close() throws Exception {
            fs.syncAll();
            fuse.unmount();
            fs.close();
            cache.store().close();
        }
    }

    @Test
    void warmRestartReadsNoPartMetadataFromS3() throws Exception {
        Path mnt = Files.createDirectories(dir.resolve("mnt"));
        Path cacheDir = dir.resolve("metadata-cache");
        try (Backends servers = Backends.start(TestVolume.Meta.REDIS, TestVolume.Store.S3)) {
            PartFsConfig noBlockCache = PartFsConfig.builder().ioThreads(8).build();
            TestVolume volume = new TestVolume(TestVolume.Meta.REDIS, TestVolume.Store.S3, dir, servers.redis, servers.s3, noBlockCache);
            CountingObjectStore[] counter = new CountingObjectStore[1];
            String before;
            try (ClickHouseServer ch = new ClickHouseServer(dir.resolve("conf"), mnt)) {
                try (Sidecar sidecar = new Sidecar(volume, mnt, cacheDir, counter)) {
                    ch.start();
                    ch.query("CREATE DATABASE w");
                    for (int t = 0; t < 3; t++) {
                        ch.query("CREATE TABLE w.`" + TABLES[t] + "` (day Date, k UInt64, a String, b String) ENGINE = MergeTree "
                                + "PARTITION BY toYYYYMMDD(day) ORDER BY k");
                        ch.query("INSERT INTO w.`" + TABLES[t] + "` SELECT toDate('2020-01-01') + (number % 8), number, "
                                + "toString(number), toString(number * 3) FROM system.numbers LIMIT 20000");
                    }
                    before = ch.query("SELECT _table, count(), sum(k) FROM merge('w', '^t') GROUP BY _table ORDER BY _table");
                    ch.stop();
                    assertTrue(sidecar.cache.filled() > 0, "parts written through the mount filled the cache");
                }
                List<String> keys = new ArrayList<>();
                try (PartMetadataStore s = PartMetadataStore.open(cacheDir, 8 << 20, false)) {
                    keys.addAll(s.keys(""));
                }
                assertTrue(keys.size() >= 3 * 8 * 4, "every part's metadata files are cached: " + keys.size());
                for (String k : keys) {
                    assertTrue(k.matches("default:(data/w/t([01]|%2D2)/(2020010[1-8]_\\d+_\\d+_\\d+/[a-z_.0-9]+|format_version\\.txt)|metadata/w/t([01]|%2D2)\\.sql)"),
                            "key form disk:relative_path: " + k);
                }
                assertTrue(keys.containsAll(List.of("default:data/w/t%2D2/format_version.txt", "default:metadata/w/t%2D2.sql")),
                        "the files ClickHouse reads per table are cached too: " + keys);

                try (Sidecar sidecar = new Sidecar(volume, mnt, cacheDir, counter)) {
                    counter[0].reset();
                    sidecar.metaRequests.reset();
                    ch.start();
                    List<String> startupGets = counter[0].gets();
                    long metaReads = sidecar.metaRequests.reads();
                    long metaTxns = sidecar.metaRequests.transactions();
                    System.out.println("metadata reads by kind: " + sidecar.metaRequests.readsByKind());
                    assertEquals(before, ch.query("SELECT _table, count(), sum(k) FROM merge('w', '^t') GROUP BY _table ORDER BY _table"));
                    Set<Long> metadataSlices = metadataSlices(sidecar.fs);
                    assertFalse(metadataSlices.isEmpty());
                    List<String> metadataGets = new ArrayList<>();
                    for (String key : startupGets) {
                        String last = key.substring(key.lastIndexOf('/') + 1);
                        if (metadataSlices.contains(Long.parseLong(last.substring(0, last.indexOf('_'))))) {
                            metadataGets.add(key);
                        }
                    }
                    assertEquals(List.of(), metadataGets, "object GETs for metadata files while ClickHouse loaded its tables");
                    assertTrue(sidecar.cache.served() >= 3 * 8 * 3, "ClickHouse's reads were served from the cache: " + sidecar.cache.served());
                    int[] tree = countTree(sidecar.fs);
                    System.out.printf("warm start: %d object GETs in all (none for metadata files), %d metadata-file reads served "
                            + "from the cache; %d metadata reads and %d transactions for %d directories and %d files%n",
                            startupGets.size(), sidecar.cache.served(), metaReads, metaTxns, tree[0], tree[1]);
                    // Per directory (a listing and its attributes), not per file: far fewer than the files loaded.
                    assertTrue(metaReads < tree[1] / 2, "metadata reads are per directory, not per file: "
                            + metaReads + " reads for " + tree[0] + " directories and " + tree[1] + " files");
                    ch.stop();
                }
                assertEquals(List.of(), ch.errors(), "ClickHouse logged errors");
            }
        }
    }

    /** Directories and files of the whole volume. */
    private static int[] countTree(PartFs fs) throws Exception {
        int[] n = new int[2];
        count(fs, fs.resolve("/"), n);
        return n;
    }

    private static void count(PartFs fs, Attr dir, int[] n) throws Exception {
        n[0]++;
        for (DirEntry e : fs.readdir(dir.ino())) {
            Attr a = fs.getattr(e.ino());
            if (a.isDirectory()) {
                count(fs, a, n);
            } else {
                n[1]++;
            }
        }
    }

    /** Slice ids of every part-metadata and table-metadata file of the volume. */
    private static Set<Long> metadataSlices(PartFs fs) throws Exception {
        Set<Long> ids = new HashSet<>();
        collect(fs, fs.resolve("/data"), "data", ids);
        collect(fs, fs.resolve("/metadata"), "metadata", ids);
        return ids;
    }

    private static void collect(PartFs fs, Attr dir, String path, Set<Long> ids) throws Exception {
        for (DirEntry e : fs.readdir(dir.ino())) {
            Attr a = fs.getattr(e.ino());
            String p = path + "/" + e.name();
            if (a.isDirectory()) {
                collect(fs, a, p, ids);
            } else if (MergeTreePaths.isPartMetadataFile(p) || MergeTreePaths.isTableMetadataFile(p)) {
                for (Slice s : fs.meta().readChunk(a.ino(), 0)) {
                    ids.add(s.id());
                }
            }
        }
    }
}
