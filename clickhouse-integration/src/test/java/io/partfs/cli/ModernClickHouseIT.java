package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.fuse.Mounts;
import io.partfs.engine.testing.RedisServer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.testcontainers.containers.BindMode;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.junit.jupiter.Testcontainers;
import org.testcontainers.utility.MountableFile;

/**
 * The modern path against a current ClickHouse image: the setting is accepted (obsolete since
 * 23.9) and kept in the DDL, tables live in Atomic {@code store/} directories, and the disk comes
 * from {@code <storage_configuration>} written by {@code partfs clickhouse config}. The host's
 * PartFS mount is bind-mounted into the container at the same path; the container shares the
 * host network so that url() reaches the sidecar on loopback.
 *
 * <p>Runs only where a Docker engine exists; elsewhere (these build machines) JUnit reports it
 * skipped.
 */
@Testcontainers(disabledWithoutDocker = true)
class ModernClickHouseIT {
    private static final String IMAGE = "clickhouse/clickhouse-server:24.8";

    private Path dir;
    private Path mnt;
    private Partfs partfs;
    private GenericContainer<?> server;

    @BeforeEach
    void setUp() throws Exception {
        dir = Files.createTempDirectory("partfs-modern-");
        mnt = dir.resolve("mnt");
        partfs = new Partfs(dir.resolve("home")).env(ClickHouseOptions.PASSWORD_ENV, "");
    }

    @AfterEach
    void tearDown() throws Exception {
        if (server != null) {
            server.stop();
        }
        partfs.unmountAndDelete(mnt, dir);
    }


    @Test
    void settingAcceptedAtomicStoreLayoutAndStoragePolicyDisk() throws Exception {
        int chPort = RedisServer.freePort();
        int tcpPort = RedisServer.freePort();
        int sidecarPort = RedisServer.freePort();
        String ch = "http://127.0.0.1:" + chPort;
        String sidecar = "http://127.0.0.1:" + sidecarPort;
        partfs.ok("mount", mnt.toString(), "--background", "--disk-name", "partfs", "--http-address", "127.0.0.1:" + sidecarPort, "--clickhouse", ch);
        Path configD = Files.createDirectories(dir.resolve("config.d"));
        partfs.ok("clickhouse", "config", "--mountpoint", mnt.toString(), "--style", "storage-policy", "--disk-name", "partfs",
                "--write", configD.toString());
        Files.writeString(configD.resolve("ports.xml"), "<clickhouse><http_port>" + chPort + "</http_port><tcp_port>" + tcpPort
                + "</tcp_port><listen_host>127.0.0.1</listen_host></clickhouse>");
        server = new GenericContainer<>(IMAGE).withNetworkMode("host")
                .withFileSystemBind(mnt.toString(), mnt.toString(), BindMode.READ_WRITE)
                .withCopyFileToContainer(MountableFile.forHostPath(configD.resolve("partfs.xml")), "/etc/clickhouse-server/config.d/partfs.xml")
                .withCopyFileToContainer(MountableFile.forHostPath(configD.resolve("ports.xml")), "/etc/clickhouse-server/config.d/ports.xml")
                .waitingFor(Wait.forLogMessage(".*Ready for connections.*", 1).withStartupTimeout(Duration.ofMinutes(3)));
        server.start();

        Partfs.Result created = partfs.ok("sql", "--clickhouse", ch, "--sidecar", sidecar,
                "CREATE TABLE default.m (d Date, k UInt64) ENGINE = MergeTree PARTITION BY d ORDER BY k "
                        + "SETTINGS storage_policy = 'partfs', use_metadata_cache = true");
        assertTrue(created.out().contains("with use_metadata_cache in its DDL"), created.all());
        partfs.ok("sql", "--clickhouse", ch, "INSERT INTO default.m SELECT toDate('2020-01-01') + number % 3, number FROM numbers(3000)");
        Partfs.Result tables = partfs.ok("clickhouse", "tables", "--clickhouse", ch, "--sidecar", sidecar);
        String m = tables.out().lines().filter(l -> l.startsWith("default.m ")).findFirst().orElseThrow();
        assertTrue(m.contains("yes") && m.contains(mnt + "/store/"), tables.out());

        partfs.ok("clickhouse", "install", "--clickhouse", ch, "--sidecar", sidecar);
        Partfs.Result keys = partfs.ok("sql", "--clickhouse", ch, "SELECT key FROM partfs.merge_tree_metadata_cache WHERE key LIKE 'partfs:store/%' LIMIT 10");
        List<String> ten = keys.out().lines().toList();
        assertEquals(10, ten.size(), keys.all());
        for (String key : ten) {
            Partfs.Result hex = partfs.ok("sql", "--clickhouse", ch, "SELECT hex(value) FROM partfs.merge_tree_metadata_cache WHERE key = '" + key + "'");
            byte[] file = Files.readAllBytes(mnt.resolve(key.substring("partfs:".length())));
            assertEquals(HexFormat.of().withUpperCase().formatHex(file), hex.out().trim(), key);
        }
    }
}
