package io.partfs.engine;

import io.partfs.engine.data.BlockCache;
import io.partfs.engine.data.ChunkStore;
import io.partfs.engine.data.Reclaimer;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.object.ObjectStore;
import java.io.Closeable;
import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The PartFS filesystem API, which the FUSE adapter calls: POSIX operations on inodes and open
 * file handles over a {@link MetaEngine} and a {@link ChunkStore}.
 *
 * <p>Every failure is an {@link FsException} that names one errno, or an {@link IOException}
 * from the backing services (EIO). Permission checks are the kernel's
 * ({@code default_permissions}); this layer keeps ownership and modes right.
 *
 * <p>Concurrency: thread-safe. Metadata changes are atomic transactions; a file's buffered
 * writes are flushed before anyone reads it, truncates it, or closes a handle, so every reader
 * sees every write that returned before its read began.
 */
public final class PartFs implements Closeable {
    public static final int O_ACCMODE = 03;
    public static final int O_RDONLY = 0;
    public static final int O_WRONLY = 01;
    public static final int O_RDWR = 02;
    public static final int O_CREAT = 0100;
    public static final int O_EXCL = 0200;
    public static final int O_TRUNC = 01000;
    public static final int O_APPEND = 02000;

    private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(PartFs.class);

    private final MetaEngine meta;
    private final ObjectStore objects;
    private final ChunkStore chunks;
    private final Reclaimer reclaimer;
    /** Compacts chunks that writes fragmented; null on a read-only mount. */
    private final io.partfs.engine.data.Compactor compactor;
    /** Deferred closes in temporary part directories; null when turned off or read-only. */
    private final PartFlushes partFlushes;
    private final PartFsConfig config;
    private final VolumeFormat format;
    private final Map<Long, Handle> handles = new ConcurrentHashMap<>();
    private final AtomicLong nextHandle = new AtomicLong(1);
    private final java.util.concurrent.atomic.AtomicBoolean closed = new java.util.concurrent.atomic.AtomicBoolean();

    private PartFs(MetaEngine meta, ObjectStore objects, PartFsConfig config) throws IOException {
        this.meta = meta;
        objects = new io.partfs.engine.metrics.MeteredObjectStore(objects, config.metrics());
        this.objects = objects;
        this.config = config;
        this.format = meta.load();
        java.time.Duration ttl = config.metaCacheTtl();
        meta.enableCache(ttl != null ? ttl : meta.store().exclusive() ? null : java.time.Duration.ofSeconds(1), config.metaCacheEntries());
        config.metrics().gauge("partfs_meta_cache_entries", "Attributes, directory listings and extended-attribute sets held in "
                + "memory (--meta-cache-entries bounds them).", meta::cacheEntries);
        config.metrics().gauge("partfs_fenced", "1 once this mount refuses changes (EROFS): it lost a flock(2) lock to another mount"
                + " while cut off from the metadata engine; unmount it and mount again.", () -> meta.fenced() == null ? 0 : 1);
        config.metrics().counterFrom("partfs_meta_cache_evictions_total", "Entries of the in-memory metadata cache evicted to stay "
                + "within --meta-cache-entries; each is read from the metadata engine again when next used.", meta::cacheEvictions);
        BlockCache cache = config.blockCacheDir() == null || config.blockCacheSize() == 0
                ? BlockCache.disabled()
                : new BlockCache(config.blockCacheDir(), config.blockCacheSize(), config.blockCacheBlocks(), config.freeSpaceRatio());
        io.partfs.engine.data.Staging staging = openStaging(config, objects, cache);
        this.chunks = new ChunkStore(meta, objects, cache, format, config.ioThreads(), config.writeBufferPerFile(),
                config.writeBufferTotal(), staging, config.writeBack());
        if (staging != null) {
            java.time.Duration settle = config.commitSettle() != null ? config.commitSettle()
                    : meta.store().exclusive() ? java.time.Duration.ZERO : PartFsConfig.SHARED_COMMIT_SETTLE;
            try {
                staging.recover(io.partfs.engine.data.Staging.SliceCheck.asking(meta, format, settle));
            } catch (IOException | RuntimeException e) {
                chunks.close(); // and with it the staging area, its lock
                throw e;
            }
            config.metrics().gauge("partfs_writeback_staged_blocks", "Blocks written in write-back mode and not yet uploaded.",
                    staging::pendingBlocks);
            config.metrics().gauge("partfs_writeback_staged_bytes", "Bytes written in write-back mode and not yet uploaded.",
                    staging::pendingBytes);
            long mountedMillis = System.currentTimeMillis();
            config.metrics().gauge("partfs_writeback_oldest_staged_seconds", "How long the longest-waiting staged block has waited"
                    + " for its upload (0: none waits; for a block an earlier mount staged, at least since this mount began). Its"
                    + " data is only on this machine's disk until then: alert when it keeps growing (the object store refuses"
                    + " uploads).", () -> {
                        long oldest = staging.oldestPendingMillis();
                        long since = oldest == Long.MIN_VALUE ? mountedMillis : oldest;
                        return oldest == 0 ? 0 : Math.max(0, System.currentTimeMillis() - since) / 1000.0;
                    });
            config.metrics().gauge("partfs_writeback_unstaged_blocks", "Blocks written in write-back mode since the mount that the "
                    + "local disk had no room to stage (--free-space-ratio), so uploaded before fsync returned.",
                    staging::turnedAway);
            config.metrics().gauge("partfs_writeback_damaged_blocks", "Staged blocks found damaged on the local disk since the "
                    + "mount (their bytes no longer match the checksums taken when written): not uploaded; check the disk.",
                    staging::damagedBlocks);
            config.metrics().gauge("partfs_writeback_space_evicted_bytes", "Block cache bytes given back since the mount to keep "
                    + "room on the disk for new files the kernel writes itself (write passthrough).", staging::evictedForBackings);
            config.metrics().gauge("partfs_writeback_freed_uploads_deleted", "Objects uploaded from write-back staging since the"
                    + " mount whose slice another mount had freed and deleted meanwhile (its file deleted there before the upload):"
                    + " deleted again, as nothing names them.", staging::uploadsOfFreedSlices);
        }
        registerCacheMetrics(config.metrics(), cache);
        config.metrics().gauge("partfs_reads_restarted", "Reads since the mount that found an object gone because another mount"
                + " compacted or truncated the file meanwhile (trash off), and read again from its new layout.",
                this::staleLayoutReads);
        config.metrics().gauge("partfs_write_buffer_bytes", "Bytes written and not yet uploaded and committed, all files.",
                chunks::bufferedBytes);
        config.metrics().gauge("partfs_deletions_pending_files",
                "Files unlinked whose data awaits deletion, or that a client still has open (whole volume).",
                () -> pendingDeletions(meta, MetaEngine.PendingDeletions::files));
        config.metrics().gauge("partfs_deletions_pending_slices", "Slices whose objects await deletion (whole volume).",
                () -> pendingDeletions(meta, MetaEngine.PendingDeletions::slices));
        // Counting the trash reads every entry on RocksDB (about 0.2 s a million slices): once a minute at most.
        config.metrics().sampledGauge("partfs_trash_slices",
                "Slices freed whose objects the volume's trash keeps until its time is over (counted at most once a minute).",
                TimeUnit.MINUTES.toNanos(1), () -> {
                    try {
                        return meta.trash().slices();
                    } catch (IOException e) {
                        return Double.NaN;
                    }
                });
        this.reclaimer = new Reclaimer(meta, chunks, config.reclaimDelay());
        if (!config.readOnly()) {
            reclaimer.whenDiskFull(this::localDiskFull);
            chunks.onNoSpace(() -> { // at once, not at the next session tick; at most once a second
                long now = System.nanoTime(), last = lastRelief.get();
                if (now - last > 1_000_000_000L && lastRelief.compareAndSet(last, now)) {
                    relieveFullDisk();
                }
            });
        }
        this.partFlushes = config.deferPartFlushes() && !config.readOnly() ? new PartFlushes(chunks::failedSinceLastWrite) : null;
        meta.setOrphanListener(reclaimer::fileOrphaned);
        this.compactor = config.readOnly() ? null : new io.partfs.engine.data.Compactor(meta, chunks, freed -> {
            reclaimer.trashed(freed);
            reclaimer.slicesFreed();
        }, config.compactQuiet(), java.time.Duration.ofSeconds(30));
        // how long a commit sent by a process, dead or alive, may still be on its way to the metadata engine
        java.time.Duration liveSettle = config.commitSettle() != null ? config.commitSettle()
                : meta.store().exclusive() ? java.time.Duration.ZERO : PartFsConfig.SHARED_LIVE_COMMIT_SETTLE;
        reclaimer.uploadSettle(liveSettle);
        if (compactor != null) {
            compactor.outcomeSettle(liveSettle);
            meta.onFragmented(config.compactAt(), compactor::request);
            config.metrics().counterFrom("partfs_compactions_total",
                    "Chunks written again as one slice because writes had left them in many (appends a write at a time, overwrites).",
                    compactor::compacted);
        }
        if (!config.readOnly()) {
            reclaimer.resumePending(); // uploads ended sessions never committed are swept once this one started (startSession)
        }
    }

    /**
     * Opens a formatted volume. The returned filesystem owns {@code meta} and {@code objects}
     * and closes them.
     */
    public static PartFs open(MetaEngine meta, ObjectStore objects, PartFsConfig config) throws IOException {
        return new PartFs(meta, objects, config);
    }

    /** For a gauge: NaN when the metadata cannot be read (the scrape still answers). */
    /**
     * The write-back staging area: opened in write-back mode, and also without it when an earlier
     * write-back mount left one (its blocks are uploaded whether or not this mount writes back).
     * A staging area another mount on this machine holds is that mount's to upload: this one then
     * goes without, unless it writes back itself (then it fails, saying so).
     */
    private static io.partfs.engine.data.Staging openStaging(PartFsConfig config, ObjectStore objects, BlockCache cache)
            throws IOException {
        java.nio.file.Path dir = config.stagingDir();
        if (config.readOnly() || dir == null || !(config.writeBack() || java.nio.file.Files.isDirectory(dir))) {
            return null;
        }
        try {
            return new io.partfs.engine.data.Staging(dir, objects, cache, Math.min(8, config.ioThreads()), config.uploadDelay(),
                    config.writeBackUploadWait(), config.freeSpaceRatio());
        } catch (io.partfs.engine.data.Staging.InUseException e) {
            if (config.writeBack()) {
                throw e;
            }
            log.info("blocks staged in {} are left to the other mount that has it open", dir);
            return null;
        }
    }

    private static double pendingDeletions(MetaEngine meta, java.util.function.ToLongFunction<MetaEngine.PendingDeletions> which) {
        try {
            return which.applyAsLong(meta.pendingDeletions());
        } catch (IOException e) {
            return Double.NaN;
        }
    }

    private static void registerCacheMetrics(io.partfs.engine.metrics.Metrics m, BlockCache cache) {
        m.counterFrom("partfs_block_cache_hits_total", "Block reads served from the local block cache.", () -> cache.stats().hits());
        m.counterFrom("partfs_block_cache_misses_total", "Block reads the local block cache could not serve.", () -> cache.stats().misses());
        m.counterFrom("partfs_block_cache_corrupt_blocks_total",
                "Cached blocks dropped because their bytes on the cache disk did not match their checksums (read again from the object store).",
                cache::corruptBlocks);
        m.gauge("partfs_block_cache_bytes", "Bytes held in the local block cache.", () -> cache.stats().bytes());
        m.gauge("partfs_block_cache_blocks", "Blocks held in the local block cache.", () -> cache.stats().blocks());
    }

    public PartFsConfig config() {
        return config;
    }

    public VolumeFormat format() {
        return format;
    }

    public MetaEngine meta() {
        return meta;
    }

    public ChunkStore chunks() {
        return chunks;
    }

    /** The compactor of fragmented chunks; null on a read-only mount. */
    public io.partfs.engine.data.Compactor compactor() {
        return compactor;
    }

    /** An open file: its inode, the flags it was opened with, and readahead state. */
    private static final class Handle {
        final long ino;
        final int flags;
        volatile long lastReadEnd = -1;
        /** The temporary part directory the file was created in, whose rename its close's flush may wait for; 0 if none. */
        volatile long partDir;

        Handle(long ino, int flags) {
            this.ino = ino;
            this.flags = flags;
        }

        boolean canWrite() {
            return (flags & O_ACCMODE) == O_WRONLY || (flags & O_ACCMODE) == O_RDWR;
        }

        boolean canRead() {
            return (flags & O_ACCMODE) == O_RDONLY || (flags & O_ACCMODE) == O_RDWR;
        }
    }

    private Handle handle(long fh) throws FsException {
        Handle h = handles.get(fh);
        if (h == null) {
            throw new FsException.BadHandle(String.valueOf(fh));
        }
        return h;
    }

    /**
     * Attributes with the size of writes still buffered in this process. {@code flushesBefore}
     * is {@link ChunkStore#retirements} taken before {@code a} was read: when the file's flush
     * ended since, its writer may be gone with {@code a} older than its commit, so they are read
     * again. Closes whose flush runs on while ClickHouse stats
     * the part's files (see PartFlushes) made this window real.
     */
    private Attr withPending(Attr a, long flushesBefore) throws IOException {
        if (a.type() == FileType.FILE && chunks.isBacked(a.ino())) {
            Attr b = chunks.backedAttr(a); // the kernel writes it itself: its backing file has the size
            return b != null ? b : meta.getattr(a.ino());
        }
        long pending = chunks.pendingEnd(a.ino());
        if (pending == ChunkStore.RETIRED || (pending < 0 && a.type() == FileType.FILE && chunks.retiredSince(a.ino(), flushesBefore))) {
            return meta.getattr(a.ino());
        }
        return pending > a.size() ? a.withSize(pending) : a;
    }

    // ---- names and attributes ----

    public Attr getattr(long ino) throws IOException {
        long flushes = chunks.retirements();
        return withPending(meta.getattr(ino), flushes);
    }

    /** The attributes of several inodes ({@link MetaEngine#getattrs}), null where one is gone. */
    public Attr[] getattrs(long[] inos) throws IOException {
        long flushes = chunks.retirements();
        Attr[] out = meta.getattrs(inos);
        for (int i = 0; i < out.length; i++) {
            if (out[i] != null) {
                out[i] = withPending(out[i], flushes);
            }
        }
        return out;
    }

    public Attr lookup(long parent, String name) throws IOException {
        long flushes = chunks.retirements();
        return withPending(meta.lookup(parent, name), flushes);
    }

    /**
     * The inode at an absolute path, without following symlinks (like {@code lstat}); for the
     * path-based FUSE API.
     */
    public Attr resolve(String path) throws IOException {
        long flushes = chunks.retirements();
        Attr cur = meta.getattr(MetaEngine.ROOT);
        int from = 0;
        int n = path.length();
        while (from < n) { // the components between slashes, without splitting into an array (every FUSE call resolves)
            int slash = path.indexOf('/', from);
            int to = slash < 0 ? n : slash;
            if (to > from && !(to == from + 1 && path.charAt(from) == '.')) {
                if (!cur.isDirectory()) {
                    throw new FsException.NotDirectory(path);
                }
                String part = path.substring(from, to);
                cur = part.equals("..") ? meta.getattr(cur.parent()) : meta.lookup(cur.ino(), part);
            }
            from = to + 1;
        }
        return withPending(cur, flushes);
    }

    public Attr setattr(long ino, MetaEngine.SetAttr change) throws IOException {
        long flushes = chunks.retirements();
        return withPending(meta.setattr(ino, change), flushes);
    }

    /**
     * Sets a file's length, after flushing its buffered writes. A write-back mount drops the
     * staged blocks the shrinking freed when no metadata backup can list them, as for a deletion.
     */
    public Attr truncate(long ino, long length) throws IOException {
        if (!chunks.truncateBacked(ino, length)) { // a backing file is cut as it is: nothing to commit first
            chunks.flush(ino);
        }
        List<long[]> trashed = new java.util.ArrayList<>();
        Attr a = meta.truncate(ino, length, trashed);
        reclaimer.trashed(trashed);
        return a;
    }

    public List<DirEntry> readdir(long ino) throws IOException {
        return meta.readdir(ino);
    }

    public Attr mkdir(long parent, String name, int mode, int uid, int gid) throws IOException {
        Attr a = meta.mknod(parent, name, FileType.DIRECTORY, mode, uid, gid, 0, null);
        if (partFlushes != null) {
            partFlushes.made(a.ino(), name);
        }
        return a;
    }

    /** Creates a special file or an empty regular file. */
    public Attr mknod(long parent, String name, FileType type, int mode, int uid, int gid, int rdev) throws IOException {
        if (type == FileType.DIRECTORY || type == FileType.SYMLINK) {
            throw new FsException.InvalidArgument("mknod of a " + type);
        }
        return meta.mknod(parent, name, type, mode, uid, gid, rdev, null);
    }

    public Attr symlink(long parent, String name, String target, int uid, int gid) throws IOException {
        if (target.isEmpty()) {
            throw new FsException.NoSuchEntry("empty symlink target");
        }
        if (target.length() > 4095) {
            throw new FsException.NameTooLong("symlink target");
        }
        return meta.mknod(parent, name, FileType.SYMLINK, 0777, uid, gid, 0, target);
    }

    public String readlink(long ino) throws IOException {
        return meta.readlink(ino);
    }

    public void unlink(long parent, String name) throws IOException {
        if (partFlushes != null && partFlushes.tracks(parent)) {
            partFlushes.awaitQuietly(parent); // a deferred flush must not commit into a file deleted meanwhile
        }
        meta.unlink(parent, name);
    }

    public void rmdir(long parent, String name) throws IOException {
        long dir = trackedPartDir(parent, name);
        if (dir != 0) {
            partFlushes.awaitQuietly(dir);
        }
        meta.rmdir(parent, name);
        if (dir != 0) {
            partFlushes.forget(dir);
        }
    }

    /** renameat2(2); see {@link MetaEngine#rename}. A temporary part directory's files are committed first. */
    public void rename(long srcParent, String srcName, long dstParent, String dstName, int flags) throws IOException {
        long dir = trackedPartDir(srcParent, srcName);
        if (dir != 0) {
            partFlushes.await(dir);
        }
        if (partFlushes != null && partFlushes.tracks(srcParent)) {
            partFlushes.await(srcParent); // a file moved out of one
        }
        meta.rename(srcParent, srcName, dstParent, dstName, flags);
        if (dir != 0) {
            partFlushes.forget(dir); // a part now: closes in it flush at once again
        }
    }

    /** The inode of {@code parent/name} if it is a temporary part directory with deferred flushes, else 0. */
    private long trackedPartDir(long parent, String name) throws IOException {
        if (partFlushes == null || partFlushes.isEmpty() || !PartFlushes.isTemporaryPart(name)) {
            return 0;
        }
        try {
            long ino = meta.lookup(parent, name).ino();
            return partFlushes.tracks(ino) ? ino : 0;
        } catch (FsException.NoSuchEntry e) {
            return 0; // the operation itself reports it
        }
    }

    public Attr link(long ino, long newParent, String newName) throws IOException {
        if (partFlushes != null && !partFlushes.isEmpty()) {
            long parent = meta.getattr(ino).parent();
            if (partFlushes.tracks(parent)) {
                partFlushes.await(parent); // visible under a second name: committed first
            }
        }
        long flushes = chunks.retirements();
        return withPending(meta.link(ino, newParent, newName), flushes);
    }

    // ---- files ----

    /** A created (or, without O_EXCL, opened: {@code isNew} false) file and its handle. */
    public record Created(Attr attr, long fh, boolean isNew) {
    }

    public Created create(long parent, String name, int mode, int flags, int uid, int gid) throws IOException {
        Attr a;
        int openFlags = flags;
        boolean isNew = false;
        try {
            a = meta.mknod(parent, name, FileType.FILE, mode, uid, gid, 0, null);
            openFlags &= ~O_TRUNC; // new and empty: truncating would only cost a transaction
            isNew = true;
        } catch (FsException.Exists e) {
            if ((flags & O_EXCL) != 0) {
                throw e;
            }
            a = meta.lookup(parent, name);
            if (a.isDirectory()) {
                throw new FsException.IsDirectory(name);
            }
            if (a.type() != FileType.FILE) {
                // a symlink, FIFO or device node another mount made under this name since the kernel
                // looked it up: it is not this file, and the kernel would refuse it as the result of
                // a create (EIO), with the handle opened here never released
                throw new FsException.Exists(name + " (a " + a.type().name().toLowerCase(java.util.Locale.ROOT) + ")");
            }
        }
        // a file this call made is opened as its own transaction left it: asking the store again
        // whether another client deleted it (open's check) would cost a shared volume a round trip
        long fh = isNew ? openHandle(new Handle(a.ino(), openFlags), a) : open(a.ino(), openFlags);
        if (partFlushes != null && partFlushes.tracks(parent)) {
            handles.get(fh).partDir = parent;
        }
        return new Created(isNew ? a : getattr(a.ino()), fh, isNew);
    }

    public long open(long ino, int flags) throws IOException {
        Handle h = new Handle(ino, flags);
        // On a shared volume an open for writing asks the store, not the cache: another client
        // may have deleted the file within the cache's second, and a handle on it would fail
        // every write with ESTALE (ClickHouse starting on B just after it stopped on A, and
        // opening the status file A deleted). A deleted file's inode stays in the store, with no
        // links, until its data is deleted; unless this mount has it open itself (an open of
        // /proc/PID/fd/N), the open came through a name this mount still had cached. Not found
        // here, the kernel looks the name up again and creates the file. Read-only opens keep
        // the cache: a part's files are opened by the thousand at startup.
        Attr a;
        if (h.canWrite() && !meta.store().exclusive()) {
            a = meta.getattrFromStore(ino);
            if (a.nlink() == 0 && !meta.isOpen(ino)) {
                throw new FsException.NoSuchEntry("inode " + ino + " (deleted by another client)");
            }
        } else {
            a = meta.getattr(ino);
        }
        return openHandle(h, a);
    }

    /** Opens handle {@code h} on its inode, whose attributes are {@code a}. */
    private long openHandle(Handle h, Attr a) throws IOException {
        long ino = h.ino;
        int flags = h.flags;
        if (a.isDirectory() && h.canWrite()) {
            throw new FsException.IsDirectory("inode " + ino);
        }
        if (a.type() == FileType.SYMLINK) {
            throw new FsException.SymlinkOpened("inode " + ino); // its chunks would be written, and never freed
        }
        if ((flags & O_TRUNC) != 0 && h.canWrite() && a.type() == FileType.FILE) {
            truncate(ino, 0);
        }
        long fh = nextHandle.getAndIncrement();
        meta.opened(ino);
        handles.put(fh, h);
        return fh;
    }

    public int read(long fh, long off, byte[] dst, int dstOff, int len) throws IOException {
        return read(fh, off, java.nio.ByteBuffer.wrap(dst, dstOff, dst.length - dstOff), len);
    }

    /**
     * Reads up to {@code len} bytes at {@code off} into {@code dst} at its position (which moves
     * past them); into a direct buffer, locally held blocks are read with no copy on the way.
     */
    public int read(long fh, long off, java.nio.ByteBuffer dst, int len) throws IOException {
        Handle h = handle(fh);
        if (!h.canRead()) {
            throw new FsException.BadHandle(fh + " is not open for reading");
        }
        if (off < 0) {
            throw new FsException.InvalidArgument("negative offset");
        }
        chunks.flush(h.ino);
        Attr a = meta.getattr(h.ino);
        if (a.isDirectory()) {
            throw new FsException.IsDirectory("inode " + h.ino);
        }
        int n = readData(a, off, dst, len);
        if (config.readsUpdateAtime() && meta.atimeStale(a)) {
            meta.touchAtime(h.ino); // checked first, so a stream of reads costs one update at most
        }
        if (off == h.lastReadEnd && config.readaheadBlocks() > 0) {
            int ahead = config.readaheadBlocks() * format.blockSize();
            chunks.prefetch(a, off + n, ahead);
        }
        h.lastReadEnd = off + n;
        return n;
    }

    /**
     * Reads file data as of attributes {@code a}. On a shared volume those (or the slice list
     * kept for their data version) may be older than another mount's compaction or truncation,
     * whose freed objects are gone at once when the trash is off: an object found missing makes
     * the read start again from the attributes the store has now, as long as their data version
     * moved on. A missing object that the current layout still names is lost data, and fails.
     */
    private int readData(Attr a, long off, java.nio.ByteBuffer dst, int len) throws IOException {
        int start = dst.position();
        for (int attempt = 1;; attempt++) {
            try {
                return chunks.read(a, off, dst, len);
            } catch (io.partfs.engine.object.ObjectNotFoundException e) {
                Attr now = meta.getattrFromStore(a.ino());
                if (now.dataVersion() == a.dataVersion() || attempt == STALE_LAYOUT_RETRIES) {
                    throw e;
                }
                log.debug("inode {}: {} is gone, its layout changed since (data version {} -> {}): reading again",
                        a.ino(), e.getMessage(), a.dataVersion(), now.dataVersion());
                staleLayoutReads.incrementAndGet();
                a = now;
                dst.position(start);
            }
        }
    }

    /** How many times a read starts again because another mount changed the file's layout under it. */
    private static final int STALE_LAYOUT_RETRIES = 5;

    private final java.util.concurrent.atomic.AtomicLong staleLayoutReads = new java.util.concurrent.atomic.AtomicLong();

    /** Reads that met an object freed by another mount's compaction or truncation and read again ({@link #readData}). */
    public long staleLayoutReads() {
        return staleLayoutReads.get();
    }

    public int write(long fh, long off, byte[] src, int srcOff, int len) throws IOException {
        Handle h = handle(fh);
        if (!h.canWrite()) {
            throw new FsException.BadHandle(fh + " is not open for writing");
        }
        if (off < 0) {
            throw new FsException.InvalidArgument("negative offset");
        }
        String fenced = meta.fenced();
        if (fenced != null) {
            throw new FsException.ReadOnly(fenced); // at once: its commit would be refused anyway
        }
        long at = (h.flags & O_APPEND) != 0 ? getattr(h.ino).size() : off;
        if (at + len > (long) VolumeFormat.CHUNK_SIZE * Integer.MAX_VALUE) {
            throw new FsException.TooLarge("write past the largest file size");
        }
        chunks.write(h.ino, at, src, srcOff, len);
        return len;
    }

    /** The inode an open handle refers to (still valid after the file was unlinked). */
    public long inodeOf(long fh) throws FsException {
        return handle(fh).ino;
    }

    /** fallocate(2) mode that keeps the file size. */
    public static final int FALLOC_FL_KEEP_SIZE = 1;

    /**
     * fallocate(2): PartFS allocates no space ahead (objects are written when data is), so
     * this only grows the file when asked to; hole punching and other modes are EOPNOTSUPP.
     */
    public void fallocate(long fh, int mode, long off, long len) throws IOException {
        Handle h = handle(fh);
        if (off < 0 || len <= 0) {
            throw new FsException.InvalidArgument("fallocate range");
        }
        if (!h.canWrite()) {
            throw new FsException.BadHandle(fh + " is not open for writing");
        }
        if ((mode & ~FALLOC_FL_KEEP_SIZE) != 0) {
            throw new UnsupportedOperationException("fallocate mode " + mode);
        }
        if ((mode & FALLOC_FL_KEEP_SIZE) == 0 && off + len > getattr(h.ino).size()) {
            truncate(h.ino, off + len);
        }
    }

    /** close(2) of one descriptor: makes the handle's writes visible to everyone. */
    public void flush(long fh) throws IOException {
        Handle h = handle(fh);
        if (h.partDir != 0 && partFlushes.defer(h.partDir, h.ino, () -> chunks.flush(h.ino))) {
            return; // the part directory's rename waits for it
        }
        chunks.flush(h.ino);
    }

    /** Commits the handle's file's writes before returning, also in a temporary part directory (for readers of its content). */
    public void flushNow(long fh) throws IOException {
        chunks.flush(handle(fh).ino);
    }

    /** True when the file's close was deferred to its temporary part directory's rename (which flushes it). */
    private boolean deferred(Handle h) {
        return h.partDir != 0 && partFlushes.tracks(h.partDir);
    }

    /**
     * {@link #flush}, unless the file's last flush failed with nothing written since: for a
     * release, whose close already reported that failure; the data waits for the next flush.
     */
    public void flushUnlessFailed(long fh) throws IOException {
        Handle h = handle(fh);
        if (!deferred(h)) {
            chunks.flushUnlessFailed(h.ino);
        }
    }

    /** Makes the file's data and metadata durable. */
    public void fsync(long fh) throws IOException {
        Handle h = handle(fh);
        if (deferred(h)) {
            partFlushes.await(h.partDir);
        }
        chunks.flush(h.ino);
        meta.sync();
    }

    public void release(long fh) throws IOException {
        Handle h = handles.remove(fh);
        if (h == null) {
            throw new FsException.BadHandle(String.valueOf(fh));
        }
        try {
            if (!deferred(h)) {
                chunks.flushUnlessFailed(h.ino); // a close's failed flush already reported it: the data waits for the next flush
            }
        } finally {
            meta.released(h.ino);
        }
    }

    /** The whole content of the file at an absolute path (for small files: DDL, metadata). */
    public byte[] readFile(String path) throws IOException {
        Attr a = resolve(path);
        if (a.isDirectory()) {
            throw new FsException.IsDirectory(path);
        }
        return readWhole(a);
    }

    /**
     * The whole content of the file {@code a} describes, read by its inode: as of {@code a} or
     * newer (then its data version is past {@code a}'s), and shorter if it was truncated since.
     */
    public byte[] readWhole(Attr a) throws IOException {
        if (a.size() > Integer.MAX_VALUE - 16) {
            throw new FsException.TooLarge("inode " + a.ino());
        }
        long fh = open(a.ino(), O_RDONLY);
        try {
            byte[] out = new byte[(int) a.size()];
            int done = 0;
            while (done < out.length) {
                int n = read(fh, done, out, done, out.length - done);
                if (n <= 0) {
                    return java.util.Arrays.copyOf(out, done);
                }
                done += n;
            }
            return out;
        } finally {
            release(fh);
        }
    }

    // ---- extended attributes ----

    public byte[] getxattr(long ino, String name) throws IOException {
        return meta.getxattr(ino, name);
    }

    public List<String> listxattr(long ino) throws IOException {
        return meta.listxattr(ino);
    }

    public void setxattr(long ino, String name, byte[] value, int flags) throws IOException {
        meta.setxattr(ino, name, value, flags);
    }

    public void removexattr(long ino, String name) throws IOException {
        meta.removexattr(ino, name);
    }

    /** Clears set-user-ID, set-group-ID and capabilities as a write by an unprivileged process does ({@link MetaEngine#killPrivileges}). */
    public void killPrivileges(long ino) throws IOException {
        meta.killPrivileges(ino);
    }

    // ---- volume ----

    /** statvfs(3) numbers in 4 KiB blocks. */
    public record StatFs(long blockSize, long totalBlocks, long freeBlocks, long files, long freeFiles, int nameMax) {
    }

    /**
     * The volume's capacity less what its files use; for objects kept on this machine's disk
     * (an embedded volume) that disk's own size and free space, so that ClickHouse's free-space
     * checks (merges, {@code keep_free_space_bytes}) see the disk fill as they would a local one.
     */
    public StatFs statfs() throws IOException {
        MetaEngine.Usage u = meta.usage();
        long total = config.capacity() / 4096;
        long used = Math.min(total, u.usedBytes() / 4096);
        long free = total - used;
        java.util.Optional<ObjectStore.LocalSpace> disk = objects.localSpace();
        if (disk.isPresent()) {
            total = Math.min(total, disk.get().total() / 4096);
            free = Math.min(total, disk.get().available() / 4096);
        }
        long files = Math.max(u.inodes(), 0);
        return new StatFs(4096, total, free, files + (1L << 30), 1L << 30, MetaEngine.MAX_NAME_BYTES);
    }

    /** Deletes, in the background, what has been in the trash long enough; for tests (mounts do it every few minutes). */
    public void expireTrash() {
        reclaimer.expireTrash();
    }

    /** Waits for background deletion of freed data; for tests and {@code umount}. */
    public void awaitReclaim() throws IOException {
        reclaimer.awaitIdle();
    }

    // ---- the mount's session ----

    private java.util.concurrent.ScheduledExecutorService sessionTimer;
    private long sessionTicks;
    /** Session ticks between two looks for trash whose time is over (5 minutes). */
    private static final int TRASH_TICKS = 15;

    /**
     * Registers this filesystem as a mount of the volume ({@code info} shows in
     * {@code partfs status}) and keeps the session alive: a heartbeat every
     * {@link MetaEngine#HEARTBEAT}; every third one also looks for sessions of crashed mounts,
     * and if there are any removes them and deletes the unlinked files they held open, and
     * deletes what ended sessions uploaded and never committed (also at once, here); the first
     * and every {@value #TRASH_TICKS}th deletes what has been in the trash long enough. A
     * writable mount also backs the metadata up, every {@link PartFsConfig#metaBackupInterval}.
     */
    public synchronized void startSession(String info) throws IOException {
        if (sessionTimer != null) {
            throw new IllegalStateException("session already started");
        }
        meta.registerSession(info);
        if (!config.readOnly()) {
            // after registering: the notes it takes over stay this session's until their objects are deleted
            reclaimer.sweepUncommittedUploads();
        }
        String durability = meta.store().durabilityProblem();
        if (durability != null) {
            log.warn("{}", durability);
        }
        sessionTimer = java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "partfs-session");
            t.setDaemon(true);
            return t;
        });
        long every = MetaEngine.HEARTBEAT.toMillis();
        sessionTimer.scheduleWithFixedDelay(this::sessionTick, every, every, java.util.concurrent.TimeUnit.MILLISECONDS);
        meta.store().onReconnect(this::beatSoon);
        if (!config.readOnly() && !config.metaBackupInterval().isZero()) {
            metaBackups = new io.partfs.engine.data.MetaBackup.Schedule(
                    new io.partfs.engine.data.MetaBackup(meta.store(), objects, format.name()), config.metaBackupInterval());
            // a freed object must outlive the time from a backup to the loss of the metadata (at most
            // an interval, plus the backup's own time: an hour to spare); nothing expires the trash after
            int trash = meta.trashHours();
            long needed = (config.metaBackupInterval().toMinutes() + 59) / 60 + 1;
            if (trash < needed) {
                log.warn("the volume's trash keeps freed objects {} hours, not the {} that {} s between metadata backups need:"
                        + " a restore of the last backup may find files deleted since without their data; 'partfs config"
                        + " --trash-hours {}' (while unmounted, for an embedded volume) closes that gap", trash, needed,
                        config.metaBackupInterval().toSeconds(), needed);
            }
        }
    }

    /**
     * A heartbeat at once, out of turn: when the metadata store is back after an outage. What
     * the outage may have cost is learnt then, not up to {@link MetaEngine#HEARTBEAT} later: a
     * session other mounts removed meanwhile, or a Redis restarted without the volume's
     * metadata (the mount is fenced, and its ERROR says how to restore it).
     */
    private void beatSoon() {
        java.util.concurrent.ScheduledExecutorService timer = sessionTimer;
        if (timer == null) {
            return;
        }
        try {
            timer.execute(() -> {
                try {
                    meta.heartbeat();
                } catch (IOException | RuntimeException e) {
                    log.warn("session heartbeat after reconnecting failed (retried in {}s at most): {}",
                            MetaEngine.HEARTBEAT.toSeconds(), e.toString());
                }
            });
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // the session ended meanwhile (unmount)
        }
    }

    /** The mount's metadata backups, while its session runs and backups are asked for. */
    private io.partfs.engine.data.MetaBackup.Schedule metaBackups;

    private void sessionTick() {
        try {
            meta.heartbeat(); // logs a session it finds removed, and what that cost
            if (meta.fenced() != null) {
                return; // it changes nothing any more, the volume's clean-up included
            }
            if (++sessionTicks % 3 == 0 && !config.readOnly()) {
                if (meta.liveSessions().size() < meta.sessions().size()) {
                    reclaimer.resumePending(); // removes the stale sessions, then deletes what they held
                }
                reclaimer.sweepUncommittedUploads(); // of sessions ended (unmounted or removed) long enough ago
            }
            if (sessionTicks % CLOCK_TICKS == 1) {
                checkClock();
            }
            if (sessionTicks % TRASH_TICKS == 1 && !config.readOnly()) {
                reclaimer.expireTrash(); // at the first tick, then every few minutes: trash time is counted in hours
            }
            if (!config.readOnly() && localDiskFull()) {
                relieveFullDisk();
            }
        } catch (IOException | RuntimeException e) {
            log.warn("session heartbeat failed (retried in {}s): {}", MetaEngine.HEARTBEAT.toSeconds(), e.toString());
        }
    }

    /** Session ticks between two comparisons of this machine's clock with the metadata store's (5 minutes). */
    private static final int CLOCK_TICKS = 15;
    /** A clock that stays off is said again every hour, not every check. */
    private final LogLimit clockWarnings = new LogLimit(java.time.Duration.ofHours(1));

    /** Warns when this machine's clock is off the metadata store's ({@link MetaEngine#clockSkewProblem}). */
    private void checkClock() throws IOException {
        java.util.OptionalLong skew = meta.clockSkewMillis();
        String problem = skew.isPresent() ? meta.clockSkewProblem(skew.getAsLong()) : null;
        if (problem != null) {
            clockWarnings.warn(log, "{}", problem);
        }
    }

    /**
     * Whether the objects are on this machine's disk and it has less than 1% of its size (and
     * than four blocks) left for them, the share kept for the metadata aside: then the trash
     * gives up its objects early.
     */
    private boolean localDiskFull() {
        return objects.localSpace().map(d -> d.available() < Math.max(d.total() / 100, 4L * format.blockSize())).orElse(false);
    }

    /** When an upload that found the local disk full last asked for the trash to make room (nanoTime). */
    private final java.util.concurrent.atomic.AtomicLong lastRelief = new java.util.concurrent.atomic.AtomicLong(System.nanoTime() - 2_000_000_000L);

    /**
     * Empties the trash, oldest first, while the local disk holding the objects is full: what an
     * upload that finds no room asks for, and a mount's session checks every 20 s (the deletion
     * of files does it too, after each batch).
     */
    public void relieveFullDisk() {
        reclaimer.relieveFullDisk();
    }

    /** Stops the heartbeat and unregisters the session; at unmount, once no file is open. */
    public synchronized void endSession() throws IOException {
        if (sessionTimer == null) {
            return;
        }
        if (metaBackups != null) {
            metaBackups.close(); // stops a backup under way: the metadata engine closes after this
            metaBackups = null;
        }
        sessionTimer.shutdownNow();
        sessionTimer = null;
        meta.unregisterSession(meta.session());
    }

    /** Flushes every file and makes metadata durable, as at unmount. */
    public void syncAll() throws IOException {
        if (partFlushes != null) {
            partFlushes.awaitAll();
        }
        chunks.flushAll();
        meta.sync();
    }

    @Override
    public void close() throws IOException {
        if (!closed.compareAndSet(false, true)) {
            return; // a second close must not reach RocksDB, which crashes the JVM on a closed handle
        }
        IOException failure = null;
        for (Closeable c : new Closeable[] {this::endSession, partFlushes == null ? () -> { } : partFlushes,
                compactor == null ? () -> { } : compactor, chunks, reclaimer, meta, objects}) {
            try {
                c.close();
            } catch (IOException e) {
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }
}
