package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.SmallDisk;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;

/**
 * ClickHouse on an embedded volume (RocksDB metadata and the objects on one local disk, a real
 * 64 MiB tmpfs) that it fills: the mount reports the disk through statfs, the INSERT that no
 * longer fits fails with "no space left on device" (errno 28, not an I/O error), the table stays
 * readable, and once ClickHouse drops what it no longer needs the mount gives the trash's
 * objects up early (the volume keeps freed objects 2 hours) and INSERTs work again.
 */
class EmbeddedDiskFullIT {
    @Test
    void anInsertThatDoesNotFitFailsWithNoSpaceAndDroppingMakesRoom() throws Exception {
        try (SmallDisk disk = new SmallDisk(64); Workdir w = Workdir.create("partfs-embedded-full-"); // the mount goes first
             ClickHouseServer ch = new ClickHouseServer(w.dir.resolve("ch"), w.mnt)) {
            String meta = disk.dir().resolve("meta").toString();
            w.partfs.ok("format", "--meta", meta, "--storage", "file://" + disk.dir().resolve("objects"), "vol");
            w.partfs.ok("mount", w.mnt.toString(), "--meta", meta, "--background", "--http-address", "none");
            long total = Files.getFileStore(w.mnt).getTotalSpace();
            assertEquals(disk.total(), total, "statfs of the mount is the disk's");

            ch.start();
            ch.query("CREATE TABLE keep (k UInt64) ENGINE = MergeTree ORDER BY k");
            ch.query("INSERT INTO keep SELECT number FROM system.numbers LIMIT 1000");
            Batches.createPad(ch);
            IOException full = null;
            int inserted = 0;
            while (full == null && inserted < 200) {
                try {
                    Batches.insertPad(ch, 0);
                    inserted++;
                } catch (IOException e) {
                    full = e;
                }
            }
            assertNotNull(full, "200 INSERTs of 0.6 MiB fitted on 64 MiB");
            System.out.printf("%d INSERTs fitted, then: %s%n", inserted, full.getMessage());
            assertTrue(inserted >= 20, inserted + " INSERTs before the disk was full");
            assertTrue(full.getMessage().toLowerCase(java.util.Locale.ROOT).contains("no space left on device"),
                    "ENOSPC, not EIO: " + full.getMessage());
            assertTrue(Files.getFileStore(w.mnt).getUsableSpace() < total / 20, "statfs says the disk is nearly full");
            assertEquals("1000\n", ch.query("SELECT count() FROM keep"), "what is there stays readable");

            ch.query("DROP TABLE pad"); // its objects go to the trash, which the mount empties early while the disk is full
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            while (Files.getFileStore(w.mnt).getUsableSpace() < total / 2) {
                assertTrue(System.nanoTime() < deadline, "no room made within 90 s: "
                        + Files.getFileStore(w.mnt).getUsableSpace() + " bytes free");
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(500)); // poll: the mount's session looks every 20 s
            }
            Batches.createPad(ch);
            for (int i = 0; i < 10; i++) {
                Batches.insertPad(ch, 0);
            }
            assertEquals("200000\n", ch.query("SELECT count() FROM pad"), "INSERTs work again");
            assertEquals("1000\n", ch.query("SELECT count() FROM keep"));
            String log = w.partfs.mountLogs();
            assertTrue(log.contains("trash: the local disk holding the objects is full"), log);
            ch.stop();
            Path detached = w.mnt.resolve("data/default/keep/detached");
            if (Files.exists(detached)) {
                try (var broken = Files.list(detached)) { // closed: an open directory keeps the umount below waiting
                    assertTrue(broken.findAny().isEmpty(), "no part of keep found broken");
                }
            }
            w.partfs.ok("umount", w.mnt.toString());
            Partfs.Result fsck = w.partfs.run("fsck", "--meta", meta);
            assertEquals(0, fsck.exit(), fsck.all());
        }
    }
}
