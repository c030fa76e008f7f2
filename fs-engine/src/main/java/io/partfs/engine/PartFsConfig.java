package io.partfs.engine;

import java.nio.file.Path;

/**
 * How one mount of a volume behaves locally: caches, buffers and threads. Immutable; build with
 * {@link #builder()}, which checks every value and says what to change.
 */
public final class PartFsConfig {
    private final Path blockCacheDir;
    private final long blockCacheSize;
    private final long blockCacheBlocks;
    private final double freeSpaceRatio;
    private final int ioThreads;
    private final long writeBufferPerFile;
    private final long writeBufferTotal;
    private final int readaheadBlocks;
    private final long capacity;
    private final boolean readOnly;
    private final AtimeMode atimeMode;
    private final boolean writeBack;
    private final boolean deferPartFlushes;
    private final java.time.Duration writeBackUploadWait;
    private final java.time.Duration uploadDelay;
    private final java.time.Duration commitSettle;
    private final java.time.Duration reclaimDelay;
    private final int compactAt;
    private final java.time.Duration compactQuiet;
    private final java.time.Duration metaCacheTtl;
    private final int metaCacheEntries;
    private final java.time.Duration metaBackupInterval;
    private final io.partfs.engine.metrics.Metrics metrics;

    private PartFsConfig(Builder b) {
        this.metrics = b.metrics;
        this.metaCacheTtl = b.metaCacheTtl;
        this.metaCacheEntries = b.metaCacheEntries;
        this.metaBackupInterval = b.metaBackupInterval;
        this.readOnly = b.readOnly;
        this.atimeMode = b.atimeMode;
        this.writeBack = b.writeBack;
        this.deferPartFlushes = b.deferPartFlushes;
        this.writeBackUploadWait = b.writeBackUploadWait;
        this.uploadDelay = b.uploadDelay;
        this.commitSettle = b.commitSettle;
        this.reclaimDelay = b.reclaimDelay;
        this.compactAt = b.compactAt;
        this.compactQuiet = b.compactQuiet;
        this.blockCacheDir = b.blockCacheDir;
        this.blockCacheSize = b.blockCacheSize;
        this.blockCacheBlocks = b.blockCacheBlocks;
        this.freeSpaceRatio = b.freeSpaceRatio;
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

    /** The most blocks the block cache holds, whatever their size (its index is on the heap). */
    public long blockCacheBlocks() { return blockCacheBlocks; }

    /**
     * The share of the cache directory's filesystem the block cache and write-back staging leave
     * free (0.1 by default): the cache evicts to keep it, and a block staging cannot fit under
     * it is uploaded before fsync returns.
     */
    public double freeSpaceRatio() { return freeSpaceRatio; }

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

    /**
     * Write-back: a flush (fsync, close) makes written blocks durable on local disk, under the
     * block cache directory, and returns; they are uploaded in the background. Faster writes;
     * until a block is uploaded, only this machine can read it.
     */
    public boolean writeBack() { return writeBack; }

    /**
     * Closes in ClickHouse's temporary part directories ({@code tmp_*}, made by this mount)
     * start their flush and return; the directory's rename waits for them (see PartFlushes).
     */
    public boolean deferPartFlushes() { return deferPartFlushes; }

    /**
     * How long closing the volume (unmount) waits for staged blocks to upload while none is
     * uploaded; what is left stays staged and is uploaded at the next open with this cache directory.
     */
    public java.time.Duration writeBackUploadWait() { return writeBackUploadWait; }

    /** How long after it was staged a write-back block is uploaded (0: at once). */
    public java.time.Duration uploadDelay() { return uploadDelay; }

    /**
     * How long staged blocks an earlier process left, of writes it did not commit, wait before
     * they are deleted (a commit it sent may still reach a shared metadata server), and how long
     * after a compaction's transaction failed its merged slice waits before it is; null
     * chooses: {@link #SHARED_COMMIT_SETTLE} and {@link #SHARED_LIVE_COMMIT_SETTLE} on a shared
     * engine, none on an embedded one.
     */
    public java.time.Duration commitSettle() { return commitSettle; }

    /**
     * {@link #commitSettle} on a shared metadata engine: longer than a dead process's socket
     * keeps sending (the kernel gives up on an orphaned connection's unacknowledged data within
     * about two minutes) and than a Redis failover pauses writes.
     */
    public static final java.time.Duration SHARED_COMMIT_SETTLE = java.time.Duration.ofMinutes(3);

    /**
     * The same for a transaction of this process that failed with an unknown outcome (a
     * compaction's, see {@link io.partfs.engine.data.Compactor}): its connection is still open,
     * and the kernel retries its unacknowledged data for ~15 minutes (tcp_retries2) before it
     * gives up; null {@link #commitSettle} chooses this on a shared engine.
     */
    public static final java.time.Duration SHARED_LIVE_COMMIT_SETTLE = java.time.Duration.ofMinutes(20);

    /**
     * How long the background deletion waits after the last file deletion of a burst before it
     * deletes the freed objects: the files of a part (or of every part a DROP removes) go in
     * one listing of the freed slices and one DeleteObjects request per thousand objects, not
     * one each ({@link io.partfs.engine.data.Reclaimer}).
     */
    public java.time.Duration reclaimDelay() { return reclaimDelay; }

    /**
     * How many slices a write commit may leave in a chunk before it is compacted ({@link
     * io.partfs.engine.data.Compactor}); {@link io.partfs.engine.meta.MetaEngine#COMPACT_AT} unless
     * a test wants compactions all the time.
     */
    public int compactAt() { return compactAt; }

    /**
     * How long a fragmented chunk's commits must pause before it is compacted (2 s; at most 30 s
     * after the first hint if they go on): a file still being written would change under it.
     */
    public java.time.Duration compactQuiet() { return compactQuiet; }

    /** Where write-back blocks wait for their upload: under the block cache directory, or null without one. */
    public Path stagingDir() {
        return blockCacheDir == null ? null : blockCacheDir.resolve(io.partfs.engine.data.BlockCache.STAGING);
    }

    /** Whether a read may have to record its access (relatime on a writable mount). */
    public boolean readsUpdateAtime() { return !readOnly && atimeMode == AtimeMode.RELATIME; }

    /**
     * How long attributes and listings held in memory may be used before they are read again;
     * null chooses: forever for an exclusive (embedded) volume, where every change passes through
     * this process, and 1 s for a shared one. Zero turns the cache off.
     */
    public java.time.Duration metaCacheTtl() { return metaCacheTtl; }

    /**
     * How many attributes, listings and extended-attribute sets the metadata cache holds at
     * most (~300 bytes of heap each); past that, those read or written longest ago are evicted.
     */
    public int metaCacheEntries() { return metaCacheEntries; }

    /**
     * How often a mount backs the volume's metadata up into its object store
     * ({@link io.partfs.engine.data.MetaBackup}); zero (the default here) for never.
     */
    public java.time.Duration metaBackupInterval() { return metaBackupInterval; }

    /** Where the filesystem records its operations (object requests, block cache, FUSE calls). */
    public io.partfs.engine.metrics.Metrics metrics() { return metrics; }

    public Builder toBuilder() {
        return new Builder().blockCache(blockCacheDir, blockCacheSize).blockCacheBlocks(blockCacheBlocks).freeSpaceRatio(freeSpaceRatio).ioThreads(ioThreads)
                .writeBufferPerFile(writeBufferPerFile).writeBufferTotal(writeBufferTotal).readaheadBlocks(readaheadBlocks).capacity(capacity).readOnly(readOnly).atimeMode(atimeMode).writeBack(writeBack).deferPartFlushes(deferPartFlushes).writeBackUploadWait(writeBackUploadWait).uploadDelay(uploadDelay).commitSettle(commitSettle).reclaimDelay(reclaimDelay).compactAt(compactAt).compactQuiet(compactQuiet).metaCacheTtl(metaCacheTtl).metaCacheEntries(metaCacheEntries).metaBackupInterval(metaBackupInterval).metrics(metrics);
    }

    public static final class Builder {
        private Path blockCacheDir;
        private long blockCacheSize;
        private long blockCacheBlocks = io.partfs.engine.data.BlockCache.DEFAULT_MAX_BLOCKS;
        private double freeSpaceRatio = 0.1;
        private int ioThreads = 16;
        private long writeBufferPerFile = 64L << 20;
        private long writeBufferTotal = 256L << 20;
        private int readaheadBlocks = 2;
        private long capacity = 1L << 50;
        private boolean readOnly;
        private AtimeMode atimeMode = AtimeMode.NOATIME;
        private boolean writeBack;
        private boolean deferPartFlushes = true;
        private java.time.Duration writeBackUploadWait = java.time.Duration.ofSeconds(60);
        private java.time.Duration uploadDelay = java.time.Duration.ZERO;
        private java.time.Duration reclaimDelay = java.time.Duration.ofMillis(200);
        private int compactAt = io.partfs.engine.meta.MetaEngine.COMPACT_AT;
        private java.time.Duration compactQuiet = java.time.Duration.ofSeconds(2);
        private io.partfs.engine.metrics.Metrics metrics = io.partfs.engine.metrics.Metrics.none();

        public Builder metrics(io.partfs.engine.metrics.Metrics m) { this.metrics = java.util.Objects.requireNonNull(m); return this; }

        public Builder readOnly(boolean b) { this.readOnly = b; return this; }

        public Builder atimeMode(AtimeMode m) { this.atimeMode = java.util.Objects.requireNonNull(m); return this; }

        public Builder writeBack(boolean b) { this.writeBack = b; return this; }

        public Builder deferPartFlushes(boolean b) { this.deferPartFlushes = b; return this; }

        public Builder uploadDelay(java.time.Duration d) { this.uploadDelay = java.util.Objects.requireNonNull(d); return this; }

        private java.time.Duration commitSettle;

        public Builder commitSettle(java.time.Duration d) { this.commitSettle = d; return this; }

        public Builder reclaimDelay(java.time.Duration d) { this.reclaimDelay = java.util.Objects.requireNonNull(d); return this; }

        public Builder compactAt(int slices) { this.compactAt = slices; return this; }

        public Builder compactQuiet(java.time.Duration d) { this.compactQuiet = java.util.Objects.requireNonNull(d); return this; }

        public Builder writeBackUploadWait(java.time.Duration d) { this.writeBackUploadWait = java.util.Objects.requireNonNull(d); return this; }

        private java.time.Duration metaCacheTtl;

        public Builder metaCacheTtl(java.time.Duration ttl) { this.metaCacheTtl = ttl; return this; }

        private int metaCacheEntries = io.partfs.engine.meta.MetaEngine.DEFAULT_CACHE_ENTRIES;

        public Builder metaCacheEntries(int n) { this.metaCacheEntries = n; return this; }

        private java.time.Duration metaBackupInterval = java.time.Duration.ZERO;

        public Builder metaBackupInterval(java.time.Duration every) {
            if (every.isNegative()) {
                throw new IllegalArgumentException("the metadata backup interval must be 0 (none) or more");
            }
            this.metaBackupInterval = every;
            return this;
        }

        /** A block cache of {@code size} bytes in {@code dir}; null or 0 for none. */
        public Builder blockCache(Path dir, long size) {
            this.blockCacheDir = dir;
            this.blockCacheSize = dir == null ? 0 : size;
            return this;
        }

        /** The most blocks the block cache may hold (~150 bytes of heap each). */
        public Builder blockCacheBlocks(long n) { this.blockCacheBlocks = n; return this; }

        /** The share of the cache directory's filesystem to leave free, from 0 to below 1. */
        public Builder freeSpaceRatio(double ratio) { this.freeSpaceRatio = ratio; return this; }

        public Builder ioThreads(int n) { this.ioThreads = n; return this; }

        public Builder writeBufferPerFile(long bytes) { this.writeBufferPerFile = bytes; return this; }

        public Builder writeBufferTotal(long bytes) { this.writeBufferTotal = bytes; return this; }

        public Builder readaheadBlocks(int n) { this.readaheadBlocks = n; return this; }

        public Builder capacity(long bytes) { this.capacity = bytes; return this; }

        public PartFsConfig build() {
            if (blockCacheSize < 0) {
                throw new IllegalArgumentException("block cache size must not be negative (0 disables the cache)");
            }
            if (blockCacheBlocks < 1) {
                throw new IllegalArgumentException("the block cache must be allowed at least one block, not " + blockCacheBlocks);
            }
            if (!(freeSpaceRatio >= 0 && freeSpaceRatio < 1)) {
                throw new IllegalArgumentException("the free space ratio must be at least 0 and below 1 (0.1 leaves a tenth of "
                        + "the cache directory's disk free), not " + freeSpaceRatio);
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
            if (metaCacheEntries < 1_000) {
                throw new IllegalArgumentException("the metadata cache must be allowed at least 1000 entries (a part's files "
                        + "and listing take ~100), not " + metaCacheEntries);
            }
            if (writeBack && (blockCacheDir == null || readOnly)) {
                throw new IllegalArgumentException(readOnly ? "write-back makes no sense on a read-only mount"
                        : "write-back needs a local cache directory to stage writes in (--cache-dir)");
            }
            if (uploadDelay.isNegative() || (!uploadDelay.isZero() && !writeBack)) {
                throw new IllegalArgumentException(uploadDelay.isNegative() ? "upload delay must not be negative"
                        : "an upload delay needs write-back (--writeback): without it fsync waits for the upload");
            }
            if (reclaimDelay.isNegative() || reclaimDelay.compareTo(java.time.Duration.ofHours(1)) > 0) {
                throw new IllegalArgumentException("the reclaim delay must be between 0 and 1 hour, not " + reclaimDelay);
            }
            if (compactAt < 2) {
                throw new IllegalArgumentException("compaction needs at least 2 slices in a chunk, not " + compactAt);
            }
            if (capacity <= 0) {
                throw new IllegalArgumentException("capacity must be positive");
            }
            return new PartFsConfig(this);
        }
    }
}
