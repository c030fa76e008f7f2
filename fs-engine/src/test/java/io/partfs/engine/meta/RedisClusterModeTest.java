package io.partfs.engine.meta;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.partfs.engine.testing.Poll;
import io.partfs.engine.testing.RedisServer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * A Redis in cluster mode (Redis Cluster, a managed service's "cluster mode enabled") cannot
 * hold a volume: its transactions span keys of many hash slots, and only database 0 exists.
 * A real redis-server with cluster-enabled, one node owning every slot (so that a key is never
 * MOVED and what is refused is cluster mode itself), is refused in one line that says what to
 * use instead, whether or not the user may run INFO, and nothing is written.
 */
class RedisClusterModeTest {
    private static String refusal(int port) {
        return "Redis at redis://127.0.0.1:" + port + "/0 runs in cluster mode, which PartFS does not support (a volume's "
                + "transactions span keys of many hash slots): use a Redis without cluster mode, one primary with replicas, "
                + "reached through its primary endpoint or redis-sentinel://";
    }

    private static boolean clusterOk(RedisServer redis) {
        io.lettuce.core.RedisClient client = io.lettuce.core.RedisClient.create(redis.url(0));
        try (var c = client.connect()) {
            return c.sync().clusterInfo().contains("cluster_state:ok");
        } finally {
            client.shutdown();
        }
    }

    @Test
    void aRedisInClusterModeIsRefusedInOneLine() throws Exception {
        // the cluster bus port set apart: by default it is the port plus 10,000, which fails above 55535
        try (RedisServer redis = RedisServer.start("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                "--cluster-port", Integer.toString(RedisServer.freePort()))) {
            assertEquals("+OK", redis.command("CLUSTER ADDSLOTSRANGE 0 16383"));
            Poll.until(() -> clusterOk(redis), java.time.Duration.ofSeconds(30),
                    "cluster_state:ok"); // till then every key is refused CLUSTERDOWN
            assertEquals("+OK", redis.command("ACL SETUSER noinfo on >pw ~* &* +@all -info"));
            int port = redis.port();

            IOException atConnect = assertThrows(IOException.class, () -> new RedisKvStore(redis.url(0)).close());
            assertEquals(refusal(port), atConnect.getMessage(), "INFO cluster says so");

            IOException select = assertThrows(IOException.class,
                    () -> new RedisKvStore("redis://noinfo:pw@127.0.0.1:" + port + "/1").close());
            assertEquals(refusal(port).replace("/0 runs", "/1 runs"), select.getMessage(), "without INFO: the SELECT refused");

            try (KvStore kv = new RedisKvStore("redis://noinfo:pw@127.0.0.1:" + port + "/0")) {
                IOException txn = assertThrows(IOException.class, () -> kv.update(tx -> {
                    tx.put("inode1", "a".getBytes(StandardCharsets.UTF_8));
                    tx.put("dir1", "b".getBytes(StandardCharsets.UTF_8));
                    return null;
                }));
                assertEquals(refusal(port), txn.getMessage(), "without INFO: the transaction refused (CROSSSLOT)");
            }
            assertEquals(":0", redis.command("DBSIZE"), "nothing written");
        }
    }
}
