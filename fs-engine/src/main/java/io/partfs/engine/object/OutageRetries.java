package io.partfs.engine.object;

import java.io.IOException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.core.exception.SdkClientException;
import software.amazon.awssdk.core.exception.SdkServiceException;
import software.amazon.awssdk.retries.api.AcquireInitialTokenRequest;
import software.amazon.awssdk.retries.api.AcquireInitialTokenResponse;
import software.amazon.awssdk.retries.api.RecordSuccessRequest;
import software.amazon.awssdk.retries.api.RecordSuccessResponse;
import software.amazon.awssdk.retries.api.RefreshRetryTokenRequest;
import software.amazon.awssdk.retries.api.RefreshRetryTokenResponse;
import software.amazon.awssdk.retries.api.RetryStrategy;
import software.amazon.awssdk.retries.api.TokenAcquisitionFailedException;

/**
 * The SDK's retries, cut short while the object store is down. A request that used all its
 * attempts on failures that say the store cannot be reached (no connection, a connection cut,
 * a timeout, HTTP 500, 502 or 504) marks the store unreachable; from then on every request is
 * tried once, and those already waiting to retry stop at their next failure. The first answer
 * from the store (a success, or a refusal such as 404) marks it reachable again, so each request
 * during an outage is also the probe that ends it.
 *
 * <p>Why: a part's rename waits for all its files' uploads, a few dozen at a time on the upload
 * threads. With every upload making all its attempts (ten, with up to 16 s of backoff), an
 * INSERT during an outage failed only after several rounds of them: 50 s to more than two
 * minutes. Throttling (503, SlowDown) never marks the store down: a store that is busy is
 * waited for, not given up on.
 */
final class OutageRetries implements RetryStrategy {
    private static final Logger log = LoggerFactory.getLogger(OutageRetries.class);

    private final RetryStrategy standard;
    private final String where;
    private final LongSupplier clock;
    /** When the store was marked unreachable ({@link #clock}, ns), or 0 while it is reachable. */
    private final AtomicLong downSince = new AtomicLong();

    OutageRetries(RetryStrategy standard, String where, LongSupplier clock) {
        this.standard = standard;
        this.where = where;
        this.clock = clock;
    }

    /** Whether a request used all its attempts on the store being unreachable, and none succeeded since. */
    boolean unreachable() {
        return downSince.get() != 0;
    }

    @Override
    public AcquireInitialTokenResponse acquireInitialToken(AcquireInitialTokenRequest request) {
        return standard.acquireInitialToken(request);
    }

    @Override
    public RefreshRetryTokenResponse refreshRetryToken(RefreshRetryTokenRequest request) {
        Throwable failure = request.failure();
        boolean outage = storeUnreachable(failure);
        if (!outage && failure instanceof SdkServiceException) {
            reachable(); // it answered, if only to refuse this request or to ask for a slower pace
        } else if (outage && unreachable()) {
            throw new TokenAcquisitionFailedException("not retried: " + where + " is unreachable", request.token(), failure);
        }
        try {
            return standard.refreshRetryToken(request);
        } catch (TokenAcquisitionFailedException e) {
            if (outage && downSince.compareAndSet(0, Math.max(1, clock.getAsLong()))) {
                log.warn("{} is unreachable: a request failed all its attempts ({}); every request is tried once "
                        + "until one succeeds", where, failure.getMessage());
            }
            throw e;
        }
    }

    @Override
    public RecordSuccessResponse recordSuccess(RecordSuccessRequest request) {
        reachable();
        return standard.recordSuccess(request);
    }

    private void reachable() {
        long since = downSince.get();
        if (since != 0 && downSince.compareAndSet(since, 0)) {
            log.info("{} answers again, after {} s unreachable", where,
                    String.format("%.1f", (clock.getAsLong() - since) / 1e9));
        }
    }

    @Override
    public int maxAttempts() {
        return standard.maxAttempts();
    }

    /** The standard strategy was built with the SDK's and AWS's retry conditions already. */
    @Override
    public boolean useClientDefaults() {
        return false;
    }

    /** A builder of the standard strategy alone: the SDK does not call it for a strategy that wants no client defaults. */
    @Override
    public Builder<?, ?> toBuilder() {
        return standard.toBuilder();
    }

    /**
     * Whether a failure says the store cannot be reached, rather than that it refused this one
     * request (403, 404, a bad request) or is busy (503, throttling).
     */
    static boolean storeUnreachable(Throwable failure) {
        if (failure instanceof SdkServiceException service) {
            if (service.isThrottlingException()) {
                return false;
            }
            int status = service.statusCode();
            return status == 500 || status == 502 || status == 504;
        }
        if (failure instanceof SdkClientException) {
            for (Throwable c = failure.getCause(); c != null; c = c.getCause() == c ? null : c.getCause()) {
                if (c instanceof IOException) {
                    return true;
                }
            }
        }
        return false;
    }
}
