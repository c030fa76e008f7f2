package io.partfs.engine.object;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Which requests {@link StoreOutage} lets out, with a probe and a clock of the test's own. */
class StoreOutageTest {
    private final AtomicLong now = new AtomicLong(1_000_000_000L);
    private final AtomicInteger probes = new AtomicInteger();
    private volatile boolean storeAnswers;
    private volatile CountDownLatch probeHeld = new CountDownLatch(0);
    private final CountDownLatch probeOut = new CountDownLatch(1);
    private final StoreOutage outage = new StoreOutage("http://store/bucket", now::get, () -> {
        probes.incrementAndGet();
        probeOut.countDown();
        try {
            probeHeld.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return storeAnswers;
    });
    private final ExecutorService prober = Executors.newSingleThreadExecutor();

    @AfterEach
    void stop() {
        probeHeld.countDown();
        prober.shutdownNow();
    }

    @Test
    void requestsGoOutWithoutAProbeWhileTheStoreAnswers() throws Exception {
        outage.admit("get a");
        outage.admit("get b");
        assertEquals(0, probes.get());
    }

    @Test
    void eachRequestSendsAProbeUntilOneIsAnswered() throws Exception {
        outage.down("a request failed all its attempts");
        assertTrue(outage.unreachable());
        now.addAndGet(2_500_000_000L);
        ObjectStoreException notSent = assertThrows(ObjectStoreException.class, () -> outage.admit("put k1"));
        assertEquals(ObjectStoreException.Kind.UNAVAILABLE, notSent.kind());
        assertEquals("put k1 failed: http://store/bucket has been unreachable for 2.5 s and did not answer a probe, "
                + "so the request was not sent: check the endpoint and the network", notSent.getMessage());
        assertThrows(ObjectStoreException.class, () -> outage.admit("put k2"));
        assertEquals(2, probes.get(), "one probe each (a refused probe costs a millisecond)");
        storeAnswers = true;
        outage.admit("put k3");
        assertEquals(3, probes.get());
        assertFalse(outage.unreachable(), "the probe got an answer");
        outage.admit("put k4");
        assertEquals(3, probes.get());
    }

    @Test
    void requestsMadeWhileAYoungProbeIsOutWaitForItsAnswer() throws Exception {
        outage.down("a request failed all its attempts");
        Future<?> first = sendWithProbeHeld("get k1");
        FutureTask<Void> second = new FutureTask<>(() -> {
            outage.admit("get k2");
            return null;
        });
        Thread waiting = new Thread(second);
        waiting.start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (waiting.getState() != Thread.State.TIMED_WAITING) { // for the probe's answer
            assertTrue(System.nanoTime() < deadline, "the second request waits for the probe");
            Thread.onSpinWait();
        }
        storeAnswers = true;
        probeHeld.countDown();
        first.get(10, TimeUnit.SECONDS);
        second.get(10, TimeUnit.SECONDS); // went out, without an exception
        assertEquals(1, probes.get(), "one probe for both");
        assertFalse(outage.unreachable());
    }

    @Test
    void requestsMadeWhileAnOldProbeIsOutFailAtOnce() throws Exception {
        outage.down("a request got no answer within 60 s");
        Future<?> first = sendWithProbeHeld("get k1");
        now.addAndGet(StoreOutage.PROBE_WAIT_NS); // the probe is waiting out its timeout: the store hangs
        assertThrows(ObjectStoreException.class, () -> outage.admit("get k2"));
        assertEquals(1, probes.get(), "no second probe while one is out");
        probeHeld.countDown();
        ExecutionException e = assertThrows(ExecutionException.class, () -> first.get(10, TimeUnit.SECONDS));
        assertTrue(e.getCause() instanceof ObjectStoreException, "the probe got no answer: " + e.getCause());
    }

    /** Starts request {@code what} on another thread, whose probe is held until {@link #probeHeld} opens. */
    private Future<?> sendWithProbeHeld(String what) throws InterruptedException {
        probeHeld = new CountDownLatch(1);
        Future<?> f = prober.submit(() -> {
            outage.admit(what);
            return null;
        });
        assertTrue(probeOut.await(10, TimeUnit.SECONDS), "the probe is out");
        return f;
    }
}
