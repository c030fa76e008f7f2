package io.partfs.engine.data;

import io.partfs.engine.Attr;
import io.partfs.engine.FileType;
import io.partfs.engine.VolumeFormat;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.Slice;
import io.partfs.engine.object.ObjectStore;
import java.io.Closeable;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The data path of a volume: file bytes as chunks of slices of immutable blocks.
 *
 * <p>Writes go to a per-inode {@link FileWriter} that buffers slices and uploads full blocks in
 * the background; {@link #flush} uploads the rest and then commits the slices in one metadata
 * transaction, so metadata never points at an object that is not there. Reads assemble the
 * slices of each chunk ({@link SliceView}), fetching whole blocks through the local
 * {@link BlockCache} with concurrent fetches of one block merged.
 *
 * <p>Concurrency: writers are per inode and synchronized on themselves; the block fetch map and
 * the cache are thread-safe; uploads and prefetches run on {@link #io}.
 */
public final class ChunkStore implements Closeable {
    private static final Logger log = LoggerFactory.getLogger(ChunkStore.class);
    static final int CHUNK = VolumeFormat.CHUNK_SIZE;

    private final MetaEngine meta;
    private final ObjectStore objects;
    private final BlockCache cache;
    private final String volume;
    private final int blockSize;
    private final long writeBufferPerFile;
    private final long writeBufferTotal;
    /** Bytes written and not yet committed, over all files: bounded by writeBufferTotal. */
    private final AtomicLong buffered = new AtomicLong();
    private final ExecutorService io;
    /** Tries again, in the background, the files whose last flush failed (see {@link #retryFailed}). */
    private final java.util.concurrent.ScheduledExecutorService retrier =
            Executors.newSingleThreadScheduledExecutor(daemon("partfs-flush-retry"));
    private final Map<Long, FileWriter> writers = new ConcurrentHashMap<>();
    /** New files the kernel writes itself into local backing files (FUSE passthrough, write-back), by inode. */
    private final Map<Long, BackedFile> backed = new ConcurrentHashMap<>();
    private final Map<String, CompletableFuture<byte[]>> fetching = new ConcurrentHashMap<>();
    /** Write-back staging, or null: staged blocks are read from it until they are uploaded. */
    private final Staging staging;
    /** Told when an upload finds no room on the disk of a local object store (the mount then makes room). */
    private volatile Runnable onNoSpace = () -> { };
    /** Whether writes are staged on local disk (fsync returns then) instead of uploaded first. */
    private final boolean writeBack;
    /** Block-sized write buffers for reuse: a file's worth of blocks ({@code writeBufferPerFile}), 16 at most. */
    private final BlockBuffers buffers;
    private final AtomicLong objectGets = new AtomicLong();
    private final AtomicLong objectPuts = new AtomicLong();

    public ChunkStore(MetaEngine meta, ObjectStore objects, BlockCache cache, VolumeFormat format,
                      int ioThreads, long writeBufferPerFile) {
        this(meta, objects, cache, format, ioThreads, writeBufferPerFile, Long.MAX_VALUE, null, false);
    }

    /**
     * @param writeBufferPerFile bytes a file may buffer before its writes are uploaded and committed
     * @param writeBufferTotal   bytes all files together may buffer: a write that goes over it
     *                           flushes its own file first, so memory stays bounded however many
     *                           files are open for writing (a merge writes every column at once)
     * @param staging            blocks staged on local disk by a write-back mount, or null
     * @param writeBack          stage written blocks in {@code staging} and upload them in the
     *                           background instead of uploading them before a flush commits
     */
    public ChunkStore(MetaEngine meta, ObjectStore objects, BlockCache cache, VolumeFormat format,
                      int ioThreads, long writeBufferPerFile, long writeBufferTotal, Staging staging, boolean writeBack) {
        if (writeBack && staging == null) {
            throw new IllegalArgumentException("write-back needs a staging directory");
        }
        this.staging = staging;
        this.writeBack = writeBack;
        this.writeBufferTotal = writeBufferTotal;
        this.meta = meta;
        this.objects = objects;
        this.cache = cache;
        this.volume = format.name();
        this.blockSize = format.blockSize();
        this.writeBufferPerFile = writeBufferPerFile;
        this.io = Executors.newFixedThreadPool(ioThreads, daemon("partfs-io"));
        this.buffers = new BlockBuffers(blockSize, (int) Math.max(1, Math.min(16, writeBufferPerFile / blockSize)));
        retrier.scheduleWithFixedDelay(this::retryFailedQuietly, RETRY_SECONDS, RETRY_SECONDS, java.util.concurrent.TimeUnit.SECONDS);
        retrier.scheduleWithFixedDelay(buffers::trim, RETRY_SECONDS, RETRY_SECONDS, java.util.concurrent.TimeUnit.SECONDS);
        retrier.scheduleWithFixedDelay(this::retryOnceTheStoreAnswers, 1, 1, java.util.concurrent.TimeUnit.SECONDS);
    }

    /**
     * Whether the object store counts as unreachable: a request failed all its attempts, or its
     * time, for want of an answer and none got one since. Its requests are then tried once, and
     * so are flushes.
     */
    boolean storeUnreachable() {
        return objects.unreachable();
    }

    /** A store that refuses every upload (credentials revoked, say) fails each file alike: a line in 10 s. */
    private final io.partfs.engine.LogLimit retryFailures = new io.partfs.engine.LogLimit(java.time.Duration.ofSeconds(10));

    /** How often writes whose flush failed are tried again. */
    static final int RETRY_SECONDS = 15;

    /** Whether the store was unreachable at the last {@link #retryOnceTheStoreAnswers}; the retrier's thread only. */
    private boolean storeWasDown;

    /**
     * Runs every second: while the store is unreachable and a file's flush has failed, asks
     * whether it answers (one probe, see {@link ObjectStore#answers}, no file lock held); once it
     * does, or once something else found it back, flushes the failed files at once instead of at
     * the next round, up to {@value #RETRY_SECONDS} s later.
     */
    private void retryOnceTheStoreAnswers() {
        try {
            if (storeUnreachable()) {
                storeWasDown = true;
                if (!anyFailedFlush() || !objects.answers()) {
                    return;
                }
            } else if (!storeWasDown) {
                return;
            }
            storeWasDown = false;
            retryFailed();
        } catch (RuntimeException e) {
            log.warn("retrying failed uploads: {}", e.toString());
        }
    }

    private boolean anyFailedFlush() {
        for (FileWriter w : writers.values()) {
            if (w.failedSinceLastWrite()) {
                return true;
            }
        }
        return false;
    }

    private void retryFailedQuietly() {
        try {
            retryFailed();
        } catch (RuntimeException e) {
            log.warn("retrying failed uploads: {}", e.toString());
        }
    }

    /**
     * Flushes again every file whose last flush failed (its close or fsync returned EIO and its
     * data stayed buffered), so that the data reaches the object store once it is back instead
     * of waiting in memory for the next fsync or the unmount. Runs every
     * {@value #RETRY_SECONDS} s; returns how many files it committed. While the store is
     * unreachable a round ends at its first failure: that flush was the probe.
     */
    public int retryFailed() {
        int committed = 0;
        for (Map.Entry<Long, BackedFile> e : backed.entrySet()) {
            if (e.getValue().closed() && e.getValue().failed()) {
                try {
                    flushBacked(e.getKey());
                    committed++;
                    log.info("inode {}, written through FUSE passthrough, committed after an earlier failure", e.getKey());
                } catch (IOException x) {
                    retryFailures.warn(log, "inode {}, written through FUSE passthrough, still not committed: {}",
                            e.getKey(), x.getMessage());
                }
            }
        }
        for (Map.Entry<Long, FileWriter> e : writers.entrySet()) {
            if (e.getValue().failedSinceLastWrite()) {
                try {
                    flush(e.getKey());
                    committed++;
                    log.info("buffered writes of inode {} uploaded after an earlier failure", e.getKey());
                } catch (IOException x) {
                    retryFailures.warn(log, "buffered writes of inode {} still not uploaded: {}", e.getKey(), x.getMessage());
                    if (storeUnreachable()) {
                        break; // the others would fail the same way, each holding its file's lock meanwhile
                    }
                }
            }
        }
        return committed;
    }

    static ThreadFactory daemon(String name) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, name + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }

    public int blockSize() {
        return blockSize;
    }

    /** A block-sized write buffer, with undefined contents. */
    byte[] takeBuffer() {
        return buffers.take();
    }

    /** Gives back a buffer of {@link #takeBuffer} (or any array) that nothing reads or writes any more. */
    void giveBuffer(byte[] b) {
        buffers.give(b);
    }

    /** Block-sized write buffers kept for reuse; all are dropped once no write took one for 15 to 30 s. */
    public int keptWriteBuffers() {
        return buffers.kept();
    }

    /** Directory levels of a block key below {@code <volume>/chunks/}: a thousand slices' blocks in each. */
    public static final int KEY_LEVELS = 2;

    /** The object key of block {@code index} (of {@code size} bytes) of slice {@code id}. */
    public static String blockKey(String volume, long id, int index, int size) {
        return volume + "/chunks/" + (id / 1_000_000) + "/" + (id / 1_000) + "/" + id + "_" + index + "_" + size;
    }

    String blockKey(long id, int index, int size) {
        return blockKey(volume, id, index, size);
    }

    /** The slice id of a {@link #blockKey}. */
    static long sliceIdOf(String key) {
        int name = key.lastIndexOf('/');
        return Long.parseLong(key, name + 1, key.indexOf('_', name + 1), 10);
    }

    /**
     * Deletes every object of slice {@code id} (one that nothing names: uploaded and never
     * committed), from the object store and this machine's block cache; returns how many.
     */
    public int deleteSliceObjects(long id) throws IOException {
        String block0 = blockKey(id, 0, 0);
        String prefix = block0.substring(0, block0.lastIndexOf('/') + 1) + id + "_";
        List<String> keys = new java.util.ArrayList<>();
        for (ObjectStore.ObjectInfo o : objects.listAll(prefix)) {
            keys.add(o.key());
        }
        objects.deleteAll(keys);
        for (String k : keys) {
            cache.remove(k);
        }
        return keys.size();
    }

    /** The object keys of every block of slice {@code id} of {@code size} bytes, in order. */
    public static List<String> blockKeys(String volume, int blockSize, long id, int size) {
        int n = blocks(blockSize, size);
        List<String> keys = new java.util.ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            keys.add(blockKey(volume, id, i, blockLength(blockSize, size, i)));
        }
        return keys;
    }

    /** Size of block {@code index} of a slice of {@code sliceSize} bytes. */
    int blockLength(int sliceSize, int index) {
        return blockLength(blockSize, sliceSize, index);
    }

    /** Size of block {@code index} of a slice of {@code sliceSize} bytes in blocks of {@code blockSize}. */
    public static int blockLength(int blockSize, int sliceSize, int index) {
        return Math.min(blockSize, sliceSize - index * blockSize);
    }

    /** Number of blocks of a slice of {@code sliceSize} bytes. */
    public static int blocks(int blockSize, int sliceSize) {
        return (int) (((long) sliceSize + blockSize - 1) / blockSize);
    }

    // ---- writing ----

    /** Buffers {@code len} bytes at {@code off} of file {@code ino}. */
    public void write(long ino, long off, byte[] src, int srcOff, int len) throws IOException {
        if (backed.containsKey(ino)) {
            flushBacked(ino); // what the kernel wrote comes first: these writes cover it
        }
        while (true) {
            FileWriter w = writers.computeIfAbsent(ino, i -> new FileWriter(this, meta, i));
            // A writer retired by a concurrent flush takes no more data: take the next one.
            if (w.write(off, src, srcOff, len)) {
                if (w.pendingBytes() >= writeBufferPerFile || buffered.get() > writeBufferTotal) {
                    w.flush();
                }
                return;
            }
        }
    }

    /** Uploads and commits what was written to {@code ino}; a no-op when nothing is pending. */
    public void flush(long ino) throws IOException {
        if (backed.containsKey(ino)) {
            flushBacked(ino);
        }
        FileWriter w = writers.get(ino);
        if (w != null && w.flushAndRetire()) {
            retired(ino); // before the writer is gone: see retiredSince
            writers.remove(ino, w);
        }
    }

    /** The inodes of the last writers retired after their commit, by retirement number modulo its length. */
    private final long[] lastRetired = new long[1024];
    private volatile long retirements; // written under this store's monitor, after the slot

    private synchronized void retired(long ino) {
        lastRetired[(int) (retirements % lastRetired.length)] = ino;
        retirements++;
    }

    /** How many writers were retired so far: taken before reading attributes, for {@link #retiredSince}. */
    public long retirements() {
        return retirements;
    }

    /**
     * Whether the writer of {@code ino} was retired since {@link #retirements} returned {@code
     * before}: attributes read in between may predate its commit while the writer is gone, so
     * they miss both the commit and the buffered size (see PartFs). True also when too many
     * writers were retired since to tell.
     */
    public boolean retiredSince(long ino, long before) {
        return retirements != before && scanRetired(ino, before); // the common case, no write since, takes no lock
    }

    private synchronized boolean scanRetired(long ino, long before) {
        if (retirements - before > lastRetired.length) {
            return true;
        }
        for (long r = before; r < retirements; r++) {
            if (lastRetired[(int) (r % lastRetired.length)] == ino) {
                return true;
            }
        }
        return false;
    }

    /**
     * Like {@link #flush}, except that a file whose last flush failed, with nothing written
     * since, is left buffered for the next flush instead of waiting for the object store again:
     * for the release that follows a close whose flush already reported the error.
     */
    public void flushUnlessFailed(long ino) throws IOException {
        if (!failedSinceLastWrite(ino)) {
            flush(ino);
        }
    }

    /** Whether the last flush of {@code ino} failed with nothing written to it since: its data is still buffered. */
    public boolean failedSinceLastWrite(long ino) {
        BackedFile b = backed.get(ino);
        if (b != null && b.failed()) {
            return true; // the kernel may have written to it since: its next commit, or the retrier's, takes that too
        }
        FileWriter w = writers.get(ino);
        return w != null && w.failedSinceLastWrite();
    }

    /**
     * Drops every buffered write (their files keep what was committed before); for an unmount
     * whose last flush failed, so that closing does not wait for the object store once more.
     * Returns the bytes dropped.
     */
    public long discardAll() {
        long dropped = 0;
        for (Long ino : List.copyOf(backed.keySet())) {
            BackedFile b = backed.remove(ino);
            if (b != null) {
                try {
                    dropped += b.dirty() ? b.size() : 0;
                } catch (IOException ignored) {
                    // counted as nothing
                }
                b.release(staging);
            }
        }
        for (Long ino : List.copyOf(writers.keySet())) {
            FileWriter w = writers.remove(ino);
            if (w != null) {
                dropped += w.discard();
            }
        }
        return dropped;
    }

    void buffered(long delta) {
        buffered.addAndGet(delta);
    }

    /** Bytes written to all files and not yet committed. */
    public long bufferedBytes() {
        return buffered.get();
    }

    /**
     * Flushes every file. Every file's last blocks start uploading first, so files wait for
     * the object store together, not one after another; a file that cannot be flushed does not
     * stop the others (its writes stay buffered), and the first failure is thrown at the end,
     * saying how many files failed.
     */
    public void flushAll() throws IOException {
        java.util.Set<Long> all = new java.util.LinkedHashSet<>(backed.keySet());
        all.addAll(writers.keySet());
        List<Long> inos = List.copyOf(all);
        for (Long ino : inos) {
            FileWriter w = writers.get(ino);
            if (w != null) {
                w.startUploads();
            }
        }
        IOException first = null;
        int failed = 0;
        for (Long ino : inos) {
            try {
                flush(ino);
            } catch (IOException e) {
                failed++;
                if (first == null) {
                    first = e;
                }
            }
        }
        if (first != null) {
            throw new IOException("buffered writes of " + failed + " file(s) not uploaded: " + first.getMessage(), first);
        }
    }

    /**
     * The end of buffered, not yet committed, data of {@code ino}, or -1. Does not wait for a
     * flush of it in progress (a stat must not wait out an upload to a store that hangs): while
     * one runs, the end of what it commits.
     */
    public long pendingEnd(long ino) {
        BackedFile b = backed.get(ino);
        if (b != null) {
            try {
                return b.size();
            } catch (IOException e) {
                return -1;
            }
        }
        FileWriter w = writers.get(ino);
        if (w == null) {
            return -1;
        }
        long end = w.end();
        return end < 0 ? RETIRED : end;
    }

    // ---- files the kernel writes itself (FUSE passthrough, write-back mode; see BackedFile) ----

    /**
     * A local file for the kernel to write new file {@code ino} into, or null when there is none
     * to give (not write-back, no spare ready, a staging filesystem without user extended
     * attributes or fine-grained mtimes, too little room): the file is then written the usual way.
     * Follow with {@link #closeBacked} when the kernel closed it, or {@link #abandonBacked} when
     * it did not take it.
     */
    public java.nio.file.Path openBacked(long ino) {
        if (!writeBack || !staging.fineTimestamps()) {
            return null;
        }
        Staging.Backing b = staging.openBacking(ino);
        if (b == null) {
            return null;
        }
        try {
            backed.put(ino, new BackedFile(ino, b));
        } catch (IOException e) {
            log.warn("cannot open write-back backing file {}: {}", b.file(), e.toString());
            staging.closeBacking(b);
            return null;
        }
        return b.file();
    }

    /** Whether the kernel writes {@code ino} into a backing file (or did, and it is not committed yet). */
    public boolean isBacked(long ino) {
        return backed.containsKey(ino);
    }

    /**
     * The kernel closed {@code ino}'s backing file (its last handle): forgotten now if all of it is
     * committed, else at the commit still to come (a close deferred to its part's rename).
     */
    public void closeBacked(long ino) {
        BackedFile b = backed.get(ino);
        if (b == null) {
            return;
        }
        boolean clean;
        try {
            clean = b.close();
        } catch (IOException e) {
            clean = false;
        }
        staging.kernelClosed(b.backing); // its uploaded blocks may now be linked into the block cache
        if (clean) {
            forget(ino, b);
        }
    }

    /** The kernel did not take the backing file {@link #openBacked} gave for {@code ino}: it is written the usual way. */
    public void abandonBacked(long ino) {
        BackedFile b = backed.remove(ino);
        if (b != null) {
            b.release(staging);
        }
    }

    private void flushBacked(long ino) throws IOException {
        BackedFile b = backed.get(ino);
        if (b == null) {
            return;
        }
        b.commit(meta, staging, volume, blockSize);
        if (b.closed()) {
            forget(ino, b);
        }
    }

    /**
     * Forgets a committed backing file. Counted as a retirement first, as a writer's (see
     * {@link #retiredSince}): attributes read before its last commit, checked for a backing
     * file only after it is gone, would miss both its size and its commit (ClickHouse saw
     * a part's .mrk file empty that way, merging a part whose rename had just committed it).
     */
    private void forget(long ino, BackedFile b) {
        retired(ino);
        if (backed.remove(ino, b)) {
            b.release(staging);
        }
    }

    /**
     * {@code a} with its backing file's size and time, when the kernel writes it into one; null
     * when the file was committed and forgotten meanwhile (its backing file may be gone): the
     * caller reads the attributes again.
     */
    public io.partfs.engine.Attr backedAttr(io.partfs.engine.Attr a) throws IOException {
        BackedFile b = backed.get(a.ino());
        if (b == null) {
            return null;
        }
        try {
            return b.attr(a);
        } catch (java.nio.file.NoSuchFileException e) {
            return null; // uploaded and deleted (or taken into the block cache) right after its commit
        }
    }

    /** Truncates {@code ino}'s backing file while the kernel writes it; false when it has none (any more). */
    public boolean truncateBacked(long ino, long length) throws IOException {
        BackedFile b = backed.get(ino);
        return b != null && b.truncate(length);
    }

    /** {@link #pendingEnd} of a file whose writer had nothing buffered, or was flushed meanwhile: its attributes may be newer. */
    public static final long RETIRED = -2;

    /**
     * Uploads one block in the background; in write-back mode stages it on local disk instead.
     * A flush's own blocks ({@code byFlush}) are staged by the flushing thread, which would only
     * wait for them: handing a small file's one block to the pool and back cost ~0.15 ms of the
     * ~2.4 ms a create, write, fsync and close took. Uploads go to the io pool, and a flush
     * waiting for one runs it itself if no io thread has taken it yet ({@link BlockUpload#await}).
     */
    BlockUpload upload(String key, byte[] data, boolean byFlush, Staging.Owner owner) {
        if (writeBack && byFlush) {
            BlockUpload staged = new BlockUpload(key, data, owner);
            staged.run();
            return staged;
        }
        BlockUpload u = new BlockUpload(key, data, owner);
        io.execute(u::run);
        return u;
    }

    /**
     * One block on its way to the object store (or to staging in write-back mode). Whoever takes
     * it first runs it: an io thread, or the flush that waits for it, which then needs no thread
     * hand-off (and wake-up) on the way to its fsync's reply. The block's copy in the block cache
     * is written before the upload counts as done.
     */
    final class BlockUpload {
        private final String key;
        private final byte[] data;
        /** The file and chunk it was written for: kept with it when staged (see {@link Staging#recover}). */
        private final Staging.Owner owner;
        private final java.util.concurrent.atomic.AtomicBoolean taken = new java.util.concurrent.atomic.AtomicBoolean();
        private final CompletableFuture<Void> done = new CompletableFuture<>();

        private BlockUpload(String key, byte[] data, Staging.Owner owner) {
            this.key = key;
            this.data = data;
            this.owner = owner;
        }

        /** Runs the upload unless someone else already took it. */
        private void run() {
            if (!taken.compareAndSet(false, true)) {
                return;
            }
            try {
                // write-back stages the block on local disk, unless the disk has no room for it
                if (!writeBack || !staging.stage(key, data, owner)) {
                    if (owner != null) {
                        meta.uploading(sliceIdOf(key), owner.ino(), owner.chunk()); // uploaded before its commit
                    }
                    objectPuts.incrementAndGet();
                    objects.put(key, data);
                    // A block just written is likely read soon (ClickHouse reads back what it merged),
                    // and the kernel reads a one-block file itself only from local disk: cached
                    // before the flush can return
                    cache.put(key, data);
                }
            } catch (IOException | RuntimeException e) {
                if (e instanceof io.partfs.engine.FsException.NoSpace) {
                    onNoSpace.run();
                }
                done.completeExceptionally(e);
                return;
            } catch (Error e) {
                done.completeExceptionally(e); // the flush waiting for it must not wait forever
                throw e;
            }
            done.complete(null);
        }

        /** Waits until the block is stored, storing it here if no io thread has started it yet. */
        void await() throws InterruptedException, ExecutionException {
            run();
            done.get();
        }
    }

    /**
     * Stores block {@code index} of slice {@code id}, written for chunk {@code chunk} of
     * {@code ino}, in the object store now (not in write-back staging) and in the block cache:
     * for a slice written whole by this process (a compaction), noted as uploaded before its commit.
     */
    void putBlock(long id, int index, byte[] data, long ino, long chunk) throws IOException {
        meta.uploading(id, ino, chunk);
        String key = blockKey(id, index, data.length);
        objectPuts.incrementAndGet();
        objects.put(key, data);
        cache.put(key, data);
    }

    /** Runs {@code r} (quickly: it hands the work on) whenever an upload finds the disk of a local object store full. */
    public void onNoSpace(Runnable r) {
        this.onNoSpace = r;
    }

    /** Called by a flush once the metadata confirmed the commit of {@code slices} to {@code ino}: see {@link Staging#committed}. */
    void committed(long ino, List<MetaEngine.ChunkSlice> slices) {
        if (staging != null) {
            staging.committed(volume, blockSize, ino, slices);
        }
    }

    /** Called by a flush after its blocks are stored and before it commits them. */
    void beforeCommit() throws IOException {
        if (writeBack) {
            staging.syncDir();
        }
    }

    // ---- reading ----

    /**
     * Reads up to {@code len} bytes at {@code off} of {@code file}, as of the size and data
     * version of those attributes; returns the number of bytes read (short only at end of file).
     */
    public int read(Attr file, long off, byte[] dst, int dstOff, int len) throws IOException {
        return read(file, off, ByteBuffer.wrap(dst, dstOff, dst.length - dstOff), len);
    }

    /**
     * Reads up to {@code len} bytes at {@code off} of {@code file} into {@code dst} at its
     * position (which moves past them), as {@link #read(Attr, long, byte[], int, int)} does. Into
     * a direct buffer, blocks held on local disk are read with no copy on the way.
     */
    public int read(Attr file, long off, ByteBuffer dst, int len) throws IOException {
        long ino = file.ino();
        long fileSize = file.size();
        if (off >= fileSize || len <= 0) {
            return 0;
        }
        int n = (int) Math.min(len, fileSize - off);
        int base = dst.position();
        int done = 0;
        while (done < n) {
            long pos = off + done;
            long idx = pos / CHUNK;
            int from = (int) (pos % CHUNK);
            int to = (int) Math.min(CHUNK, from + (long) (n - done));
            List<Slice> slices = meta.readChunk(ino, idx, file.dataVersion());
            for (SliceView.Segment seg : SliceView.resolve(slices, from, to)) {
                dst.position(base + done + (seg.pos() - from));
                if (seg.isZero()) {
                    for (int z = 0; z < seg.len(); z += ZEROS.length) {
                        dst.put(ZEROS, 0, Math.min(ZEROS.length, seg.len() - z));
                    }
                } else {
                    readSlice(seg.slice(), seg.sliceOff(), dst, seg.len());
                }
            }
            done += to - from;
        }
        dst.position(base + n);
        return n;
    }

    /** What holes are read as, a piece at a time. */
    private static final byte[] ZEROS = new byte[64 << 10];

    private void readSlice(Slice s, int sliceOff, ByteBuffer dst, int len) throws IOException {
        int done = 0;
        while (done < len) {
            int o = sliceOff + done;
            int index = o / blockSize;
            int inBlock = o % blockSize;
            int blen = blockLength(s.size(), index);
            int n = Math.min(len - done, blen - inBlock);
            readBlock(blockKey(s.id(), index, blen), blen, inBlock, n, dst);
            done += n;
        }
    }

    private void readBlock(String key, int blockLen, int off, int len, ByteBuffer dst) throws IOException {
        if (cache.read(key, off, len, dst) || (staging != null && staging.read(key, off, len, dst))) {
            return;
        }
        if (!cache.enabled()) {
            objectGets.incrementAndGet();
            dst.put(checkLength(key, objects.get(key, off, len), len));
            return;
        }
        dst.put(fetchBlock(key, blockLen, false), off, len);
    }

    /**
     * Fetches a whole block into the cache; concurrent callers for one key share one GET. With
     * {@code unlessCached} (readahead, warmup: callers that checked the cache before) a block
     * cached since, by a fetch that ended between that check and this one, is read from the
     * cache instead of fetched a second time.
     */
    private byte[] fetchBlock(String key, int blockLen, boolean unlessCached) throws IOException {
        CompletableFuture<byte[]> mine = new CompletableFuture<>();
        CompletableFuture<byte[]> running = fetching.putIfAbsent(key, mine);
        if (running == null) {
            try {
                byte[] block = unlessCached && cache.contains(key) ? cache.read(key, 0, blockLen) : null;
                if (block != null) {
                    mine.complete(block);
                    return block;
                }
                objectGets.incrementAndGet();
                block = checkLength(key, objects.get(key, 0, -1), blockLen);
                cache.put(key, block);
                mine.complete(block);
                return block;
            } catch (IOException | RuntimeException e) {
                mine.completeExceptionally(e);
                throw e;
            } finally {
                fetching.remove(key, mine);
            }
        }
        try {
            return running.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("interrupted while reading block " + key);
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            throw c instanceof IOException io ? io : new IOException("reading block " + key + " failed", c);
        }
    }

    private static byte[] checkLength(String key, byte[] data, int expected) throws IOException {
        if (data.length != expected) {
            throw new IOException("block " + key + " has " + data.length + " bytes, expected " + expected
                    + ": the object store lost or truncated data");
        }
        return data;
    }

    /**
     * The local file that holds all of {@code file}'s content, else null. Either its content is
     * exactly one whole block (one slice from offset 0, nothing buffered) already in the block
     * cache, staging, or a local object directory; or it is larger, each 64 MiB chunk one whole
     * slice, and every block of it is in the block cache as a link into one file of its size at
     * its own offset (a file this machine wrote through passthrough, see {@link BlockCache#link}).
     * Never fetches: a miss stays a miss. The file may be evicted or moved right after, so an
     * open of it can fail and the caller falls back.
     */
    public java.nio.file.Path localWholeFile(Attr file) throws IOException {
        long size = file.size();
        if (file.type() != FileType.FILE || size <= 0 || pendingEnd(file.ino()) >= 0) {
            return null;
        }
        if (size > blockSize) {
            return size <= LINKED_PASSTHROUGH_MAX ? linkedWholeFile(file) : null;
        }
        List<Slice> slices = meta.readChunk(file.ino(), 0, file.dataVersion());
        if (slices.size() != 1) {
            return null;
        }
        Slice s = slices.get(0);
        if (s.isHole() || s.pos() != 0 || s.off() != 0 || s.len() != size || s.size() != size) {
            return null;
        }
        String key = blockKey(s.id(), 0, s.size());
        java.nio.file.Path p = cache.pathIfCached(key);
        if (p == null && staging != null) {
            p = staging.pathIfStaged(key);
        }
        return p != null ? p : objects.localFile(key); // a local object directory (embedded volume)
    }

    /**
     * The largest file of several blocks {@link #localWholeFile} hands to the kernel. Cold
     * sequential reads (benchmarks/RESULTS.md, round 37): files of 8 and 32 MiB 1.25x and 1.17x
     * faster through the kernel than through this process; of 256 MiB 0.6-0.8x, this process's
     * parallel readahead ahead of the kernel's single stream; 64 MiB either way.
     */
    static final long LINKED_PASSTHROUGH_MAX = 32L << 20;

    /** {@link #localWholeFile} of a file larger than a block: its blocks linked into one file, or null. */
    private java.nio.file.Path linkedWholeFile(Attr file) throws IOException {
        long size = file.size();
        List<String> keys = new ArrayList<>();
        List<Long> offsets = new ArrayList<>();
        for (long c = 0; c * CHUNK < size; c++) {
            int len = (int) Math.min(CHUNK, size - c * CHUNK);
            List<Slice> slices = meta.readChunk(file.ino(), c, file.dataVersion());
            if (slices.size() != 1) {
                return null;
            }
            Slice s = slices.get(0);
            if (s.isHole() || s.pos() != 0 || s.off() != 0 || s.len() != len || s.size() != len) {
                return null;
            }
            for (int i = 0; i < blocks(blockSize, len); i++) {
                keys.add(blockKey(s.id(), i, blockLength(blockSize, len, i)));
                offsets.add(c * CHUNK + (long) i * blockSize);
            }
            if (c == 0 && !cache.isLinked(keys.get(0))) {
                return null; // the usual case, a file this machine did not write: no more metadata read for it
            }
        }
        return cache.linkedWholeFile(keys, offsets.stream().mapToLong(Long::longValue).toArray(), size);
    }

    /** Starts fetching the blocks of {@code [off, off+len)} of {@code file} into the cache. */
    public void prefetch(Attr file, long off, int len) {
        if (!cache.enabled() || off >= file.size()) {
            return;
        }
        io.execute(() -> {
            try {
                forEachBlock(file, off, len, (key, blen) -> {
                    if (!isLocal(key)) {
                        fetchBlock(key, blen, true);
                    }
                });
            } catch (IOException | RuntimeException e) {
                log.debug("readahead of inode {} failed: {}", file.ino(), e.toString());
            }
        });
    }

    /** Told of each block a file's data is in. */
    @FunctionalInterface
    public interface BlockVisitor {
        void block(String key, int blockLen) throws IOException;
    }

    /**
     * Calls {@code visitor} for each block holding data of {@code [off, off+len)} of {@code file}
     * as its attributes' data version has it, in file order (holes have none). Only committed data:
     * what is buffered for the file is not in a block yet.
     */
    public void forEachBlock(Attr file, long off, long len, BlockVisitor visitor) throws IOException {
        forEachSegment(file, off, len, (at, seg) -> segmentBlocks(seg, visitor));
    }

    /** Told of each run of a file's bytes: where it starts in the file, and what holds it. */
    @FunctionalInterface
    interface SegmentVisitor {
        void segment(long fileOffset, SliceView.Segment seg) throws IOException;
    }

    /**
     * Calls {@code visitor} for each run of {@code [off, off+len)} of {@code file} that one slice
     * holds, or that reads as zeros, in file order, as its attributes' data version has it.
     */
    void forEachSegment(Attr file, long off, long len, SegmentVisitor visitor) throws IOException {
        long end = Math.min(file.size(), off + len);
        for (long pos = off; pos < end; ) {
            long idx = pos / CHUNK;
            int from = (int) (pos % CHUNK);
            int to = (int) Math.min(CHUNK, from + (end - pos));
            for (SliceView.Segment seg : SliceView.resolve(meta.readChunk(file.ino(), idx, file.dataVersion()), from, to)) {
                visitor.segment(idx * CHUNK + seg.pos(), seg);
            }
            pos += to - from;
        }
    }

    /** Calls {@code visitor} for each block holding bytes of {@code seg} (none for zeros). */
    void segmentBlocks(SliceView.Segment seg, BlockVisitor visitor) throws IOException {
        if (seg.isZero()) {
            return;
        }
        Slice s = seg.slice();
        for (int b = seg.sliceOff() / blockSize; b <= (seg.sliceOff() + seg.len() - 1) / blockSize; b++) {
            int blen = blockLength(s.size(), b);
            visitor.block(blockKey(s.id(), b, blen), blen);
        }
    }

    /**
     * Whether block {@code key} is read from local disk: the block cache, write-back staging, or
     * a local object directory.
     */
    public boolean isLocal(String key) {
        return cache.contains(key) || (staging != null && staging.contains(key)) || objects.localFile(key) != null;
    }

    /**
     * Fetches block {@code key} into the block cache unless it is read locally already; returns
     * the bytes fetched (0 when it was local). Concurrent reads of the block share the GET.
     */
    public int warm(String key, int blockLen) throws IOException {
        if (isLocal(key)) {
            return 0;
        }
        if (!cache.enabled()) {
            throw new IllegalStateException("this mount keeps no block cache (--cache-size 0): there is nowhere to warm data into");
        }
        fetchBlock(key, blockLen, true);
        return blockLen;
    }

    // ---- deletion ----

    /**
     * Drops the still-staged blocks of slices just put in the trash that were staged after
     * {@code sinceMillis} (when the last metadata backup was completed, plus a margin for
     * clocks): no backup lists them, so uploading them would only keep a copy nobody can restore. What a
     * write-back mount dropped before there was a trash (a temporary file never reached S3).
     * Returns the slices whose every block it dropped: no object of theirs is left to keep.
     */
    public List<long[]> dropStagedTrash(List<long[]> slices, long sinceMillis) {
        List<long[]> whole = new java.util.ArrayList<>();
        if (staging == null) {
            return whole;
        }
        for (long[] s : slices) {
            boolean all = true;
            for (String key : blockKeys(volume, blockSize, s[0], (int) s[1])) {
                if (staging.removeIfStagedAfter(key, sinceMillis)) {
                    cache.remove(key);
                } else {
                    all = false; // uploaded already (or staged before the backup): kept in the trash
                }
            }
            if (all) {
                whole.add(s);
            }
        }
        return whole;
    }

    /** Deletes the objects of slices waiting in the metadata's deletion list; returns how many slices. */
    public int reclaimSlices(int limit) throws IOException {
        List<long[]> pending = meta.pendingSliceDeletions(limit);
        List<String> uploaded = new java.util.ArrayList<>(pending.size());
        for (long[] s : pending) {
            for (String key : blockKeys(volume, blockSize, s[0], (int) s[1])) {
                cache.remove(key);
                // a block still staged was never uploaded (and an upload under way deletes its object itself)
                if (staging == null || !staging.remove(key)) {
                    uploaded.add(key);
                }
            }
        }
        // a thousand objects a request on S3; after a failure the whole pass is tried again (deleting twice is harmless)
        objects.deleteAll(uploaded);
        meta.slicesDeleted(pending); // one transaction for the pass
        return pending.size();
    }

    public long objectGets() {
        return objectGets.get();
    }

    public long objectPuts() {
        return objectPuts.get();
    }

    public BlockCache cache() {
        return cache;
    }

    /** The object store the blocks are in. */
    public ObjectStore objects() {
        return objects;
    }

    /** The write-back staging area, or null. */
    public Staging staging() {
        return staging;
    }

    @Override
    public void close() throws IOException {
        retrier.shutdownNow();
        try {
            flushAll();
            if (staging != null) {
                staging.drain(); // with nothing staged, it still asks about the last uploads (UploadRecheck)
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            if (staging != null) {
                staging.close();
            }
            io.shutdown();
            try {
                if (!io.awaitTermination(30, java.util.concurrent.TimeUnit.SECONDS)) {
                    log.warn("background uploads did not finish within 30 s");
                    io.shutdownNow();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
