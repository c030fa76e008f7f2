package io.partfs.engine.object;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.S3Server;
import io.partfs.engine.testing.TestCertificate;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
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
    @TempDir
    static Path dir;
    static S3Server server;
    static Path pem;

    @BeforeAll
    static void start() throws Exception {
        TestCertificate cert = TestCertificate.create(dir);
        pem = cert.certificatePem();
        server = S3Server.startTls(cert.keyStore(), cert.password());
    }

    @AfterAll
    static void stop() throws Exception {
        if (server != null) {
            server.close();
        }
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
