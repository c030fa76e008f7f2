package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.S3Server;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Virtual-hosted S3 addressing (the bucket in the host name, as AWS S3 and most providers want
 * it), end to end through scripts/partfs against s3proxy taking virtual-hosted requests. Every
 * other S3 test uses path-style. The sidecar resolves names from a hosts file of the test's own
 * ({@code -Djdk.net.hosts.file}, a JDK property: no DNS and no change to /etc/hosts), which
 * knows only the bucket's host name: a request that named the endpoint's host itself, as
 * path-style does, could not be sent at all. Nor does it know this machine's own name, which a
 * mount must not need (it once failed with "Unable to resolve host").
 */
class VirtualHostedS3IT {
    private static final String DOMAIN = "s3.partfs.test";
    private static final String BUCKET = "partfs-vh";

    private Path dir;
    private Path mnt;
    private Partfs partfs;

    @BeforeEach
    void setUp() throws Exception {
        dir = Files.createTempDirectory("partfs-cli-");
        mnt = dir.resolve("mnt");
        Path hosts = dir.resolve("hosts");
        Files.writeString(hosts, "127.0.0.1 " + BUCKET + "." + DOMAIN + "\n");
        partfs = new Partfs(dir.resolve("home"))
                .env("PARTFS_JAVA_EXTRA_OPTS", "-Djdk.net.hosts.file=" + hosts)
                .env("PARTFS_ACCESS_KEY", S3Server.ACCESS_KEY).env("PARTFS_SECRET_KEY", S3Server.SECRET_KEY);
    }

    @AfterEach
    void tearDown() throws Exception {
        partfs.unmountAndDelete(mnt, dir);
    }

    /**
     * A volume formatted and mounted with the bucket in the host name writes its blocks into the
     * bucket, and a second mount with an empty block cache reads them back from there; the same
     * endpoint with path-style=true cannot even be reached (its host name is unknown), so the
     * first mount's requests were virtual-hosted.
     */
    @Test
    void aVolumeOnVirtualHostedS3KeepsItsFilesInTheBucket() throws Exception {
        Path objects = Files.createDirectories(dir.resolve("s3"));
        try (S3Server s3 = S3Server.startVirtualHosted(objects, DOMAIN)) {
            String storage = "s3://" + BUCKET + "/vol?endpoint=" + s3.endpoint(DOMAIN);
            String meta = dir.resolve("meta").toString();
            Partfs.Result format = partfs.ok("format", "--meta", meta, "--storage", storage, "--block-size", "1M", "vh");
            assertTrue(format.all().contains("s3://" + BUCKET + "/vol/"), format.all());

            byte[] big = new byte[(3 << 20) + 7];
            new Random(11).nextBytes(big);
            partfs.ok("mount", "--meta", meta, mnt.toString(), "--background", "--cache-dir", dir.resolve("cache1").toString());
            Files.createDirectories(mnt.resolve("db/t/all_1_1_0"));
            Files.write(mnt.resolve("db/t/all_1_1_0/c.bin"), big);
            Files.writeString(mnt.resolve("db/t/all_1_1_0/count.txt"), "3");
            partfs.ok("umount", mnt.toString()); // uploads everything before it returns

            List<Path> stored;
            try (Stream<Path> files = Files.walk(objects)) {
                stored = files.filter(Files::isRegularFile).map(objects::relativize).toList();
            }
            assertEquals(5, stored.stream().filter(f -> f.startsWith(BUCKET + "/vol/vh/chunks")).count(),
                    "the 4 blocks of c.bin and count.txt's, in the bucket: " + stored);

            partfs.ok("mount", "--meta", meta, mnt.toString(), "--background", "--cache-dir", dir.resolve("cache2").toString());
            assertArrayEquals(big, Files.readAllBytes(mnt.resolve("db/t/all_1_1_0/c.bin")));
            String host = Files.readString(Path.of("/proc/sys/kernel/hostname")).trim();
            Partfs.Result status = partfs.ok("status", mnt.toString());
            assertTrue(status.out().contains(": " + host + " pid "), "the session names this machine: " + status.out());
            assertEquals("3", Files.readString(mnt.resolve("db/t/all_1_1_0/count.txt")));
            partfs.ok("umount", mnt.toString());

            Partfs.Result pathStyle = partfs.run("format", "--meta", dir.resolve("meta2").toString(), "--storage",
                    storage + "&path-style=true", "--block-size", "1M", "vh");
            assertNotEquals(0, pathStyle.exit(), pathStyle.all());
            List<String> said = Partfs.errorLines(pathStyle);
            assertEquals(1, said.size(), pathStyle.all());
            // the JDK names the hosts file when it looked the name up, and the name alone when the
            // lookup's failure was still cached (10 s): which one the last retry meets depends on timing
            assertTrue(said.get(0).matches(java.util.regex.Pattern.quote("partfs: check bucket " + BUCKET + " failed: cannot reach s3://"
                    + BUCKET + "/vol/ at " + s3.endpoint(DOMAIN) + " (path-style) (UnknownHostException: ")
                    + "(Unable to resolve host )?" + java.util.regex.Pattern.quote(DOMAIN) + "( in hosts file \\S+)?"
                    + java.util.regex.Pattern.quote("): check the endpoint and the network")), said.get(0));
        }
    }
}
