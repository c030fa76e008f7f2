package io.partfs.engine.fuse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.PartFs;
import io.partfs.engine.metrics.Metrics;
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
        Path dir = Files.createTempDirectory("partfs-prefetch-");
        Metrics metrics = new Metrics();
        try (PartFs fs = new TestVolume(TestVolume.Meta.ROCKSDB, TestVolume.Store.LOCAL, dir, null, null,
                TestVolume.defaultConfig(dir).toBuilder().metrics(metrics).build()).open()) {
            Path mnt = Files.createDirectory(dir.resolve("mnt"));
            FuseOptions options = FuseOptions.builder().driver(FuseOptions.Driver.KERNEL)
                    .attrTimeout(60).entryTimeout(60).negativeTimeout(60).build();
            FuseMount fuse = FuseMount.create(fs, null, options);
            fuse.mountAndWait(mnt, options);
            try {
                Path table = Files.createDirectories(mnt.resolve("data/db/t"));
                for (int p = 0; p < PARTS; p++) {
                    Path part = Files.createDirectory(table.resolve("2024010" + (p % 9 + 1) + "_" + p + "_" + p + "_0"));
                    for (int f = 0; f < FILES; f++) {
                        Files.writeString(part.resolve("c" + f + ".bin"), "x");
                    }
                }
                Files.createDirectory(table.resolve("detached"));
                // a fresh mount: the kernel knows nothing of what was written through the old one
                fuse.unmount();
                fuse = FuseMount.create(fs, null, options);
                fuse.mountAndWait(mnt, options);

                try (Stream<Path> s = Files.list(table)) { // what ClickHouse does first when it loads a table
                    assertEquals(PARTS + 1, s.count());
                }
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (calls(metrics, "releasedir") < PARTS + 1) { // the table's listing and every part's
                    assertTrue(System.nanoTime() < deadline, "parts were not listed ahead: " + calls(metrics, "releasedir"));
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
            } finally {
                fuse.unmount();
            }
        } finally {
            TempDirs.deleteRecursively(dir);
        }
    }

    private static long calls(Metrics metrics, String op) {
        Matcher m = Pattern.compile("(?m)^partfs_fuse_operations_total\\{op=\"" + op + "\"} (\\d+)").matcher(metrics.scrape());
        return m.find() ? Long.parseLong(m.group(1)) : 0;
    }
}
