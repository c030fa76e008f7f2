package io.partfs.engine.object;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.S3Server;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * An https S3 endpoint whose certificate no CA of the JVM signed (self-signed, as a private CA's
 * would look to it): refused with a message that says what to do, accepted with the certificate
 * given as a CA bundle; bad bundles are refused in one line.
 */
class S3TlsTest {
    private static final String PASSWORD = "partfs-test-keystore";

    @TempDir
    static Path dir;
    static S3Server server;
    static Path pem;

    @BeforeAll
    static void start() throws Exception {
        Path keyStore = dir.resolve("server.p12");
        pem = dir.resolve("ca.pem");
        keytool("-genkeypair", "-alias", "s3", "-keyalg", "RSA", "-keysize", "2048", "-validity", "2",
                "-dname", "CN=127.0.0.1", "-ext", "SAN=IP:127.0.0.1", "-storetype", "PKCS12",
                "-keystore", keyStore.toString(), "-storepass", PASSWORD, "-keypass", PASSWORD);
        keytool("-exportcert", "-rfc", "-alias", "s3", "-keystore", keyStore.toString(), "-storepass", PASSWORD,
                "-file", pem.toString());
        server = S3Server.startTls(keyStore, PASSWORD);
    }

    @AfterAll
    static void stop() throws Exception {
        if (server != null) {
            server.close();
        }
    }

    private static void keytool(String... args) throws Exception {
        List<String> cmd = new java.util.ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "keytool").toString());
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "keytool did not finish");
        assertEquals(0, p.exitValue(), "keytool " + args[0] + ": " + out);
    }

    private StorageUrl url(String bucket) {
        return StorageUrl.parse("s3://" + bucket + "/vol?endpoint=" + server.endpoint() + "&path-style=true");
    }

    @Test
    void anUntrustedCertificateIsRefusedWithWhatToDo() {
        IOException e = assertThrows(IOException.class, () -> {
            try (ObjectStore s = url("tls-refused").open(new StorageUrl.Credentials(S3Server.ACCESS_KEY, S3Server.SECRET_KEY), true, 1, java.time.Duration.ofSeconds(60))) {
                s.put("k", new byte[] {1});
            }
        });
        assertTrue(e.getMessage().contains("TLS certificate") && e.getMessage().contains("--ca-bundle"), e.getMessage());
        assertEquals(1, e.getMessage().lines().count(), e.getMessage());
        assertTrue(!e.getMessage().contains(S3Server.SECRET_KEY), "no secret in the message");
    }

    @Test
    void theCertificateGivenAsCaBundleIsTrusted() throws IOException {
        StorageUrl.Credentials c = new StorageUrl.Credentials(S3Server.ACCESS_KEY, S3Server.SECRET_KEY).withCaBundle(pem);
        try (ObjectStore s = url("tls-trusted").open(c, true, 1, java.time.Duration.ofSeconds(60))) {
            byte[] data = "over https".getBytes();
            s.put("a/b", data);
            assertArrayEquals(data, s.get("a/b", 0, -1));
        }
    }

    @Test
    void aMissingOrEmptyBundleIsRefusedInOneLine() throws IOException {
        StorageUrl.Credentials keys = new StorageUrl.Credentials(S3Server.ACCESS_KEY, S3Server.SECRET_KEY);
        IOException missing = assertThrows(IOException.class, () -> url("tls-bad").open(keys.withCaBundle(dir.resolve("none.pem")), false, 1, java.time.Duration.ofSeconds(60)));
        assertTrue(missing.getMessage().contains("does not exist"), missing.getMessage());
        Path empty = Files.writeString(dir.resolve("empty.pem"), "not a certificate\n");
        IOException notPem = assertThrows(IOException.class, () -> url("tls-bad").open(keys.withCaBundle(empty), false, 1, java.time.Duration.ofSeconds(60)));
        assertTrue(notPem.getMessage().contains("CA bundle"), notPem.getMessage());
        assertEquals(1, notPem.getMessage().lines().count(), notPem.getMessage());
    }

    @Test
    void anHttpEndpointNeverReadsTheBundle() throws Exception {
        try (S3Server plain = S3Server.start()) {
            StorageUrl http = StorageUrl.parse("s3://tls-http/vol?endpoint=" + plain.endpoint() + "&path-style=true");
            StorageUrl.Credentials c = new StorageUrl.Credentials(S3Server.ACCESS_KEY, S3Server.SECRET_KEY)
                    .withCaBundle(dir.resolve("none.pem"));
            try (ObjectStore s = http.open(c, true, 1, java.time.Duration.ofSeconds(60))) {
                s.put("k", new byte[] {7});
                assertArrayEquals(new byte[] {7}, s.get("k", 0, -1));
            }
        }
    }
}
