package io.partfs.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.partfs.engine.PartFs;
import io.partfs.engine.PartFsConfig;
import io.partfs.engine.fuse.FuseOptions;
import io.partfs.engine.fuse.FuseMount;
import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.TempDirs;
import io.partfs.engine.testing.TestVolume;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A shared (Redis) volume changed by another client while the sidecar was down: after the
 * restart, the changed files are read again and the unchanged ones come from the warm cache;
 * nothing stale is served.
 */
class ChangedByAnotherClientTest {
    private RedisServer redis;
    private Path dir;
    private TestVolume volume;

    @BeforeEach
    void setUp() throws Exception {
        redis = RedisServer.start();
        dir = Files.createTempDirectory("partfs-otherclient-");
        volume = new TestVolume(TestVolume.Meta.REDIS, TestVolume.Store.LOCAL, dir, redis, null, TestVolume.defaultConfig(dir));
    }

    @AfterEach
    void tearDown() throws Exception {
        redis.close();
        TempDirs.deleteRecursively(dir);
    }

    /** The sidecar: a mount with the part-metadata cache in {@code dir/mdcache}. */
    private final class Sidecar implements AutoCloseable {
        final PartFs fs;
        final PartMetadataCache cache;
        final FuseMount fuse;
        final Path mnt;

        Sidecar() throws Exception {
            mnt = Files.createDirectories(dir.resolve("mnt"));
            fs = volume.open();
            cache = new PartMetadataCache(PartMetadataStore.open(dir.resolve("mdcache"), 8 << 20, false), "default",
                    TableSelector.parse("all"), PartMetadataCache.reader(fs));
            fuse = FuseMount.create(fs, cache, FuseOptions.builder().build());
            fuse.mountAndWait(mnt, FuseOptions.builder().build());
        }

        String read(String rel) throws Exception {
            return Files.readString(mnt.resolve(rel));
        }

        @Override
        public void close() throws Exception {
            fuse.unmount();
            fs.close();
            cache.store().close();
        }
    }

    private static void writeVia(PartFs fs, long dir, String name, String content) throws Exception {
        PartFs.Created c = fs.create(dir, name, 0644, PartFs.O_WRONLY | PartFs.O_TRUNC, 0, 0);
        byte[] b = content.getBytes(StandardCharsets.UTF_8);
        fs.write(c.fh(), 0, b, 0, b.length);
        fs.release(c.fh());
    }

    @Test
    void onlyWhatChangedIsReadAgainAndNothingStaleIsServed() throws Exception {
        try (Sidecar s = new Sidecar()) {
            for (String part : new String[] {"all_1_1_0", "all_2_2_0"}) {
                Path tmp = Files.createDirectories(s.mnt.resolve("data/db/t/tmp_insert_" + part));
                Files.writeString(tmp.resolve("checksums.txt"), "checksums of " + part);
                Files.writeString(tmp.resolve("columns.txt"), "columns of " + part);
                Files.writeString(tmp.resolve("count.txt"), "10");
                Files.move(tmp, s.mnt.resolve("data/db/t/" + part), StandardCopyOption.ATOMIC_MOVE);
            }
            assertEquals("10", s.read("data/db/t/all_2_2_0/count.txt"));
        }

        // Another client, while the sidecar is down: checksums.txt of one part rewritten through
        // .tmp and rename (a new inode), count.txt of the other overwritten in place.
        try (PartFs other = volume.openAs(PartFsConfig.builder().metaCacheTtl(java.time.Duration.ZERO).build())) {
            long p1 = other.resolve("/data/db/t/all_1_1_0").ino();
            writeVia(other, p1, "checksums.txt.tmp", "checksums rewritten by another client");
            other.rename(p1, "checksums.txt.tmp", p1, "checksums.txt", 0);
            writeVia(other, other.resolve("/data/db/t/all_2_2_0").ino(), "count.txt", "99");
        }

        try (Sidecar s = new Sidecar()) {
            assertEquals("checksums rewritten by another client", s.read("data/db/t/all_1_1_0/checksums.txt"));
            assertEquals("99", s.read("data/db/t/all_2_2_0/count.txt"));
            assertEquals(2, s.cache.filled(), "exactly the two changed files were read from the volume again");
            assertEquals(0, s.cache.served());
            assertEquals("columns of all_1_1_0", s.read("data/db/t/all_1_1_0/columns.txt"));
            assertEquals("checksums of all_2_2_0", s.read("data/db/t/all_2_2_0/checksums.txt"));
            assertEquals("10", s.read("data/db/t/all_1_1_0/count.txt"));
            assertEquals(3, s.cache.served(), "the unchanged files came from the warm cache");
            assertEquals(2, s.cache.filled());
        }
    }
}
