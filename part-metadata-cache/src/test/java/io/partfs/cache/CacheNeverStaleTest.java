package io.partfs.cache;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.Attr;
import io.partfs.engine.FsException;
import io.partfs.engine.PartFs;
import io.partfs.engine.fuse.FuseOptions;
import io.partfs.engine.fuse.FuseMount;
import io.partfs.engine.testing.TempDirs;
import io.partfs.engine.testing.TestVolume;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The cache never serves stale bytes: two threads, each on its own table of a real mount,
 * interleave part inserts (tmp_insert_* then rename), checksums.txt rewrites through .tmp and
 * rename, overwrites in place, truncates, detach and re-attach renames, drops (delete_tmp_*)
 * and reads. Every read through the mount (served by the cache when it can) must equal both
 * the thread's model and the backing file read directly from the volume. Seeded; the seed is in
 * every failure message ({@code -Dpartfs.seed=N} reproduces it).
 */
class CacheNeverStaleTest {
    private static final int OPS = Integer.getInteger("partfs.cache.ops", 1500);
    private static final String[] FILES = {"checksums.txt", "columns.txt", "count.txt", "primary.idx"};

    private Path dir;
    private Path mnt;
    private PartFs fs;
    private FuseMount fuse;
    private PartMetadataCache cache;

    @BeforeEach
    void mount() throws Exception {
        dir = Files.createTempDirectory("partfs-stale-");
        mnt = Files.createDirectory(dir.resolve("mnt"));
        fs = new TestVolume(TestVolume.Meta.ROCKSDB, TestVolume.Store.LOCAL, dir, null, null, TestVolume.defaultConfig(dir)).open();
        cache = new PartMetadataCache(PartMetadataStore.open(dir.resolve("mdcache"), 16 << 20, false), "default",
                TableSelector.parse("all"), PartMetadataCache.reader(fs));
        fuse = FuseMount.create(fs, cache, FuseOptions.builder().build());
        fuse.mountAndWait(mnt, FuseOptions.builder().build());
    }

    @AfterEach
    void unmount() throws Exception {
        try {
            fuse.unmount();
        } finally {
            fs.close();
            cache.store().close();
            TempDirs.deleteRecursively(dir);
        }
    }

    @Test
    void readsAlwaysMatchTheBackingFiles() throws Exception {
        long seed = Long.getLong("partfs.seed", System.nanoTime());
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            List<Future<?>> workers = new ArrayList<>();
            for (int t = 0; t < 2; t++) {
                int thread = t;
                workers.add(pool.submit(() -> {
                    new Worker(seed + thread, "data/db/t" + thread).run();
                    return null;
                }));
            }
            for (Future<?> w : workers) {
                w.get();
            }
        } finally {
            pool.shutdownNow();
        }
        assertTrue(cache.served() > 0, "the cache served reads (seed " + seed + ")");
        // Whatever the cache holds and would serve equals the file.
        for (String key : cache.store().keys("default:")) {
            String path = key.substring("default:".length());
            PartMetadataStore.Entry e = cache.store().peek(key).orElseThrow();
            Attr a;
            try {
                a = fs.resolve("/" + path);
            } catch (FsException.NoSuchEntry gone) {
                continue;
            }
            if (PartMetadataCache.matches(e, a)) {
                assertArrayEquals(fs.readFile("/" + path), e.bytes(), key + " (seed " + seed + ")");
            }
        }
    }

    /** One thread's random operations on its own table, with a model of what each file holds. */
    private final class Worker {
        private final long seed;
        private final Random rnd;
        private final String table;
        /** part directory (relative to the table) to file name to content. */
        private final Map<String, Map<String, byte[]>> parts = new HashMap<>();
        private int next = 1;

        Worker(long seed, String table) {
            this.seed = seed;
            this.rnd = new Random(seed);
            this.table = table;
        }

        private byte[] content() {
            byte[] b = new byte[1 + rnd.nextInt(rnd.nextInt(10) == 0 ? 100_000 : 300)];
            rnd.nextBytes(b);
            return b;
        }

        private String pick() {
            List<String> names = new ArrayList<>(parts.keySet());
            names.sort(null);
            return names.get(rnd.nextInt(names.size()));
        }

        void run() throws Exception {
            Files.createDirectories(mnt.resolve(table).resolve("detached"));
            for (int step = 0; step < OPS; step++) {
                int op = rnd.nextInt(100);
                if (parts.isEmpty() || op < 20) {
                    insert();
                } else if (op < 30) {
                    rewriteChecksums(pick());
                } else if (op < 38) {
                    overwrite(pick());
                } else if (op < 43) {
                    truncate(pick());
                } else if (op < 50) {
                    detachOrAttach(pick());
                } else if (op < 56) {
                    drop(pick());
                } else {
                    read(pick(), step);
                }
            }
            for (String part : new ArrayList<>(parts.keySet())) {
                for (String f : parts.get(part).keySet()) {
                    check(part, f, -1);
                }
            }
        }

        private void insert() throws IOException {
            int n = next++;
            Path tmp = Files.createDirectory(mnt.resolve(table).resolve("tmp_insert_all_" + n + "_" + n + "_0"));
            Map<String, byte[]> files = new HashMap<>();
            for (String f : FILES) {
                byte[] b = content();
                Files.write(tmp.resolve(f), b);
                files.put(f, b);
                if (rnd.nextBoolean()) {
                    read(tmp, f, b); // ClickHouse reads nothing here, but a cached tmp entry must move with the rename
                }
            }
            Files.write(tmp.resolve("k.bin"), content());
            String name = "all_" + n + "_" + n + "_0";
            Files.move(tmp, mnt.resolve(table).resolve(name), StandardCopyOption.ATOMIC_MOVE);
            parts.put(name, files);
        }

        private void rewriteChecksums(String part) throws IOException {
            Path p = mnt.resolve(table).resolve(part);
            byte[] b = content();
            Files.write(p.resolve("checksums.txt.tmp"), b);
            Files.move(p.resolve("checksums.txt.tmp"), p.resolve("checksums.txt"), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            parts.get(part).put("checksums.txt", b);
        }

        private void overwrite(String part) throws IOException {
            String f = FILES[rnd.nextInt(FILES.length)];
            byte[] b = content();
            Files.write(mnt.resolve(table).resolve(part).resolve(f), b);
            parts.get(part).put(f, b);
        }

        private void truncate(String part) throws IOException {
            String f = FILES[rnd.nextInt(FILES.length)];
            byte[] old = parts.get(part).get(f);
            int len = rnd.nextInt(old.length + 1);
            try (var ch = java.nio.channels.FileChannel.open(mnt.resolve(table).resolve(part).resolve(f), java.nio.file.StandardOpenOption.WRITE)) {
                ch.truncate(len);
            }
            parts.get(part).put(f, Arrays.copyOf(old, len));
        }

        private void detachOrAttach(String part) throws IOException {
            String to = part.startsWith("detached/") ? part.substring("detached/".length()) : "detached/" + part;
            if (parts.containsKey(to)) {
                return;
            }
            Files.move(mnt.resolve(table).resolve(part), mnt.resolve(table).resolve(to), StandardCopyOption.ATOMIC_MOVE);
            parts.put(to, parts.remove(part));
        }

        private void drop(String part) throws IOException {
            Path doomed = mnt.resolve(table).resolve("delete_tmp_" + part.replace('/', '_'));
            Files.move(mnt.resolve(table).resolve(part), doomed, StandardCopyOption.ATOMIC_MOVE);
            try (Stream<Path> s = Files.list(doomed)) {
                for (Path f : s.toList()) {
                    Files.delete(f);
                }
            }
            Files.delete(doomed);
            parts.remove(part);
        }

        private void read(String part, int step) throws IOException {
            check(part, FILES[rnd.nextInt(FILES.length)], step);
        }

        private void check(String part, String f, int step) throws IOException {
            read(mnt.resolve(table).resolve(part), f, parts.get(part).get(f));
        }

        private void read(Path partDir, String f, byte[] expected) throws IOException {
            String where = " (seed " + seed + ", " + partDir.getFileName() + "/" + f + ")";
            byte[] viaMount;
            try {
                viaMount = Files.readAllBytes(partDir.resolve(f));
            } catch (NoSuchFileException e) {
                throw new AssertionError("missing" + where, e);
            }
            assertArrayEquals(expected, viaMount, "read through the mount equals the model" + where);
            byte[] backing = fs.readFile("/" + mnt.relativize(partDir.resolve(f)));
            assertArrayEquals(backing, viaMount, "read through the mount equals the backing file" + where);
        }
    }
}
