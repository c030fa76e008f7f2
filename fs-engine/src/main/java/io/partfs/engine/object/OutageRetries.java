package io.partfs.engine.object;

import java.io.IOException;
import software.amazon.awssdk.core.exception.ApiCallAttemptTimeoutException;
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
 * a timeout, HTTP 500, 502 or 504) marks the store unreachable ({@link StoreOutage}); from then
 * on a request is tried once, and those already waiting to retry stop at their next failure.
 * The first answer from the store (a success, or a refusal such as 404) marks it reachable.
 *
 * <p>Why: a part's rename waits for all its files' uploads, a few dozen at a time on the upload
 * threads. With every upload making all its attempts (ten, with up to 16 s of backoff), an
 * INSERT during an outage failed only after several rounds of them: 50 s to more than two
 * minutes. Throttling (503, SlowDown) never marks the store down: a store that is busy is
 * waited for, not given up on.
 */
final class OutageRetries implements RetryStrategy {
    private final RetryStrategy standard;
    private final StoreOutage outage;

    OutageRetries(RetryStrategy standard, StoreOutage outage) {
        this.standard = standard;
        this.outage = outage;
    }

    @Override
    public AcquireInitialTokenResponse acquireInitialToken(AcquireInitialTokenRequest request) {
        return standard.acquireInitialToken(request);
    }

    @Override
    public RefreshRetryTokenResponse refreshRetryToken(RefreshRetryTokenRequest request) {
        Throwable failure = request.failure();
        boolean unreachable = storeUnreachable(failure);
        if (!unreachable && failure instanceof SdkServiceException) {
            outage.answered(); // it answered, if only to refuse this request or to ask for a slower pace
        } else if (unreachable && outage.unreachable()) {
            throw new TokenAcquisitionFailedException("not retried: " + outage.where() + " is unreachable", request.token(), failure);
        }
        try {
            return standard.refreshRetryToken(request);
        } catch (TokenAcquisitionFailedException e) {
            if (unreachable) {
                outage.down("a request failed all its attempts (" + failure.getMessage() + ")");
            }
            throw e;
        }
    }

    @Override
    public RecordSuccessResponse recordSuccess(RecordSuccessRequest request) {
        outage.answered();
        return standard.recordSuccess(request);
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
        if (failure instanceof ApiCallAttemptTimeoutException) {
            return true; // no answer in time: see StoreOutage for what follows
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
