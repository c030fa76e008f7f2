package io.partfs.engine.meta;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisConnectionException;
import io.lettuce.core.RedisException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.TransactionResult;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.codec.ByteArrayCodec;
import io.partfs.engine.NameCodec;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * {@link KvStore} on Redis through lettuce: the shared metadata engine, which several machines
 * may mount at once.
 *
 * <p>Concurrency: a transaction is optimistic. On a connection of its own (from {@link #pool}),
 * it WATCHes every key before reading it (pipelined with the read), buffers its writes, and
 * sends them in one pipelined MULTI/EXEC; if
 * another client changed a watched key, EXEC is discarded and the body runs again, up to
 * {@link #MAX_ATTEMPTS} times. A first attempt answers reads of what the caller believes it
 * knows ({@link KvStore.Writer#believe}) without asking, and sends the checks of those beliefs
 * with its writes as one script: a create or a write's commit whose reads the metadata engine's
 * cache could answer costs one round trip instead of two. Read-only views and counters use one shared connection, which
 * lettuce makes safe for concurrent callers (and replays after a reconnect: a counter may then skip ids, never repeat one).
 * Transactions survive a lost connection by running again on a new one ({@link #txnClient()}).
 *
 * <p>Plain keys are Redis strings, counters decimal strings (INCRBY), hashes Redis hashes.
 * Durability is Redis's own (appendonly and its fsync policy); {@link #sync()} adds nothing.
 */
public final class RedisKvStore implements KvStore {
    private static final int MAX_ATTEMPTS = 100;
    private static final int POOL_SIZE = 16;
    /** How long a command, or an operation whose connection dropped, waits for Redis; {@code ?timeout=} in the URL changes it. */
    static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(30);
    private static final Duration MIN_TIMEOUT = Duration.ofSeconds(1);
    private static final Duration MAX_TIMEOUT = Duration.ofHours(1);

    private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(RedisKvStore.class);

    private final String description;
    private final Duration timeout;
    /** False once the server refused the checking script (an ACL without @scripting, say): then no beliefs. */
    private volatile boolean scripts = true;
    private final io.lettuce.core.resource.ClientResources resources;
    /** Reads and counters, on {@link #shared}: queued while disconnected and replayed after a reconnect, as lettuce does by default. */
    private final RedisClient client;
    private final RedisURI uri;
    /** Transactions, on {@link #pool} connections: see {@link #txnClient()}; made at the first, read-only commands need none. */
    private RedisClient txnClient;
    /**
     * This client's commit log, one hash: a field per transaction connection, holding the number
     * of the last transaction committed on it, written by that transaction itself (in its
     * MULTI/EXEC or script). When a connection drops before EXEC's answer comes back, the
     * transaction may or may not have been applied; once Redis answers again, the field says
     * which, and update() either returns or runs the transaction again. One small hash per
     * client, deleted at close; it expires {@link #COMMIT_LOG_TTL} after the client's last
     * commit (pushed back at most every {@link #COMMIT_LOG_REFRESH}), so a crashed client's goes too.
     */
    private final String commitLog = "commitlog:" + Long.toHexString(ThreadLocalRandom.current().nextLong());
    private final java.util.concurrent.atomic.AtomicLong commits = new java.util.concurrent.atomic.AtomicLong();
    /** When the last out-of-memory error was logged (nanoTime), 0 for never. */
    private final io.partfs.engine.LogLimit outOfMemoryLog = new io.partfs.engine.LogLimit(java.time.Duration.ofMinutes(1));
    private final Map<Object, String> commitLogFields = new java.util.concurrent.ConcurrentHashMap<>();
    private static final Duration COMMIT_LOG_TTL = Duration.ofDays(1);
    private static final Duration COMMIT_LOG_REFRESH = Duration.ofMinutes(10);
    /** When the commit log's expiry was last pushed back ({@link System#nanoTime}); unset before the first commit. */
    private final java.util.concurrent.atomic.AtomicLong commitLogKept = new java.util.concurrent.atomic.AtomicLong();
    private final java.util.concurrent.atomic.AtomicBoolean commitLogKeptOnce = new java.util.concurrent.atomic.AtomicBoolean();
    private final AtomicInteger commitLogFieldsMade = new AtomicInteger();
    private final StatefulRedisConnection<byte[], byte[]> shared;
    private final BlockingQueue<StatefulRedisConnection<byte[], byte[]>> pool = new ArrayBlockingQueue<>(POOL_SIZE);
    private final AtomicInteger created = new AtomicInteger();

    /**
     * Connects to {@code redis://[user:password@]host:port/db} (or {@code rediss://}, or
     * {@code redis-sentinel://...#master}, whose master is looked up again at every reconnect;
     * {@code rediss-sentinel://} for TLS to Sentinel and to Redis, with the same tls- parameters).
     *
     * @throws IOException when the URL is malformed, Redis cannot be reached, or refuses the login
     */
    public RedisKvStore(String url) throws IOException {
        this.timeout = timeoutOf(url);
        RedisURI uri;
        try {
            uri = RedisURI.create(url);
        } catch (RuntimeException e) {
            throw new IOException("invalid Redis URL '" + redact(url) + "': expected " + (url.matches("rediss?-sentinel:.*")
                    ? "redis-sentinel://[password@]host:port[,host:port]/db[?timeout=30s]#master (the name Sentinel monitors the master by)"
                    : "redis://[user:password@]host:port/db[?timeout=30s]") + "; in a password, write @ / # ? as %40 %2F %23 %3F");
        }
        uri.setTimeout(timeout);
        this.ssl = sslOptions(url, uri);
        if (uri.getSentinels().isEmpty()) {
            this.description = (uri.isSsl() ? "rediss://" : "redis://") + uri.getHost() + ":" + uri.getPort() + "/" + uri.getDatabase();
        } else {
            this.description = (uri.isSsl() ? "rediss-sentinel://" : "redis-sentinel://") + uri.getSentinels().stream().map(u -> u.getHost() + ":" + u.getPort())
                    .collect(java.util.stream.Collectors.joining(",")) + "/" + uri.getDatabase() + "#" + uri.getSentinelMasterId();
        }
        this.resources = io.lettuce.core.resource.DefaultClientResources.builder().reconnectDelay(RECONNECT_DELAY).build();
        this.client = RedisClient.create(resources, uri);
        if (ssl != null) {
            client.setOptions(io.lettuce.core.ClientOptions.builder().sslOptions(ssl).build());
        }
        this.uri = uri;
        watchOutages();
        try {
            this.shared = client.connect(ByteArrayCodec.INSTANCE);
            connectedOnce = true;
        } catch (RuntimeException e) {
            RuntimeException why = e;
            if (uri.getDatabase() != 0 && rootMessage(e).contains("closed prematurely")) {
                why = selectRefusal(e);
            }
            shutdownClients();
            throw wrap("connect", why);
        }
        try {
            if ("1".equals(infoField(info("cluster"), "cluster_enabled"))) {
                throw clusterMode();
            }
            checkEvictionPolicy(memoryInfo());
            durabilityProblem = durabilityProblem(info("persistence"));
        } catch (IOException | RuntimeException e) {
            closed = true; // a refused server is no outage to report
            shared.close();
            shutdownClients();
            throw e instanceof RuntimeException re ? wrap("INFO", re) : (IOException) e;
        }
    }

    /**
     * Between two attempts to reconnect a dropped connection: 1 ms, doubling, one second at most.
     * Lettuce's default doubles up to 30 s, so after an outage of a minute or two the connection
     * came back up to 30 s after Redis did, and operations waiting for it failed meanwhile
     * (measured: 29 s after a 95 s outage). A refused connect costs Redis and us next to nothing.
     */
    static final io.lettuce.core.resource.Delay RECONNECT_DELAY =
            io.lettuce.core.resource.Delay.exponential(Duration.ZERO, Duration.ofSeconds(1), 2, java.util.concurrent.TimeUnit.MILLISECONDS);

    /** What {@link #onReconnect} asked to run when the connection is back after an outage. */
    private final java.util.List<Runnable> reconnectActions = new java.util.concurrent.CopyOnWriteArrayList<>();

    @Override
    public void onReconnect(Runnable action) {
        reconnectActions.add(action);
    }

    /**
     * Set once the first connection is up: a connection refused in its handshake (a wrong
     * password, a database Redis does not have) is closed by lettuce as if lost, and was logged
     * as an outage ("lost the connection ... reconnecting") before the one-line refusal.
     */
    private volatile boolean connectedOnce;

    /** The log lines of an outage ({@link RedisOutageLog}), from the reads connection's events. */
    private void watchOutages() {
        RedisOutageLog outages = new RedisOutageLog(description, timeout);
        client.addListener(new io.lettuce.core.RedisConnectionStateListener() {
            @Override
            public void onRedisConnected(io.lettuce.core.RedisChannelHandler<?, ?> conn, java.net.SocketAddress a) {
                if (outages.connected()) {
                    for (Runnable action : reconnectActions) {
                        try {
                            action.run();
                        } catch (RuntimeException e) {
                            log.warn("an action after reconnecting to Redis failed: {}", e.toString());
                        }
                    }
                }
            }

            @Override
            public void onRedisDisconnected(io.lettuce.core.RedisChannelHandler<?, ?> conn) {
                if (connectedOnce && !closed) {
                    outages.disconnected();
                }
            }
        });
        resources.eventBus().get()
                .filter(e -> e instanceof io.lettuce.core.event.connection.ReconnectFailedEvent)
                .subscribe(e -> outages.reconnectFailed(((io.lettuce.core.event.connection.ReconnectFailedEvent) e).getCause()));
    }

    /**
     * The URL's {@code timeout} ({@code ?timeout=90s}, also ms, m, h; seconds without a unit), or 30 s.
     * How long an operation waits for a Redis that does not answer before it fails with EIO:
     * above a Sentinel's {@code down-after-milliseconds} plus its failover, operations wait out
     * a failover instead of failing; shorter, a stalled Redis fails ClickHouse's calls sooner.
     */
    private static Duration timeoutOf(String url) throws IOException {
        int query = url.indexOf('?');
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("[?&]timeout=([^&#]*)").matcher(query < 0 ? "" : url.substring(query));
        if (!m.find()) {
            return DEFAULT_TIMEOUT;
        }
        // parsed here: lettuce takes a value it cannot read for its own default, silently
        java.util.regex.Matcher v = java.util.regex.Pattern.compile("(\\d{1,9})(ms|s|m|h)?").matcher(m.group(1));
        Duration t = !v.matches() ? null : switch (v.group(2) == null ? "s" : v.group(2)) {
            case "ms" -> Duration.ofMillis(Long.parseLong(v.group(1)));
            case "m" -> Duration.ofMinutes(Long.parseLong(v.group(1)));
            case "h" -> Duration.ofHours(Long.parseLong(v.group(1)));
            default -> Duration.ofSeconds(Long.parseLong(v.group(1)));
        };
        if (t == null || t.compareTo(MIN_TIMEOUT) < 0 || t.compareTo(MAX_TIMEOUT) > 0) {
            throw new IOException("invalid Redis URL '" + redact(url) + "': timeout must be between 1s and 1h, not '"
                    + m.group(1) + "' (e.g. ?timeout=90s, 1500ms, 2m)");
        }
        return t;
    }

    /** TLS options of a {@code rediss://} URL's tls- parameters, or null for lettuce's defaults. */
    private final io.lettuce.core.SslOptions ssl;

    /**
     * The TLS parameters of a {@code rediss://} URL, JuiceFS's names for them, or null when it
     * gives none. {@code tls-ca-cert-file=FILE}: a PEM file of the certificates of the CA that
     * signed Redis's, trusted besides the JVM's own CAs (as {@code --ca-bundle} is for S3), for a
     * Redis whose certificate a private CA signed; the host name is still checked.
     * {@code tls-cert-file=FILE&tls-key-file=FILE}: the client certificate (PEM, its chain) and
     * its unencrypted PKCS#8 PEM key, for a Redis that asks clients for one (tls-auth-clients).
     */
    private static io.lettuce.core.SslOptions sslOptions(String url, RedisURI uri) throws IOException {
        java.nio.file.Path ca = urlFile(url, "tls-ca-cert-file");
        java.nio.file.Path cert = urlFile(url, "tls-cert-file");
        java.nio.file.Path key = urlFile(url, "tls-key-file");
        if (ca == null && cert == null && key == null) {
            return null;
        }
        String bad = "invalid Redis URL '" + redact(url) + "': ";
        if (!uri.isSsl()) {
            throw new IOException(bad + (ca != null ? "tls-ca-cert-file" : cert != null ? "tls-cert-file" : "tls-key-file")
                    + " is for Redis over TLS: write " + (url.startsWith("redis-sentinel:") ? "rediss-sentinel://" : "rediss://"));
        }
        if ((cert == null) != (key == null)) {
            throw new IOException(bad + "give tls-cert-file and tls-key-file together (the client certificate and its key)");
        }
        io.lettuce.core.SslOptions.Builder b = io.lettuce.core.SslOptions.builder().jdkSslProvider();
        if (ca != null) {
            javax.net.ssl.TrustManager[] trust;
            try {
                trust = io.partfs.engine.object.CaBundle.trustManagers(ca);
            } catch (IOException e) {
                throw new IOException(bad + e.getMessage(), e);
            }
            b.trustManager(new io.netty.handler.ssl.util.SimpleTrustManagerFactory() {
                @Override
                protected void engineInit(java.security.KeyStore keyStore) {
                }

                @Override
                protected void engineInit(javax.net.ssl.ManagerFactoryParameters parameters) {
                }

                @Override
                protected javax.net.ssl.TrustManager[] engineGetTrustManagers() {
                    return trust;
                }
            });
        }
        if (cert != null) {
            for (java.nio.file.Path f : new java.nio.file.Path[] {cert, key}) {
                if (!java.nio.file.Files.isReadable(f)) {
                    throw new IOException(bad + "cannot read " + f + ": give the client certificate's and key's PEM files");
                }
            }
            try {
                // netty reads them now, not at the first connect: a key it cannot use fails here, in one line
                io.netty.handler.ssl.SslContextBuilder.forClient().keyManager(cert.toFile(), key.toFile()).build();
            } catch (javax.net.ssl.SSLException | IllegalArgumentException e) {
                throw new IOException(bad + "cannot use the client certificate " + cert + " with the key " + key + " ("
                        + e.getMessage() + "): give PEM files, the key unencrypted PKCS#8 (BEGIN PRIVATE KEY)", e);
            }
            b.keyManager(cert.toFile(), key.toFile(), null);
        }
        return b.build();
    }

    /** The file a URL parameter names, or null without the parameter. */
    private static java.nio.file.Path urlFile(String url, String parameter) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("[?&]" + parameter + "=([^&#]*)").matcher(url);
        return m.find() ? java.nio.file.Path.of(java.net.URLDecoder.decode(m.group(1), StandardCharsets.UTF_8)) : null;
    }

    /** How long an operation waits for Redis before failing. */
    public Duration timeout() {
        return timeout;
    }

    /** {@code d} for a message: "30 s", "1.5 s". */
    static String seconds(Duration d) {
        return d.toMillis() % 1000 == 0 ? d.toSeconds() + " s" : String.format(java.util.Locale.ROOT, "%.1f s", d.toMillis() / 1000.0);
    }

    /** INFO memory, or "" where the user may not run INFO (it is @dangerous: managed services may deny it). */
    private String memoryInfo() {
        return info("memory");
    }

    /** A section of INFO, or "" where the user may not run INFO (it is @dangerous: managed services may deny it). */
    private String info(String section) {
        try {
            return shared.sync().info(section);
        } catch (RedisCommandExecutionException e) {
            log.debug("cannot read INFO {} of {}: {}", section, description, e.getMessage());
            return "";
        }
    }

    /**
     * The refusal of a Redis in cluster mode (Redis Cluster, a managed service's "cluster mode
     * enabled"): a volume's transactions span keys of many hash slots (CROSSSLOT), its keys live
     * on every shard (MOVED), and only database 0 exists. Checked at connect (INFO cluster), and
     * by the refusals themselves where INFO is denied.
     */
    private IOException clusterMode() {
        return new IOException("Redis at " + description + " runs in cluster mode, which PartFS does not support (a volume's "
                + "transactions span keys of many hash slots): use a Redis without cluster mode, one primary with replicas, "
                + "reached through its primary endpoint or redis-sentinel://");
    }

    /**
     * Why the handshake's SELECT of the URL's database failed, asked again on a connection to
     * database 0: lettuce closes a connection whose handshake Redis refused, and the refusal
     * ("SELECT is not allowed in cluster mode", "DB index is out of range") sometimes loses the
     * race with that close, leaving "Connection closed prematurely". {@code failed} when the
     * second connection learns nothing more.
     */
    private RuntimeException selectRefusal(RuntimeException failed) {
        RedisClient probe = RedisClient.create(resources, RedisURI.builder(uri).withDatabase(0).build());
        if (ssl != null) {
            probe.setOptions(io.lettuce.core.ClientOptions.builder().sslOptions(ssl).build());
        }
        try (var conn = probe.connect(ByteArrayCodec.INSTANCE)) {
            conn.sync().select(uri.getDatabase());
            return failed;
        } catch (RedisCommandExecutionException refused) {
            return new RedisConnectionException(refused.getMessage(), refused);
        } catch (RuntimeException notEvenThat) {
            failed.addSuppressed(notEvenThat);
            return failed;
        } finally {
            probe.shutdown(Duration.ZERO, Duration.ofSeconds(2));
        }
    }

    /** Whether Redis refused {@code e}'s command, or a command of its transaction (suppressed), for cluster mode. */
    private static boolean refusedForClusterMode(Throwable e) {
        java.util.List<Throwable> refusals = new java.util.ArrayList<>(java.util.List.of(e.getSuppressed()));
        for (Throwable c = e; c != null; c = c.getCause()) {
            refusals.add(c);
        }
        return refusals.stream().map(t -> String.valueOf(t.getMessage())).anyMatch(m ->
                m.contains("is not allowed in cluster mode") || m.startsWith("CROSSSLOT") || m.startsWith("MOVED ")
                        || m.startsWith("CLUSTERDOWN"));
    }

    /** Set at connect: see {@link #durabilityProblem()}. */
    private final String durabilityProblem;

    @Override
    public String durabilityProblem() {
        return durabilityProblem;
    }

    /**
     * What a Redis without an append-only file risks, from its INFO persistence, or null when it
     * has one (or INFO was refused). Without one, a restart loads the last RDB snapshot: every
     * metadata change since is lost (files written since gone, their objects leaked), and with
     * no snapshots configured the whole volume (a mount then stops, see Sessions).
     */
    private String durabilityProblem(String persistenceInfo) {
        if (!"0".equals(infoField(persistenceInfo, "aof_enabled"))) {
            return null;
        }
        return "Redis at " + description + " keeps no append-only file (appendonly no): a restart or crash of Redis loses every"
                + " metadata change since its last RDB snapshot, or the whole volume if it takes none; PartFS wants"
                + " appendonly yes with appendfsync everysec or always (CONFIG SET appendonly yes, and in redis.conf)";
    }

    /**
     * Refuses a Redis that evicts any key when it reaches its maxmemory: it would drop inodes,
     * directory entries and chunk lists, and with them files. A policy that evicts only keys with
     * an expiry (volatile-*) touches nothing but the commit logs, and is only warned about.
     */
    private void checkEvictionPolicy(String memoryInfo) throws IOException {
        String policy = infoField(memoryInfo, "maxmemory_policy");
        String max = infoField(memoryInfo, "maxmemory");
        boolean limited = max != null && !"0".equals(max);
        if (policy == null || "noeviction".equals(policy)) {
            return;
        }
        if (policy.startsWith("allkeys-") && limited) {
            throw new IOException("Redis at " + description + " evicts keys at its maxmemory (maxmemory-policy " + policy
                    + "), which would lose PartFS metadata and the files with it: set maxmemory-policy noeviction "
                    + "(CONFIG SET maxmemory-policy noeviction, and in redis.conf)");
        }
        log.warn("Redis at {} has maxmemory-policy {}{}: PartFS wants noeviction (CONFIG SET maxmemory-policy noeviction)",
                description, policy, policy.startsWith("allkeys-") ? " and no maxmemory yet, so it evicts nothing for now"
                        : ", which evicts only keys with an expiry (its transaction logs)");
    }

    /** A field of an INFO answer ({@code name:value} lines), or null. */
    private static String infoField(String info, String name) {
        for (String line : info.split("\r?\n")) {
            if (line.startsWith(name + ":")) {
                return line.substring(name.length() + 1).trim();
            }
        }
        return null;
    }

    /**
     * The client of transaction connections. A WATCH dies with its TCP connection, and the
     * commands of a MULTI/EXEC must all go out on the one that sent the MULTI, so a transaction
     * connection is one TCP connection for life: lettuce does not reconnect it, a command
     * written to it once it dropped fails at once, and update() goes on with a new connection
     * ({@link #replace}). With lettuce reconnecting it (before), a drop and a reconnect between
     * two commands of one transaction sent the rest on the new connection: outside the MULTI,
     * each applied on its own (half a transaction), or without the WATCH (another client's change
     * overwritten); and under cuts every few milliseconds a MULTI's failure reset lettuce's
     * transaction state under the next command (a NullPointerException out of update()).
     */
    private synchronized RedisClient txnClient() {
        if (txnClient == null) {
            RedisClient c = RedisClient.create(resources, uri);
            c.setOptions((ssl == null ? io.lettuce.core.ClientOptions.builder() : io.lettuce.core.ClientOptions.builder().sslOptions(ssl))
                    .autoReconnect(false)
                    .disconnectedBehavior(io.lettuce.core.ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
                    .replayFilter(RedisKvStore::failUnsent)
                    .build());
            txnClient = c;
        }
        return txnClient;
    }

    /** How {@link #failUnsent} fails a command: as lettuce refuses one while disconnected (see {@link #throwIfRefusedUnsent}). */
    static final String NOT_SENT = "Currently not connected: the connection dropped as the command was written, and it was not sent";

    /**
     * The replay filter of transaction connections: fails {@code command}, which was never sent,
     * and keeps it out of the buffer of commands to send at a reconnect. Lettuce asks it of a
     * command written just as the connection dropped (it passed the connected check, then found
     * the connection gone); filtered out without this, the command was never completed, and
     * its caller waited the whole timeout for it: a commit whose outcome was looked up then
     * failed with "Redis did not answer within 30 s" while Redis answered all along. Read in
     * lettuce 7.7's DefaultEndpoint: the filter is asked there only, and by a write retry that
     * commands refused while disconnected never reach; failing a command that did go out would
     * have update() run a perhaps applied EXEC again, so a lettuce upgrade must check this again.
     */
    static boolean failUnsent(io.lettuce.core.protocol.RedisCommand<?, ?, ?> command) {
        command.completeExceptionally(new RedisException(NOT_SENT));
        return true;
    }

    /**
     * The URL with any password replaced, for messages. Everything between the scheme and the
     * last '@' counts as the user and password, so a password holding '@', '/' or '#' that was
     * not percent-encoded (a URL lettuce then refuses) is hidden whole; only a user name
     * before the first ':' is kept.
     */
    public static String redact(String url) {
        int at = url == null ? -1 : url.lastIndexOf('@');
        if (at < 0) {
            return url;
        }
        java.util.regex.Matcher scheme = SCHEME_AND_SLASHES.matcher(url);
        int start = scheme.find() ? scheme.end() : 0;
        if (start > at) {
            return url;
        }
        String userInfo = url.substring(start, at);
        int colon = userInfo.indexOf(':');
        return url.substring(0, start) + (colon < 0 ? "***" : userInfo.substring(0, colon) + ":***") + url.substring(at);
    }

    /** A URL's scheme and the slashes after it, however many a mistyped URL has. */
    private static final java.util.regex.Pattern SCHEME_AND_SLASHES = java.util.regex.Pattern.compile("^[a-zA-Z][a-zA-Z0-9+.-]*:/*");

    private static byte[] b(String s) {
        return NameCodec.encode(s);
    }

    private IOException wrap(String op, RuntimeException e) {
        if (refusedForClusterMode(e)) {
            return clusterMode(); // where INFO is denied: a SELECT refused at connect, or a transaction or key refused later
        }
        if (outOfMemory(e)) {
            outOfMemoryLog.error(log, "Redis at {} is out of memory: it refuses every write past its maxmemory, so files can be "
                    + "neither created nor written (ENOSPC) until Redis gets more memory (CONFIG SET maxmemory) "
                    + "or a larger instance", description);
            return new io.partfs.engine.FsException.NoSpace("Redis at " + description + " reached its maxmemory and refused " + op
                    + ": give Redis more memory");
        }
        if (e instanceof RedisConnectionException) {
            String why = rootMessage(e);
            if (why.contains("NOAUTH") || why.contains("WRONGPASS") || why.contains("invalid password")) { // refused at connect
                return new IOException("Redis at " + description + " refused the login (" + why.trim()
                        + "): check the user and password in the URL", e);
            }
            if (why.contains("DB index is out of range")) {
                return new IOException("Redis at " + description + " has no database " + uri.getDatabase() + " (" + why.trim()
                        + "): give a database number below its 'databases' setting (16 unless redis.conf says otherwise)", e);
            }
            if (why.contains("certificate_required")) {
                return new IOException("cannot reach Redis at " + description + ": it asks for a client certificate (" + why.trim()
                        + "): give its PEM file and the key's as ?tls-cert-file=FILE&tls-key-file=FILE in the URL", e);
            }
            if (untrustedCertificate(e)) {
                return new IOException("cannot reach Redis at " + description + ": its TLS certificate is not trusted (" + why.trim()
                        + "): give the PEM file of the CA that signed it as ?tls-ca-cert-file=FILE in the URL", e);
            }
            return new IOException("cannot reach Redis at " + description + " (" + why + "): check that it runs and the URL is right", e);
        }
        if (notReady(e)) {
            return new IOException("Redis at " + description + " did not serve " + op + " within " + seconds(timeout) + ": "
                    + rootMessage(e).trim() + " (after a restart Redis answers nothing until its data is loaded; raise"
                    + " ?timeout= in the URL to wait longer)", e);
        }
        if (onReplica(e)) {
            return new IOException("Redis at " + description + " refused " + op + " as a read-only replica, and no master answered"
                    + " there within " + seconds(timeout) + " (nothing was written): after a failover the URL must lead to the new"
                    + " master (a primary endpoint, or redis-sentinel://)", e);
        }
        if (e instanceof RedisCommandExecutionException) {
            String m = String.valueOf(e.getMessage());
            if (m.contains("NOAUTH") || m.contains("WRONGPASS") || m.contains("invalid password")) {
                return new IOException("Redis at " + description + " refused the login: check the user and password in the URL", e);
            }
            return new IOException("Redis at " + description + " rejected " + op + ": " + m, e);
        }
        return new IOException("Redis " + op + " failed at " + description + ": " + rootMessage(e), e);
    }

    /** How Redis refuses a write past maxmemory (noeviction): "OOM command not allowed when used memory > 'maxmemory'". */
    private static final String OUT_OF_MEMORY = "OOM command not allowed";

    /** Whether {@code e}, or the queued command's error it carries, is Redis refusing a write for want of memory. */
    private static boolean outOfMemory(Throwable e) {
        if (String.valueOf(e.getMessage()).contains(OUT_OF_MEMORY)) {
            return true;
        }
        for (Throwable s : e.getSuppressed()) {
            if (String.valueOf(s.getMessage()).contains(OUT_OF_MEMORY)) {
                return true;
            }
        }
        return false;
    }

    /** Whether the TLS handshake under {@code e} failed for want of a trusted certificate path. */
    private static boolean untrustedCertificate(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (c instanceof java.security.cert.CertPathBuilderException || c instanceof java.security.cert.CertPathValidatorException) {
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
        return c.getMessage() == null ? c.getClass().getSimpleName() : c.getMessage();
    }

    private static long parseCounter(byte[] v) {
        return v == null ? 0 : Long.parseLong(new String(v, StandardCharsets.US_ASCII));
    }

    private static Map<String, byte[]> decodeHash(Map<byte[], byte[]> raw) {
        Map<String, byte[]> out = new HashMap<>(raw.size() * 2);
        for (Map.Entry<byte[], byte[]> e : raw.entrySet()) {
            out.put(NameCodec.decode(e.getKey()), e.getValue());
        }
        return out;
    }

    /** Plain reads on a connection; inside a transaction each key is WATCHed first. */
    private class CommandReader implements Reader {
        final RedisCommands<byte[], byte[]> cmd;
        final boolean watch;

        CommandReader(RedisCommands<byte[], byte[]> cmd, boolean watch) {
            this.cmd = cmd;
            this.watch = watch;
        }

        /**
         * Runs the request(s) of {@code c}. Outside a transaction, a request the connection's drop
         * cut off (a reset, a Redis restart, a proxy's) is sent again once the connection is back,
         * and one Redis refused as not ready ({@link #notReady}: loading its data after a restart)
         * a moment later, until the timeout: it only reads, so nothing is undone or done twice.
         * Inside one the failure goes up: the WATCHes died with the connection, and update() runs
         * it all again. Before, a getattr or a listing that met a drop failed with EIO.
         */
        private <V> V call(String what, RedisCall<V> c) throws IOException {
            long deadline = 0;
            while (true) {
                try {
                    return c.run();
                } catch (RedisException e) {
                    if (watch || closed || !(cutOff(e) || notReady(e))) {
                        throw wrap(what, e); // (closed: a request racing close() would wait for a connection that never comes)
                    }
                    deadline = deadline != 0 ? deadline : System.nanoTime() + timeout.toNanos();
                    if (!awaitReconnect(cmd.getStatefulConnection(), deadline)) {
                        throw wrap(what, e);
                    }
                }
            }
        }

        /** SCAN with MATCH on the prefix (its glob characters escaped); never WATCHed. */
        @Override
        public boolean holdsAnyKey() throws IOException {
            return call("DBSIZE", () -> cmd.dbsize() > 0);
        }

        @Override
        public void scanKeys(String prefix, KeyPage each) throws IOException {
            String pattern = prefix.replaceAll("([\\\\*?\\[\\]])", "\\\\$1") + "*";
            io.lettuce.core.ScanArgs args = new io.lettuce.core.ScanArgs().match(b(pattern)).limit(1000);
            io.lettuce.core.ScanCursor cursor = io.lettuce.core.ScanCursor.INITIAL;
            do {
                io.lettuce.core.ScanCursor at = cursor;
                io.lettuce.core.KeyScanCursor<byte[]> page;
                try {
                    page = call("SCAN", () -> cmd.scan(at, args));
                } catch (RuntimeException e) {
                    throw wrap("SCAN", e);
                }
                if (!page.getKeys().isEmpty()) {
                    each.accept(page.getKeys().stream().map(NameCodec::decode).toList());
                }
                cursor = page;
            } while (!cursor.isFinished());
        }

        /**
         * The key, WATCHed first inside a transaction. The WATCH is sent without waiting for its
         * reply: the read that follows on the same connection is answered after it, so the
         * pair costs one round trip, not two. {@link #watched} checks the WATCH's reply.
         */
        private byte[] key(String k) {
            byte[] key = b(k);
            if (watch) {
                watches.add(cmd.getStatefulConnection().async().watch(key));
                watchedAny = true;
            }
            return key;
        }

        /** Some key was WATCHed: the commit needs MULTI/EXEC for the WATCHes to count. */
        boolean watchedAny;

        private final java.util.List<io.lettuce.core.RedisFuture<String>> watches = new java.util.ArrayList<>(4);

        /** Returns {@code value} once the WATCHes sent before it are known to have succeeded. */
        private <V> V watched(V value) {
            for (io.lettuce.core.RedisFuture<String> w : watches) {
                await(w); // already answered: Redis replies in order
            }
            watches.clear();
            return value;
        }

        @Override
        public byte[] get(String k) throws IOException {
            return call("GET", () -> watched(cmd.get(key(k))));
        }

        @Override
        public long counter(String k) throws IOException {
            return parseCounter(call("GET", () -> watched(cmd.get(key(k)))));
        }

        @Override
        public byte[] hget(String hash, String field) throws IOException {
            return call("HGET", () -> watched(cmd.hget(key(hash), b(field))));
        }

        @Override
        public java.util.List<byte[]> hmget(String hash, java.util.List<String> fields) throws IOException {
            if (fields.isEmpty()) {
                return java.util.List.of();
            }
            byte[][] fs = new byte[fields.size()][];
            for (int i = 0; i < fs.length; i++) {
                fs[i] = b(fields.get(i));
            }
            return call("HMGET", () -> {
                java.util.List<byte[]> out = new java.util.ArrayList<>(fs.length);
                for (io.lettuce.core.KeyValue<byte[], byte[]> kv : watched(cmd.hmget(key(hash), fs))) {
                    out.add(kv.hasValue() ? kv.getValue() : null);
                }
                return out;
            });
        }

        /** Both commands go out together (after their WATCHes): one round trip. */
        @Override
        public byte[][] getAndHget(String key, String hash, String field) throws IOException {
            return call("GET and HGET", () -> {
                io.lettuce.core.api.async.RedisAsyncCommands<byte[], byte[]> async = cmd.getStatefulConnection().async();
                io.lettuce.core.RedisFuture<byte[]> value = async.get(key(key));
                io.lettuce.core.RedisFuture<byte[]> entry = async.hget(key(hash), b(field));
                return watched(new byte[][] {await(value), await(entry)});
            });
        }

        @Override
        public Map<String, byte[]> hgetAll(String hash) throws IOException {
            return decodeHash(call("HGETALL", () -> watched(cmd.hgetall(key(hash)))));
        }

        /** HSCAN until {@code limit} fields (outside transactions; inside, all of the hash, WATCHed). */
        @Override
        public Map<String, byte[]> hgetSome(String hash, int limit) throws IOException {
            if (watch) {
                return Reader.super.hgetSome(hash, limit);
            }
            Map<String, byte[]> out = new HashMap<>();
            io.lettuce.core.ScanArgs args = new io.lettuce.core.ScanArgs().limit(Math.max(1, Math.min(limit, 1000)));
            io.lettuce.core.ScanCursor cursor = io.lettuce.core.ScanCursor.INITIAL;
            do {
                io.lettuce.core.ScanCursor at = cursor;
                io.lettuce.core.MapScanCursor<byte[], byte[]> page = call("HSCAN", () -> cmd.hscan(key(hash), at, args));
                for (Map.Entry<byte[], byte[]> e : page.getMap().entrySet()) {
                    if (out.size() >= limit) {
                        return out;
                    }
                    out.put(NameCodec.decode(e.getKey()), e.getValue());
                }
                cursor = page;
            } while (!cursor.isFinished() && out.size() < limit);
            return out;
        }

        /** HSCAN, a page of about a thousand fields at a time (outside transactions; inside, all of the hash, WATCHed). */
        @Override
        public void scanHash(String hash, FieldPage each) throws IOException {
            if (watch) {
                Reader.super.scanHash(hash, each);
                return;
            }
            io.lettuce.core.ScanArgs args = new io.lettuce.core.ScanArgs().limit(1000);
            io.lettuce.core.ScanCursor cursor = io.lettuce.core.ScanCursor.INITIAL;
            do {
                io.lettuce.core.ScanCursor at = cursor;
                io.lettuce.core.MapScanCursor<byte[], byte[]> page = call("HSCAN", () -> cmd.hscan(b(hash), at, args));
                if (!page.getMap().isEmpty()) {
                    each.accept(decodeHash(page.getMap()));
                }
                cursor = page;
            } while (!cursor.isFinished());
        }

        /**
         * Outside transactions: every hash's HLEN in one pipelined round trip; then the hashes of
         * up to a thousand fields read whole, pipelined, in groups of at most
         * {@value KvStore#SCAN_PAGE_FIELDS} fields, and longer ones with HSCAN.
         */
        @Override
        public void scanHashes(java.util.List<String> hashes, HashPage each) throws IOException {
            if (watch || hashes.size() < 2) {
                Reader.super.scanHashes(hashes, each);
                return;
            }
            long[] lengths = call("HLEN", () -> {
                var async = shared.async();
                java.util.List<io.lettuce.core.RedisFuture<Long>> sent = new java.util.ArrayList<>(hashes.size());
                for (String h : hashes) {
                    sent.add(async.hlen(b(h)));
                }
                long[] got = new long[sent.size()];
                for (int i = 0; i < got.length; i++) {
                    got[i] = await(sent.get(i));
                }
                return got;
            });
            java.util.List<String> group = new java.util.ArrayList<>();
            long grouped = 0;
            for (int i = 0; i < hashes.size(); i++) {
                String hash = hashes.get(i);
                long n = lengths[i];
                if (n > 1000) {
                    scanHash(hash, page -> each.accept(hash, page));
                } else if (n > 0) {
                    if (grouped + n > SCAN_PAGE_FIELDS) {
                        readWhole(group, each);
                        group.clear();
                        grouped = 0;
                    }
                    group.add(hash);
                    grouped += n;
                }
            }
            readWhole(group, each);
        }

        private void readWhole(java.util.List<String> group, HashPage each) throws IOException {
            java.util.List<Map<String, byte[]>> all = hgetAllMany(group);
            for (int i = 0; i < group.size(); i++) {
                if (!all.get(i).isEmpty()) {
                    each.accept(group.get(i), all.get(i));
                }
            }
        }

        /** Outside transactions the requests are pipelined: one round trip for all of them. */
        @Override
        public java.util.List<Map<String, byte[]>> hgetAllMany(java.util.List<String> hashes) throws IOException {
            if (watch || hashes.size() < 2) {
                return Reader.super.hgetAllMany(hashes);
            }
            return call("HGETALL", () -> {
                var async = shared.async();
                java.util.List<io.lettuce.core.RedisFuture<Map<byte[], byte[]>>> futures = new java.util.ArrayList<>(hashes.size());
                for (String h : hashes) {
                    futures.add(async.hgetall(b(h)));
                }
                java.util.List<Map<String, byte[]>> out = new java.util.ArrayList<>(hashes.size());
                try {
                    for (var f : futures) {
                        out.add(decodeHash(f.get()));
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new java.io.InterruptedIOException("interrupted reading metadata");
                } catch (java.util.concurrent.ExecutionException e) {
                    throw e.getCause() instanceof RedisException re ? re : new RedisException(e.getCause());
                }
                return out;
            });
        }

        @Override
        public java.util.List<byte[]> getAll(java.util.List<String> keys) throws IOException {
            if (keys.isEmpty()) {
                return java.util.List.of();
            }
            byte[][] ks = new byte[keys.size()][];
            for (int i = 0; i < ks.length; i++) {
                ks[i] = key(keys.get(i));
            }
            return call("MGET", () -> {
                java.util.List<byte[]> out = new java.util.ArrayList<>(ks.length);
                for (io.lettuce.core.KeyValue<byte[], byte[]> kv : watched(cmd.mget(ks))) {
                    out.add(kv.hasValue() ? kv.getValue() : null);
                }
                return out;
            });
        }

        @Override
        public long hlen(String hash) throws IOException {
            return call("HLEN", () -> watched(cmd.hlen(key(hash))));
        }
    }

    private enum Outcome { COMMITTED, CONFLICT, STALE_BELIEF }

    /**
     * Sends a transaction's writes in MULTI/EXEC, pipelined: one round trip for all of them.
     * CONFLICT when a watched key changed. A transaction that answered reads with beliefs sends
     * its checks and writes as one script ({@link #CHECK_AND_WRITE}) inside the MULTI/EXEC, or
     * alone when it WATCHed nothing: STALE_BELIEF, with nothing written, when a belief was wrong.
     */
    private Outcome commit(RedisCommands<byte[], byte[]> cmd, TxnBuffer buf, boolean watched, long number) {
        boolean believed = !buf.beliefsUsed().isEmpty();
        if (buf.isEmpty() && !believed) {
            try {
                cmd.unwatch();
            } catch (RedisException e) {
                // the connection is gone, and its WATCHes with it: a transaction that writes nothing is done
            }
            return Outcome.COMMITTED;
        }
        buf.hset(commitLog, commitLogField(cmd.getStatefulConnection()), Long.toString(number).getBytes(StandardCharsets.US_ASCII));
        io.lettuce.core.api.async.RedisAsyncCommands<byte[], byte[]> async = cmd.getStatefulConnection().async();
        if (believed && !watched) {
            // Every read was answered by a belief, so nothing is WATCHed and the script, atomic
            // on its own, is the whole transaction: two commands fewer for client and server.
            io.lettuce.core.RedisFuture<Object> checked;
            try {
                checked = sendScript(async, buf);
            } catch (RuntimeException e) {
                throw new NotSent(e);
            }
            throwIfRefusedUnsent(checked);
            try {
                return Long.valueOf(1).equals(await(checked)) ? Outcome.COMMITTED : Outcome.STALE_BELIEF;
            } catch (RedisCommandExecutionException e) {
                return refused(e, "");
            }
        }
        io.lettuce.core.RedisFuture<String> multi;
        io.lettuce.core.RedisFuture<Object> checking = null;
        List<io.lettuce.core.RedisFuture<?>> queued = new ArrayList<>(believed ? 0 : buf.ops().size());
        io.lettuce.core.RedisFuture<TransactionResult> exec;
        try {
            multi = async.multi();
            if (believed) {
                checking = sendScript(async, buf);
            } else {
                for (TxnBuffer.Op op : buf.ops()) {
                    if (op instanceof TxnBuffer.Put p) {
                        queued.add(async.set(b(p.key()), p.value()));
                    } else if (op instanceof TxnBuffer.Delete d) {
                        queued.add(async.del(b(d.key())));
                    } else if (op instanceof TxnBuffer.HSet h) {
                        queued.add(async.hset(b(h.hash()), b(h.field()), h.value()));
                    } else if (op instanceof TxnBuffer.HDel h) {
                        queued.add(async.hdel(b(h.hash()), b(h.field())));
                    } else if (op instanceof TxnBuffer.HDelAll h) {
                        queued.add(async.del(b(h.hash())));
                    } else if (op instanceof TxnBuffer.Add a) {
                        queued.add(async.incrby(b(a.counter()), a.delta()));
                    }
                }
            }
            exec = async.exec();
        } catch (RuntimeException e) {
            // lettuce may refuse a command while disconnected by throwing here, before sending it,
            // or fail inside (a NullPointerException seen when the MULTI failed as the connection
            // dropped): EXEC did not go out, so nothing of the transaction can have been applied
            throw new NotSent(e);
        }
        throwIfRefusedUnsent(exec);
        TransactionResult result;
        try {
            result = await(exec);
        } catch (RedisCommandExecutionException e) {
            if (notAppliedForNotReady(e, multi, believed ? List.of(checking) : queued)) {
                throw new NotApplied(e); // refused as not ready (Redis loading its data): nothing was applied
            }
            if (!believed) {
                for (io.lettuce.core.RedisFuture<?> q : queued) {
                    String why = queueError(q);
                    if (!why.isEmpty()) { // EXEC only says "EXECABORT": the reason is the queued command's
                        e.addSuppressed(new RedisCommandExecutionException(why));
                        break;
                    }
                }
                throw e;
            }
            // EXEC aborts the transaction when the script was refused: nothing was written
            return refused(e, queueError(checking));
        }
        await(multi);
        if (result.wasDiscarded()) {
            return Outcome.CONFLICT;
        }
        if (believed) {
            Object checked = result.get(0);
            if (checked instanceof RuntimeException e) {
                throw e;
            }
            return Long.valueOf(1).equals(checked) ? Outcome.COMMITTED : Outcome.STALE_BELIEF;
        }
        return Outcome.COMMITTED;
    }

    /**
     * Throws NotSent when lettuce refused {@code sent} without sending it. A command written to
     * a connection that is down (REJECT_COMMANDS, see {@link #txnClient}) comes back already
     * failed, within the call that wrote it, with one of the client's own messages; a command
     * that went out can only fail later, with the server's answer or the connection's loss.
     * Seen when Redis was killed under a running ClickHouse: the drop went unnoticed until the
     * EXEC was refused, and the create reported "may or may not have been applied" (EIO) where
     * it could have waited for Redis and run again.
     */
    private static void throwIfRefusedUnsent(io.lettuce.core.RedisFuture<?> sent) {
        if (!sent.isDone()) {
            return;
        }
        try {
            sent.toCompletableFuture().getNow(null);
        } catch (java.util.concurrent.CompletionException | java.util.concurrent.CancellationException e) {
            Throwable c = e.getCause();
            if (c instanceof RedisException && !(c instanceof RedisCommandExecutionException)
                    && String.valueOf(c.getMessage()).matches("(?s)(Currently not connected|Connection is closed|Request queue size exceeded).*")) {
                throw new NotSent(c);
            }
        }
    }

    /** Sends {@link #CHECK_AND_WRITE} with the beliefs and writes of {@code buf}. */
    private static io.lettuce.core.RedisFuture<Object> sendScript(io.lettuce.core.api.async.RedisAsyncCommands<byte[], byte[]> async,
                                                                  TxnBuffer buf) {
        Script script = Script.of(buf);
        return async.eval(CHECK_AND_WRITE, io.lettuce.core.ScriptOutputType.INTEGER, script.keys(), script.args());
    }

    /**
     * A transaction whose script failed, with nothing written: run the body again on real reads,
     * and stop using scripts when the server refuses them outright.
     */
    private Outcome refused(RedisCommandExecutionException e, String queueError) {
        String m = e.getMessage() + " " + queueError;
        if (m.contains(OUT_OF_MEMORY) || m.contains(REPLICA_REFUSAL)) {
            if (!queueError.isEmpty()) {
                e.addSuppressed(new RedisCommandExecutionException(queueError));
            }
            throw e; // the script ran into maxmemory, or a replica, at its first write, so it wrote nothing
        }
        if (m.contains("NOPERM") || m.contains("unknown command") || m.contains("not allowed") || m.contains("disabled")) {
            if (scripts) {
                scripts = false;
                log.warn("{} refuses Lua scripts ({}): metadata transactions read everything first (two round trips "
                        + "instead of one); allow EVAL (@scripting) to the PartFS user to avoid this", description, m.trim());
            }
        }
        return Outcome.STALE_BELIEF;
    }

    /**
     * Checks a transaction's beliefs and, only if all hold, applies its writes, atomically (a
     * script runs alone in Redis). Returns 1 when it wrote, 0 when a belief was wrong. KEYS are
     * the keys involved; ARGV is the number of checks, then each check (g: a plain key, h: a
     * hash field; then the KEYS index, for h the field, then 0 for "missing" or 1 and the
     * value), then the number of writes and each write (S key value, D key, H hash field value,
     * X hash field, I counter delta; keys as KEYS indexes).
     */
    private static final String CHECK_AND_WRITE = """
            local a = 1
            local function arg() local v = ARGV[a]; a = a + 1; return v end
            for _ = 1, tonumber(arg()) do
              local kind = arg()
              local key = KEYS[tonumber(arg())]
              local now
              if kind == 'g' then now = redis.call('GET', key) else now = redis.call('HGET', key, arg()) end
              if arg() == '0' then
                if now then return 0 end
              elseif now ~= arg() then
                return 0
              end
            end
            for _ = 1, tonumber(arg()) do
              local op = arg()
              local key = KEYS[tonumber(arg())]
              if op == 'S' then redis.call('SET', key, arg())
              elseif op == 'D' then redis.call('DEL', key)
              elseif op == 'H' then local f = arg(); redis.call('HSET', key, f, arg())
              elseif op == 'X' then redis.call('HDEL', key, arg())
              elseif op == 'I' then redis.call('INCRBY', key, arg())
              else return redis.error_reply('unknown write ' .. tostring(op)) end
            end
            return 1
            """;

    /** The KEYS and ARGV of {@link #CHECK_AND_WRITE} for one transaction. */
    private record Script(byte[][] keys, byte[][] args) {
        static Script of(TxnBuffer buf) {
            Map<String, Integer> index = new java.util.LinkedHashMap<>();
            java.util.List<byte[]> args = new java.util.ArrayList<>();
            java.util.function.Function<String, byte[]> key = k -> b(String.valueOf(index.computeIfAbsent(k, x -> index.size() + 1)));
            args.add(b(String.valueOf(buf.beliefsUsed().size())));
            for (TxnBuffer.Belief c : buf.beliefsUsed()) {
                args.add(b(c.field() == null ? "g" : "h"));
                args.add(key.apply(c.key()));
                if (c.field() != null) {
                    args.add(b(c.field()));
                }
                args.add(b(c.value() == null ? "0" : "1"));
                if (c.value() != null) {
                    args.add(c.value());
                }
            }
            args.add(b(String.valueOf(buf.ops().size())));
            for (TxnBuffer.Op op : buf.ops()) {
                if (op instanceof TxnBuffer.Put p) {
                    args.add(b("S"));
                    args.add(key.apply(p.key()));
                    args.add(p.value());
                } else if (op instanceof TxnBuffer.Delete d) {
                    args.add(b("D"));
                    args.add(key.apply(d.key()));
                } else if (op instanceof TxnBuffer.HSet h) {
                    args.add(b("H"));
                    args.add(key.apply(h.hash()));
                    args.add(b(h.field()));
                    args.add(h.value());
                } else if (op instanceof TxnBuffer.HDel h) {
                    args.add(b("X"));
                    args.add(key.apply(h.hash()));
                    args.add(b(h.field()));
                } else if (op instanceof TxnBuffer.HDelAll h) {
                    args.add(b("D"));
                    args.add(key.apply(h.hash()));
                } else if (op instanceof TxnBuffer.Add ad) {
                    args.add(b("I"));
                    args.add(key.apply(ad.counter()));
                    args.add(b(String.valueOf(ad.delta())));
                } else {
                    throw new IllegalStateException("unknown write " + op);
                }
            }
            byte[][] keys = index.keySet().stream().map(RedisKvStore::b).toArray(byte[][]::new);
            return new Script(keys, args.toArray(byte[][]::new));
        }
    }

    /** The error Redis gave a command queued in MULTI (EXEC then only says the transaction was aborted), or "". */
    private static String queueError(io.lettuce.core.RedisFuture<?> queued) {
        java.util.concurrent.CompletableFuture<?> f = queued.toCompletableFuture();
        if (!f.isCompletedExceptionally()) {
            return "";
        }
        try {
            f.join();
            return "";
        } catch (java.util.concurrent.CompletionException | java.util.concurrent.CancellationException x) {
            return String.valueOf(x.getCause() == null ? x.getMessage() : x.getCause().getMessage());
        }
    }

    /** The value of a command sent asynchronously, with the connection's timeout; failures as lettuce's sync API throws them. */
    private <V> V await(io.lettuce.core.RedisFuture<V> f) {
        return io.lettuce.core.LettuceFutures.awaitOrCancel(f, timeout.toNanos(), java.util.concurrent.TimeUnit.NANOSECONDS);
    }

    private StatefulRedisConnection<byte[], byte[]> borrow() throws IOException {
        StatefulRedisConnection<byte[], byte[]> c = pool.poll();
        if (c != null) {
            return c;
        }
        if (created.incrementAndGet() <= POOL_SIZE) {
            return connect(0);
        }
        created.decrementAndGet();
        try {
            return pool.take();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException("interrupted while waiting for a Redis connection");
        }
    }

    /**
     * A new transaction connection, already counted in {@link #created} (uncounted again when
     * this throws). Redis restarting, or the connection cut during its handshake, is tried
     * again until {@code deadline} (nanoTime; 0: the timeout from the first failure), as a
     * transaction on a dropped connection waits; a refused login is not.
     */
    private StatefulRedisConnection<byte[], byte[]> connect(long deadline) throws IOException {
        while (true) {
            try {
                return txnClient().connect(ByteArrayCodec.INSTANCE);
            } catch (RuntimeException e) {
                deadline = deadline != 0 ? deadline : System.nanoTime() + timeout.toNanos();
                IOException failure = wrap("connect", e);
                if (closed || failure.getMessage().contains("refused the login") || System.nanoTime() > deadline) {
                    created.decrementAndGet();
                    throw failure;
                }
                java.util.concurrent.locks.LockSupport.parkNanos(50_000_000L); // the pace of the attempts
                if (Thread.interrupted()) {
                    created.decrementAndGet();
                    Thread.currentThread().interrupt();
                    throw new java.io.InterruptedIOException("interrupted while connecting to Redis at " + description);
                }
            }
        }
    }

    /** The transaction connection an update holds; {@link #replace} swaps a dropped one for a new one. */
    private static final class Lease {
        StatefulRedisConnection<byte[], byte[]> conn;

        Lease(StatefulRedisConnection<byte[], byte[]> conn) {
            this.conn = conn;
        }
    }

    /**
     * Puts a new connection in the lease in place of its dropped one (never reconnected: see
     * {@link #txnClient}), connecting until {@code deadline}; the dropped one stays in the lease
     * when none can be made. The new connection takes over the commit log field of the dropped
     * one, whose last transaction's outcome is settled by then ({@link #committed}), so the log
     * keeps a field per pooled connection however often connections drop.
     */
    private void replace(Lease lease, long deadline) throws IOException {
        created.incrementAndGet();
        StatefulRedisConnection<byte[], byte[]> fresh = connect(deadline);
        StatefulRedisConnection<byte[], byte[]> dropped = lease.conn;
        String field = commitLogFields.remove(dropped);
        if (field != null) {
            commitLogFields.put(fresh, field);
        }
        discard(dropped);
        lease.conn = fresh;
    }

    /**
     * A failure of the client or the connection (refused while disconnected, closed, timed out),
     * not an answer of the server: somewhere in {@code e}'s causes a RedisException that is not
     * a RedisCommandExecutionException.
     */
    private static boolean connectionTrouble(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause() == c ? null : c.getCause()) {
            if (c instanceof RedisException && !(c instanceof RedisCommandExecutionException)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Pushes the commit log's expiry back after a commit (which made the key exist), at most
     * every {@link #COMMIT_LOG_REFRESH}, so it always has nearly a day left when a commit's
     * outcome is looked up in it. Sent without waiting for the answer.
     */
    private void keepCommitLog() {
        long now = System.nanoTime();
        long last = commitLogKept.get();
        boolean due = !commitLogKeptOnce.get() || now - last > COMMIT_LOG_REFRESH.toNanos();
        if (due && commitLogKept.compareAndSet(last, now)) {
            commitLogKeptOnce.set(true);
            shared.async().expire(b(commitLog), COMMIT_LOG_TTL.toSeconds());
        }
    }

    /** The field of {@link #commitLog} that transactions on {@code conn} write their number into. */
    private String commitLogField(Object conn) {
        return commitLogFields.computeIfAbsent(conn, c -> "c" + commitLogFieldsMade.getAndIncrement());
    }

    /**
     * Whether transaction {@code number}, whose EXEC (or script) went out on the lease's
     * connection and got no answer ({@code lost}), was applied: reads the number the
     * connection's last commit wrote, on it while it is open (after a stall of Redis, say), else
     * on a new one ({@link #replace}, until {@code deadline}). Throws when Redis does not answer
     * by then: only then is the outcome unknown.
     */
    private boolean committed(Lease lease, long number, long deadline, RedisException lost) throws IOException {
        byte[] field = b(commitLogField(lease.conn));
        while (true) {
            try {
                if (!lease.conn.isOpen()) {
                    replace(lease, deadline);
                }
                byte[] last = lease.conn.sync().hget(b(commitLog), field);
                boolean applied = last != null && new String(last, StandardCharsets.US_ASCII).equals(Long.toString(number));
                log.info("Redis connection to {} lost while a metadata transaction was committed ({}); it came back, and the"
                        + " transaction {}", description, rootMessage(lost), applied ? "had been applied" : "had not been applied: running it again");
                return applied;
            } catch (IOException | RedisException e) {
                if ((e instanceof RedisCommandExecutionException && !notReady(e)) || System.nanoTime() > deadline) {
                    throw new IOException("Redis connection to " + description + " lost while a metadata transaction was"
                            + " committed, and Redis did not answer within " + seconds(timeout) + ": it may or may"
                            + " not have been applied (" + rootMessage(lost) + ")", lost);
                }
                java.util.concurrent.locks.LockSupport.parkNanos(20_000_000L); // dropped again: wait for it once more
            }
        }
    }

    /**
     * Whether a MULTI/EXEC whose EXEC failed with {@code e} was refused as not ready
     * ({@link #notReady}) with nothing of it applied: EXECABORT (Redis discards the whole
     * transaction) after a command was refused so, or MULTI and every command after it refused.
     */
    private static boolean notAppliedForNotReady(RedisCommandExecutionException e, io.lettuce.core.RedisFuture<String> multi,
                                                 List<? extends io.lettuce.core.RedisFuture<?>> queued) {
        if (String.valueOf(e.getMessage()).startsWith("EXECABORT")) {
            return queued.stream().anyMatch(q -> notReadyMessage(queueError(q)));
        }
        return notReadyMessage(queueError(multi)) && queued.stream().allMatch(q -> notReadyMessage(queueError(q)));
    }

    /**
     * A commit Redis refused whole as not ready ({@link #notReady}), nothing of it applied: it may
     * run again.
     */
    private static final class NotApplied extends RuntimeException {
        final RedisException refusal;

        NotApplied(RedisException refusal) {
            super(refusal);
            this.refusal = refusal;
        }
    }

    /** A commit lettuce refused to send, the connection being down: its EXEC (or script) never went out. */
    private static final class NotSent extends RuntimeException {
        NotSent(Throwable cause) {
            super(cause);
        }
    }

    /**
     * Waits until lettuce has connected {@code conn} again, until {@code deadline}
     * ({@link System#nanoTime}); a Redis restart or a Sentinel failover takes seconds.
     */
    /** Request(s) sent to Redis: lettuce's failures as it throws them. */
    @FunctionalInterface
    private interface RedisCall<V> {
        V run() throws IOException;
    }

    /**
     * Whether {@code e} says the connection was cut under the request (reset, closed, not
     * connected): not an answer of the server, and not a timeout, which waiting again would only
     * make twice as long.
     */
    private static boolean cutOff(RedisException e) {
        for (Throwable c = e; c != null; c = c.getCause() == c ? null : c.getCause()) {
            if (c instanceof io.lettuce.core.RedisCommandTimeoutException || c instanceof RedisCommandExecutionException) {
                return false;
            }
        }
        return connectionTrouble(e);
    }

    /**
     * Whether {@code e} (or an error of a queued command it carries) is Redis refusing a request
     * because it cannot serve any yet: LOADING (loading its data after a restart, which takes
     * seconds to minutes for a large volume) or BUSY (a script runs). Nothing of the request was
     * done, so it may be sent again.
     */
    static boolean notReady(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause() == c ? null : c.getCause()) {
            if (c instanceof io.lettuce.core.RedisLoadingException || c instanceof io.lettuce.core.RedisBusyException
                    || (c instanceof RedisCommandExecutionException && notReadyMessage(c.getMessage()))) {
                return true;
            }
            for (Throwable s : c.getSuppressed()) {
                if (notReady(s)) {
                    return true;
                }
            }
        }
        return false;
    }

    private static boolean notReadyMessage(String m) {
        return m != null && (m.startsWith("LOADING") || m.startsWith("BUSY"));
    }

    /**
     * Waits a moment for lettuce to notice the drop and connect again, then until {@code conn} is
     * open; false once past {@code deadline} (nanoTime).
     */
    private static boolean awaitReconnect(StatefulRedisConnection<byte[], byte[]> conn, long deadline) throws IOException {
        do {
            java.util.concurrent.locks.LockSupport.parkNanos(20_000_000L);
            if (Thread.interrupted()) {
                Thread.currentThread().interrupt();
                throw new java.io.InterruptedIOException("interrupted while waiting for Redis to come back");
            }
            if (System.nanoTime() > deadline) {
                return false;
            }
        } while (!conn.isOpen());
        return true;
    }

    /**
     * A moment's pause before an update tries again after its connection dropped or Redis
     * refused it as not ready; throws once past {@code deadline} (nanoTime), also when the
     * connection keeps dropping and coming back.
     */
    private void pause(long deadline) throws IOException {
        if (System.nanoTime() > deadline) {
            throw new IOException("cannot reach Redis at " + description + " for " + seconds(timeout)
                    + ": check that it runs (nothing of this metadata transaction was written)");
        }
        java.util.concurrent.locks.LockSupport.parkNanos(20_000_000L);
        if (Thread.interrupted()) {
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException("interrupted while waiting for Redis to come back");
        }
    }

    @Override
    public <T> T update(Txn<T> body) throws IOException {
        Lease lease = new Lease(borrow());
        boolean healthy = false;
        long deadline = 0; // set when the connection is first lost in this update
        try {
            for (int attempt = 1; ; attempt++) {
                if (!lease.conn.isOpen()) { // dropped (before, or idle in the pool): never reconnected, see txnClient
                    deadline = deadline != 0 ? deadline : System.nanoTime() + timeout.toNanos();
                    replace(lease, deadline);
                }
                StatefulRedisConnection<byte[], byte[]> conn = lease.conn;
                RedisCommands<byte[], byte[]> cmd = conn.sync();
                // only the first attempt trusts the caller's beliefs: after a conflict everything is read
                CommandReader reader = new CommandReader(cmd, true);
                TxnBuffer tx = new TxnBuffer(reader, attempt == 1 && scripts);
                T result;
                try {
                    result = body.run(tx);
                } catch (IOException | RuntimeException e) {
                    if (!conn.isOpen() || connectionTrouble(e)) {
                        deadline = deadline != 0 ? deadline : System.nanoTime() + timeout.toNanos();
                        pause(deadline); // lettuce notices the drop
                        continue; // read on a connection that dropped: nothing was written, all again
                    }
                    if (notReady(e)) { // Redis loading its data after a restart: nothing was written
                        deadline = deadline != 0 ? deadline : System.nanoTime() + timeout.toNanos();
                        try {
                            cmd.unwatch(); // a WATCH the load's end let through would stay for the next attempt
                        } catch (RedisException stillLoading) {
                            // nothing is watched then
                        }
                        if (System.nanoTime() > deadline) {
                            throw e instanceof IOException io ? io : wrap("a read", (RuntimeException) e);
                        }
                        pause(deadline);
                        continue;
                    }
                    try {
                        cmd.unwatch();
                    } catch (RedisException gone) {
                        // the connection dropped after the body's last read, and its WATCHes with it;
                        // the body's answer stands (it wrote nothing). Seen as a raw lettuce
                        // "Connection disconnected" escaping an rmdir that failed with ENOTEMPTY.
                    }
                    if (!tx.beliefsUsed().isEmpty()) {
                        continue; // perhaps a wrong belief led the body astray: decide on real reads
                    }
                    healthy = true;
                    throw e;
                }
                Outcome outcome;
                long number = commits.incrementAndGet();
                try {
                    if (!conn.isOpen()) {
                        throw new NotSent(null); // its WATCHes (if any) died with the connection
                    }
                    outcome = commit(cmd, tx, reader.watchedAny, number);
                } catch (NotSent e) {
                    deadline = deadline != 0 ? deadline : System.nanoTime() + timeout.toNanos();
                    pause(deadline);
                    if (conn.isOpen()) { // lettuce failed inside, or refused a queued command: a MULTI may be open on it
                        replace(lease, deadline);
                    }
                    continue;
                } catch (NotApplied e) {
                    deadline = deadline != 0 ? deadline : System.nanoTime() + timeout.toNanos();
                    if (System.nanoTime() > deadline) {
                        throw wrap("EXEC", e.refusal);
                    }
                    pause(deadline);
                    continue;
                } catch (RedisException e) {
                    if (!conn.isOpen() || connectionTrouble(e)) {
                        deadline = deadline != 0 ? deadline : System.nanoTime() + timeout.toNanos();
                        if (committed(lease, number, deadline, e)) {
                            healthy = true;
                            return result;
                        }
                        continue; // not applied: all again, on fresh reads
                    }
                    if (onReplica(e)) { // refused, nothing applied: all again on a new connection, to the new master
                        deadline = deadline != 0 ? deadline : System.nanoTime() + timeout.toNanos();
                        masterMoved();
                        if (System.nanoTime() > deadline) {
                            throw wrap("EXEC", e);
                        }
                        java.util.concurrent.locks.LockSupport.parkNanos(50_000_000L); // the pace, while the name still leads to the replica
                        replace(lease, deadline); // connects anew, to wherever the name leads now
                        continue;
                    }
                    throw wrap("EXEC", e);
                }
                if (outcome == Outcome.COMMITTED) {
                    healthy = true;
                    keepCommitLog();
                    return result;
                }
                if (outcome == Outcome.STALE_BELIEF) {
                    continue; // not a conflict with another writer: again at once, reading everything
                }
                if (attempt >= MAX_ATTEMPTS) {
                    healthy = true;
                    throw new IOException("metadata transaction kept conflicting with other clients of "
                            + description + " after " + attempt + " attempts");
                }
                backoff(attempt);
            }
        } finally {
            if (healthy) {
                pool.offer(lease.conn);
            } else {
                discard(lease.conn);
            }
        }
    }

    /** Closes a transaction connection for good: it leaves the pool's count. */
    private void discard(StatefulRedisConnection<byte[], byte[]> conn) {
        created.decrementAndGet();
        commitLogFields.remove(conn);
        conn.closeAsync();
    }

    /**
     * Whether {@code e} (or the queued command's error it carries) is Redis refusing a write
     * because it is a replica now: a failover demoted it and left it running, and the name in
     * the URL leads elsewhere (a managed Redis's endpoint) or Sentinel names another master.
     * Nothing of the request was applied.
     */
    static boolean onReplica(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause() == c ? null : c.getCause()) {
            if (c instanceof RedisCommandExecutionException && String.valueOf(c.getMessage()).contains(REPLICA_REFUSAL)) {
                return true;
            }
            for (Throwable s : c.getSuppressed()) {
                if (onReplica(s)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** How a replica refuses a write: "READONLY You can't write against a read only replica." */
    private static final String REPLICA_REFUSAL = "READONLY You can't write";

    private final io.partfs.engine.LogLimit replicaLog = new io.partfs.engine.LogLimit(java.time.Duration.ofSeconds(10));
    /** When {@link #masterMoved} last cut the reads connection (nanoTime), so that many refusals at once cut it once. */
    private final java.util.concurrent.atomic.AtomicLong sharedCutAt = new java.util.concurrent.atomic.AtomicLong(System.nanoTime() - 1_000_000_000L);

    /**
     * The server answered as a replica: every connection to it is dropped, so that the next
     * connect finds the master (the name resolved again, or Sentinel asked). Idle pooled
     * connections are closed; the reads connection is killed from its own side (CLIENT KILL),
     * which lettuce reconnects, as after a drop. Reads there would otherwise miss this
     * client's writes to the new master.
     */
    private void masterMoved() {
        replicaLog.warn(log, "Redis at {} refused a write as a read-only replica (READONLY): a failover moved the master;"
                + " connecting again to reach the new one", description);
        StatefulRedisConnection<byte[], byte[]> c;
        while ((c = pool.poll()) != null) {
            discard(c);
        }
        long at = sharedCutAt.get();
        if (System.nanoTime() - at > 1_000_000_000L && sharedCutAt.compareAndSet(at, System.nanoTime())) {
            try {
                RedisCommands<byte[], byte[]> sync = shared.sync();
                sync.clientKill(io.lettuce.core.KillArgs.Builder.id(sync.clientId()).skipme(false));
            } catch (RedisCommandExecutionException refused) { // a user without CLIENT (NOPERM)
                log.warn("cannot drop the reads connection to {}, now a replica ({}): reads go on there, a little behind"
                        + " this mount's writes, until that connection drops; allow +client|kill and +client|id to the"
                        + " PartFS user, or restart the mount", description, refused.getMessage());
            } catch (RedisException gone) {
                // dropped already: lettuce connects it again
            }
        }
    }

    private static void backoff(int attempt) throws IOException {
        long maxMicros = Math.min(50_000, 100L << Math.min(attempt, 9));
        try {
            java.util.concurrent.TimeUnit.MICROSECONDS.sleep(ThreadLocalRandom.current().nextLong(maxMicros));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException("interrupted while retrying a metadata transaction");
        }
    }

    @Override
    public <T> T read(ReadBody<T> body) throws IOException {
        return body.run(new CommandReader(shared.sync(), false));
    }

    /** Set once Redis refused TIME (an ACL without it, a renamed command): from then on there is no store clock. */
    private volatile boolean timeRefused;

    /**
     * Redis's TIME; empty when Redis refuses the command (said once): then heartbeats and the
     * trash follow this machine's clock, as before there was a store clock, rather than fail.
     */
    @Override
    public java.util.OptionalLong serverTimeMillis() throws IOException {
        if (timeRefused) {
            return java.util.OptionalLong.empty();
        }
        java.util.List<byte[]> t;
        try {
            t = new CommandReader(shared.sync(), false).call("TIME", () -> shared.sync().time());
        } catch (IOException e) {
            if (!(e.getCause() instanceof RedisCommandExecutionException) || notReady(e)) {
                throw e; // unreachable, or still loading its data: no answer about TIME
            }
            timeRefused = true;
            log.warn("{} refuses the TIME command ({}): heartbeats and the trash follow each machine's own clock, so keep"
                    + " the clocks of the machines sharing the volume within a minute (NTP), or allow TIME to the PartFS user",
                    description, rootMessage(e).trim());
            return java.util.OptionalLong.empty();
        }
        return java.util.OptionalLong.of(Long.parseLong(new String(t.get(0), StandardCharsets.US_ASCII)) * 1000
                + Long.parseLong(new String(t.get(1), StandardCharsets.US_ASCII)) / 1000);
    }

    @Override
    public long increment(String key, long delta) throws IOException {
        long deadline = 0;
        while (true) {
            try {
                return shared.sync().incrby(b(key), delta);
            } catch (RedisException e) {
                // refused as not ready: not applied; cut off: perhaps applied, and sent again all the
                // same (the counter may grow twice: ids are skipped, never given twice; see KvStore)
                boolean replica = onReplica(e); // refused: not applied
                if (closed || !(notReady(e) || cutOff(e) || replica)) {
                    throw wrap("INCRBY", e);
                }
                deadline = deadline != 0 ? deadline : System.nanoTime() + timeout.toNanos();
                if (replica) {
                    masterMoved();
                }
                if (!awaitReconnect(shared, deadline)) {
                    throw wrap("INCRBY", e);
                }
            }
        }
    }

    @Override
    public void sync() {
        // Redis persists by its own policy (appendonly/appendfsync); there is nothing to ask for.
    }

    @Override
    public String describe() {
        return description;
    }

    @Override
    public void close() {
        closed = true;
        StatefulRedisConnection<byte[], byte[]> c;
        while ((c = pool.poll()) != null) {
            c.close();
        }
        if (commits.get() > 0 && shared.isOpen()) {
            try { // a few seconds at most: Redis may be the reason for closing
                shared.async().del(b(commitLog)).get(2, java.util.concurrent.TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (Exception e) {
                log.debug("commit log {} not deleted: {}", commitLog, e.toString());
            }
        }
        shared.close();
        shutdownClients();
    }

    /** Set at the start of {@link #close}: a read cut off then is not sent again. */
    private volatile boolean closed;

    private synchronized void shutdownClients() {
        client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
        if (txnClient != null) {
            txnClient.shutdown(Duration.ZERO, Duration.ofSeconds(2));
        }
        resources.shutdown(0, 2, java.util.concurrent.TimeUnit.SECONDS);
    }
}
