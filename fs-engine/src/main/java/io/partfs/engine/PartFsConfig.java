package io.partfs.engine;

import java.nio.file.Path;

/**
 * How one mount of a volume behaves locally: caches, buffers and threads. Immutable; build with
 * {@link #builder()}, which checks every value and says what to change.
 */
public final class PartFsConfig {
    private final Path blockCacheDir;
    private final long blockCacheSize;
    private final int ioThreads;
    private final long writeBufferPerFile;
    private final long writeBufferTotal;
    private final int readaheadBlocks;
    private final long capacity;
    private final boolean readOnly;
    private final AtimeMode atimeMode;
    private final java.time.Duration metaCacheTtl;
    private final io.partfs.engine.metrics.Metrics metrics;

    private PartFsConfig(Builder b) {
        this.metrics = b.metrics;
        this.metaCacheTtl = b.metaCacheTtl;
        this.readOnly = b.readOnly;
        this.atimeMode = b.atimeMode;
        this.blockCacheDir = b.blockCacheDir;
        this.blockCacheSize = b.blockCacheSize;
        this.ioThreads = b.ioThreads;
        this.writeBufferPerFile = b.writeBufferPerFile;
        this.writeBufferTotal = b.writeBufferTotal;
        this.readaheadBlocks = b.readaheadBlocks;
        this.capacity = b.capacity;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Directory of the local block cache, or null for none. */
    public Path blockCacheDir() { return blockCacheDir; }

    public long blockCacheSize() { return blockCacheSize; }

    public int ioThreads() { return ioThreads; }

    public long writeBufferPerFile() { return writeBufferPerFile; }

    /** Bytes all files together may buffer before writes are uploaded (bounds the sidecar's memory). */
    public long writeBufferTotal() { return writeBufferTotal; }

    public int readaheadBlocks() { return readaheadBlocks; }

    /** Size reported by statfs. */
    public long capacity() { return capacity; }

    /**
     * Reads only: no background deletion is resumed and reads leave atime alone, so a tool may
     * open a volume that a mount is serving (verify, inspect).
     */
    public boolean readOnly() { return readOnly; }

    /**
     * When reads move a file's access time. Not at all by default, as JuiceFS does and
     * ClickHouse needs: under relatime the first read of every new file (ClickHouse reads each
     * part it merges) costs a metadata transaction.
     */
    public enum AtimeMode {
        /** Reads never change atime (mounted noatime). */
        NOATIME,
        /** Linux's default for local disks: a read moves atime when it is not newer than mtime or ctime, or a day old. */
        RELATIME;

        public static AtimeMode parse(String s) {
            for (AtimeMode m : values()) {
                if (m.name().equalsIgnoreCase(s)) {
                    return m;
                }
            }
            throw new IllegalArgumentException("unknown atime mode '" + s + "': use noatime or relatime");
        }
    }

    public AtimeMode atimeMode() { return atimeMode; }

    /** Whether a read may have to record its access (relatime on a writable mount). */
    public boolean readsUpdateAtime() { return !readOnly && atimeMode == AtimeMode.RELATIME; }

    /**
     * How long attributes and listings held in memory may be used before they are read again;
     * null chooses: forever for an exclusive (embedded) volume, where every change passes through
     * this process, and 1 s for a shared one. Zero turns the cache off.
     */
    public java.time.Duration metaCacheTtl() { return metaCacheTtl; }

    /** Where the filesystem records its operations (object requests, block cache, FUSE calls). */
    public io.partfs.engine.metrics.Metrics metrics() { return metrics; }

    public Builder toBuilder() {
        return new Builder().blockCache(blockCacheDir, blockCacheSize).ioThreads(ioThreads)
                .writeBufferPerFile(writeBufferPerFile).writeBufferTotal(writeBufferTotal).readaheadBlocks(readaheadBlocks).capacity(capacity).readOnly(readOnly).atimeMode(atimeMode).metaCacheTtl(metaCacheTtl).metrics(metrics);
    }

    public static final class Builder {
        private Path blockCacheDir;
        private long blockCacheSize;
        private int ioThreads = 16;
        private long writeBufferPerFile = 64L << 20;
        private long writeBufferTotal = 256L << 20;
        private int readaheadBlocks = 2;
        private long capacity = 1L << 50;
        private boolean readOnly;
        private AtimeMode atimeMode = AtimeMode.NOATIME;
        private io.partfs.engine.metrics.Metrics metrics = io.partfs.engine.metrics.Metrics.none();

        public Builder metrics(io.partfs.engine.metrics.Metrics m) { this.metrics = java.util.Objects.requireNonNull(m); return this; }

        public Builder readOnly(boolean b) { this.readOnly = b; return this; }

        public Builder atimeMode(AtimeMode m) { this.atimeMode = java.util.Objects.requireNonNull(m); return this; }

        private java.time.Duration metaCacheTtl;

        public Builder metaCacheTtl(java.time.Duration ttl) { this.metaCacheTtl = ttl; return this; }

        /** A block cache of {@code size} bytes in {@code dir}; null or 0 for none. */
        public Builder blockCache(Path dir, long size) {
            this.blockCacheDir = dir;
            this.blockCacheSize = dir == null ? 0 : size;
            return this;
        }

        public Builder ioThreads(int n) { this.ioThreads = n; return this; }

        public Builder writeBufferPerFile(long bytes) { this.writeBufferPerFile = bytes; return this; }

        public Builder writeBufferTotal(long bytes) { this.writeBufferTotal = bytes; return this; }

        public Builder readaheadBlocks(int n) { this.readaheadBlocks = n; return this; }

        public Builder capacity(long bytes) { this.capacity = bytes; return this; }

        public PartFsConfig build() {
            if (blockCacheSize < 0) {
                throw new IllegalArgumentException("block cache size must not be negative (0 disables the cache)");
            }
            if (ioThreads < 1 || ioThreads > 1024) {
                throw new IllegalArgumentException("io threads must be between 1 and 1024, not " + ioThreads);
            }
            if (writeBufferPerFile < 1 << 20) {
                throw new IllegalArgumentException("write buffer per file must be at least 1 MiB");
            }
            if (writeBufferTotal < writeBufferPerFile) {
                throw new IllegalArgumentException("the total write buffer must be at least the write buffer per file");
            }
            if (readaheadBlocks < 0) {
                throw new IllegalArgumentException("readahead blocks must not be negative");
            }
            if (metaCacheTtl != null && metaCacheTtl.isNegative()) {
                throw new IllegalArgumentException("metadata cache TTL must not be negative");
            }
            if (capacity <= 0) {
                throw new IllegalArgumentException("capacity must be positive");
            }
            return new PartFsConfig(this);
        }
    }
}
