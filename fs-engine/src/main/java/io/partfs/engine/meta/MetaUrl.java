package io.partfs.engine.meta;

import java.io.IOException;
import java.net.URI;
import java.nio.file.Path;

/**
 * Where a volume's metadata lives: {@code redis://[user:password@]host:port/db} (shared; also
 * {@code rediss://} with TLS, and {@code redis-sentinel://[password@]host:port[,host:port]/db#master}
 * for a master Redis Sentinel fails over) or a local RocksDB directory ({@code rocksdb:///dir} or a plain path, single machine).
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
        if (url.startsWith("redis://") || url.startsWith("rediss://") || url.startsWith("redis-sentinel://")) {
            return new MetaUrl(url, null);
        }
        if (url.startsWith("rocksdb://")) {
            return new MetaUrl(null, Path.of(URI.create(url).getPath()).toAbsolutePath().normalize());
        }
        if (url.matches("^[a-zA-Z][a-zA-Z0-9+.-]*://.*")) {
            throw new IllegalArgumentException("unsupported metadata URL '" + RedisKvStore.redact(url)
                    + "': use redis://[user:password@]host:port/db, redis-sentinel://[password@]host:port[,host:port]/db#master,"
                    + " rocksdb:///dir or a directory path");
        }
        return new MetaUrl(null, Path.of(url).toAbsolutePath().normalize());
    }

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
