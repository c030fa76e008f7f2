package io.partfs.engine.object;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.ConnectException;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.awscore.exception.AwsErrorDetails;
import software.amazon.awssdk.awscore.retry.AwsRetryStrategy;
import software.amazon.awssdk.core.exception.SdkClientException;
import software.amazon.awssdk.retries.api.AcquireInitialTokenRequest;
import software.amazon.awssdk.retries.api.RefreshRetryTokenRequest;
import software.amazon.awssdk.retries.api.RetryToken;
import software.amazon.awssdk.retries.api.TokenAcquisitionFailedException;
import software.amazon.awssdk.services.s3.model.S3Exception;

/**
 * The retry decisions of {@link OutageRetries}, request by request: what {@code S3RetryTest}
 * cannot time, a request already retrying when another one finds the store down.
 */
class OutageRetriesTest {
    private final StoreOutage outage = new StoreOutage("the store", System::nanoTime, () -> false);
    private final OutageRetries retries = new OutageRetries(AwsRetryStrategy.standardRetryStrategy().toBuilder()
            .maxAttempts(3).circuitBreakerEnabled(false).build(), outage);

    private RetryToken start() {
        return retries.acquireInitialToken(AcquireInitialTokenRequest.create("test")).token();
    }

    private RetryToken fail(RetryToken token, Throwable failure) {
        return retries.refreshRetryToken(RefreshRetryTokenRequest.builder().token(token).failure(failure).build()).token();
    }

    private static SdkClientException refused() {
        return SdkClientException.create("Unable to execute HTTP request", new ConnectException("Connection refused"));
    }

    private static S3Exception status(int code, String errorCode) {
        return (S3Exception) S3Exception.builder().statusCode(code).message("HTTP " + code)
                .awsErrorDetails(AwsErrorDetails.builder().errorCode(errorCode).build()).build();
    }

    @Test
    void aRequestWaitingToRetryStopsOnceAnotherHasFoundTheStoreDown() {
        RetryToken waiting = fail(start(), refused()); // retried once, as before
        RetryToken other = fail(start(), refused());
        other = fail(other, refused());
        assertFalse(outage.unreachable(), "not before a request has used all its attempts");
        RetryToken last = other;
        assertThrows(TokenAcquisitionFailedException.class, () -> fail(last, refused()));
        assertTrue(outage.unreachable());
        assertThrows(TokenAcquisitionFailedException.class, () -> fail(waiting, refused()),
                "the request still retrying gives up at its next failure");
    }

    @Test
    void throttlingAndRefusalsNeverMarkTheStoreDownAndAnAnswerMarksItUp() {
        RetryToken t = fail(start(), status(503, "SlowDown"));
        t = fail(t, status(503, "SlowDown"));
        RetryToken last = t;
        assertThrows(TokenAcquisitionFailedException.class, () -> fail(last, status(503, "SlowDown")));
        assertFalse(outage.unreachable(), "a busy store is waited for, not given up on");
        assertThrows(TokenAcquisitionFailedException.class, () -> fail(start(), status(403, "AccessDenied")));
        assertFalse(outage.unreachable());

        RetryToken down = fail(fail(start(), status(502, "BadGateway")), status(502, "BadGateway"));
        assertThrows(TokenAcquisitionFailedException.class, () -> fail(down, status(502, "BadGateway")));
        assertTrue(outage.unreachable(), "a gateway that cannot reach the store: down");
        assertThrows(TokenAcquisitionFailedException.class, () -> fail(start(), status(404, "NoSuchKey")));
        assertFalse(outage.unreachable(), "a 404 is an answer");
        fail(start(), refused()); // and a retry again, without exception
    }

    @Test
    void theBackoffOfTheStandardStrategyIsKept() {
        var response = retries.refreshRetryToken(RefreshRetryTokenRequest.builder().token(start()).failure(refused()).build());
        assertTrue(response.delay().compareTo(Duration.ofSeconds(30)) < 0, response.delay().toString());
    }
}
