package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.LatencyProxy;
import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.S3Server;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * ClickHouse on a PartFS mount while its object store is unreachable for a while: an INSERT
 * made during the outage fails (its part's files cannot be uploaded, so the rename that would
 * make the part exist reports EIO) and leaves nothing behind; the INSERTs before it are intact,
 * the first one after the store is back succeeds, nothing is found broken when ClickHouse
 * restarts, and fsck finds every block. The outage is real: the proxy in front of s3proxy cuts
 * every connection and refuses new ones. The mount has the default retries: the failing INSERT
 * took 57 s here; when the rename tried each file of the part again, one after another, it had
 * not failed within the 120 s of the test's HTTP request.
 */
class ObjectStoreOutageIT {
    private static final int ROWS = 20_000;

    @Test
    void anInsertDuringAnOutageFailsCleanlyAndTheTableCarriesOnAfterIt() throws Exception {
        Path dir = Files.createTempDirectory("partfs-outage-");
        Path mnt = dir.resolve("mnt");
        Partfs partfs = new Partfs(dir.resolve("home"))
                .env("PARTFS_ACCESS_KEY", S3Server.ACCESS_KEY).env("PARTFS_SECRET_KEY", S3Server.SECRET_KEY);
        try (RedisServer redis = RedisServer.start(); S3Server s3 = S3Server.start();
             LatencyProxy proxy = new LatencyProxy(s3.endpoint().getPort());
             ClickHouseServer ch = new ClickHouseServer(dir.resolve("ch"), mnt)) {
            String meta = redis.url(0);
            String storage = "s3://partfs-outage/vol?endpoint=http://127.0.0.1:" + proxy.port() + "&path-style=true";
            partfs.ok("format", "--meta", meta, "--storage", storage, "--block-size", "1M", "vol");
            partfs.ok("mount", mnt.toString(), "--meta", meta, "--background", "--http-address", "none");
            ch.start();
            ch.query("CREATE TABLE t (batch UInt32, i UInt32, s String) ENGINE = MergeTree"
                    + " PARTITION BY batch % 3 ORDER BY (batch, i)");
            for (int batch = 1; batch <= 4; batch++) {
                insert(ch, batch);
            }

            proxy.setDown(true);
            long started = System.nanoTime();
            IOException failed = assertThrows(IOException.class, () -> insert(ch, 5), "an INSERT with S3 unreachable");
            double seconds = (System.nanoTime() - started) / 1e9;
            System.out.printf("the INSERT during the outage failed after %.1f s: %s%n", seconds, failed.getMessage());
            assertTrue(failed.getMessage().contains("I/O error"),
                    "ClickHouse reports the I/O error: " + failed.getMessage());
            proxy.setDown(false);

            insert(ch, 6);
            assertEquals(batches(1, 2, 3, 4, 6), rows(ch), "the failed INSERT left nothing, the others are whole");
            ch.stop();
            ch.start();
            assertEquals(batches(1, 2, 3, 4, 6), rows(ch), "after a restart of ClickHouse");
            Path detached = mnt.resolve("data/default/t/detached");
            try (Stream<Path> s = Files.exists(detached) ? Files.list(detached) : Stream.empty()) {
                assertEquals(List.of(), s.map(p -> p.getFileName().toString()).toList(), "no part found broken");
            }
            ch.stop();

            Partfs.Result u = partfs.run("umount", mnt.toString());
            assertEquals(0, u.exit(), "umount has nothing left to upload: " + u.all());
            Partfs.Result fsck = partfs.run("fsck", "--meta", meta);
            assertEquals(0, fsck.exit(), fsck.all());
            assertTrue(fsck.out().contains("fsck: OK"), fsck.out());
        } finally {
            partfs.unmountAndDelete(mnt, dir);
        }
    }

    private static void insert(ClickHouseServer ch, int batch) throws IOException {
        ch.query("INSERT INTO t SELECT " + batch + ", toUInt32(number), toString(number * " + batch
                + ") FROM system.numbers LIMIT " + ROWS);
    }

    /** Each batch's row count, sum of i and sum of s as numbers, as the table should hold them. */
    private static TreeMap<Integer, String> batches(int... present) {
        long sumI = (long) ROWS * (ROWS - 1) / 2;
        TreeMap<Integer, String> m = new TreeMap<>();
        for (int b : present) {
            m.put(b, ROWS + " " + sumI + " " + sumI * b);
        }
        return m;
    }

    private static TreeMap<Integer, String> rows(ClickHouseServer ch) throws IOException {
        TreeMap<Integer, String> m = new TreeMap<>();
        for (String line : ch.query("SELECT batch, count(), sum(i), sum(toUInt64(s)) FROM t GROUP BY batch").split("\n")) {
            if (!line.isBlank()) {
                String[] f = line.split("\t");
                m.put(Integer.parseInt(f[0]), f[1] + " " + f[2] + " " + f[3]);
            }
        }
        return m;
    }
}
