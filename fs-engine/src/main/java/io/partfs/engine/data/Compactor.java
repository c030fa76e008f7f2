package io.partfs.engine.data;

import io.partfs.engine.Attr;
import io.partfs.engine.FileType;
import io.partfs.engine.FsException;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.Slice;
import java.io.Closeable;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Compacts fragmented chunks in the background: a chunk whose slice list grew to {@value
 * MetaEngine#COMPACT_AT} slices (a file appended to one write at a time, as ClickHouse's Log
 * engines do, or written over again and again) is read as it is and written again as one slice,
 * which replaces the list in one transaction if the file did not change meanwhile
 * ({@link MetaEngine#compactChunk}). Without it each read resolves every slice and may fetch an
 * object for each, each commit rewrites the whole list, and overwritten bytes stay in the store
 * until the file is deleted. The replaced slices are freed as a truncation frees them: to the
 * trash, then deleted.
 *
 * <p>One chunk at a time, on one low-priority thread, a block of memory at a time: the new
 * slice's blocks go straight to the object store (not to write-back staging) and into the block
 * cache. A chunk mostly of holes is left alone: written out, its zeros would take space. A
 * chunk that changes while it is being compacted is left as it is (the new slice goes to
 * deletion) and compacted at a later commit.
 */
public final class Compactor implements Closeable {
    private static final Logger log = LoggerFactory.getLogger(Compactor.class);
    /** Chunks waiting: a burst of appends to many files queues each chunk once, and at most this many. */
    private static final int MAX_QUEUED = 10_000;

    private final MetaEngine meta;
    private final ChunkStore chunks;
    private final Consumer<List<long[]>> trashed;
    private final Set<String> queued = ConcurrentHashMap.newKeySet();
    private final ThreadPoolExecutor pool = new ThreadPoolExecutor(1, 1, 0, TimeUnit.MILLISECONDS,
            new LinkedBlockingQueue<>(MAX_QUEUED), ChunkStore.daemon("partfs-compact"));
    private final AtomicLong compacted = new AtomicLong();
    private final AtomicLong changedMeanwhile = new AtomicLong();
    private final io.partfs.engine.LogLimit failures = new io.partfs.engine.LogLimit(java.time.Duration.ofSeconds(10));

    /** Compacts chunks of files through {@code chunks}, handing the slices it puts in the trash to {@code trashed}. */
    public Compactor(MetaEngine meta, ChunkStore chunks, Consumer<List<long[]>> trashed) {
        this.meta = meta;
        this.chunks = chunks;
        this.trashed = trashed;
    }

    /** Queues chunk {@code idx} of inode {@code ino} for compaction, unless it is queued already. */
    public void request(long ino, long idx) {
        String key = ino + ":" + idx;
        if (!queued.add(key)) {
            return;
        }
        try {
            pool.execute(() -> {
                LowPriority.thisThread(); // nothing waits for it: ClickHouse's reads and writes go first
                queued.remove(key);
                try {
                    compact(ino, idx);
                } catch (FsException.NoSuchEntry e) {
                    // deleted meanwhile
                } catch (IOException | RuntimeException e) {
                    failures.warn(log, "compacting chunk {} of inode {} failed (it stays as it is, and is tried at a later write): {}",
                            idx, ino, e.toString());
                }
            });
        } catch (java.util.concurrent.RejectedExecutionException e) {
            queued.remove(key); // the queue is full, or the mount is closing: a later commit asks again
        }
    }

    /**
     * Compacts chunk {@code idx} of inode {@code ino} now ({@link CompactionPlan}), unless it has
     * fewer than two slices or what would be merged is mostly holes; true when its list was
     * replaced, false when there was nothing to do or the file changed meanwhile.
     */
    public boolean compact(long ino, long idx) throws IOException {
        Attr a = meta.getattr(ino);
        long start = idx * ChunkStore.CHUNK;
        if (a.type() != FileType.FILE || a.nlink() == 0 || start >= a.size()) {
            return false;
        }
        List<Slice> list = meta.readChunk(ino, idx, a.dataVersion());
        int inFile = (int) Math.min(ChunkStore.CHUNK, a.size() - start);
        CompactionPlan plan = list.size() < 2 ? null : CompactionPlan.of(list, inFile);
        if (plan == null || zeros(list, plan.lo(), plan.hi()) > (plan.hi() - plan.lo()) / 2) {
            return false;
        }
        int len = plan.hi() - plan.lo();
        Slice merged = new Slice(meta.nextSliceId(), len, 0, len, plan.lo());
        int bs = chunks.blockSize();
        try {
            for (int b = 0; (long) b * bs < len; b++) {
                byte[] block = new byte[ChunkStore.blockLength(bs, len, b)];
                long at = start + plan.lo() + (long) b * bs;
                int n = chunks.read(a, at, block, 0, block.length);
                if (n != block.length) {
                    throw new IOException("read " + n + " of " + block.length + " bytes at " + at);
                }
                chunks.putBlock(merged.id(), b, block);
            }
        } catch (IOException | RuntimeException e) {
            meta.abandonSlice(merged); // its blocks stored so far are deleted
            throw e;
        }
        List<long[]> freed = new ArrayList<>();
        Attr done = meta.compactChunk(ino, idx, a.dataVersion(), plan.apply(merged), merged, freed);
        if (done == null) {
            changedMeanwhile.incrementAndGet();
            return false;
        }
        trashed.accept(freed);
        compacted.incrementAndGet();
        log.debug("compacted chunk {} of inode {}: {} of {} slices into one of {} bytes at {}", idx, ino, plan.taken(), list.size(),
                len, plan.lo());
        return true;
    }

    /** Bytes of {@code [lo, hi)} of the chunk that no slice holds, or a hole does. */
    private static long zeros(List<Slice> list, int lo, int hi) {
        long z = 0;
        for (SliceView.Segment seg : SliceView.resolve(list, lo, hi)) {
            if (seg.isZero()) {
                z += seg.len();
            }
        }
        return z;
    }

    /** Chunks compacted so far. */
    public long compacted() {
        return compacted.get();
    }

    /** Compactions given up because the file changed while its chunk was being read. */
    public long changedMeanwhile() {
        return changedMeanwhile.get();
    }

    /** Waits until every chunk queued so far is compacted or given up (for tests and close). */
    public void awaitIdle() throws InterruptedException {
        java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
        pool.execute(done::countDown);
        done.await();
    }

    @Override
    public void close() {
        pool.shutdownNow(); // a compaction cut short leaves its chunk as it was
        try {
            pool.awaitTermination(1, TimeUnit.MINUTES);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
