package io.partfs.engine.testing;

import io.partfs.engine.object.S3Config;
import java.net.URI;
import java.time.Duration;
import org.gaul.s3proxy.S3Proxy;
import org.gaul.s3proxy.auth.AuthenticationType;
import org.gaul.s3proxy.nio2blob.TransientNio2BlobStore;

/**
 * A real S3 API over HTTP: s3proxy embedded in the test JVM, holding objects in memory, with
 * AWS v2/v4 signature checking. Clients reach it with path-style addressing.
 */
public final class S3Server implements AutoCloseable {
    public static final String ACCESS_KEY = "partfs-test-access";
    public static final String SECRET_KEY = "partfs-test-secret-do-not-log";

    private final S3Proxy proxy;
    private final URI endpoint;

    private S3Server(S3Proxy proxy, URI endpoint) {
        this.proxy = proxy;
        this.endpoint = endpoint;
    }

    public static S3Server start() throws Exception {
        return start(new TransientNio2BlobStore());
    }

    /** An S3 server keeping its objects in files under {@code dir} (for data larger than memory). */
    public static S3Server start(java.nio.file.Path dir) throws Exception {
        return start(new org.gaul.s3proxy.nio2blob.FilesystemNio2BlobStore(dir.toString()));
    }

    /**
     * An S3 server in memory reached over https only, presenting the certificate of
     * {@code keyStore} (PKCS12, for 127.0.0.1).
     */
    public static S3Server startTls(java.nio.file.Path keyStore, String password) throws Exception {
        URI endpoint = URI.create("https://127.0.0.1:" + RedisServer.freePort());
        return start(S3Proxy.builder().blobStore(new TransientNio2BlobStore()).secureEndpoint(endpoint)
                .keyStore(keyStore.toString(), password), endpoint);
    }

    /**
     * An S3 server keeping its objects in files under {@code dir} that also takes virtual-hosted
     * requests: a request to host {@code bucket.domain} is one for {@code bucket}. It listens on
     * 127.0.0.1; a client reaches it as {@code http://domain:port} ({@link #endpoint(String)})
     * once the names resolve to 127.0.0.1. With a domain, s3proxy reads every other host name as
     * a bucket too (CNAME style), so path-style requests to 127.0.0.1 no longer work.
     */
    public static S3Server startVirtualHosted(java.nio.file.Path dir, String domain) throws Exception {
        URI endpoint = URI.create("http://127.0.0.1:" + RedisServer.freePort());
        return start(S3Proxy.builder().blobStore(new org.gaul.s3proxy.nio2blob.FilesystemNio2BlobStore(dir.toString()))
                .endpoint(endpoint).virtualHost(domain), endpoint);
    }

    /**
     * An S3 server in memory that takes requests signed with temporary credentials. s3proxy
     * refuses a header it does not know with HTTP 501, x-amz-security-token (the session token)
     * among them; this one ignores such headers. It checks the signature, not the token.
     */
    public static S3Server startTakingSessionTokens() throws Exception {
        URI endpoint = URI.create("http://127.0.0.1:" + RedisServer.freePort());
        return start(S3Proxy.builder().blobStore(new TransientNio2BlobStore()).endpoint(endpoint).ignoreUnknownHeaders(true), endpoint);
    }

    private static S3Server start(org.gaul.s3proxy.nio2blob.AbstractNio2BlobStore store) throws Exception {
        URI endpoint = URI.create("http://127.0.0.1:" + RedisServer.freePort());
        return start(S3Proxy.builder().blobStore(store).endpoint(endpoint), endpoint);
    }

    private static S3Server start(S3Proxy.Builder builder, URI endpoint) throws Exception {
        S3Proxy proxy = builder
                .awsAuthentication(AuthenticationType.AWS_V2_OR_V4, ACCESS_KEY, SECRET_KEY)
                .build();
        proxy.start();
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (!"STARTED".equals(proxy.getState())) {
            if (System.nanoTime() > deadline) {
                proxy.stop();
                throw new IllegalStateException("s3proxy did not start: state " + proxy.getState());
            }
            java.util.concurrent.locks.LockSupport.parkNanos(20_000_000L); // poll interval
        }
        return new S3Server(proxy, endpoint);
    }

    public URI endpoint() {
        return endpoint;
    }

    /** This server's endpoint with {@code host} for its address (a name that resolves to 127.0.0.1). */
    public URI endpoint(String host) {
        return URI.create("http://" + host + ":" + endpoint.getPort());
    }

    /** Configuration for {@code bucket} on this server, path-style, with the right credentials. */
    public S3Config.Builder config(String bucket) {
        return S3Config.builder(bucket).endpoint(endpoint).region("us-east-1").pathStyle(true)
                .credentials(ACCESS_KEY, SECRET_KEY).maxAttempts(3);
    }

    @Override
    public void close() throws Exception {
        proxy.stop();
    }
}
