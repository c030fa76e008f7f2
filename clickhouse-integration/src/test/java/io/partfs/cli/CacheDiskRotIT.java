package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.S3Server;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * A block cache disk that returns other bytes than were cached (bit rot; or, as the cache does
 * not fsync, blocks a power loss left unwritten): one bit flipped in every cached block while
 * no mount runs. ClickHouse then starts on the next mount with every part whole and reads every
 * row as written, because each block fails its checksum on its first read and is fetched from
 * S3 again. With the checks turned off (sums never read), ClickHouse 18.16 did not start at
 * all on the damaged blocks (exit 70).
 */
class CacheDiskRotIT {
    @Test
    void clickHouseReadsEveryRowRightThroughACacheDiskThatFlippedABitInEveryBlock() throws Exception {
        try (Workdir w = Workdir.create("partfs-rot-"); RedisServer redis = RedisServer.start(); S3Server s3 = S3Server.start();
             ClickHouseServer ch = new ClickHouseServer(w.dir.resolve("ch"), w.mnt)) {
            String meta = redis.url(0);
            w.partfs.formatOnS3(meta, s3.endpoint(), "partfs-rot", "vol");
            String[] mount = {"mount", w.mnt.toString(), "--meta", meta, "--background", "--http-address", "none",
                    "--cache-dir", w.dir.resolve("cache").toString()};
            w.partfs.ok(mount);
            ch.start();
            Batches.createTable(ch);
            for (int batch = 1; batch <= 3; batch++) {
                Batches.insert(ch, batch);
            }
            assertEquals(Batches.wholeBatches(1, 2, 3), Batches.read(ch));
            ch.stop();
            assertEquals(0, w.partfs.run("umount", w.mnt.toString()).exit());

            int damaged = flipABitInEveryBlock(w.dir.resolve("cache"));
            assertTrue(damaged >= 3 * 8, "every file of the three parts was in the cache: " + damaged + " blocks");

            w.partfs.ok(mount);
            ch.start();
            assertEquals(Batches.wholeBatches(1, 2, 3), Batches.read(ch), "every row as written");
            Batches.assertNothingDetached(w.mnt, "after the cache disk rotted");
            assertEquals(List.of(), ch.logLines("broken", 5), "ClickHouse found no broken part at its start");
            ch.stop();
            assertTrue(w.partfs.mountLogs().contains("does not match its checksum"), "the mount said what it found");
            assertEquals(0, w.partfs.run("umount", w.mnt.toString()).exit());
        }
    }

    /** Flips one bit in the middle of every cached block file under {@code cache}; returns how many. */
    private static int flipABitInEveryBlock(Path cache) throws Exception {
        List<Path> blocks = new ArrayList<>();
        try (Stream<Path> s = Files.walk(cache)) {
            s.filter(Files::isRegularFile).filter(f -> !f.startsWith(cache.resolve("staging")))
                    .filter(f -> f.getParent().getFileName().toString().matches("[0-9a-f]{2}")).forEach(blocks::add);
        }
        int n = 0;
        for (Path f : blocks) {
            long at = Files.size(f) / 2;
            if (Files.size(f) == 0) {
                continue;
            }
            try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                ByteBuffer b = ByteBuffer.allocate(1);
                ch.read(b, at);
                b.put(0, (byte) (b.get(0) ^ 0x04)).position(0);
                ch.write(b, at);
            }
            n++;
        }
        return n;
    }
}
