package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.fuse.Mounts;
import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.TempDirs;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * Two machines mount one Redis volume and, by a configuration mistake, start ClickHouse on the
 * same data path. ClickHouse guards its path with flock(2) on its {@code status} file; PartFS
 * holds that lock for the whole volume, so the second server refuses to start as it would on
 * one machine, instead of both writing the same tables. (The two machines are two mounts with
 * their own data homes, here on one machine.)
 */
class SharedDataPathIT {
    @Test
    void aSecondClickHouseOnTheSameDataPathThroughAnotherMountRefusesToStart() throws Exception {
        Path dir = Files.createTempDirectory("partfs-shared-path-");
        Path mntA = dir.resolve("mnt-a");
        Path mntB = dir.resolve("mnt-b");
        Partfs machineA = new Partfs(dir.resolve("home-a"));
        Partfs machineB = new Partfs(dir.resolve("home-b"));
        try (RedisServer redis = RedisServer.start()) {
            try {
                mountTwiceAndStartTwice(redis.url(0), dir, machineA, mntA, machineB, mntB);
            } finally { // while Redis still runs: an unmount flushes through it
                for (Path m : new Path[] {mntA, mntB}) {
                    if (Mounts.isMounted(m)) {
                        (m == mntA ? machineA : machineB).run("umount", m.toString());
                    }
                }
            }
        } finally {
            TempDirs.deleteRecursively(dir);
        }
    }

    private static void mountTwiceAndStartTwice(String meta, Path dir, Partfs machineA, Path mntA, Partfs machineB, Path mntB)
            throws Exception {
        assertEquals(0, machineA.run("format", "--meta", meta, "--storage", dir.resolve("objects").toString(), "vol").exit());
        for (Partfs.Result r : new Partfs.Result[] {
                machineA.run("mount", "--meta", meta, mntA.toString(), "--background", "--http-address", "none"),
                machineB.run("mount", "--meta", meta, mntB.toString(), "--background", "--http-address", "none")}) {
            assertEquals(0, r.exit(), r.all());
        }
        try (ClickHouseServer first = new ClickHouseServer(dir.resolve("conf-a"), mntA);
             ClickHouseServer second = new ClickHouseServer(dir.resolve("conf-b"), mntB)) {
            first.start();
            first.query("CREATE TABLE t (d Date, x UInt64) ENGINE = MergeTree PARTITION BY d ORDER BY x");
            IOException refused = assertThrows(IOException.class, second::start);
            assertTrue(refused.getMessage().contains("Another server instance in same directory is already running"),
                    refused.getMessage());
            assertEquals("0", first.query("SELECT count() FROM t").trim(), "the first server is unharmed");

            first.stop(); // its status file closed: the lock goes
            second.start();
            assertEquals("0", second.query("SELECT count() FROM t").trim(), "the table the first created");
            second.stop();
        }
    }
}
