package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.object.LocalObjectStore;
import io.partfs.engine.object.ObjectStore;
import io.partfs.engine.object.S3ObjectStore;
import io.partfs.engine.object.StorageUrl;
import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.S3Server;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * {@code partfs config --storage}: a volume moves to a copy of its objects (another bucket, an
 * endpoint renamed, an embedded volume's directory copied to S3), and is refused the move while
 * a client has it mounted or while the new store lacks its objects, the volume left as it was.
 * The copy is made with the S3 API, as rclone or mc would make it.
 */
class StorageMoveIT {
    @Test
    void aSharedVolumeMovesToACopyOfItsBucketOnlyOnceTheCopyHoldsItsObjects() throws Exception {
        try (Workdir w = Workdir.create("partfs-cli-");
             RedisServer redis = RedisServer.start();
             S3Server s3 = S3Server.start()) {
            Partfs partfs = w.partfs;
            String meta = redis.url(0);
            partfs.formatOnS3(meta, s3.endpoint(), "partfs-move-a", "mv");
            String from = StorageUrl.parse("s3://partfs-move-a/mv?endpoint=" + s3.endpoint() + "&path-style=true").url();
            String to = "s3://partfs-move-b/mv?endpoint=" + s3.endpoint() + "&path-style=true";

            byte[] big = new byte[(5 << 19) + 11]; // 3 blocks of 1 MiB, the last one short
            new Random(5).nextBytes(big);
            partfs.ok("mount", "--meta", meta, w.mnt.toString(), "--background", "--cache-dir", w.dir.resolve("cache1").toString());
            Files.createDirectories(w.mnt.resolve("db/t/all_1_1_0"));
            Files.write(w.mnt.resolve("db/t/all_1_1_0/data.bin"), big);
            for (int i = 0; i < 40; i++) {
                Files.writeString(w.mnt.resolve("db/t/all_1_1_0/small" + i + ".txt"), "part " + i);
            }
            Partfs.Result mounted = partfs.run("config", "--meta", meta, "--storage", to);
            assertEquals(1, mounted.exit(), mounted.all());
            assertEquals(List.of("partfs: volume 'mv' is mounted by 1 client(s) (" + hostname() + " pid "),
                    Partfs.errorLines(mounted).stream().map(l -> l.substring(0, l.indexOf(" pid ") + 5)).toList(), mounted.all());
            assertTrue(mounted.err().contains("unmount every client first (a mount keeps the storage it opened); the storage is still "
                    + from), mounted.err());
            partfs.ok("umount", w.mnt.toString());

            Partfs.Result empty = partfs.run("config", "--meta", meta, "--storage", to);
            assertEquals(1, empty.exit(), empty.all());
            assertEquals(1, Partfs.errorLines(empty).size(), empty.all());
            assertTrue(empty.err().matches("(?s).*partfs: storage s3://partfs-move-b/mv/\\S+ does not hold volume 'mv': object "
                    + "mv/chunks/\\S+ is missing: copy the objects under 'mv/' from \\S+ there first, or give the URL where they"
                    + " are; the storage is still \\S+\n"), empty.err());
            assertTrue(partfs.ok("status", "--meta", meta).out().contains("storage:    " + from), "unchanged");

            try (S3ObjectStore a = new S3ObjectStore(s3.config("partfs-move-a").prefix("mv").build());
                 S3ObjectStore b = new S3ObjectStore(s3.config("partfs-move-b").prefix("mv").build())) {
                b.ensureBucket();
                int copied = copy(a, b);
                assertTrue(copied >= 43, "3 blocks of data.bin, 40 small files: " + copied);
                Partfs.Result moved = partfs.run("config", "--meta", meta, "--storage", to);
                assertEquals(0, moved.exit(), moved.all());
                assertTrue(moved.out().matches("(?s)volume mv\n  storage: s3://partfs-move-b/mv/\\S+ \\(was " + java.util.regex.Pattern.quote(from)
                        + "; \\d+ objects of 32 slices found there; 'partfs fsck' checks every one\\)\n"), moved.out());
                a.deleteAll(a.listAll("").stream().map(ObjectStore.ObjectInfo::key).toList()); // the old bucket is gone
            }
            assertTrue(partfs.ok("status", "--meta", meta).out().contains("storage:    s3://partfs-move-b/mv/"), "changed");
            Partfs.Result again = partfs.ok("config", "--meta", meta, "--storage", to);
            assertTrue(again.out().contains("(unchanged)"), again.out());
            Partfs.Result shown = partfs.ok("config", "--meta", meta);
            assertTrue(shown.out().startsWith("volume mv\n  storage: s3://partfs-move-b/mv/"), shown.out());

            partfs.ok("mount", "--meta", meta, w.mnt.toString(), "--background", "--cache-dir", w.dir.resolve("cache2").toString());
            assertArrayEquals(big, Files.readAllBytes(w.mnt.resolve("db/t/all_1_1_0/data.bin")), "read from the new bucket");
            assertEquals("part 39", Files.readString(w.mnt.resolve("db/t/all_1_1_0/small39.txt")));
            Files.writeString(w.mnt.resolve("db/t/all_1_1_0/after.txt"), "written after the move");
            partfs.ok("umount", w.mnt.toString());
            Partfs.Result fsck = partfs.ok("fsck", "--meta", meta);
            assertTrue(fsck.out().contains("fsck: OK"), fsck.out());
        }
    }

    @Test
    void anEmbeddedVolumeMovesItsObjectsToS3() throws Exception {
        try (Workdir w = Workdir.create("partfs-cli-");
             S3Server s3 = S3Server.start()) {
            Partfs partfs = w.partfs.env("PARTFS_ACCESS_KEY", S3Server.ACCESS_KEY).env("PARTFS_SECRET_KEY", S3Server.SECRET_KEY);
            byte[] data = new byte[(3 << 20) + 5];
            new Random(6).nextBytes(data);
            partfs.ok("mount", w.mnt.toString(), "--background");
            Files.write(w.mnt.resolve("data.bin"), data);
            partfs.ok("umount", w.mnt.toString());

            String to = "s3://partfs-embedded/objects?endpoint=" + s3.endpoint() + "&path-style=true";
            try (LocalObjectStore local = new LocalObjectStore(partfs.home().resolve("default/objects"));
                 S3ObjectStore remote = new S3ObjectStore(s3.config("partfs-embedded").prefix("objects").build())) {
                remote.ensureBucket();
                copy(local, remote);
            }
            Partfs.Result moved = partfs.ok("config", "--storage", to);
            assertTrue(moved.out().contains("storage: s3://partfs-embedded/objects/"), moved.out());
            deleteTree(partfs.home().resolve("default/objects"));

            partfs.ok("mount", w.mnt.toString(), "--background", "--cache-dir", w.dir.resolve("cache2").toString());
            assertArrayEquals(data, Files.readAllBytes(w.mnt.resolve("data.bin")), "read from S3 after the move");
            assertTrue(partfs.ok("status").out().contains("storage:    s3://partfs-embedded/objects/"));
            partfs.ok("umount", w.mnt.toString());
        }
    }

    /** Copies every object of {@code from} to {@code to}, as {@code rclone copy} would; returns how many. */
    private static int copy(ObjectStore from, ObjectStore to) throws Exception {
        List<ObjectStore.ObjectInfo> all = from.listAll("");
        for (ObjectStore.ObjectInfo o : all) {
            to.put(o.key(), from.get(o.key(), 0, -1));
        }
        return all.size();
    }

    private static void deleteTree(Path dir) throws Exception {
        io.partfs.engine.testing.TempDirs.deleteRecursively(dir);
    }

    private static String hostname() throws Exception {
        return Files.readString(Path.of("/proc/sys/kernel/hostname")).trim();
    }
}
