package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.S3Server;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;

/**
 * The metadata server crashes under a running ClickHouse: Redis (persisting every write to its
 * append-only file, as a volume's Redis must) is killed with SIGKILL while ClickHouse inserts
 * into a table on the mount, and restarted 3 s later by its supervisor. A metadata transaction
 * waits up to 30 s for Redis to come back, so no INSERT fails: those in flight during the
 * outage finish after it, every batch is whole, and the mount, a restarted ClickHouse and fsck
 * find the volume as it should be. The mount's log says when Redis went away and when it came back.
 */
class RedisRestartIT {
    private static final int BEFORE = 5;
    private static final int AFTER = 5;

    @Test
    void insertsRideThroughAKilledAndRestartedRedis() throws Exception {
        try (Workdir w = Workdir.create("partfs-redis-restart-");
             RedisServer redis = RedisServer.start("--appendonly", "yes", "--appendfsync", "always");
             S3Server s3 = S3Server.start();
             ClickHouseServer ch = new ClickHouseServer(w.dir.resolve("ch"), w.mnt)) {
            Path mnt = w.mnt;
            Partfs partfs = w.partfs;
            String meta = redis.url(0);
            partfs.formatOnS3(meta, s3.endpoint(), "partfs-redis-restart", "vol");
            partfs.ok("mount", mnt.toString(), "--meta", meta, "--background", "--http-address", "none");
            ch.start();
            Batches.createTable(ch);

            Batches.Writer writer = new Batches.Writer(ch);
            writer.awaitAcknowledged(BEFORE);
            redis.kill();
            int atKill = writer.acknowledged.size();
            LockSupport.parkNanos(TimeUnit.SECONDS.toNanos(3)); // the outage: Redis is down this long
            int duringOutage = writer.acknowledged.size() - atKill;
            redis.restart();
            writer.awaitAcknowledged(atKill + AFTER);
            assertEquals("stopped", writer.stop(), "no INSERT failed: " + redis.log());
            System.out.printf("Redis down 3 s: %d INSERTs acknowledged before, %d during the outage, %d in all%n",
                    atKill, duringOutage, writer.acknowledged.size());
            assertTrue(duringOutage <= 1, "an INSERT needs its metadata: at most the one committed as Redis died, "
                    + duringOutage + " acknowledged while it was down");

            String log = partfs.mountLogs();
            assertTrue(log.contains("lost the connection to Redis at") && log.matches("(?s).*reconnected to Redis at \\S+ after [0-9.]+ s away.*"),
                    "the mount said when Redis went and came back:\n" + log);
            assertTrue(!log.contains("ConnectionWatchdog"), "and not once per reconnect attempt:\n" + log);

            int[] all = writer.acknowledgedBatches();
            assertEquals(Batches.wholeBatches(all), Batches.read(ch), "every batch whole, once");
            ch.stop();
            ch.start();
            assertEquals(Batches.wholeBatches(all), Batches.read(ch), "after a restart of ClickHouse");
            Batches.assertNothingDetached(mnt, "after the Redis restart");
            ch.stop();
            Partfs.Result u = partfs.run("umount", mnt.toString());
            assertEquals(0, u.exit(), u.all());
            Partfs.Result fsck = partfs.run("fsck", "--meta", meta);
            assertEquals(0, fsck.exit(), fsck.all());
            assertTrue(fsck.out().contains("fsck: OK"), fsck.out());
            assertEquals(List.of(), Partfs.errorLines(u), "umount reported nothing");
        }
    }
}
