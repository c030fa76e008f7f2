package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.S3Server;
import io.partfs.engine.testing.SmallDisk;
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

    @Test
    void insertsGoOnWhenTheStagingDiskIsFull() throws Exception {
        try (SmallDisk disk = new SmallDisk(4); Workdir w = Workdir.create("partfs-diskfull-"); // the mount goes first
             RedisServer redis = RedisServer.start(); S3Server s3 = S3Server.start();
             ClickHouseServer ch = new ClickHouseServer(w.dir.resolve("ch"), w.mnt)) {
            String meta = redis.url(0);
            w.partfs.formatOnS3(meta, s3.endpoint(), "partfs-diskfull", "vol");
            w.partfs.ok("mount", w.mnt.toString(), "--meta", meta, "--background", "--http-address", "none",
                    "--writeback", "--upload-delay", "3600", "--cache-dir", disk.dir().toString());
            ch.start();
            Batches.createTable(ch);
            Batches.createPad(ch); // beside the batches, ~0.6 MiB an INSERT
            int[] all = new int[BATCHES];
            long started = System.nanoTime();
            for (int batch = 1; batch <= BATCHES; batch++) {
                Batches.insert(ch, batch);
                Batches.insertPad(ch, batch * 20_000L);
                all[batch - 1] = batch;
                assertTrue(disk.free() >= disk.total() / 10 - (1 << 20),
                        "after INSERT " + batch + " the disk keeps about its floor: " + disk.free() + " bytes free");
            }
            System.out.printf("%d INSERTs of each table in %.1f s%n", BATCHES, (System.nanoTime() - started) / 1e9);
            assertEquals(Batches.wholeBatches(all), Batches.read(ch));
            String pad = Batches.padSum(ch);
            assertTrue(pad.startsWith(BATCHES * 20_000 + "\t"), pad);
            String log = w.partfs.mountLogs();
            assertTrue(log.contains("write-back staging in " + disk.dir()) && log.contains("is full"),
                    "the disk filled up and the mount said so:\n" + log);
            ch.stop();
            w.partfs.ok("umount", w.mnt.toString()); // uploads what is staged

            // the next mount reads from S3 alone: no block cache
            w.partfs.ok("mount", w.mnt.toString(), "--meta", meta, "--background", "--http-address", "none",
                    "--cache-size", "0", "--cache-dir", w.dir.resolve("cache2").toString());
            ch.start();
            assertEquals(Batches.wholeBatches(all), Batches.read(ch), "every batch whole, from S3");
            assertEquals(pad, Batches.padSum(ch), "every row of hashes too");
            Batches.assertNothingDetached(w.mnt, "after the disk was full");
            ch.stop();
            w.partfs.ok("umount", w.mnt.toString());
            Partfs.Result fsck = w.partfs.run("fsck", "--meta", meta);
            assertEquals(0, fsck.exit(), fsck.all());
            assertTrue(fsck.out().contains("fsck: OK"), fsck.out());
        }
    }
}
