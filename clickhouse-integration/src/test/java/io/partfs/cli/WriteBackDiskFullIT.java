package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.S3Server;
import io.partfs.engine.testing.SmallDisk;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * ClickHouse on a write-back mount whose cache directory is a disk too small for what it
 * writes (a real 4 MiB tmpfs, uploads held back an hour so that staged blocks pile up): every
 * INSERT succeeds (the blocks staging has no room for are uploaded before fsync or close
 * returns), the disk keeps its free-space floor, and after the sidecar's unmount every batch
 * reads back whole from S3 alone, with nothing found broken and fsck clean.
 */
class WriteBackDiskFullIT {
    private static final int BATCHES = 12;
    private static final String PAD_SUM = "SELECT count(), sum(cityHash64(h)) FROM pad";

    @Test
    void insertsGoOnWhenTheStagingDiskIsFull() throws Exception {
        Path dir = Files.createTempDirectory("partfs-diskfull-");
        Path mnt = dir.resolve("mnt");
        Partfs partfs = new Partfs(dir.resolve("home"));
        SmallDisk disk = new SmallDisk(4);
        try (RedisServer redis = RedisServer.start(); S3Server s3 = S3Server.start();
             ClickHouseServer ch = new ClickHouseServer(dir.resolve("ch"), mnt)) {
            String meta = redis.url(0);
            partfs.formatOnS3(meta, s3.endpoint(), "partfs-diskfull", "vol");
            partfs.ok("mount", mnt.toString(), "--meta", meta, "--background", "--http-address", "none",
                    "--writeback", "--upload-delay", "3600", "--cache-dir", disk.dir().toString());
            ch.start();
            Batches.createTable(ch);
            // beside the batches, rows of hashes in hex, which compress to half: ~0.6 MiB an INSERT
            ch.query("CREATE TABLE pad (k UInt64, h String) ENGINE = MergeTree ORDER BY k");
            int[] all = new int[BATCHES];
            long started = System.nanoTime();
            for (int batch = 1; batch <= BATCHES; batch++) {
                Batches.insert(ch, batch);
                ch.query("INSERT INTO pad SELECT number, concat(hex(MD5(toString(number))), hex(MD5(toString(number + "
                        + batch + ")))) FROM system.numbers LIMIT " + (batch * 20_000) + ", 20000");
                all[batch - 1] = batch;
                assertTrue(disk.free() >= disk.total() / 10 - (1 << 20),
                        "after INSERT " + batch + " the disk keeps about its floor: " + disk.free() + " bytes free");
            }
            System.out.printf("%d INSERTs of each table in %.1f s%n", BATCHES, (System.nanoTime() - started) / 1e9);
            assertEquals(Batches.wholeBatches(all), Batches.read(ch));
            String pad = ch.query(PAD_SUM);
            assertTrue(pad.startsWith(BATCHES * 20_000 + "\t"), pad);
            String log = mountLog(partfs.home());
            assertTrue(log.contains("write-back staging in " + disk.dir()) && log.contains("is full"),
                    "the disk filled up and the mount said so:\n" + log);
            ch.stop();
            partfs.ok("umount", mnt.toString()); // uploads what is staged

            // the next mount reads from S3 alone: no block cache
            partfs.ok("mount", mnt.toString(), "--meta", meta, "--background", "--http-address", "none",
                    "--cache-size", "0", "--cache-dir", dir.resolve("cache2").toString());
            ch.start();
            assertEquals(Batches.wholeBatches(all), Batches.read(ch), "every batch whole, from S3");
            assertEquals(pad, ch.query(PAD_SUM), "every row of hashes too");
            Batches.assertNothingDetached(mnt, "after the disk was full");
            ch.stop();
            partfs.ok("umount", mnt.toString());
            Partfs.Result fsck = partfs.run("fsck", "--meta", meta);
            assertEquals(0, fsck.exit(), fsck.all());
            assertTrue(fsck.out().contains("fsck: OK"), fsck.out());
        } finally {
            partfs.unmountAndDelete(mnt, dir);
            disk.close(); // after the mount that uses it
        }
    }

    /** What the background mounts logged, all files together. */
    private static String mountLog(Path home) throws Exception {
        StringBuilder all = new StringBuilder();
        try (Stream<Path> logs = Files.list(home.resolve("logs"))) {
            for (Path p : logs.filter(p -> p.getFileName().toString().startsWith("mount-")).toList()) {
                all.append(Files.readString(p));
            }
        }
        return all.toString();
    }
}
