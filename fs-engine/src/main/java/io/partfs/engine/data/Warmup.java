package io.partfs.engine.data;

import io.partfs.engine.Attr;
import io.partfs.engine.FileType;
import io.partfs.engine.FsException;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.TreeWalk;
import java.io.IOException;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * {@code partfs warmup}: fetches the blocks of a file or of every file under a directory into
 * the block cache, so that the first reads of them (a query after a restart, a new replica)
 * do not wait for the object store. Blocks already on local disk are not read at all, and no
 * data goes through FUSE or the page cache. Blocks are fetched by {@code threads} in parallel;
 * a block the store lacks is counted as failed, unless its file was deleted or rewritten
 * meanwhile. Only committed data is warmed: what a writer still buffers is not in a block yet.
 * Safe to run many times and while the volume is in use. A check ({@code partfs warmup
 * --check}) only counts which blocks are on local disk, and fetches nothing. A verifying run
 * ({@code --verify}) also reads every block in the block cache whole and checks it against its
 * checksums, however often reads checked it before: a damaged one is dropped, and fetched again
 * unless only checking. Blocks staged by write-back and in local object directories have no
 * checksums to check. A warmup marks the cached blocks it finds or fetches as used (evicted
 * last); a check leaves the cache's eviction order as it was.
 */
public final class Warmup {
    /**
     * How far a warmup is; {@code fileBytes} is the size of the files found so far, {@code
     * blockBytes} that of their blocks (less, where files have holes), {@code localBytes} that of
     * the blocks found on local disk (block cache, write-back staging, a local object directory).
     * When verifying, {@code verifiedBlocks} of the local blocks matched their checksums, {@code
     * uncheckableBlocks} had none, and {@code damagedBlocks} did not match or could not be read
     * (those are not counted as local: they were dropped, and are fetched unless only checking).
     */
    public record Progress(long files, long fileBytes, long blocks, long blockBytes, long localBlocks, long localBytes,
            long fetchedBlocks, long fetchedBytes, long failedBlocks, String firstError, long verifiedBlocks,
            long uncheckableBlocks, long damagedBlocks) {
    }

    private final MetaEngine meta;
    private final ChunkStore chunks;
    private final int threads;
    private final boolean checkOnly;
    private final boolean verify;
    private final AtomicLong files = new AtomicLong();
    private final AtomicLong fileBytes = new AtomicLong();
    private final AtomicLong blocks = new AtomicLong();
    private final AtomicLong blockBytes = new AtomicLong();
    private final AtomicLong local = new AtomicLong();
    private final AtomicLong localBytes = new AtomicLong();
    private final AtomicLong fetched = new AtomicLong();
    private final AtomicLong fetchedBytes = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private final AtomicReference<String> firstError = new AtomicReference<>();
    private final AtomicLong verified = new AtomicLong();
    private final AtomicLong uncheckable = new AtomicLong();
    private final AtomicLong damaged = new AtomicLong();
    private volatile boolean cancelled;

    public Warmup(MetaEngine meta, ChunkStore chunks, int threads) {
        this(meta, chunks, threads, false, false);
    }

    /**
     * With {@code checkOnly}, {@link #run} counts the blocks on local disk and fetches nothing;
     * with {@code verify}, it reads and checks the blocks in the block cache.
     */
    public Warmup(MetaEngine meta, ChunkStore chunks, int threads, boolean checkOnly, boolean verify) {
        if (threads < 1 || threads > 256) {
            throw new IllegalArgumentException("warmup threads must be 1-256, not " + threads);
        }
        this.meta = meta;
        this.chunks = chunks;
        this.threads = threads;
        this.checkOnly = checkOnly;
        this.verify = verify;
    }

    /** A snapshot of the counters; may be called from any thread while {@link #run} works. */
    public Progress progress() {
        return new Progress(files.get(), fileBytes.get(), blocks.get(), blockBytes.get(), local.get(), localBytes.get(),
                fetched.get(), fetchedBytes.get(), failed.get(), firstError.get(), verified.get(), uncheckable.get(),
                damaged.get());
    }

    /** Makes {@link #run} stop walking and return once the fetches it started have ended. */
    public void cancel() {
        cancelled = true;
    }

    /**
     * Warms {@code start} (a file, or a directory and everything under it; symlinks are not
     * followed) and returns when every block is fetched or has failed.
     */
    public Progress run(Attr start) throws IOException, InterruptedException {
        ExecutorService pool = Executors.newFixedThreadPool(threads, ChunkStore.daemon("partfs-warmup"));
        Semaphore inFlight = new Semaphore(threads); // a fetch holds its block in memory until it is cached
        try {
            if (start.type() == FileType.FILE) {
                warmFile(start, pool, inFlight);
            } else if (start.type() == FileType.DIRECTORY) {
                Set<Long> linked = new HashSet<>();
                TreeWalk.breadthFirst(meta, start.ino(), "", (dir, path, others, subdirectories) -> {
                    TreeWalk.regularFiles(meta, others, linked, a -> warmFile(a, pool, inFlight));
                    return !cancelled;
                });
            }
            inFlight.acquire(threads); // every fetch has ended
            inFlight.release(threads);
        } finally {
            pool.shutdownNow();
            pool.awaitTermination(1, TimeUnit.MINUTES);
        }
        return progress();
    }

    private void warmFile(Attr file, ExecutorService pool, Semaphore inFlight) throws IOException {
        files.incrementAndGet();
        fileBytes.addAndGet(file.size());
        try {
            chunks.forEachBlock(file, 0, file.size(), (key, len) -> {
                if (cancelled) {
                    return;
                }
                blocks.incrementAndGet();
                blockBytes.addAndGet(len);
                boolean toVerify = verify && chunks.cache().contains(key);
                if (!toVerify && chunks.isLocal(key)) {
                    local(key, len, verify ? uncheckable : null); // staged by write-back, or a local object: no sums
                    return;
                }
                if (checkOnly && !toVerify) {
                    return;
                }
                try {
                    inFlight.acquire();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new java.io.InterruptedIOException("warmup interrupted");
                }
                try {
                    pool.execute(() -> {
                        boolean fetching;
                        try {
                            fetching = !toVerify || mustFetch(key, len);
                        } catch (RuntimeException e) { // counted, and the permit given back: run() must not wait for it
                            failed.incrementAndGet();
                            firstError.compareAndSet(null, "verifying block " + key + ": " + e);
                            fetching = false;
                        }
                        if (fetching) {
                            fetch(file, key, len, inFlight);
                        } else {
                            inFlight.release();
                        }
                    });
                } catch (RuntimeException e) {
                    inFlight.release();
                    throw e;
                }
            });
        } catch (FsException.NoSuchEntry e) {
            // deleted while the warmup was on its way to it
        }
    }

    /**
     * Counts block {@code key} of {@code len} bytes, found on local disk, and in {@code also} if
     * not null; a warmup (not a check) marks it used in the block cache, to be evicted last.
     */
    private void local(String key, int len, AtomicLong also) {
        if (!checkOnly) {
            chunks.cache().touch(key);
        }
        local.incrementAndGet();
        localBytes.addAndGet(len);
        if (also != null) {
            also.incrementAndGet();
        }
    }

    /** Verifies cached block {@code key}: whether it must be fetched (it was damaged, or is gone) and may be. */
    private boolean mustFetch(String key, int len) {
        BlockCache.Verdict v = chunks.cache().verify(key);
        switch (v) {
            case GOOD -> local(key, len, verified);
            case UNCHECKABLE -> local(key, len, uncheckable);
            case DAMAGED -> damaged.incrementAndGet();
            case ABSENT -> { } // evicted meanwhile
        }
        return !checkOnly && (v == BlockCache.Verdict.DAMAGED || v == BlockCache.Verdict.ABSENT);
    }

    private void fetch(Attr file, String key, int len, Semaphore inFlight) {
        try {
            int n = chunks.warm(key, len);
            if (n > 0) {
                fetched.incrementAndGet();
                fetchedBytes.addAndGet(n);
            } else {
                local.incrementAndGet(); // a read fetched it meanwhile
                localBytes.addAndGet(len);
            }
        } catch (IOException | RuntimeException e) {
            if (!changed(file)) {
                failed.incrementAndGet();
                firstError.compareAndSet(null, "inode " + file.ino() + ": " + e.getMessage());
            }
        } finally {
            inFlight.release();
        }
    }

    /**
     * Whether {@code file} was deleted, rewritten or compacted since its attributes were read, as
     * the store says (not the cache: on a shared volume another mount changes it).
     */
    private boolean changed(Attr file) {
        try {
            return meta.getattrFromStore(file.ino()).dataVersion() != file.dataVersion();
        } catch (FsException.NoSuchEntry e) {
            return true;
        } catch (IOException e) {
            return false; // the metadata is unreachable: the block's failure stands
        }
    }
}
