package io.partfs.engine.meta;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.TestCertificate;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Metadata in Redis over TLS ({@code rediss://}), as managed Redis services and Redis set up with
 * a private CA serve it: a real redis-server with a TLS port whose certificate no CA of the JVM
 * signed. Given the CA's PEM file ({@code ?tls-ca-cert-file=}) the store serves reads and
 * transactions (both of its connections' kinds) over TLS; without it the connection is refused
 * with one line that says what to give. The same for a client certificate Redis asks for.
 */
class RedisTlsTest {
    @TempDir
    static Path dir;
    static TestCertificate cert;
    static RedisServer redis;
    static int tlsPort;

    @BeforeAll
    static void start() throws Exception {
        cert = TestCertificate.create(dir);
        tlsPort = RedisServer.freePort();
        redis = RedisServer.start("--tls-port", Integer.toString(tlsPort), "--tls-cert-file", cert.certificatePem().toString(),
                "--tls-key-file", cert.privateKeyPem().toString(), "--tls-ca-cert-file", cert.certificatePem().toString(),
                "--tls-auth-clients", "no");
    }

    @AfterAll
    static void stop() throws Exception {
        if (redis != null) {
            redis.close();
        }
    }

    private static String url(String query) {
        return "rediss://127.0.0.1:" + tlsPort + "/2" + query;
    }

    @Test
    void withItsCaGivenRedisOverTlsServesReadsAndTransactions() throws Exception {
        try (KvStore kv = new RedisKvStore(url("?tls-ca-cert-file=" + cert.certificatePem()))) {
            assertTrue(kv.describe().startsWith("rediss://127.0.0.1:" + tlsPort + "/2"), kv.describe());
            kv.update(tx -> {
                tx.put("n", "1".getBytes(StandardCharsets.UTF_8));
                return null;
            });
            kv.update(tx -> { // a read, so the commit WATCHes it: MULTI/EXEC on a transaction connection
                long n = Long.parseLong(new String(tx.get("n"), StandardCharsets.UTF_8));
                tx.put("n", Long.toString(n + 1).getBytes(StandardCharsets.UTF_8));
                return null;
            });
            assertEquals("2", new String(kv.read(r -> r.get("n")), StandardCharsets.UTF_8));
        }
        try (KvStore plain = new RedisKvStore(redis.url(2))) {
            assertEquals("2", new String(plain.read(r -> r.get("n")), StandardCharsets.UTF_8), "written over TLS, read on the plain port");
        }
    }

    /**
     * {@code rediss-sentinel://}: Sentinel on a TLS port, watching the master on its TLS port, so
     * that the master it names is reached over TLS too; the CA given in the URL serves both.
     */
    @Test
    void aSentinelOverTlsLeadsToTheMasterOverTls() throws Exception {
        int sentinelTls = RedisServer.freePort();
        try (RedisServer sentinel = RedisServer.startSentinel("partfs-tls", tlsPort, "tls-port " + sentinelTls,
                "tls-cert-file " + cert.certificatePem(), "tls-key-file " + cert.privateKeyPem(),
                "tls-ca-cert-file " + cert.certificatePem(), "tls-auth-clients no", "tls-replication yes");
             KvStore kv = new RedisKvStore("rediss-sentinel://127.0.0.1:" + sentinelTls + "/3?tls-ca-cert-file=" + cert.certificatePem()
                     + "#partfs-tls")) {
            assertEquals("rediss-sentinel://127.0.0.1:" + sentinelTls + "/3#partfs-tls", kv.describe());
            kv.update(tx -> {
                tx.put("s", "over TLS".getBytes(StandardCharsets.UTF_8));
                return null;
            });
            try (KvStore plain = new RedisKvStore(redis.url(3))) {
                assertEquals("over TLS", new String(plain.read(r -> r.get("s")), StandardCharsets.UTF_8), "written to the master");
            }
            IOException untrusted = assertThrows(IOException.class,
                    () -> new RedisKvStore("rediss-sentinel://127.0.0.1:" + sentinelTls + "/3#partfs-tls").close());
            assertEquals(1, untrusted.getMessage().lines().count(), untrusted.getMessage());
            assertTrue(untrusted.getMessage().contains("?tls-ca-cert-file=FILE"), untrusted.getMessage());
        }
    }

    @Test
    void anUntrustedCertificateIsRefusedWithWhatToGive() {
        IOException e = assertThrows(IOException.class, () -> new RedisKvStore(url("")).close());
        assertEquals(1, e.getMessage().lines().count(), e.getMessage());
        assertEquals("cannot reach Redis at rediss://127.0.0.1:" + tlsPort + "/2: its TLS certificate is not trusted (unable to "
                + "find valid certification path to requested target): give the PEM file of the CA that signed it as "
                + "?tls-ca-cert-file=FILE in the URL", e.getMessage());
    }

    /**
     * A Redis that asks clients for a certificate (tls-auth-clients yes) serves one that gives it
     * ({@code tls-cert-file} and {@code tls-key-file}: here the server's own, which its CA file
     * holds) and refuses one that does not, in one line.
     */
    @Test
    void aClientCertificateIsGivenWhenRedisAsksForOne() throws Exception {
        int mutualPort = RedisServer.freePort();
        try (RedisServer mutual = RedisServer.start("--tls-port", Integer.toString(mutualPort),
                "--tls-cert-file", cert.certificatePem().toString(), "--tls-key-file", cert.privateKeyPem().toString(),
                "--tls-ca-cert-file", cert.certificatePem().toString(), "--tls-auth-clients", "yes")) {
            String base = "rediss://127.0.0.1:" + mutualPort + "/2?tls-ca-cert-file=" + cert.certificatePem();
            try (KvStore kv = new RedisKvStore(base + "&tls-cert-file=" + cert.certificatePem() + "&tls-key-file=" + cert.privateKeyPem())) {
                kv.update(tx -> {
                    tx.put("m", "1".getBytes(StandardCharsets.UTF_8));
                    return null;
                });
                assertEquals("1", new String(kv.read(r -> r.get("m")), StandardCharsets.UTF_8));
            }
            IOException without = assertThrows(IOException.class, () -> new RedisKvStore(base).close());
            assertEquals("cannot reach Redis at rediss://127.0.0.1:" + mutualPort + "/2: it asks for a client certificate (Received "
                    + "fatal alert: certificate_required): give its PEM file and the key's as ?tls-cert-file=FILE&tls-key-file=FILE "
                    + "in the URL", without.getMessage());
        }
        IOException half = assertThrows(IOException.class, () -> new RedisKvStore(url("?tls-cert-file=" + cert.certificatePem())).close());
        assertEquals("invalid Redis URL '" + url("?tls-cert-file=" + cert.certificatePem()) + "': give tls-cert-file and tls-key-file "
                + "together (the client certificate and its key)", half.getMessage());
        IOException swapped = assertThrows(IOException.class, () -> new RedisKvStore(url("?tls-cert-file=" + cert.privateKeyPem()
                + "&tls-key-file=" + cert.certificatePem())).close());
        assertEquals(1, swapped.getMessage().lines().count(), swapped.getMessage());
        assertTrue(swapped.getMessage().contains("cannot use the client certificate"), swapped.getMessage());
    }

    @Test
    void aCaFileThatIsMissingOrNoCertificateIsRefusedInOneLine() throws Exception {
        IOException missing = assertThrows(IOException.class, () -> new RedisKvStore(url("?tls-ca-cert-file=" + dir.resolve("none.pem"))).close());
        assertEquals("invalid Redis URL 'rediss://127.0.0.1:" + tlsPort + "/2?tls-ca-cert-file=" + dir.resolve("none.pem")
                + "': CA bundle " + dir.resolve("none.pem") + " does not exist: give a PEM file of the CA certificates that sign the "
                + "server's", missing.getMessage());
        Path junk = Files.writeString(dir.resolve("junk.pem"), "not a certificate\n");
        IOException notPem = assertThrows(IOException.class, () -> new RedisKvStore(url("?tls-ca-cert-file=" + junk)).close());
        assertEquals(1, notPem.getMessage().lines().count(), notPem.getMessage());
        assertTrue(notPem.getMessage().startsWith("invalid Redis URL"), notPem.getMessage());
        IOException plain = assertThrows(IOException.class,
                () -> new RedisKvStore("redis://127.0.0.1:" + tlsPort + "/2?tls-ca-cert-file=" + cert.certificatePem()).close());
        assertEquals("invalid Redis URL 'redis://127.0.0.1:" + tlsPort + "/2?tls-ca-cert-file=" + cert.certificatePem()
                + "': tls-ca-cert-file is for Redis over TLS: write rediss://", plain.getMessage());
    }
}
