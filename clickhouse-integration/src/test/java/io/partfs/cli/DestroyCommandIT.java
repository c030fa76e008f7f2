package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.object.S3ObjectStore;
import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.S3Server;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * {@code partfs destroy} on Redis and s3proxy, and on the embedded default: it deletes the
 * volume's objects and metadata, and only those (another volume under the same storage prefix
 * keeps its files); it is refused, nothing deleted, for a mounted volume, a wrong uuid, no
 * --yes without a terminal, and wrong S3 credentials.
 */
class DestroyCommandIT {
    @Test
    void aSharedVolumeIsDeletedWholeAndNothingElse() throws Exception {
        try (Workdir w = Workdir.create("partfs-cli-");
             RedisServer redis = RedisServer.start();
             S3Server s3 = S3Server.start()) {
            Partfs partfs = w.partfs.env("PARTFS_ACCESS_KEY", S3Server.ACCESS_KEY).env("PARTFS_SECRET_KEY", S3Server.SECRET_KEY);
            String storage = "s3://partfs-destroy/shared?endpoint=" + s3.endpoint() + "&path-style=true";
            String doomed = redis.url(0);
            String kept = redis.url(1);
            partfs.ok("format", "--meta", doomed, "--storage", storage, "--block-size", "1M", "doomed");
            partfs.ok("format", "--meta", kept, "--storage", storage, "--block-size", "1M", "kept");
            byte[] data = new byte[(3 << 19) + 1];
            new Random(8).nextBytes(data);
            for (String meta : List.of(kept, doomed)) {
                partfs.ok("mount", "--meta", meta, w.mnt.toString(), "--background", "--http-address", "none");
                Files.createDirectories(w.mnt.resolve("db/t"));
                Files.write(w.mnt.resolve("db/t/data.bin"), data);
                if (meta.equals(kept)) {
                    partfs.ok("umount", w.mnt.toString());
                }
            }
            String uuid = uuidOf(partfs.ok("status", "--meta", doomed));

            Partfs.Result mounted = partfs.run("destroy", "--meta", doomed, uuid, "--yes");
            assertEquals(1, mounted.exit(), mounted.all());
            assertEquals(1, Partfs.errorLines(mounted).size(), mounted.all());
            assertTrue(mounted.err().contains("partfs: volume 'doomed' is mounted by 1 client(s) (")
                    && mounted.err().contains("): unmount every client first; nothing was deleted"), mounted.err());
            assertArrayEquals(data, Files.readAllBytes(w.mnt.resolve("db/t/data.bin")), "the mount works on");
            partfs.ok("umount", w.mnt.toString());

            Partfs.Result wrongUuid = partfs.run("destroy", "--meta", doomed, "3f2b6c1e-0d5a-4f0e-9a57-2c1d8e6b7a90", "--yes");
            assertEquals(List.of("partfs: metadata at " + doomed + " holds volume 'doomed' with uuid " + uuid
                    + ", not 3f2b6c1e-0d5a-4f0e-9a57-2c1d8e6b7a90: nothing was deleted; give the uuid 'partfs status' shows for the volume"
                    + " to destroy"), Partfs.errorLines(wrongUuid), wrongUuid.all());
            Partfs.Result unasked = partfs.run("destroy", "--meta", doomed, uuid);
            assertEquals(List.of("partfs: no terminal to ask on: add --yes to destroy volume 'doomed'; nothing was deleted"),
                    Partfs.errorLines(unasked), unasked.all());
            Partfs.Result badKey = w.partfs.env("PARTFS_SECRET_KEY", "not-the-secret").run("destroy", "--meta", doomed, uuid, "--yes");
            partfs.env("PARTFS_SECRET_KEY", S3Server.SECRET_KEY);
            assertEquals(1, Partfs.errorLines(badKey).size(), badKey.all());
            assertFalse(badKey.all().contains("not-the-secret"), badKey.all());
            assertEquals(1, badKey.exit(), badKey.all());

            try (S3ObjectStore bucket = new S3ObjectStore(s3.config("partfs-destroy").prefix("shared").build())) {
                assertEquals(2, bucket.listAll("doomed/chunks/").size(), "refused four times, nothing deleted");
                Partfs.Result destroyed = partfs.ok("destroy", "--meta", doomed, uuid, "--yes");
                assertTrue(destroyed.out().startsWith("volume doomed (uuid " + uuid + ")\n"), destroyed.out());
                assertTrue(destroyed.out().contains("destroyed volume doomed: 2 objects (1.5 MiB) deleted from "), destroyed.out());
                assertTrue(destroyed.out().matches("(?s).*; \\d+ metadata keys deleted\n.*"), destroyed.out());
                assertEquals(List.of(), bucket.listAll("doomed/"), "none of its objects left");
                assertEquals(2, bucket.listAll("kept/chunks/").size(), "the other volume's objects stay");
            }
            assertEquals(":0", redis.command("DBSIZE"), "its Redis database is empty");
            Partfs.Result gone = partfs.run("status", "--meta", doomed);
            assertEquals(1, gone.exit(), gone.all());
            assertTrue(gone.err().contains("no volume is formatted at " + doomed), gone.err());
            partfs.ok("format", "--meta", doomed, "--storage", storage, "doomed"); // a new volume of that name, there

            partfs.ok("mount", "--meta", kept, w.mnt.toString(), "--background", "--http-address", "none");
            assertArrayEquals(data, Files.readAllBytes(w.mnt.resolve("db/t/data.bin")), "the other volume reads whole");
            partfs.ok("umount", w.mnt.toString());
            assertTrue(partfs.ok("fsck", "--meta", kept).out().contains("fsck: OK"));
        }
    }

    @Test
    void theEmbeddedVolumeGoesWithItsDirectory() throws Exception {
        try (Workdir w = Workdir.create("partfs-cli-")) {
            Partfs partfs = w.partfs;
            partfs.ok("mount", w.mnt.toString(), "--background", "--http-address", "none");
            Files.writeString(w.mnt.resolve("f.txt"), "gone soon");
            String uuid = uuidOf(partfs.ok("status"));
            Partfs.Result mounted = partfs.run("destroy", uuid, "--yes");
            assertEquals(1, mounted.exit(), mounted.all());
            assertEquals(1, Partfs.errorLines(mounted).size(), mounted.all());
            partfs.ok("umount", w.mnt.toString());

            Path dir = partfs.home().resolve("default");
            Partfs.Result destroyed = partfs.ok("destroy", uuid, "--yes");
            assertTrue(destroyed.out().contains("destroyed volume default: 1 objects (9 B) deleted from file://"), destroyed.out());
            assertTrue(destroyed.out().contains("; its metadata directory deleted"), destroyed.out());
            assertFalse(Files.exists(dir), "the volume's directory is gone");
            try (var left = Files.list(partfs.home())) {
                assertEquals(List.of(), left.filter(p -> p.getFileName().toString().startsWith("default")).toList());
            }
            partfs.ok("mount", w.mnt.toString(), "--background", "--http-address", "none"); // a new, empty default volume
            try (var files = Files.list(w.mnt)) {
                assertEquals(List.of(), files.toList());
            }
            assertFalse(uuidOf(partfs.ok("status")).equals(uuid));
            partfs.ok("umount", w.mnt.toString());
        }
    }

    private static String uuidOf(Partfs.Result status) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("volume: +\\S+ \\(uuid ([0-9a-f-]+)\\)").matcher(status.out());
        assertTrue(m.find(), status.out());
        return m.group(1);
    }
}
