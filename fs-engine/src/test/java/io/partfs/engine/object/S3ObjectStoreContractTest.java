package io.partfs.engine.object;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.S3Server;
import java.net.URI;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The object store contract on a real S3 API (s3proxy over HTTP), plus S3-only behaviour. */
class S3ObjectStoreContractTest extends ObjectStoreContract {
    private static S3Server server;
    private static final AtomicInteger buckets = new AtomicInteger();

    @BeforeAll
    static void startServer() throws Exception {
        server = S3Server.start();
    }

    @AfterAll
    static void stopServer() throws Exception {
        server.close();
    }

    @Override
    protected ObjectStore newStore() throws Exception {
        S3ObjectStore s = new S3ObjectStore(server.config("contract-" + buckets.incrementAndGet()).prefix("pfx").build());
        s.ensureBucket();
        return s;
    }

    @Test
    void largeObjectsGoAsMultipartUploads() throws Exception {
        try (S3ObjectStore s = new S3ObjectStore(server.config("multipart").multipart(5 << 20, 5 << 20).build())) {
            s.ensureBucket();
            byte[] data = new byte[(12 << 20) + 17];
            new Random(7).nextBytes(data);
            s.put("big", data);
            assertArrayEquals(data, s.get("big", 0, -1));
            assertEquals(data.length, s.head("big").orElseThrow().size());
        }
    }

    @Test
    void prefixKeepsVolumesApartInOneBucket() throws Exception {
        try (S3ObjectStore a = new S3ObjectStore(server.config("shared").prefix("a").build());
             S3ObjectStore b = new S3ObjectStore(server.config("shared").prefix("b/").build())) {
            a.ensureBucket();
            a.put("k", new byte[] {1});
            b.put("k", new byte[] {2});
            assertArrayEquals(new byte[] {1}, a.get("k", 0, -1));
            assertArrayEquals(new byte[] {2}, b.get("k", 0, -1));
            assertEquals(1, a.listAll("").size());
        }
    }

    @Test
    void wrongSecretIsAccessDeniedWithoutRetriesOrSecretsInTheMessage() throws Exception {
        try (S3ObjectStore s = new S3ObjectStore(server.config("denied")
                .credentials(S3Server.ACCESS_KEY, "wrong-secret-value").maxAttempts(5).build())) {
            long start = System.nanoTime();
            ObjectStoreException e = assertThrows(ObjectStoreException.class, () -> s.put("k", new byte[1]));
            assertEquals(ObjectStoreException.Kind.ACCESS_DENIED, e.kind());
            assertTrue(e.getMessage().contains("check the access key"), e.getMessage());
            assertFalse(e.getMessage().contains("wrong-secret-value"), e.getMessage());
            assertFalse(e.getMessage().contains(S3Server.SECRET_KEY), e.getMessage());
            assertTrue(Duration.ofNanos(System.nanoTime() - start).toSeconds() < 5, "auth errors are not retried with backoff");
        }
    }

    @Test
    void unreachableEndpointIsUnavailableAfterRetries() throws Exception {
        int closedPort = RedisServer.freePort();
        try (S3ObjectStore s = new S3ObjectStore(S3Config.builder("nowhere").endpoint(URI.create("http://127.0.0.1:" + closedPort))
                .pathStyle(true).credentials("a", "b").maxAttempts(2).connectTimeout(Duration.ofSeconds(1)).build())) {
            ObjectStoreException e = assertThrows(ObjectStoreException.class, () -> s.get("k", 0, -1));
            assertEquals(ObjectStoreException.Kind.UNAVAILABLE, e.kind());
            assertTrue(e.getMessage().contains("cannot reach"), e.getMessage());
        }
    }

    @Test
    void checkAccessTellsWrongSecretsAndMissingBucketsApart() throws Exception {
        try (S3ObjectStore ok = new S3ObjectStore(server.config("access").prefix("vol/").build());
             S3ObjectStore denied = new S3ObjectStore(server.config("access").prefix("vol/")
                     .credentials(S3Server.ACCESS_KEY, "wrong-secret-value").maxAttempts(1).build());
             S3ObjectStore missing = new S3ObjectStore(server.config("no-such-bucket-either").build())) {
            ok.ensureBucket();
            ok.put("chunks/0/0/1_0_1", new byte[1]); // objects outside the probe prefix: the check needs none of them
            ok.checkAccess();
            assertEquals(ObjectStoreException.Kind.ACCESS_DENIED, assertThrows(ObjectStoreException.class, denied::checkAccess).kind());
            assertEquals(ObjectStoreException.Kind.NO_SUCH_BUCKET, assertThrows(ObjectStoreException.class, missing::checkAccess).kind());
        }
    }

    @Test
    void missingBucketSaysSo() throws Exception {
        try (S3ObjectStore s = new S3ObjectStore(server.config("no-such-bucket-here").build())) {
            ObjectStoreException e = assertThrows(ObjectStoreException.class, () -> s.put("k", new byte[1]));
            assertEquals(ObjectStoreException.Kind.NO_SUCH_BUCKET, e.kind(), e.getMessage());
        }
    }

    @Test
    void configNeverPrintsTheSecret() {
        S3Config c = server.config("xyz").build();
        assertFalse(c.toString().contains(S3Server.SECRET_KEY));
        assertFalse(c.describe().contains(S3Server.SECRET_KEY));
    }

    @Test
    void badConfigIsRejectedWithAUsefulMessage() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> S3Config.builder("Bad_Bucket").build());
        assertTrue(e.getMessage().contains("bucket"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> S3Config.builder("ok-bucket").endpoint(URI.create("ftp://host")).build());
        assertTrue(e.getMessage().contains("endpoint"), e.getMessage());
    }
}
