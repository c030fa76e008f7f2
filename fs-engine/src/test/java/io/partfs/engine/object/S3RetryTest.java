package io.partfs.engine.object;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.FaultyProxy;
import io.partfs.engine.testing.FaultyProxy.Fault;
import io.partfs.engine.testing.LatencyProxy;
import io.partfs.engine.testing.S3Server;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Retries and errors against real failures: a proxy in front of s3proxy answers 503 or drops connections. */
class S3RetryTest {
    private static S3Server server;

    @BeforeAll
    static void start() throws Exception {
        server = S3Server.start();
        try (S3ObjectStore direct = new S3ObjectStore(server.config("retries").build())) {
            direct.ensureBucket();
        }
    }

    @AfterAll
    static void stop() throws Exception {
        server.close();
    }

    @Test
    void throttlingAndDroppedConnectionsAreRetried() throws Exception {
        try (FaultyProxy proxy = new FaultyProxy(server.endpoint());
             S3ObjectStore s3 = new S3ObjectStore(server.config("retries").endpoint(proxy.endpoint()).maxAttempts(5).build())) {
            proxy.failNext(Fault.SLOW_DOWN_503, Fault.DROP, Fault.SLOW_DOWN_503);
            s3.put("k", new byte[] {1, 2, 3});
            assertEquals(4, proxy.connections(), "three failed attempts, then one that got through");
            assertArrayEquals(new byte[] {1, 2, 3}, s3.get("k", 0, -1));
        }
    }

    /**
     * "Expect: 100-continue" would hold every PUT's body back a round trip for the server's
     * go-ahead (with 20 ms to the store a 128 KiB PUT took 48 ms instead of 27).
     */
    @Test
    void uploadsSendTheirBodyWithoutWaitingForTheServersGoAhead() throws Exception {
        try (FaultyProxy proxy = new FaultyProxy(server.endpoint())) {
            for (int size : new int[] {100, 4 << 20}) { // the second past the S3 client's own threshold for the header
                try (S3ObjectStore s3 = new S3ObjectStore(server.config("retries").endpoint(proxy.endpoint()).build())) {
                    s3.put("put-" + size, new byte[size]); // a new client: the first request of a connection
                }
            }
            assertEquals(2, proxy.requestHeads().size(), proxy.requestHeads().toString());
            for (String head : proxy.requestHeads()) {
                assertTrue(head.startsWith("PUT "), head);
                assertFalse(head.toLowerCase(java.util.Locale.ROOT).contains("\nexpect:"), head);
            }
        }
    }

    @Test
    void anAnswerCutOffMidBodyIsFetchedAgainWhole() throws Exception {
        byte[] data = new byte[1 << 20];
        new java.util.Random(7).nextBytes(data);
        try (S3ObjectStore direct = new S3ObjectStore(server.config("retries").build())) {
            direct.put("cut", data);
        }
        try (FaultyProxy proxy = new FaultyProxy(server.endpoint());
             S3ObjectStore s3 = new S3ObjectStore(server.config("retries").endpoint(proxy.endpoint()).maxAttempts(3).build())) {
            proxy.failNext(Fault.CUT_ANSWER);
            assertArrayEquals(data, s3.get("cut", 0, -1), "the whole object, not the part the first answer had");
            assertEquals(2, proxy.connections(), "the cut answer, then one whole");
        }
    }

    @Test
    void aListingThatFailsFailsTheWholeScan() throws Exception {
        try (FaultyProxy proxy = new FaultyProxy(server.endpoint());
             S3ObjectStore s3 = new S3ObjectStore(server.config("retries").endpoint(proxy.endpoint()).maxAttempts(1).build())) {
            proxy.failNext(Fault.DROP);
            ObjectStoreException e = assertThrows(ObjectStoreException.class, () -> s3.scan("vol/chunks/", 2, 4, o -> { }));
            assertEquals(ObjectStoreException.Kind.UNAVAILABLE, e.kind(), e.getMessage());
        }
    }

    @Test
    void aStoreWithoutMultiObjectDeleteGetsOneDeleteAKey() throws Exception {
        try (S3ObjectStore direct = new S3ObjectStore(server.config("retries").build())) {
            for (String k : new String[] {"m/a", "m/b", "m/c"}) {
                direct.put(k, new byte[1]);
            }
        }
        try (FaultyProxy proxy = new FaultyProxy(server.endpoint());
             S3ObjectStore s3 = new S3ObjectStore(server.config("retries").endpoint(proxy.endpoint()).maxAttempts(1).build())) {
            proxy.failNext(Fault.NOT_IMPLEMENTED_501); // the DeleteObjects request
            s3.deleteAll(java.util.List.of("m/a", "m/b"));
            s3.deleteAll(java.util.List.of("m/c"));
            assertEquals(java.util.List.of(), s3.listAll("m/"), "every key deleted, by single deletes after the refusal");
        }
    }

    /**
     * AWS answers a request signed for another region than the bucket's with 301 and the bucket's
     * region in a header (a HEAD with no body to read a code from): the error names the region to
     * give, at once, for a HEAD and a GET alike, and nothing is retried.
     */
    @Test
    void aBucketInAnotherRegionSaysWhichRegionToGive() throws Exception {
        try (FaultyProxy proxy = new FaultyProxy(server.endpoint());
             S3ObjectStore s3 = new S3ObjectStore(server.config("retries").endpoint(proxy.endpoint()).maxAttempts(3).build())) {
            proxy.failNext(Fault.WRONG_REGION_301, Fault.WRONG_REGION_301);
            ObjectStoreException get = assertThrows(ObjectStoreException.class, () -> s3.get("k", 0, -1));
            assertEquals("get k failed: bucket 'retries' is in region eu-central-1, not us-east-1: add region=eu-central-1 "
                    + "to the storage URL (or set $AWS_REGION)", get.getMessage());
            assertEquals(1, proxy.connections(), "not retried");
            ObjectStoreException head = assertThrows(ObjectStoreException.class, s3::ensureBucket);
            assertTrue(head.getMessage().endsWith(" failed: bucket 'retries' is in region eu-central-1, not us-east-1: "
                    + "add region=eu-central-1 to the storage URL (or set $AWS_REGION)"), head.getMessage());
            assertEquals(2, proxy.connections(), "not retried");
        }
    }

    @Test
    void givesUpAfterMaxAttemptsWithAClearError() throws Exception {
        try (FaultyProxy proxy = new FaultyProxy(server.endpoint());
             S3ObjectStore s3 = new S3ObjectStore(server.config("retries").endpoint(proxy.endpoint()).maxAttempts(3).build())) {
            proxy.failNext(Fault.DROP, Fault.DROP, Fault.DROP, Fault.DROP);
            ObjectStoreException e = assertThrows(ObjectStoreException.class, () -> s3.get("k", 0, -1));
            assertEquals(ObjectStoreException.Kind.UNAVAILABLE, e.kind(), e.getMessage());
            assertEquals(3, proxy.connections());
        }
    }

    @Test
    void anUploadCutOffMidBodySaysTheServerMayHaveRefusedIt() throws Exception {
        try (FaultyProxy proxy = new FaultyProxy(server.endpoint());
             S3ObjectStore s3 = new S3ObjectStore(server.config("retries").endpoint(proxy.endpoint()).maxAttempts(1).build())) {
            proxy.failNext(Fault.DROP);
            // the proxy closes the connection without reading, as s3proxy does with a wrong secret
            ObjectStoreException e = assertThrows(ObjectStoreException.class, () -> s3.put("big", new byte[8 << 20]));
            assertEquals(ObjectStoreException.Kind.UNAVAILABLE, e.kind(), "retried like any dropped connection");
            assertTrue(e.getMessage().contains("closed the connection while the data was being sent"), e.getMessage());
            assertTrue(e.getMessage().contains("check the access key"), e.getMessage());
        }
    }

    /**
     * Once a request has failed all its attempts for want of a connection, requests are not
     * sent until a probe gets an answer: an INSERT during an outage fails in one round of
     * retries, not one per request queued. The first answer ends that, and a later outage gets
     * all attempts again.
     */
    @Test
    void aStoreThatFailedAllTheAttemptsOfARequestGetsRequestsOnlyOnceAProbeIsAnswered() throws Exception {
        try (LatencyProxy proxy = new LatencyProxy(server.endpoint().getPort());
             S3ObjectStore s3 = new S3ObjectStore(server.config("retries")
                     .endpoint(java.net.URI.create("http://127.0.0.1:" + proxy.port())).maxAttempts(4).build())) {
            proxy.setDown(true);
            assertThrows(ObjectStoreException.class, () -> s3.get("outage", 0, -1));
            assertEquals(4, proxy.refused(), "the first request makes all its attempts");
            assertTrue(s3.unreachable());
            for (int i = 1; i <= 3; i++) {
                ObjectStoreException e = assertThrows(ObjectStoreException.class, () -> s3.put("outage", new byte[10]));
                assertEquals(ObjectStoreException.Kind.UNAVAILABLE, e.kind(), e.getMessage());
                assertTrue(e.getMessage().contains("did not answer a probe, so the request was not sent"), e.getMessage());
            }
            assertTrue(proxy.refused() <= 5 + 3, "one attempt, the probe's, at most each request: " + proxy.refused());
            long refused = proxy.refused();
            assertFalse(s3.answers(), "background work asking whether the store is back: no");
            assertEquals(refused + 1, proxy.refused(), "it asked with one probe");

            proxy.setDown(false);
            assertTrue(s3.answers(), "a probe gets an answer once the store is back");
            assertFalse(s3.unreachable());
            proxy.setDown(true);
            assertThrows(ObjectStoreException.class, () -> s3.get("outage", 0, -1));
            assertTrue(s3.unreachable(), "down again");
            proxy.setDown(false);
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (true) { // the next probe goes out a second after the last one failed
                try {
                    s3.get("outage", 0, -1);
                    break;
                } catch (ObjectNotFoundException e) {
                    break; // an answer
                } catch (ObjectStoreException e) {
                    assertTrue(System.nanoTime() < deadline, "a probe gets through once the store is back: " + e.getMessage());
                    Thread.sleep(50);
                }
            }
            assertFalse(s3.unreachable(), "a 404 is an answer: the store is back");
            s3.put("outage", new byte[10]);
            assertEquals(10, s3.get("outage", 0, -1).length);

            long before = proxy.refused();
            proxy.setDown(true);
            assertThrows(ObjectStoreException.class, () -> s3.head("outage"));
            // the first attempt may go to the pooled connection that the outage cut, not to the proxy's accept
            assertTrue(proxy.refused() - before >= 3, "a new outage: all attempts again, " + (proxy.refused() - before) + " refused");
        }
    }

    /**
     * A store that accepts connections and never answers: the first request costs one timeout
     * (not one per attempt) and marks the store unreachable; the next one sends a probe, which
     * gets no answer either, and fails without being sent. Once the store answers, a probe gets
     * through and requests go out again.
     */
    @Test
    void aStoreThatHangsCostsOneTimeoutThenRequestsWaitOnlyForAProbe() throws Exception {
        try (LatencyProxy proxy = new LatencyProxy(server.endpoint().getPort());
             S3ObjectStore s3 = new S3ObjectStore(server.config("retries")
                     .endpoint(java.net.URI.create("http://127.0.0.1:" + proxy.port())).maxAttempts(4)
                     .requestTimeout(java.time.Duration.ofSeconds(2)).build())) {
            s3.put("hang", new byte[10]); // leaves a pooled connection, which the hang holds too
            proxy.setHung(true);
            ObjectStoreException first = assertThrows(ObjectStoreException.class, () -> s3.get("hang", 0, -1));
            assertEquals(ObjectStoreException.Kind.UNAVAILABLE, first.kind(), first.getMessage());
            assertTrue(first.getMessage().contains("no answer from") && first.getMessage().contains("within 2 s"), first.getMessage());
            assertTrue(s3.unreachable(), "a request that timed out marks the store unreachable");
            assertEquals(1, proxy.heldRequests(), "one attempt: the request's time covers all its attempts");

            ObjectStoreException probed = assertThrows(ObjectStoreException.class, () -> s3.put("other", new byte[10]));
            assertTrue(probed.getMessage().contains("did not answer a probe, so the request was not sent"), probed.getMessage());
            assertEquals(2, proxy.heldRequests(), "the probe, not the request");

            proxy.setHung(false);
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (true) {
                try {
                    assertEquals(10, s3.get("hang", 0, -1).length);
                    break;
                } catch (ObjectStoreException e) {
                    assertTrue(System.nanoTime() < deadline, "a probe gets through once the store answers: " + e.getMessage());
                    Thread.sleep(50);
                }
            }
            assertFalse(s3.unreachable());
            s3.put("other", new byte[10]);
        }
    }

    /**
     * A gateway in front of the store that answers 502 to everything: once a request has made
     * all its attempts on it, the probe's 502 does not count as the store being back, so the
     * next request is not sent; the first probe the store itself answers ends the outage.
     */
    @Test
    void aProbeAnsweredWithBadGatewayLeavesTheStoreUnreachable() throws Exception {
        try (FaultyProxy proxy = new FaultyProxy(server.endpoint());
             S3ObjectStore s3 = new S3ObjectStore(server.config("retries").endpoint(proxy.endpoint()).maxAttempts(3).build())) {
            proxy.failNext(Fault.BAD_GATEWAY_502, Fault.BAD_GATEWAY_502, Fault.BAD_GATEWAY_502, Fault.BAD_GATEWAY_502);
            assertThrows(ObjectStoreException.class, () -> s3.get("gateway", 0, -1));
            assertEquals(3, proxy.connections());
            assertTrue(s3.unreachable());
            ObjectStoreException e = assertThrows(ObjectStoreException.class, () -> s3.put("gateway", new byte[5]));
            assertTrue(e.getMessage().contains("did not answer a probe, so the request was not sent"), e.getMessage());
            assertEquals(4, proxy.connections(), "the probe, answered 502");
            assertTrue(s3.unreachable());
            s3.put("gateway", new byte[5]);
            assertFalse(s3.unreachable());
            assertEquals(5, s3.get("gateway", 0, -1).length);
        }
    }
}
