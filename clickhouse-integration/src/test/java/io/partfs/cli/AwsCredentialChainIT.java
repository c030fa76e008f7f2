package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import io.partfs.engine.testing.S3Server;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * S3 credentials as a pod on EKS gets them, with no keys given: from a web identity (IRSA:
 * {@code AWS_ROLE_ARN} and {@code AWS_WEB_IDENTITY_TOKEN_FILE}, which the AWS default chain
 * trades at STS for temporary credentials) or from EKS Pod Identity (the container credentials
 * endpoint, {@code AWS_CONTAINER_CREDENTIALS_FULL_URI} with the token of
 * {@code AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE}). Neither STS nor the EKS agent can run here,
 * so one stand-in (JDK HttpServer) answers both as their documentation shows, with s3proxy's
 * keys and a session token; everything else is real: the launcher, the SDK's chain, s3proxy
 * checking every signature.
 */
class AwsCredentialChainIT {
    private static final String ROLE = "arn:aws:iam::123456789012:role/partfs-sidecar";
    private static final String TOKEN = "eyJhbGciOiJSUzI1NiJ9.partfs-test-web-identity-token";
    private static final String SESSION_TOKEN = "partfs-session-token";

    private Path dir;
    private Path mnt;
    private Path token;
    private Partfs partfs;
    private HttpServer standIn;
    private String standInUrl;
    /** The forms STS was sent, and the Authorization headers the container endpoint was sent. */
    private final List<Map<String, String>> assumed = new CopyOnWriteArrayList<>();
    private final List<String> containerAsks = new CopyOnWriteArrayList<>();
    /** Whether the stand-in refuses the token, as STS does one for another role or expired. */
    private volatile boolean refuse;
    /** How long the credentials the Pod Identity stand-in gives are valid. */
    private volatile java.time.Duration podCredentialsLast = java.time.Duration.ofHours(1);

    @BeforeEach
    void setUp() throws Exception {
        dir = Files.createTempDirectory("partfs-cli-");
        mnt = dir.resolve("mnt");
        token = Files.writeString(dir.resolve("token"), TOKEN);
        standIn = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        standIn.createContext("/", exchange -> { // STS: a form POSTed, XML back
            assumed.add(form(new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8)));
            byte[] reply = (refuse ? REFUSAL : assumeRoleReply()).getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().add("Content-Type", "text/xml");
            exchange.sendResponseHeaders(refuse ? 403 : 200, reply.length);
            exchange.getResponseBody().write(reply);
            exchange.close();
        });
        standIn.createContext("/v1/credentials", exchange -> { // the EKS Pod Identity agent: a GET, JSON back
            containerAsks.add(String.valueOf(exchange.getRequestHeaders().getFirst("Authorization")));
            byte[] reply = """
                    {"AccessKeyId":"%s","SecretAccessKey":"%s","Token":"%s","Expiration":"%s"}"""
                    .formatted(S3Server.ACCESS_KEY, S3Server.SECRET_KEY, SESSION_TOKEN + "-" + containerAsks.size(),
                            Instant.now().plus(podCredentialsLast).truncatedTo(ChronoUnit.SECONDS)).getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().add("Content-Type", "application/json");
            exchange.sendResponseHeaders(200, reply.length);
            exchange.getResponseBody().write(reply);
            exchange.close();
        });
        standIn.start();
        standInUrl = "http://127.0.0.1:" + standIn.getAddress().getPort();
        partfs = new Partfs(dir.resolve("home"))
                .env("AWS_REGION", "us-east-1")
                // whatever the machine's own environment holds must not answer first
                .unset("AWS_ACCESS_KEY_ID").unset("AWS_SECRET_ACCESS_KEY").unset("AWS_SESSION_TOKEN").unset("AWS_PROFILE")
                .unset("AWS_ROLE_ARN").unset("AWS_WEB_IDENTITY_TOKEN_FILE").unset("AWS_CONTAINER_CREDENTIALS_FULL_URI")
                .unset("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").unset("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
                .env("AWS_EC2_METADATA_DISABLED", "true");
    }

    @AfterEach
    void tearDown() throws Exception {
        standIn.stop(0);
        partfs.unmountAndDelete(mnt, dir);
    }

    private void useWebIdentity() {
        partfs.env("AWS_ROLE_ARN", ROLE).env("AWS_WEB_IDENTITY_TOKEN_FILE", token.toString())
                .env("AWS_ROLE_SESSION_NAME", "partfs-it").env("AWS_ENDPOINT_URL_STS", standInUrl);
    }

    /**
     * With no access key the volume is formatted, mounted, written and read back on credentials
     * STS gave for the token's role, and neither the token nor those credentials show in any
     * output or log.
     */
    @Test
    void aMountWithoutKeysUsesTheCredentialsItsWebIdentityAssumes() throws Exception {
        useWebIdentity();
        roundTrip(() -> {
            assertFalse(assumed.isEmpty(), "format asked STS");
            Map<String, String> call = assumed.get(0);
            assertEquals("AssumeRoleWithWebIdentity", call.get("Action"), call.toString());
            assertEquals(ROLE, call.get("RoleArn"), call.toString());
            assertEquals(TOKEN, call.get("WebIdentityToken"), "the token file's content");
        });
    }

    /** The same on EKS Pod Identity: the container endpoint asked with the token of its file. */
    @Test
    void aMountWithoutKeysUsesTheCredentialsOfItsPodIdentity() throws Exception {
        partfs.env("AWS_CONTAINER_CREDENTIALS_FULL_URI", standInUrl + "/v1/credentials")
                .env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", token.toString());
        roundTrip(() -> {
            assertFalse(containerAsks.isEmpty(), "format asked the container endpoint");
            assertEquals(TOKEN, containerAsks.get(0), "the token file's content, as the Authorization header");
            assertEquals(List.of(), assumed, "no STS");
        });
    }

    /**
     * A mount outlives its credentials: the Pod Identity agent's last 70 s, inside the window
     * before expiry in which the SDK renews them (here at almost every request), and the mount,
     * uploading file after file, asks the agent for new ones and goes on uploading; every file
     * reads back from S3. A mount that kept the first credentials (a static copy) would ask once
     * and fail here. (s3proxy checks the keys' signature, not the session token or its expiry:
     * that the agent was asked again is what shows the renewal.)
     */
    @Test
    void aMountRenewsCredentialsThatExpireAndGoesOnUploading() throws Exception {
        podCredentialsLast = java.time.Duration.ofSeconds(70);
        partfs.env("AWS_CONTAINER_CREDENTIALS_FULL_URI", standInUrl + "/v1/credentials")
                .env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", token.toString());
        try (S3Server s3 = S3Server.startTakingSessionTokens()) {
            String meta = dir.resolve("meta").toString();
            partfs.ok("format", "--meta", meta, "--storage", "s3://partfs-creds/vol?endpoint=" + s3.endpoint() + "&path-style=true", "creds");
            partfs.ok("mount", "--meta", meta, mnt.toString(), "--background", "--cache-dir", dir.resolve("cache1").toString());
            int asked = containerAsks.size();
            int files = 0;
            long deadline = System.nanoTime() + java.time.Duration.ofSeconds(120).toNanos();
            while (containerAsks.size() < asked + 2) { // each file's close uploads it, signed with the credentials of the moment
                assertTrue(System.nanoTime() < deadline, "the mount asked for new credentials within 120 s: " + containerAsks.size());
                Files.writeString(mnt.resolve("f" + files), "file " + files);
                files++;
            }
            Files.writeString(mnt.resolve("f" + files), "file " + files); // with the renewed credentials
            files++;
            partfs.ok("umount", mnt.toString());
            partfs.ok("mount", "--meta", meta, mnt.toString(), "--background", "--cache-dir", dir.resolve("cache2").toString());
            for (int i = 0; i < files; i += Math.max(1, files / 50)) {
                assertEquals("file " + i, Files.readString(mnt.resolve("f" + i)), "read back from S3");
            }
            assertEquals("file " + (files - 1), Files.readString(mnt.resolve("f" + (files - 1))));
            partfs.ok("umount", mnt.toString());
            System.out.printf("credentials renewed %d times while %d files were written%n", containerAsks.size() - asked, files);
        }
    }

    /**
     * Formats a volume on s3proxy with no keys, runs {@code afterFormat}, writes a file through
     * one mount and reads it back through another with an empty block cache, and checks that no
     * token or secret shows in any output or log.
     */
    private void roundTrip(Runnable afterFormat) throws Exception {
        try (S3Server s3 = S3Server.startTakingSessionTokens()) {
            String storage = "s3://partfs-creds/vol?endpoint=" + s3.endpoint() + "&path-style=true";
            String meta = dir.resolve("meta").toString();
            Partfs.Result format = partfs.ok("format", "--meta", meta, "--storage", storage, "creds");
            afterFormat.run();

            byte[] data = new byte[(2 << 20) + 3];
            new Random(12).nextBytes(data);
            partfs.ok("mount", "--meta", meta, mnt.toString(), "--background", "--cache-dir", dir.resolve("cache1").toString());
            Files.write(mnt.resolve("c.bin"), data);
            partfs.ok("umount", mnt.toString());
            partfs.ok("mount", "--meta", meta, mnt.toString(), "--background", "--cache-dir", dir.resolve("cache2").toString());
            assertArrayEquals(data, Files.readAllBytes(mnt.resolve("c.bin")), "read back from S3 with an empty block cache");
            partfs.ok("umount", mnt.toString());

            String everything = format.all() + partfs.mountLogs();
            for (String secret : List.of(TOKEN, S3Server.SECRET_KEY, SESSION_TOKEN)) {
                assertFalse(everything.contains(secret), secret + " in: " + everything);
            }
        }
    }

    /**
     * A token STS refuses fails the format with one line that gives STS's reason, a non-zero
     * exit and nothing written to the metadata directory.
     */
    @Test
    void aRefusedWebIdentitySaysWhatStsAnswered() throws Exception {
        useWebIdentity();
        refuse = true;
        try (S3Server s3 = S3Server.startTakingSessionTokens()) {
            Path meta = dir.resolve("meta");
            Partfs.Result format = partfs.run("format", "--meta", meta.toString(), "--storage",
                    "s3://partfs-creds/vol?endpoint=" + s3.endpoint() + "&path-style=true", "creds");
            assertEquals(1, format.exit(), format.all());
            assertEquals(List.of("partfs: no S3 credentials for s3://partfs-creds/vol/ at " + s3.endpoint() + " (path-style): the web "
                            + "identity token in $AWS_WEB_IDENTITY_TOKEN_FILE got none for $AWS_ROLE_ARN (Not authorized to perform "
                            + "sts:AssumeRoleWithWebIdentity (Service: Sts, Status Code: 403, Request ID: partfs-it)): check the role's "
                            + "ARN and its trust policy, and that the token is the service account's"),
                    Partfs.errorLines(format), format.all());
            assertFalse(format.all().contains(TOKEN), format.all());
            assertFalse(Files.exists(meta), "nothing formatted");
        }
    }

    private static final String REFUSAL = """
            <ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
              <Error>
                <Type>Sender</Type>
                <Code>AccessDenied</Code>
                <Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message>
              </Error>
              <RequestId>partfs-it</RequestId>
            </ErrorResponse>
            """;

    private static String inAnHour() {
        return Instant.now().plus(1, ChronoUnit.HOURS).truncatedTo(ChronoUnit.SECONDS).toString();
    }

    /** STS's answer to AssumeRoleWithWebIdentity, with s3proxy's keys, valid for an hour. */
    private static String assumeRoleReply() {
        return """
                <AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
                  <AssumeRoleWithWebIdentityResult>
                    <SubjectFromWebIdentityToken>system:serviceaccount:clickhouse:partfs</SubjectFromWebIdentityToken>
                    <AssumedRoleUser>
                      <Arn>arn:aws:sts::123456789012:assumed-role/partfs-sidecar/partfs-it</Arn>
                      <AssumedRoleId>AROAPARTFSTEST:partfs-it</AssumedRoleId>
                    </AssumedRoleUser>
                    <Credentials>
                      <AccessKeyId>%s</AccessKeyId>
                      <SecretAccessKey>%s</SecretAccessKey>
                      <SessionToken>%s</SessionToken>
                      <Expiration>%s</Expiration>
                    </Credentials>
                  </AssumeRoleWithWebIdentityResult>
                  <ResponseMetadata><RequestId>partfs-it</RequestId></ResponseMetadata>
                </AssumeRoleWithWebIdentityResponse>
                """.formatted(S3Server.ACCESS_KEY, S3Server.SECRET_KEY, SESSION_TOKEN, inAnHour());
    }

    private static Map<String, String> form(String body) {
        Map<String, String> out = new HashMap<>();
        for (String pair : body.split("&")) {
            int eq = pair.indexOf('=');
            if (eq > 0) {
                out.put(URLDecoder.decode(pair.substring(0, eq), StandardCharsets.UTF_8),
                        URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8));
            }
        }
        return out;
    }
}
