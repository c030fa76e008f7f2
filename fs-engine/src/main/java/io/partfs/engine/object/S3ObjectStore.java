package io.partfs.engine.object;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.awscore.retry.AwsRetryStrategy;
import software.amazon.awssdk.core.client.config.ClientOverrideConfiguration;
import software.amazon.awssdk.core.exception.ApiCallAttemptTimeoutException;
import software.amazon.awssdk.core.exception.ApiCallTimeoutException;
import software.amazon.awssdk.core.exception.RetryableException;
import software.amazon.awssdk.core.exception.SdkClientException;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.core.exception.SdkServiceException;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.core.checksums.RequestChecksumCalculation;
import software.amazon.awssdk.core.checksums.ResponseChecksumValidation;
import software.amazon.awssdk.http.apache.ApacheHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.retries.api.BackoffStrategy;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.S3Configuration;
import software.amazon.awssdk.services.s3.model.CompletedMultipartUpload;
import software.amazon.awssdk.services.s3.model.CompletedPart;
import software.amazon.awssdk.services.s3.model.DeleteObjectsResponse;
import software.amazon.awssdk.services.s3.model.GetObjectRequest;
import software.amazon.awssdk.services.s3.model.GetObjectResponse;
import software.amazon.awssdk.services.s3.model.HeadObjectResponse;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Response;
import software.amazon.awssdk.services.s3.model.NoSuchBucketException;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;
import software.amazon.awssdk.services.s3.model.ObjectIdentifier;
import software.amazon.awssdk.services.s3.model.S3Error;
import software.amazon.awssdk.services.s3.model.S3Exception;
import software.amazon.awssdk.services.s3.model.S3Object;

/**
 * Objects in an S3-compatible bucket through the AWS SDK v2 (Apache HTTP client). Works with
 * any endpoint, path-style or virtual-hosted. The SDK retries 5xx, throttling and dropped
 * connections with exponential backoff; authentication errors fail at once. While the store
 * does not answer, requests are sent only after a probe got an answer ({@link StoreOutage}). Every SDK
 * exception is turned into an {@link ObjectStoreException} here and goes no further.
 * Thread-safe: the client is shared by all callers.
 */
public final class S3ObjectStore implements ObjectStore {
    private static final Logger log = LoggerFactory.getLogger(S3ObjectStore.class);

    private final S3Config config;
    private final S3Client s3;
    private final StoreOutage outage;
    /** False once the store refused a DeleteObjects request: then one DELETE per object. */
    private volatile boolean multiDelete = true;

    public S3ObjectStore(S3Config config) {
        this.config = config;
        // The SDK's own circuit breaker (a token bucket that a run of failures empties) is off:
        // it would refuse the retries of many parallel uploads to a slow but working store.
        // OutageRetries stops retrying only once a request has failed all its attempts.
        this.outage = new StoreOutage(config.describe(), System::nanoTime, this::probe);
        OutageRetries retries = new OutageRetries(AwsRetryStrategy.standardRetryStrategy().toBuilder()
                .maxAttempts(config.maxAttempts())
                .backoffStrategy(BackoffStrategy.exponentialDelay(
                        java.time.Duration.ofMillis(50), java.time.Duration.ofSeconds(5)))
                .throttlingBackoffStrategy(BackoffStrategy.exponentialDelay(
                        java.time.Duration.ofMillis(200), java.time.Duration.ofSeconds(10)))
                .circuitBreakerEnabled(false)
                .build(), outage);
        AwsCredentialsProvider credentials = config.accessKey() == null
                ? DefaultCredentialsProvider.builder().build()
                : StaticCredentialsProvider.create(AwsBasicCredentials.create(config.accessKey(), config.secretKey()));
        var builder = S3Client.builder()
                .region(Region.of(config.region()))
                .forcePathStyle(config.pathStyle())
                .credentialsProvider(credentials)
                // Checksum headers beyond HTTP's own are not understood by every S3-compatible server.
                .requestChecksumCalculation(RequestChecksumCalculation.WHEN_REQUIRED)
                .responseChecksumValidation(ResponseChecksumValidation.WHEN_REQUIRED)
                .httpClientBuilder(httpClient(config))
                // Over plain http the SDK signs every payload. Without this it sends it aws-chunked,
                // a signature per 128 KiB chunk that the server must take apart again; with it, one
                // SHA-256 of the whole body in a header: the oldest form of SigV4, which every
                // S3-compatible server takes (measured: benchmarks/RESULTS.md, round 10).
                // No "Expect: 100-continue" on PUTs (the S3 client adds it from 1 MiB, the HTTP client
                // to every PUT): the handshake holds each body back a round trip for the server's
                // go-ahead, which only pays when a large body is likely refused. A block is at most
                // a few MiB and a refusal (bad credentials) ends the mount's first request anyway:
                // 128 KiB PUTs at 20 ms latency took 47.7 ms with it and 27.3 without (round 27).
                .serviceConfiguration(S3Configuration.builder().chunkedEncodingEnabled(false).expectContinueEnabled(false).build())
                .overrideConfiguration(ClientOverrideConfiguration.builder()
                        .apiCallAttemptTimeout(config.requestTimeout())
                        // all attempts of one call together: a store that hangs costs one timeout, not one per
                        // retry, and marks the store unreachable (StoreOutage)
                        .apiCallTimeout(config.requestTimeout())
                        .retryStrategy(retries)
                        .build());
        if (config.endpoint() != null) {
            builder.endpointOverride(config.endpoint());
        }
        this.s3 = builder.build();
    }

    /** The longest a probe of an unreachable store waits for its answer. */
    static final java.time.Duration PROBE_TIMEOUT = java.time.Duration.ofSeconds(5);

    /**
     * A HEAD of the bucket, as {@link StoreOutage}'s probe: true on any answer, a refusal (403,
     * 404) or throttling too, but not HTTP 500, 502 or 504, which count as the store being down. It waits at most {@link #PROBE_TIMEOUT}, or the request timeout if shorter: a
     * store that is back answers a HEAD in far less, and on a store that hangs the request that
     * sent the probe waits that long, not a whole request timeout.
     */
    private boolean probe() {
        java.time.Duration timeout = config.requestTimeout().compareTo(PROBE_TIMEOUT) < 0 ? config.requestTimeout() : PROBE_TIMEOUT;
        try {
            s3.headBucket(b -> b.bucket(config.bucket())
                    .overrideConfiguration(o -> o.apiCallTimeout(timeout).apiCallAttemptTimeout(timeout)));
            return true;
        } catch (SdkServiceException e) {
            // refused (403, 404) or throttled: an answer; a 500, 502 or 504 says the store is still not there
            return !OutageRetries.storeUnreachable(e);
        } catch (SdkException e) {
            log.debug("probe of {} got no answer: {}", config.describe(), e.toString());
            return false;
        }
    }

    public S3Config config() {
        return config;
    }

    private static ApacheHttpClient.Builder httpClient(S3Config config) {
        ApacheHttpClient.Builder b = ApacheHttpClient.builder()
                .expectContinueEnabled(false) // see the S3 client's configuration above
                .maxConnections(config.maxConnections())
                .connectionTimeout(config.connectTimeout())
                .socketTimeout(config.requestTimeout());
        if (config.trust() != null) {
            javax.net.ssl.TrustManager[] trust = config.trust();
            b.tlsTrustManagersProvider(() -> trust);
        }
        return b;
    }

    private String fullKey(String key) {
        return config.prefix() + ObjectStore.checkKey(key);
    }

    /** Creates the bucket when it does not exist yet (as {@code partfs format} does). */
    public void ensureBucket() throws IOException {
        outage.admit("check bucket " + config.bucket());
        try {
            s3.headBucket(b -> b.bucket(config.bucket()));
        } catch (NoSuchBucketException e) {
            try {
                s3.createBucket(b -> b.bucket(config.bucket()));
                log.info("created bucket {}", config.describe());
            } catch (SdkException ce) {
                throw wrap("create bucket", config.bucket(), ce);
            }
        } catch (S3Exception e) {
            if (e.statusCode() == 404) {
                try {
                    s3.createBucket(b -> b.bucket(config.bucket()));
                } catch (SdkException ce) {
                    throw wrap("create bucket", config.bucket(), ce);
                }
                return;
            }
            throw wrap("check bucket", config.bucket(), e);
        } catch (SdkException e) {
            throw wrap("check bucket", config.bucket(), e);
        }
    }

    @Override
    public void put(String key, byte[] data) throws IOException {
        String k = fullKey(key);
        outage.admit("put " + key);
        try {
            if (data.length > config.multipartThreshold()) {
                putMultipart(k, data);
            } else {
                // fromBytes would copy the block (4 MiB, a humongous allocation for G1); the
                // provider streams the caller's array, again on each retry, and callers never
                // change a block they handed over
                s3.putObject(b -> b.bucket(config.bucket()).key(k).contentLength((long) data.length)
                                .serverSideEncryption(config.sse()).ssekmsKeyId(config.sseKmsKeyId()),
                        RequestBody.fromContentProvider(() -> new java.io.ByteArrayInputStream(data), data.length,
                                "application/octet-stream"));
            }
        } catch (SdkException e) {
            throw wrap("put", key, e);
        }
    }

    private void putMultipart(String k, byte[] data) {
        String uploadId = s3.createMultipartUpload(b -> b.bucket(config.bucket()).key(k)
                .serverSideEncryption(config.sse()).ssekmsKeyId(config.sseKmsKeyId())).uploadId();
        try {
            List<CompletedPart> parts = new ArrayList<>();
            int partSize = config.partSize();
            for (int off = 0, n = 1; off < data.length; off += partSize, n++) {
                int len = Math.min(partSize, data.length - off);
                final int partNumber = n;
                String etag = s3.uploadPart(b -> b.bucket(config.bucket()).key(k).uploadId(uploadId)
                                .partNumber(partNumber).contentLength((long) len),
                        RequestBody.fromByteBuffer(java.nio.ByteBuffer.wrap(data, off, len).slice())).eTag();
                parts.add(CompletedPart.builder().partNumber(partNumber).eTag(etag).build());
            }
            s3.completeMultipartUpload(b -> b.bucket(config.bucket()).key(k).uploadId(uploadId)
                    .multipartUpload(CompletedMultipartUpload.builder().parts(parts).build()));
        } catch (RuntimeException e) {
            try {
                s3.abortMultipartUpload(b -> b.bucket(config.bucket()).key(k).uploadId(uploadId));
            } catch (SdkException abort) {
                e.addSuppressed(abort);
            }
            throw e;
        }
    }

    @Override
    public byte[] get(String key, long offset, int length) throws IOException {
        if (offset < 0) {
            throw new IllegalArgumentException("negative offset " + offset);
        }
        if (length == 0) {
            return new byte[0];
        }
        String k = fullKey(key);
        GetObjectRequest.Builder req = GetObjectRequest.builder().bucket(config.bucket()).key(k);
        if (offset > 0 || length > 0) {
            req.range("bytes=" + offset + "-" + (length < 0 ? "" : String.valueOf(offset + length - 1)));
        }
        outage.admit("get " + key);
        try {
            return s3.getObject(req.build(), S3ObjectStore::readBody);
        } catch (NoSuchKeyException e) {
            throw new ObjectNotFoundException(key);
        } catch (S3Exception e) {
            if (e.statusCode() == 416) {
                return new byte[0]; // range starts at or past the end
            }
            if (e.statusCode() == 404) {
                throw new ObjectNotFoundException(key);
            }
            throw wrap("get", key, e);
        } catch (SdkException e) {
            throw wrap("get", key, e);
        }
    }

    /**
     * A GET's body in an array of exactly its Content-Length. The SDK's own {@code toBytes()}
     * grows a buffer by doubling and copies it once more at the end: three times a block's size
     * allocated per block, which kept the collector busy during readahead and warmup (measured:
     * benchmarks/RESULTS.md, round 13). A body cut short is retried as the SDK retries its own.
     */
    private static byte[] readBody(GetObjectResponse response, java.io.InputStream in) {
        try {
            Long length = response.contentLength();
            if (length == null || length < 0 || length > Integer.MAX_VALUE - 8) {
                return in.readAllBytes();
            }
            byte[] body = new byte[(int) (long) length];
            int n = in.readNBytes(body, 0, body.length);
            if (n < body.length) {
                throw new java.io.EOFException("the connection ended after " + n + " of " + body.length + " bytes");
            }
            return body;
        } catch (IOException e) {
            throw RetryableException.builder().message("Failed to read response.").cause(e).build();
        }
    }

    @Override
    public Optional<ObjectInfo> head(String key) throws IOException {
        String k = fullKey(key);
        outage.admit("head " + key);
        try {
            HeadObjectResponse r = s3.headObject(b -> b.bucket(config.bucket()).key(k));
            return Optional.of(new ObjectInfo(key, r.contentLength(), millis(r.lastModified())));
        } catch (NoSuchKeyException e) {
            return Optional.empty();
        } catch (S3Exception e) {
            if (e.statusCode() == 404) {
                return Optional.empty();
            }
            throw wrap("head", key, e);
        } catch (SdkException e) {
            throw wrap("head", key, e);
        }
    }

    @Override
    public void delete(String key) throws IOException {
        String k = fullKey(key);
        outage.admit("delete " + key);
        try {
            s3.deleteObject(b -> b.bucket(config.bucket()).key(k));
        } catch (NoSuchKeyException e) {
            // already gone
        } catch (SdkException e) {
            throw wrap("delete", key, e);
        }
    }

    /**
     * DeleteObjects, a thousand keys a request. A store that refuses it (some S3-compatible
     * servers do not implement it, or want a Content-MD5 the SDK no longer sends) gets single
     * deletes from then on; a key the store could not delete fails the call.
     */
    @Override
    public void deleteAll(List<String> keys) throws IOException {
        for (int from = 0; from < keys.size(); from += 1000) {
            List<String> batch = keys.subList(from, Math.min(keys.size(), from + 1000));
            if (!multiDelete) {
                ObjectStore.super.deleteAll(batch);
                continue;
            }
            List<ObjectIdentifier> ids = new ArrayList<>(batch.size());
            for (String k : batch) {
                ids.add(ObjectIdentifier.builder().key(fullKey(k)).build());
            }
            DeleteObjectsResponse r;
            outage.admit("delete " + batch.get(0) + " (and " + (batch.size() - 1) + " more)");
            try {
                r = s3.deleteObjects(b -> b.bucket(config.bucket()).delete(d -> d.objects(ids).quiet(true)));
            } catch (S3Exception e) {
                int status = e.statusCode();
                if (status == 400 || status == 405 || status == 501) {
                    multiDelete = false;
                    log.warn("{} refused a multi-object delete (HTTP {}): deleting one object a request from now on",
                            config.describe(), status);
                    ObjectStore.super.deleteAll(batch);
                    continue;
                }
                throw wrap("delete", batch.get(0) + " (and " + (batch.size() - 1) + " more)", e);
            } catch (SdkException e) {
                throw wrap("delete", batch.get(0) + " (and " + (batch.size() - 1) + " more)", e);
            }
            for (S3Error err : r.errors()) {
                if (!"NoSuchKey".equals(err.code())) {
                    String key = err.key() != null && err.key().startsWith(config.prefix()) ? err.key().substring(config.prefix().length()) : err.key();
                    throw new ObjectStoreException("AccessDenied".equals(err.code()) ? ObjectStoreException.Kind.ACCESS_DENIED
                            : ObjectStoreException.Kind.OTHER, "delete " + key + " failed at " + config.describe() + ": " + err.code()
                            + " " + err.message() + " (" + r.errors().size() + " of " + batch.size() + " keys not deleted)", null);
                }
            }
        }
    }

    @Override
    public List<ObjectInfo> list(String prefix, String startAfter, int limit) throws IOException {
        String p = config.prefix() + prefix;
        outage.admit("list " + prefix);
        try {
            ListObjectsV2Response r = s3.listObjectsV2(b -> {
                b.bucket(config.bucket()).prefix(p).maxKeys(Math.min(limit, 1000));
                if (startAfter != null) {
                    b.startAfter(config.prefix() + startAfter);
                }
            });
            List<ObjectInfo> out = new ArrayList<>(r.contents().size());
            for (S3Object o : r.contents()) {
                out.add(new ObjectInfo(o.key().substring(config.prefix().length()), o.size(), millis(o.lastModified())));
            }
            return out;
        } catch (SdkException e) {
            throw wrap("list", prefix, e);
        }
    }

    @Override
    public void scan(String prefix, int depth, int threads, IoConsumer<ObjectInfo> each) throws IOException {
        ParallelScan.scan(new ParallelScan.Lister() {
            @Override
            public ParallelScan.Level level(String p, String token) throws IOException {
                return listLevel(p, token);
            }

            @Override
            public List<ObjectInfo> page(String p, String startAfter, int limit) throws IOException {
                return list(p, startAfter, limit);
            }
        }, prefix, depth, threads, each);
    }

    /** One page of a delimiter listing: the objects directly under {@code prefix} and the directories ('/') under it. */
    private ParallelScan.Level listLevel(String prefix, String token) throws IOException {
        String p = config.prefix() + prefix;
        int strip = config.prefix().length();
        outage.admit("list " + prefix);
        try {
            ListObjectsV2Response r = s3.listObjectsV2(b -> {
                b.bucket(config.bucket()).prefix(p).delimiter("/").maxKeys(1000);
                if (token != null) {
                    b.continuationToken(token);
                }
            });
            List<ObjectInfo> objects = new ArrayList<>(r.contents().size());
            for (S3Object o : r.contents()) {
                objects.add(new ObjectInfo(o.key().substring(strip), o.size(), millis(o.lastModified())));
            }
            List<String> dirs = new ArrayList<>(r.commonPrefixes().size());
            for (software.amazon.awssdk.services.s3.model.CommonPrefix c : r.commonPrefixes()) {
                dirs.add(c.prefix().substring(strip));
            }
            boolean more = Boolean.TRUE.equals(r.isTruncated()) && r.nextContinuationToken() != null;
            return new ParallelScan.Level(objects, dirs, more ? r.nextContinuationToken() : null);
        } catch (SdkException e) {
            throw wrap("list", prefix, e);
        }
    }

    /** An object's last-modified time; a missing one counts as now, so gc never takes an object of unknown age for an old one. */
    private static long millis(java.time.Instant t) {
        return t == null ? System.currentTimeMillis() : t.toEpochMilli();
    }

    /** Turns an SDK exception into ours, with a message that says what to check and no secrets. */
    private ObjectStoreException wrap(String op, String key, SdkException e) {
        String where = config.describe();
        String what = key.isEmpty() ? op : op + " " + key;
        if (timedOut(e)) {
            String waited = "no answer from " + where + " within " + config.requestTimeout().toSeconds() + " s";
            outage.down("a request got " + waited);
            return new ObjectStoreException(ObjectStoreException.Kind.UNAVAILABLE, what + " failed: " + waited
                    + ": check the endpoint and the network (a slow link may need a longer --io-timeout)", e);
        }
        if (e instanceof NoSuchBucketException) {
            return new ObjectStoreException(ObjectStoreException.Kind.NO_SUCH_BUCKET,
                    "bucket '" + config.bucket() + "' does not exist at " + where + ": create it or run 'partfs format'", e);
        }
        if (e instanceof S3Exception s3e) {
            int status = s3e.statusCode();
            String code = s3e.awsErrorDetails() == null ? null : s3e.awsErrorDetails().errorCode();
            String bucketRegion = s3e.awsErrorDetails() == null || s3e.awsErrorDetails().sdkHttpResponse() == null ? null
                    : s3e.awsErrorDetails().sdkHttpResponse().firstMatchingHeader("x-amz-bucket-region").orElse(null);
            if ((status == 301 || status == 400) && bucketRegion != null && !bucketRegion.equals(config.region())) {
                // AWS answers a request signed for another region than the bucket's so (a HEAD's reply has no body)
                return new ObjectStoreException(ObjectStoreException.Kind.OTHER, what + " failed: bucket '" + config.bucket()
                        + "' is in region " + bucketRegion + ", not " + config.region() + ": add region=" + bucketRegion
                        + " to the storage URL (or set $AWS_REGION)", e);
            }
            if (status == 403 || status == 401 || "InvalidAccessKeyId".equals(code) || "SignatureDoesNotMatch".equals(code)) {
                return new ObjectStoreException(ObjectStoreException.Kind.ACCESS_DENIED,
                        what + " denied by " + where + (code == null ? "" : " (" + code + ")") // a HEAD's reply has no code
                                + ": check the access key, secret key and bucket permissions", e);
            }
            String said = s3e.awsErrorDetails() == null ? null : s3e.awsErrorDetails().errorMessage();
            return new ObjectStoreException(ObjectStoreException.Kind.OTHER, what + " failed at " + where + ": HTTP " + status
                    + (code == null ? "" : " " + code) + (said == null || said.isBlank() ? "" : " (" + said.strip() + ")"), e);
        }
        if (e instanceof SdkClientException && String.valueOf(e.getMessage()).startsWith("Unable to load credentials")) {
            String webIdentity = System.getenv("AWS_WEB_IDENTITY_TOKEN_FILE") == null ? null
                    : chainStepFailure(e.getMessage(), "WebIdentityTokenFileCredentialsProvider");
            if (webIdentity != null) {
                return new ObjectStoreException(ObjectStoreException.Kind.ACCESS_DENIED, "no S3 credentials for " + where
                        + ": the web identity token in $AWS_WEB_IDENTITY_TOKEN_FILE got none for $AWS_ROLE_ARN (" + webIdentity
                        + "): check the role's ARN and its trust policy, and that the token is the service account's", e);
            }
            return new ObjectStoreException(ObjectStoreException.Kind.ACCESS_DENIED, "no S3 credentials for " + where
                    + ": give --access-key with $PARTFS_SECRET_KEY (or $PARTFS_ACCESS_KEY and $PARTFS_SECRET_KEY), "
                    + "or configure the AWS default chain (environment, profile, web identity, container or instance role)", e);
        }
        if (e instanceof SdkClientException && untrustedCertificate(e)) {
            return new ObjectStoreException(ObjectStoreException.Kind.UNAVAILABLE, what + " failed: the TLS certificate of "
                    + where + " is not signed by a trusted CA: give the CA certificates that sign it as a PEM file with "
                    + "--ca-bundle FILE (or $AWS_CA_BUNDLE)", e);
        }
        if (e instanceof SdkClientException && "put".equals(op) && cutOffMidBody(e)) {
            // a server refusing a PUT (credentials, permissions) may answer before reading the
            // body and close the connection: the client then sees only its write fail
            return new ObjectStoreException(ObjectStoreException.Kind.UNAVAILABLE, what + " failed: " + where
                    + " closed the connection while the data was being sent (" + rootMessage(e) + "): it may have refused "
                    + "the request (check the access key, secret key and bucket permissions), or the network failed", e);
        }
        if (e instanceof SdkClientException) {
            return new ObjectStoreException(ObjectStoreException.Kind.UNAVAILABLE,
                    what + " failed: cannot reach " + where + " (" + rootMessage(e)
                            + "): check the endpoint and the network", e);
        }
        return new ObjectStoreException(ObjectStoreException.Kind.OTHER, what + " failed at " + where + ": " + e.getMessage(), e);
    }

    /** The request's time ran out: the call's or an attempt's timer, or the socket's. */
    private static boolean timedOut(Throwable t) {
        return anyCause(t, c -> c instanceof ApiCallTimeoutException || c instanceof ApiCallAttemptTimeoutException
                || c instanceof java.net.SocketTimeoutException);
    }

    /** A write to a connection the server closed: "Broken pipe" or "Connection reset". */
    private static boolean cutOffMidBody(Throwable t) {
        return anyCause(t, c -> c instanceof java.net.SocketException && c.getMessage() != null
                && (c.getMessage().contains("Broken pipe") || c.getMessage().contains("Connection reset")));
    }

    /**
     * Why step {@code provider} of the SDK's default credential chain found nothing, from the
     * chain's message ("... : [Step(): why, Step2(...): why, ...]"), or null when it does not
     * say. The step an operator set up (a web identity) is the one whose failure matters; the
     * chain names every step, most of them only not configured.
     */
    static String chainStepFailure(String chainMessage, String provider) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile(java.util.regex.Pattern.quote(provider)
                + "\\([^)]*\\): (.*?)(?:, [A-Za-z]+CredentialsProvider\\(|]$)", java.util.regex.Pattern.DOTALL).matcher(chainMessage);
        if (!m.find()) {
            return null;
        }
        return m.group(1).replaceAll(" \\(SDK Attempt Count: \\d+\\)$", "").trim();
    }

    /** A TLS handshake refused for the server's certificate chain (PKIX path building). */
    private static boolean untrustedCertificate(Throwable t) {
        return anyCause(t, c -> c instanceof java.security.cert.CertPathBuilderException
                || c instanceof java.security.cert.CertPathValidatorException);
    }

    /** Whether {@code t} or any exception in its chain of causes matches. */
    private static boolean anyCause(Throwable t, java.util.function.Predicate<Throwable> matches) {
        for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
            if (matches.test(c)) {
                return true;
            }
        }
        return false;
    }

    private static String rootMessage(Throwable t) {
        Throwable c = t;
        while (c.getCause() != null && c.getCause() != c) {
            c = c.getCause();
        }
        return c.getClass().getSimpleName() + (c.getMessage() == null ? "" : ": " + c.getMessage());
    }

    @Override
    public String describe() {
        return config.describe();
    }

    /** Whether a request failed all its attempts, or its time, on the store being unreachable and none got an answer since (see {@link StoreOutage}). */
    @Override
    public boolean unreachable() {
        return outage.unreachable();
    }

    @Override
    public boolean answers() {
        try {
            outage.admit("a probe");
            return true;
        } catch (IOException e) {
            return false; // no answer to the probe, or interrupted while waiting for it
        }
    }

    @Override
    public void close() {
        s3.close();
    }
}
