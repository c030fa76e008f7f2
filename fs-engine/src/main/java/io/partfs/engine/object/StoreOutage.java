package io.partfs.engine.object;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Whether an object store answers, as its requests find out, and which requests are sent while
 * it does not. The store is marked unreachable by a request that used all its attempts for want
 * of a connection ({@link OutageRetries}) or that got no answer within its timeout, and marked
 * reachable again by any answer, a refusal such as 404 too.
 *
 * <p>While the store is unreachable a request is sent only after a probe, a cheap request with
 * a short timeout, got an answer. A request that finds no probe out sends one itself; one that
 * finds a probe out waits for its outcome, but only until the probe is {@link #PROBE_WAIT_NS}
 * old: a store that is back answers far sooner, so requests made together at the end of an
 * outage all go out after the first one's probe, while on a store that hangs they fail without
 * being sent, and only the request that sent the probe waits out its timeout.
 *
 * <p>Why: a store that has gone away refuses connections, and its requests fail in milliseconds;
 * but a store that hangs (a wedged process, a network that drops packets) costs each request its
 * whole timeout. A part's rename waits for all its files' uploads, sixteen at a time, so an
 * INSERT would wait out one timeout per sixteen files, many minutes for a wide table, and reads
 * would stall queries as long. Now an outage costs callers the timeout of the requests already
 * out when it began, and at most one probe's.
 */
final class StoreOutage {
    private static final Logger log = LoggerFactory.getLogger(StoreOutage.class);

    /** How long after a probe was sent requests still wait for its outcome rather than fail. */
    static final long PROBE_WAIT_NS = 1_000_000_000L;

    /** A cheap request to the store. */
    @FunctionalInterface
    interface Probe {
        /** Sends it: true on any answer (a refusal too), false if the store could not be reached or did not answer in time. */
        boolean answered();
    }

    /** A probe that is out: when it was sent ({@link #clock}, ns), and whether it got an answer, once it has. */
    private record Out(long sentAt, CompletableFuture<Boolean> answered) {
    }

    private final String where;
    private final LongSupplier clock;
    private final Probe probe;
    /** When the store was marked unreachable ({@link #clock}, ns), or 0 while it is reachable. */
    private final AtomicLong downSince = new AtomicLong();
    /** The probe that is out, or null. */
    private final AtomicReference<Out> probing = new AtomicReference<>();

    StoreOutage(String where, LongSupplier clock, Probe probe) {
        this.where = where;
        this.clock = clock;
        this.probe = probe;
    }

    /** The store, as logs and errors name it. */
    String where() {
        return where;
    }

    /** Whether a request found the store unreachable and none got an answer since. */
    boolean unreachable() {
        return downSince.get() != 0;
    }

    /** Marks the store unreachable; {@code why} (the failure, never a secret) is logged once an outage. */
    void down(String why) {
        if (downSince.compareAndSet(0, Math.max(1, clock.getAsLong()))) {
            log.warn("{} is unreachable: {}; requests fail without being sent until a probe request gets an answer",
                    where, why);
        }
    }

    /** The store answered a request: it is reachable. */
    void answered() {
        long since = downSince.get();
        if (since != 0 && downSince.compareAndSet(since, 0)) {
            log.info("{} answers again, after {} s unreachable", where, seconds(clock.getAsLong() - since));
        }
    }

    /**
     * Returns when request {@code what} may be sent: at once while the store is reachable; while
     * it is not, once a probe got an answer (sending the probe, or waiting for the one that is
     * out while it is young). Otherwise throws an {@link ObjectStoreException.Kind#UNAVAILABLE}
     * saying that {@code what} was not sent.
     */
    void admit(String what) throws IOException {
        while (downSince.get() != 0) {
            Out out = probing.get();
            if (out == null) {
                Out mine = new Out(clock.getAsLong(), new CompletableFuture<>());
                if (probing.compareAndSet(null, mine) && !sendProbe(mine) && unreachable()) {
                    throw notSent(what);
                }
                continue;
            }
            long wait = PROBE_WAIT_NS - (clock.getAsLong() - out.sentAt);
            boolean answered;
            try {
                answered = out.answered.get(Math.max(0, wait), TimeUnit.NANOSECONDS);
            } catch (TimeoutException e) {
                answered = false; // the store hangs, most likely: this probe waits out its timeout
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new InterruptedIOException(what + " interrupted while waiting for " + where + " to answer");
            } catch (ExecutionException e) {
                throw new IllegalStateException(e); // never completed exceptionally
            }
            if (!answered && unreachable()) {
                throw notSent(what);
            }
        }
    }

    /** Sends the probe, and says whether it got an answer. */
    private boolean sendProbe(Out mine) {
        boolean answered = false;
        try {
            answered = probe.answered();
        } catch (RuntimeException e) {
            log.debug("probe of {} failed: {}", where, e.toString());
        } finally {
            if (answered) {
                answered();
            }
            probing.set(null);
            mine.answered.complete(answered);
        }
        return answered;
    }

    private ObjectStoreException notSent(String what) {
        long since = downSince.get();
        return new ObjectStoreException(ObjectStoreException.Kind.UNAVAILABLE, what + " failed: " + where
                + " has been unreachable for " + seconds(since == 0 ? 0 : clock.getAsLong() - since)
                + " s and did not answer a probe, so the request was not sent: check the endpoint and the network", null);
    }

    private static String seconds(long nanos) {
        return String.format("%.1f", Math.max(0, nanos) / 1e9);
    }
}
