package io.partfs.engine.meta;

import java.io.IOException;
import java.nio.file.Path;

/**
 * Where a volume's metadata lives: {@code redis://[user:password@]host:port/db} (shared; also
 * {@code rediss://} with TLS, and {@code redis-sentinel://[password@]host:port[,host:port]/db#master}
 * for a master Redis Sentinel fails over, {@code rediss-sentinel://} when Sentinel and Redis speak TLS) or a local RocksDB directory ({@code rocksdb:///dir} or a plain path, single machine).
 * {@link #toString()} never shows the password.
 */
public final class MetaUrl {
    private final String redisUrl;
    private final Path rocksDir;

    private MetaUrl(String redisUrl, Path rocksDir) {
        this.redisUrl = redisUrl;
        this.rocksDir = rocksDir;
    }

    /** @throws IllegalArgumentException with a message that shows the expected forms */
    public static MetaUrl parse(String url) {
        if (url == null || url.isBlank()) {
            throw new IllegalArgumentException("empty metadata URL: use redis://host:port/db or a directory for RocksDB");
        }
        String u = io.partfs.engine.LocationUrl.normalize(url, SCHEMES, "metadata", RedisKvStore.redact(url), FORMS);
        if (u == null) {
            return new MetaUrl(null, Path.of(url).toAbsolutePath().normalize());
        }
        if (u.startsWith("rocksdb:")) {
            return new MetaUrl(null, rocksPath(u));
        }
        checkPorts(u);
        return new MetaUrl(u, null);
    }

    private static Path rocksPath(String u) {
        return io.partfs.engine.LocationUrl.literalPath(u, "metadata", FORMS);
    }

    /**
     * Each host of a Redis URL has a numeric port or none: lettuce would take {@code host:abc}
     * for a host name of that spelling and fail later, with a DNS error that does not say why.
     */
    private static void checkPorts(String u) {
        // the hosts start after the last '@', as RedisKvStore.redact takes it: a password may hold '/' or ':'
        int start = Math.max(u.indexOf("://") + 3, u.lastIndexOf('@') + 1);
        int end = start;
        while (end < u.length() && "/?#".indexOf(u.charAt(end)) < 0) {
            end++;
        }
        String hosts = u.substring(start, end);
        for (String host : hosts.split(",", -1)) {
            int colon = host.lastIndexOf(':');
            String port = colon < 0 || host.lastIndexOf(']') > colon ? null : host.substring(colon + 1);
            if (host.isEmpty() || colon == 0 || port != null && !port.matches("\\d{1,5}")
                    || port != null && Integer.parseInt(port) > 65535) {
                throw new IllegalArgumentException("invalid metadata URL '" + RedisKvStore.redact(u) + "': '" + host
                        + "' is not host or host:port (a port is a number up to 65535); use " + FORMS);
            }
        }
    }

    private static final java.util.Set<String> SCHEMES = java.util.Set.of("redis", "rediss", "redis-sentinel", "rediss-sentinel", "rocksdb");
    private static final String FORMS = "redis://[user:password@]host:port/db, rediss://..., "
            + "redis-sentinel://[password@]host:port[,host:port]/db#master (rediss-sentinel:// over TLS), rocksdb:///dir or a directory path";

    public boolean isRedis() {
        return redisUrl != null;
    }

    /** The RocksDB directory, or null for Redis. */
    public Path rocksDir() {
        return rocksDir;
    }

    /** Opens an existing volume's metadata; a RocksDB directory that does not exist is an error. */
    public KvStore open() throws IOException {
        if (redisUrl == null && !java.nio.file.Files.isDirectory(rocksDir)) {
            throw new IOException("no metadata at " + rocksDir + ": check the path, or run 'partfs format' to create a volume there");
        }
        return openOrCreate();
    }

    /** Opens the metadata, creating an empty RocksDB directory if needed (for format). */
    public KvStore openOrCreate() throws IOException {
        return redisUrl != null ? new RedisKvStore(redisUrl) : new RocksKvStore(rocksDir);
    }

    /** Opens for reading only: RocksDB then works while a mount holds the database. */
    public KvStore openReadOnly() throws IOException {
        return redisUrl != null ? new RedisKvStore(redisUrl) : new RocksKvStore(rocksDir, true);
    }

    @Override
    public String toString() {
        return redisUrl != null ? RedisKvStore.redact(redisUrl) : "rocksdb://" + rocksDir;
    }
}
