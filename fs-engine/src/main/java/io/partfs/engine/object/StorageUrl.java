package io.partfs.engine.object;

import io.partfs.engine.LocationUrl;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Where a volume's objects live, as a URL a user writes and the volume remembers:
 * {@code s3://bucket[/prefix][?endpoint=URL&region=R&path-style=true]} or a local directory
 * ({@code file:///dir} or a plain path). The URL never holds credentials: they come from
 * {@link Credentials} at open time.
 */
public final class StorageUrl {
    private final Path localDir;
    private final S3Config s3;

    private StorageUrl(Path localDir, S3Config s3) {
        this.localDir = localDir;
        this.s3 = s3;
    }

    /**
     * What this machine brings to reach the store: access key and secret key (both null for the
     * SDK's default chain: env, profile, IAM role), and a PEM file of CAs to trust for an https
     * endpoint besides the JVM's (null for none; read only when the endpoint is https).
     */
    public record Credentials(String accessKey, String secretKey, java.nio.file.Path caBundle) {
        public static final Credentials DEFAULT_CHAIN = new Credentials(null, null);

        public Credentials(String accessKey, String secretKey) {
            this(accessKey, secretKey, null);
        }

        public Credentials withCaBundle(java.nio.file.Path pem) {
            return new Credentials(accessKey, secretKey, pem);
        }

        @Override
        public String toString() {
            return accessKey == null ? "default credential chain" : "access key " + accessKey + " and a secret key";
        }
    }

    /**
     * Parses a storage URL.
     *
     * @throws IllegalArgumentException with a message that shows the expected form
     */
    public static StorageUrl parse(String url) {
        return parse(url, System::getenv);
    }

    /**
     * As {@link #parse(String)}, with {@code env} for the environment: an {@code s3://} URL with
     * neither endpoint nor region (AWS S3 itself) takes {@code $AWS_REGION}, else
     * {@code $AWS_DEFAULT_REGION}, as the SDKs and the AWS CLI do (on EKS a pod's role sets them),
     * else us-east-1. Another endpoint's region is the URL's or us-east-1: a region meant for
     * AWS would be wrong for a MinIO that checks it.
     */
    public static StorageUrl parse(String url, java.util.function.UnaryOperator<String> env) {
        if (url == null || url.isBlank()) {
            throw new IllegalArgumentException("empty storage URL: use s3://bucket[/prefix]?endpoint=http://host:port or a directory");
        }
        String u = LocationUrl.normalize(url, java.util.Set.of("s3", "file"), "storage", url, FORMS);
        if (u == null) {
            return new StorageUrl(Path.of(url).toAbsolutePath().normalize(), null);
        }
        if (u.startsWith("s3:")) {
            return new StorageUrl(null, parseS3(u, env));
        }
        return new StorageUrl(LocationUrl.literalPath(u, "storage", FORMS), null);
    }

    private static final String FORMS = "s3://bucket[/prefix]?endpoint=http://host:port, file:///dir or a directory path";

    private static S3Config parseS3(String url, java.util.function.UnaryOperator<String> env) {
        URI u;
        try {
            u = new URI(url);
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException("malformed storage URL '" + url + "': " + e.getReason()
                    + "; expected s3://bucket[/prefix]?endpoint=http://host:port&region=R&path-style=true");
        }
        if (u.getUserInfo() != null) {
            throw new IllegalArgumentException("put S3 credentials in --access-key/--secret-key or the environment, not in the storage URL");
        }
        String bucket = u.getHost();
        if (bucket == null) {
            throw new IllegalArgumentException("storage URL '" + url + "' names no bucket: expected s3://bucket[/prefix]");
        }
        Map<String, String> q = query(u.getRawQuery());
        S3Config.Builder b = S3Config.builder(bucket).prefix(u.getPath());
        String endpoint = q.remove("endpoint");
        if (endpoint != null) {
            try {
                b.endpoint(new URI(endpoint));
            } catch (URISyntaxException e) {
                throw new IllegalArgumentException("malformed S3 endpoint '" + endpoint + "': expected http(s)://host[:port]");
            }
        }
        String region = q.remove("region");
        if (region != null && region.isBlank()) {
            throw new IllegalArgumentException("empty region in storage URL '" + url + "': give one (region=us-east-1) or leave it out");
        }
        if (region == null && endpoint == null) {
            region = java.util.stream.Stream.of(env.apply("AWS_REGION"), env.apply("AWS_DEFAULT_REGION"))
                    .filter(r -> r != null && !r.isBlank()).findFirst().orElse(null);
        }
        if (region != null) {
            b.region(region.trim());
        }
        String pathStyle = q.remove("path-style");
        if (pathStyle != null) {
            if (!pathStyle.equals("true") && !pathStyle.equals("false")) {
                throw new IllegalArgumentException("path-style must be true or false, not '" + pathStyle + "'");
            }
            b.pathStyle(Boolean.parseBoolean(pathStyle));
        }
        String sse = q.remove("sse");
        String kmsKey = q.remove("sse-kms-key-id");
        if (sse != null || kmsKey != null) {
            b.serverSideEncryption(sse, kmsKey);
        }
        if (!q.isEmpty()) {
            throw new IllegalArgumentException("unknown storage URL parameter(s) " + q.keySet()
                    + ": the known ones are endpoint, region, path-style, sse and sse-kms-key-id");
        }
        return b.build();
    }

    private static Map<String, String> query(String raw) {
        Map<String, String> out = new LinkedHashMap<>();
        if (raw == null || raw.isEmpty()) {
            return out;
        }
        for (String pair : raw.split("&")) {
            int eq = pair.indexOf('=');
            String k = URLDecoder.decode(eq < 0 ? pair : pair.substring(0, eq), StandardCharsets.UTF_8);
            String v = eq < 0 ? "" : URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8);
            out.put(k, v);
        }
        return out;
    }

    public boolean isS3() {
        return s3 != null;
    }

    /** The canonical URL, as stored in the volume's format (no credentials). */
    public String url() {
        if (s3 == null) {
            return "file://" + localDir; // not toUri(): it adds a '/' only once the directory exists
        }
        StringBuilder sb = new StringBuilder("s3://").append(s3.bucket()).append('/').append(s3.prefix());
        String sep = "?";
        if (s3.endpoint() != null) {
            sb.append(sep).append("endpoint=").append(s3.endpoint());
            sep = "&";
        }
        sb.append(sep).append("region=").append(s3.region());
        if (s3.pathStyle()) {
            sb.append("&path-style=true");
        }
        if (s3.sse() != null) {
            sb.append("&sse=").append(s3.sse());
        }
        if (s3.sseKmsKeyId() != null) {
            sb.append("&sse-kms-key-id=").append(java.net.URLEncoder.encode(s3.sseKmsKeyId(), StandardCharsets.UTF_8));
        }
        return sb.toString();
    }

    @Override
    public String toString() {
        return url();
    }

    /**
     * Opens the store; for S3, creates the bucket when {@code createBucket} and it is missing.
     */
    public ObjectStore open(Credentials credentials, boolean createBucket) throws IOException {
        return s3 == null ? new LocalObjectStore(localDir) : open(credentials, createBucket, s3.maxAttempts(), s3.requestTimeout());
    }

    /**
     * As {@link #open(Credentials, boolean)}, trying each S3 request at most {@code attempts}
     * times, all of them within {@code timeout}.
     */
    public ObjectStore open(Credentials credentials, boolean createBucket, int attempts, java.time.Duration timeout) throws IOException {
        if (s3 == null) {
            return new LocalObjectStore(localDir);
        }
        if (attempts < 1) {
            throw new IllegalArgumentException("S3 request attempts must be at least 1, not " + attempts);
        }
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("the S3 request timeout must be positive, not " + timeout);
        }
        S3Config.Builder b = s3.toBuilder().maxAttempts(attempts).requestTimeout(timeout);
        if (credentials.caBundle() != null && s3.tls()) {
            b.trust(CaBundle.trustManagers(credentials.caBundle()));
        }
        S3Config c = (credentials.accessKey() == null ? b : b.credentials(credentials.accessKey(), credentials.secretKey())).build();
        S3ObjectStore store = new S3ObjectStore(c);
        if (createBucket) {
            try {
                store.ensureBucket();
            } catch (IOException e) {
                store.close();
                throw e;
            }
        }
        return store;
    }
}
