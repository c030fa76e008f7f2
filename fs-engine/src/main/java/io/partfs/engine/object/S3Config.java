package io.partfs.engine.object;

import java.net.URI;
import java.time.Duration;
import java.util.Objects;

/**
 * How to reach one S3-compatible bucket. Immutable; build with {@link #builder(String)}.
 * {@link #toString()} never shows the secret key.
 */
public final class S3Config {
    private final String bucket;
    private final String prefix;
    private final URI endpoint;
    private final String region;
    private final boolean pathStyle;
    private final String accessKey;
    private final String secretKey;
    private final Duration connectTimeout;
    private final Duration requestTimeout;
    private final int maxAttempts;
    private final int maxConnections;
    private final long multipartThreshold;
    private final int partSize;
    /** Trust managers for the endpoint's TLS certificate ({@link CaBundle}), or null for the JVM's. */
    private final javax.net.ssl.TrustManager[] trust;
    /** Server-side encryption asked for on every upload: null (the bucket's default), AES256 or aws:kms. */
    private final String sse;
    /** The KMS key of {@code sse} aws:kms, or null for the account's default S3 key. */
    private final String sseKmsKeyId;

    private S3Config(Builder b) {
        this.bucket = b.bucket;
        this.prefix = b.prefix;
        this.endpoint = b.endpoint;
        this.region = b.region;
        this.pathStyle = b.pathStyle;
        this.accessKey = b.accessKey;
        this.secretKey = b.secretKey;
        this.connectTimeout = b.connectTimeout;
        this.requestTimeout = b.requestTimeout;
        this.maxAttempts = b.maxAttempts;
        this.maxConnections = b.maxConnections;
        this.multipartThreshold = b.multipartThreshold;
        this.partSize = b.partSize;
        this.trust = b.trust;
        this.sse = b.sse;
        this.sseKmsKeyId = b.sseKmsKeyId;
    }

    public static Builder builder(String bucket) {
        return new Builder(bucket);
    }

    public Builder toBuilder() {
        Builder b = new Builder(bucket);
        b.prefix = prefix;
        b.endpoint = endpoint;
        b.region = region;
        b.pathStyle = pathStyle;
        b.accessKey = accessKey;
        b.secretKey = secretKey;
        b.connectTimeout = connectTimeout;
        b.requestTimeout = requestTimeout;
        b.maxAttempts = maxAttempts;
        b.maxConnections = maxConnections;
        b.multipartThreshold = multipartThreshold;
        b.partSize = partSize;
        b.trust = trust;
        b.sse = sse;
        b.sseKmsKeyId = sseKmsKeyId;
        return b;
    }

    public String bucket() { return bucket; }

    /** Server-side encryption every upload asks for (AES256 or aws:kms), or null to leave it to the bucket. */
    public String sse() { return sse; }

    /** The KMS key id or ARN with {@link #sse()} aws:kms, or null. */
    public String sseKmsKeyId() { return sseKmsKeyId; }

    /** Key prefix inside the bucket, empty or ending in '/'. */
    public String prefix() { return prefix; }

    /** Endpoint override, or null for AWS's own endpoint of {@link #region()}. */
    public URI endpoint() { return endpoint; }

    public String region() { return region; }

    public boolean pathStyle() { return pathStyle; }

    /** Explicit access key, or null to use the default credential chain. */
    public String accessKey() { return accessKey; }

    String secretKey() { return secretKey; }

    public Duration connectTimeout() { return connectTimeout; }

    public Duration requestTimeout() { return requestTimeout; }

    public int maxAttempts() { return maxAttempts; }

    public int maxConnections() { return maxConnections; }

    public long multipartThreshold() { return multipartThreshold; }

    public int partSize() { return partSize; }

    /** Trust managers for https endpoints, or null for the JVM's default CAs. */
    public javax.net.ssl.TrustManager[] trust() { return trust; }

    /** Whether requests go over TLS: an https endpoint, or AWS's own. */
    public boolean tls() { return endpoint == null || "https".equals(endpoint.getScheme()); }

    /** Endpoint, bucket and prefix as a user would name them, without credentials. */
    public String describe() {
        String where = endpoint == null ? "aws:" + region : endpoint.toString();
        return "s3://" + bucket + "/" + prefix + " at " + where + (pathStyle ? " (path-style)" : "");
    }

    @Override
    public String toString() {
        return "S3Config{" + describe() + ", accessKey=" + (accessKey == null ? "<default chain>" : accessKey)
                + ", secretKey=" + (secretKey == null ? "<none>" : "***") + "}";
    }

    /** Validating builder; {@link #build()} throws {@link IllegalArgumentException} with a message a user can act on. */
    public static final class Builder {
        private final String bucket;
        private String prefix = "";
        private URI endpoint;
        private String region = "us-east-1";
        private boolean pathStyle;
        private String accessKey;
        private String secretKey;
        private Duration connectTimeout = Duration.ofSeconds(10);
        private Duration requestTimeout = Duration.ofSeconds(60);
        private int maxAttempts = 10;
        private int maxConnections = 64;
        private long multipartThreshold = 64L << 20;
        private int partSize = 16 << 20;
        private javax.net.ssl.TrustManager[] trust;
        private String sse;
        private String sseKmsKeyId;

        private Builder(String bucket) {
            this.bucket = bucket;
        }

        public Builder prefix(String prefix) {
            String p = prefix == null ? "" : prefix.replaceAll("^/+", "");
            this.prefix = p.isEmpty() || p.endsWith("/") ? p : p + "/";
            return this;
        }

        public Builder endpoint(URI endpoint) { this.endpoint = endpoint; return this; }

        public Builder region(String region) { this.region = region; return this; }

        public Builder pathStyle(boolean pathStyle) { this.pathStyle = pathStyle; return this; }

        public Builder credentials(String accessKey, String secretKey) {
            this.accessKey = accessKey;
            this.secretKey = secretKey;
            return this;
        }

        /** Trust managers for the endpoint's certificate instead of the JVM's ({@link CaBundle#trustManagers}). */
        public Builder trust(javax.net.ssl.TrustManager[] trust) { this.trust = trust; return this; }

        /**
         * Server-side encryption for every upload: AES256 (SSE-S3) or aws:kms (SSE-KMS, with
         * {@code kmsKeyId} or null for the account's default key); null leaves it to the bucket.
         */
        public Builder serverSideEncryption(String sse, String kmsKeyId) {
            this.sse = sse;
            this.sseKmsKeyId = kmsKeyId;
            return this;
        }

        public Builder connectTimeout(Duration d) { this.connectTimeout = d; return this; }

        public Builder requestTimeout(Duration d) { this.requestTimeout = d; return this; }

        public Builder maxAttempts(int n) { this.maxAttempts = n; return this; }

        public Builder maxConnections(int n) { this.maxConnections = n; return this; }

        /** Objects larger than this are sent as a multipart upload of {@code partSize} parts. */
        public Builder multipart(long threshold, int partSize) {
            this.multipartThreshold = threshold;
            this.partSize = partSize;
            return this;
        }

        public S3Config build() {
            if (bucket == null || !bucket.matches("[a-z0-9][a-z0-9.\\-]{1,61}[a-z0-9]")) {
                throw new IllegalArgumentException("invalid bucket name '" + bucket
                        + "': use 3-63 lowercase letters, digits, '.' or '-'");
            }
            if (endpoint != null && (endpoint.getScheme() == null || endpoint.getHost() == null
                    || !(endpoint.getScheme().equals("http") || endpoint.getScheme().equals("https")))) {
                throw new IllegalArgumentException("invalid S3 endpoint '" + endpoint
                        + "': expected http://host[:port] or https://host[:port]");
            }
            Objects.requireNonNull(region, "region");
            if (sse != null && !sse.equals("AES256") && !sse.equals("aws:kms")) {
                throw new IllegalArgumentException("sse must be AES256 (keys S3 manages) or aws:kms (keys KMS manages), not '" + sse + "'");
            }
            if (sseKmsKeyId != null && !"aws:kms".equals(sse)) {
                throw new IllegalArgumentException("sse-kms-key-id goes with sse=aws:kms: add it, or leave the key id out");
            }
            if ((accessKey == null) != (secretKey == null)) {
                throw new IllegalArgumentException("give both the S3 access key and the secret key, or neither to use the default credential chain");
            }
            if (maxAttempts < 1 || maxConnections < 1) {
                throw new IllegalArgumentException("S3 max attempts and max connections must be at least 1");
            }
            if (partSize < (5 << 20) || multipartThreshold < partSize) {
                throw new IllegalArgumentException("S3 multipart part size must be at least 5 MiB and not above the threshold");
            }
            return new S3Config(this);
        }
    }
}
