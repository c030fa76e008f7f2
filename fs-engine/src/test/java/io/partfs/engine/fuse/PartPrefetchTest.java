package io.partfs.engine.fuse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.PartFs;
import io.partfs.engine.metrics.Metrics;
import io.partfs.engine.testing.Teardown;
import io.partfs.engine.testing.TempDirs;
import io.partfs.engine.testing.TestVolume;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The kernel driver's metadata readahead: listing a table directory makes the kernel learn every
 * file of its parts, so ClickHouse's stats of those files never reach PartFS; and a name removed
 * after a listing was taken is not brought back by it.
 */
class PartPrefetchTest {
    private static final int PARTS = 20;
    private static final int FILES = 30;

    @Test
    void partNamesAreRecognized() {
        for (String part : new String[] {"20240101_1_1_0", "all_12_40_3", "202401_1_9_2_15", "a1b2-3c_7_7_0"}) {
            assertTrue(PartPrefetcher.PART.matcher(part).matches(), part);
        }
        for (String other : new String[] {"tmp_insert_20240101_1_1_0", "detached", "format_version.txt",
            "tmp_delete_all_1_1_0", "delete_tmp_all_1_1_0", "all_1_1"}) {
            assertFalse(PartPrefetcher.PART.matcher(other).matches(), other);
        }
    }

    @Test
    void listingATableLetsTheKernelAnswerEveryStatOfItsParts() throws Exception {
        try (Mounted m = new Mounted(null)) {
            Path mnt = m.mnt;
            Metrics metrics = m.metrics;
            Path table = Files.createDirectories(mnt.resolve("data/db/t"));
            for (int p = 0; p < PARTS; p++) {
                Path part = Files.createDirectory(table.resolve("2024010" + (p % 9 + 1) + "_" + p + "_" + p + "_0"));
                for (int f = 0; f < FILES; f++) {
                    Files.writeString(part.resolve("c" + f + ".bin"), "x");
                }
            }
            Files.createDirectory(table.resolve("detached"));
            m.remount(); // a fresh mount: the kernel knows nothing of what was written through the old one

            try (Stream<Path> s = Files.list(table)) { // what ClickHouse does first when it loads a table
                assertEquals(PARTS + 1, s.count());
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (calls(metrics, "partfs_fuse_readahead_parts_total", "") < PARTS) {
                assertTrue(System.nanoTime() < deadline, "parts were not listed ahead: "
                        + calls(metrics, "partfs_fuse_readahead_parts_total", ""));
                java.util.concurrent.locks.LockSupport.parkNanos(10_000_000L); // poll interval
            }
            java.util.List<Path> parts;
            try (Stream<Path> s = Files.list(table)) {
                parts = s.filter(p -> !p.endsWith("detached")).toList();
            }
            long lookups = calls(metrics, "lookup");
            long getattrs = calls(metrics, "getattr");
            for (Path part : parts) {
                for (int f = 0; f < FILES; f++) {
                    assertEquals(1, Files.size(part.resolve("c" + f + ".bin")));
                }
            }
            assertEquals(lookups, calls(metrics, "lookup"), "stats of prefetched parts needed lookups");
            assertEquals(getattrs, calls(metrics, "getattr"), "stats of prefetched parts needed getattr");

            // removed while a long listing is read: the kernel must not keep the name alive
            Path big = Files.createDirectory(mnt.resolve("big"));
            for (int f = 0; f < 1000; f++) {
                Files.writeString(big.resolve(String.format("f%04d", f)), "x");
            }
            Path gone = big.resolve("f0999");
            Files.createLink(mnt.resolve("kept"), gone); // its inode lives on, as after FREEZE
            try (var ds = Files.newDirectoryStream(big)) {
                var it = ds.iterator();
                it.next(); // the first chunk of the listing (far from f0999)
                Files.delete(gone);
                while (it.hasNext()) {
                    it.next();
                }
            }
            assertFalse(Files.exists(gone), "a name removed during a listing came back with it");
        }
    }

    /**
     * A table listed again soon after its readahead is not read ahead again while the kernel keeps
     * the listing. Once the kernel has dropped it (as under memory pressure) the same listing
     * comes back to PartFS; when one of its parts is then listed too, as ClickHouse restarted
     * does loading the table, the parts are read ahead again instead of loaded one request at a time.
     */
    @Test
    void aListingTheKernelDroppedIsReadAheadAgain() throws Exception {
        try (Mounted m = new Mounted(null)) {
            Path table = Files.createDirectories(m.mnt.resolve("data/db/t"));
            for (int p = 0; p < PARTS; p++) {
                Files.writeString(Files.createDirectory(table.resolve("all_" + p + "_" + p + "_0")).resolve("count.txt"), "1");
            }
            m.remount();
            listAndAwaitReadahead(m, table, PARTS);
            long listings = calls(m.metrics, "readdirplus");
            list(table); // still in the kernel: nothing reaches PartFS, nothing is read ahead
            assertEquals(listings, calls(m.metrics, "readdirplus"), "the kernel did not keep the listing");

            Files.writeString(Path.of("/proc/sys/vm/drop_caches"), "3\n"); // the kernel forgets it all
            list(table);
            assertTrue(calls(m.metrics, "readdirplus") > listings, "the listing did not come back to PartFS");
            try (Stream<Path> s = Files.list(table.resolve("all_0_0_0"))) { // ClickHouse loading the first part
                assertEquals(1, s.count());
            }
            awaitReadahead(m, 2 * PARTS);
        }
    }

    private static void list(Path dir) throws java.io.IOException {
        try (Stream<Path> s = Files.list(dir)) {
            assertEquals(PARTS, s.count());
        }
    }

    private static void listAndAwaitReadahead(Mounted m, Path table, long partsReadAhead) throws Exception {
        list(table);
        awaitReadahead(m, partsReadAhead);
    }

    private static void awaitReadahead(Mounted m, long partsReadAhead) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (calls(m.metrics, "partfs_fuse_readahead_parts_total", "") < partsReadAhead) {
            assertTrue(System.nanoTime() < deadline, "parts read ahead: " + calls(m.metrics, "partfs_fuse_readahead_parts_total", "")
                    + ", expected " + partsReadAhead);
            java.util.concurrent.locks.LockSupport.parkNanos(10_000_000L); // poll interval
        }
    }

    /**
     * The readahead stores each part's cached metadata files into the page cache: ClickHouse's
     * open, read, close and stat of them never reach PartFS for data. A file changed behind the
     * kernel's back (another machine) is read as it is now, not as stored.
     */
    @Test
    void cachedMetadataFilesAreReadFromThePageCache() throws Exception {
        MemoryObserver observer = new MemoryObserver();
        try (Mounted m = new Mounted(observer)) {
            Path mnt = m.mnt;
            Metrics metrics = m.metrics;
            PartFs fs = m.fs;
            Path table = Files.createDirectories(mnt.resolve("data/db/t"));
            for (int p = 0; p < PARTS; p++) {
                Path part = Files.createDirectory(table.resolve("all_" + p + "_" + p + "_0"));
                Files.writeString(part.resolve("checksums.txt"), "checksums of part " + p);
                Files.writeString(part.resolve("count.txt"), String.valueOf(p));
                Files.writeString(part.resolve("c.bin"), "data");
            }
            assertEquals(2 * PARTS, observer.size(), "the observer got every metadata file on commit");
            m.remount(); // a fresh mount: nothing in the kernel's caches

            try (Stream<Path> s = Files.list(table)) {
                assertEquals(PARTS, s.count());
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (calls(metrics, "partfs_fuse_page_cache_stores_total", "") < 2 * PARTS) {
                assertTrue(System.nanoTime() < deadline, "metadata files not stored: "
                        + calls(metrics, "partfs_fuse_page_cache_stores_total", ""));
                java.util.concurrent.locks.LockSupport.parkNanos(10_000_000L); // poll interval
            }
            long reads = calls(metrics, "read");
            long flushes = calls(metrics, "flush");
            long getattrs = calls(metrics, "getattr");
            int last = PARTS - 1; // left unread for the change below
            for (int p = 0; p < last; p++) {
                Path part = table.resolve("all_" + p + "_" + p + "_0");
                assertEquals("checksums of part " + p, Files.readString(part.resolve("checksums.txt")));
                assertEquals(String.valueOf(p), Files.readString(part.resolve("count.txt")));
                assertEquals(String.valueOf(p).length(), Files.size(part.resolve("count.txt")));
            }
            assertEquals(reads, calls(metrics, "read"), "reads of stored files reached PartFS");
            assertEquals(flushes, calls(metrics, "flush"), "closing a read-only file sent FLUSH");
            assertEquals(getattrs, calls(metrics, "getattr"), "stats after reading stored files reached PartFS");
            // the data file was not stored: it is read as usual, or by the kernel from its cached
            // block where the kernel has FUSE passthrough
            long passedThrough = calls(metrics, "partfs_fuse_passthrough_opens_total", "");
            assertEquals("data", Files.readString(table.resolve("all_0_0_0/c.bin")));
            assertTrue(calls(metrics, "read") > reads || calls(metrics, "partfs_fuse_passthrough_opens_total", "") > passedThrough);

            // stored, then changed behind the kernel (same size): the open drops the stored copy
            String lastPart = "all_" + last + "_" + last + "_0";
            long ino = fs.resolve("data/db/t/" + lastPart + "/checksums.txt").ino();
            long fh = fs.open(ino, PartFs.O_WRONLY);
            byte[] other = ("checksums OF part " + last).getBytes(java.nio.charset.StandardCharsets.UTF_8);
            fs.write(fh, 0, other, 0, other.length);
            fs.release(fh);
            assertEquals("checksums OF part " + last, Files.readString(table.resolve(lastPart + "/checksums.txt")));
            // and written through the mount: read back as written
            Path changed = table.resolve("all_1_1_0/count.txt");
            Files.writeString(changed, "99");
            assertEquals("99", Files.readString(changed));
        }
    }

    /** A RocksDB volume on local storage mounted with the kernel driver and 60 s kernel caches. */
    private static final class Mounted implements AutoCloseable {
        final Path dir;
        final Metrics metrics = new Metrics();
        final PartFs fs;
        final Path mnt;
        private final io.partfs.engine.spi.PathObserver observer;
        private final FuseOptions options = FuseOptions.builder().driver(FuseOptions.Driver.KERNEL)
                .attrTimeout(60).entryTimeout(60).negativeTimeout(60).build();
        private FuseMount fuse;

        Mounted(io.partfs.engine.spi.PathObserver observer) throws Exception {
            this.observer = observer;
            dir = Files.createTempDirectory("partfs-prefetch-");
            fs = new TestVolume(TestVolume.Meta.ROCKSDB, TestVolume.Store.LOCAL, dir, null, null,
                    TestVolume.defaultConfig(dir).toBuilder().metrics(metrics).build()).open();
            mnt = Files.createDirectory(dir.resolve("mnt"));
            remount();
        }

        void remount() throws Exception {
            if (fuse != null) {
                fuse.unmount();
            }
            fuse = FuseMount.create(fs, observer, options);
            fuse.mountAndWait(mnt, options);
        }

        @Override
        public void close() throws Exception {
            Teardown.inOrder(fuse::unmount, fs, () -> TempDirs.deleteRecursively(dir));
        }
    }

    /** A part-metadata cache in memory: every *.txt file, served when ino, size and data version match. */
    private static final class MemoryObserver implements io.partfs.engine.spi.PathObserver {
        private record Copy(io.partfs.engine.Attr attr, byte[] content) {
        }

        private final java.util.Map<String, Copy> copies = new java.util.concurrent.ConcurrentHashMap<>();

        int size() {
            return copies.size();
        }

        @Override
        public boolean caches(String path) {
            return path.endsWith(".txt");
        }

        @Override
        public byte[] cached(String path, io.partfs.engine.Attr a) {
            Copy c = copies.get(path);
            return c != null && c.attr.ino() == a.ino() && c.attr.size() == a.size()
                    && c.attr.dataVersion() == a.dataVersion() ? c.content : null;
        }

        @Override
        public void store(String path, io.partfs.engine.Attr a, byte[] content) {
            copies.put(path, new Copy(a, content));
        }

        @Override
        public void renamed(String from, String to) {
            copies.keySet().removeIf(k -> k.equals(from) || k.startsWith(from + "/"));
        }

        @Override
        public void removed(String path) {
            copies.keySet().removeIf(k -> k.equals(path) || k.startsWith(path + "/"));
        }

        @Override
        public void linked(String existing, String added, io.partfs.engine.Attr a) {
        }
    }

    private static long calls(Metrics metrics, String op) {
        return calls(metrics, "partfs_fuse_operations_total", "{op=\"" + op + "\"}");
    }

    private static long calls(Metrics metrics, String metric, String labels) {
        Matcher m = Pattern.compile("(?m)^" + Pattern.quote(metric + labels) + " (\\d+)").matcher(metrics.scrape());
        return m.find() ? Long.parseLong(m.group(1)) : 0;
    }
}
