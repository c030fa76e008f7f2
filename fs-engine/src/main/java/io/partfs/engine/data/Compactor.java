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
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Compacts fragmented chunks in the background: a chunk whose slice list grew to {@value
 * MetaEngine#COMPACT_AT} slices (a file appended to one write at a time, as ClickHouse's Log
 * engines do, or written over again and again) is read as it is and written again as one slice,
 * which replaces those slices in one transaction, under any committed since
 * ({@link MetaEngine#compactChunk}). Without it each read resolves every slice and may fetch an
 * object for each, each commit rewrites the whole list, and overwritten bytes stay in the store
 * until the file is deleted. The replaced slices are freed as a truncation frees them: to the
 * trash, then deleted.
 *
 * <p>One chunk at a time, on one low-priority thread, a block of memory at a time: the new
 * slice's blocks go straight to the object store (not to write-back staging) and into the block
 * cache. A chunk mostly of holes is left alone: written out, its zeros would take space; so are
 * large slices side by side, which are fine objects already ({@link #worthIt}). Commits made
 * while a chunk is being compacted stay on top of the merged slice; a chunk whose list changed
 * under them otherwise (a truncation freed it, say) is left as it is, the new slice goes to
 * deletion, and a later commit asks again. A replacement whose transaction failed with an
 * unknown outcome (the connection to Redis broke while it was under way) may still apply: the
 * metadata is asked again once no transaction sent then can arrive any more
 * ({@link #checkOutcome}), and a merged slice no chunk, trash or deletion list knows is then
 * handed to deletion instead of left in the store with nothing naming it.
 */
public final class Compactor implements Closeable {
    private static final Logger log = LoggerFactory.getLogger(Compactor.class);
    /** Chunks waiting: a burst of appends to many files notes each chunk once, and at most this many. */
    private static final int MAX_QUEUED = 10_000;
    /** How often a chunk of a file the kernel still writes (FUSE passthrough) is looked at again. */
    private static final long BACKED_RETRY_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

    private final MetaEngine meta;
    private final ChunkStore chunks;
    private final Consumer<List<long[]>> trashed;
    /** Chunks waiting, by "ino:idx": {first hint, last hint} in nanoseconds. */
    private final Map<String, long[]> waiting = new ConcurrentHashMap<>();
    private final ScheduledThreadPoolExecutor pool = new ScheduledThreadPoolExecutor(1, ChunkStore.daemon("partfs-compact"));
    private final long quietNanos;
    private final long maxWaitNanos;
    private final AtomicLong compacted = new AtomicLong();
    private final AtomicLong changedMeanwhile = new AtomicLong();
    private final io.partfs.engine.LogLimit failures = new io.partfs.engine.LogLimit(java.time.Duration.ofSeconds(10));
    /** How long after a replacement failed its transaction may still apply ({@link #checkOutcome}). */
    private volatile long outcomeSettleNanos = TimeUnit.MINUTES.toNanos(20);

    /**
     * Compacts chunks of files through {@code chunks}, handing the slices it puts in the trash to
     * {@code trashed}. A chunk is compacted once no commit has hinted it for {@code quiet}, or
     * {@code maxWait} after the first hint if commits go on: a file still being written would
     * change under the compaction, which would then be written for nothing.
     */
    public Compactor(MetaEngine meta, ChunkStore chunks, Consumer<List<long[]>> trashed, java.time.Duration quiet,
            java.time.Duration maxWait) {
        this.meta = meta;
        this.chunks = chunks;
        this.trashed = trashed;
        this.quietNanos = quiet.toNanos();
        this.maxWaitNanos = maxWait.toNanos();
        pool.setRemoveOnCancelPolicy(true);
        pool.setExecuteExistingDelayedTasksAfterShutdownPolicy(false); // close() drops the chunks still waiting
    }

    /**
     * How long a replacement whose transaction failed may still apply, before the metadata is
     * asked whether it did ({@link #checkOutcome}): on a shared engine longer than the kernel
     * retries a connection's unacknowledged data (~15 min), none on an embedded one.
     */
    public void outcomeSettle(java.time.Duration settle) {
        this.outcomeSettleNanos = settle.toNanos();
    }

    /** Notes a hint for chunk {@code idx} of inode {@code ino}: compacted once its commits pause. */
    public void request(long ino, long idx) {
        String key = ino + ":" + idx;
        long now = System.nanoTime();
        long[] fresh = {now, now};
        long[] known = waiting.putIfAbsent(key, fresh);
        if (known != null) {
            synchronized (known) {
                known[1] = now; // its task, scheduled already, looks again
            }
            return;
        }
        if (waiting.size() > MAX_QUEUED) {
            waiting.remove(key); // a burst over many files: a later commit asks again
            return;
        }
        schedule(key, ino, idx, quietNanos);
    }

    private void schedule(String key, long ino, long idx, long delayNanos) {
        try {
            pool.schedule(() -> due(key, ino, idx), delayNanos, TimeUnit.NANOSECONDS);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            waiting.remove(key); // the mount is closing
        }
    }

    /** A chunk's wait is over, unless a commit hinted it again within the quiet time and the longest wait is not up. */
    private void due(String key, long ino, long idx) {
        long[] times = waiting.get(key);
        if (times == null) {
            return;
        }
        long now = System.nanoTime();
        synchronized (times) {
            long quietLeft = times[1] + quietNanos - now;
            if (quietLeft > 0 && now - times[0] < maxWaitNanos) {
                schedule(key, ino, idx, Math.min(quietLeft, times[0] + maxWaitNanos - now));
                return;
            }
        }
        if (chunks.isBacked(ino)) { // the kernel still writes it: looked at again once it is committed and closed
            schedule(key, ino, idx, Math.max(quietNanos, BACKED_RETRY_NANOS));
            return;
        }
        waiting.remove(key);
        LowPriority.thisThread(); // nothing waits for it: ClickHouse's reads and writes go first
        try {
            compact(ino, idx);
        } catch (FsException.NoSuchEntry | Closing e) {
            // deleted meanwhile, or the mount is closing: a later write asks again
        } catch (IOException | RuntimeException e) {
            failures.warn(log, "compacting chunk {} of inode {} failed (it stays as it is, and is tried at a later write): {}",
                    idx, ino, e.toString());
        }
    }

    /**
     * Compacts chunk {@code idx} of inode {@code ino} now ({@link CompactionPlan}), unless it has
     * fewer than two slices or what would be merged is mostly holes; returns the bytes of the
     * merged slice when its list was replaced, 0 when there was nothing to do or its list changed
     * under it (not by commits on top).
     */
    public long compact(long ino, long idx) throws IOException {
        if (chunks.isBacked(ino)) {
            // the kernel writes it into a local file (FUSE passthrough): its staged blocks read what
            // it wrote since their commit, which the next commit compares against what they held
            return 0;
        }
        // the size and the slices as of one data version: which slices lie past the file's end is decided from both
        MetaEngine.ChunkAt read = meta.readChunkWithAttr(ino, idx);
        Attr a = read.attr();
        long start = idx * ChunkStore.CHUNK;
        if (a.type() != FileType.FILE || a.nlink() == 0 || start >= a.size()) {
            return 0;
        }
        List<Slice> list = read.slices();
        int inFile = (int) Math.min(ChunkStore.CHUNK, a.size() - start);
        CompactionPlan plan = list.size() < 2 ? null : CompactionPlan.of(list, inFile);
        if (plan == null || zeros(list, plan.lo(), plan.hi()) > (plan.hi() - plan.lo()) / 2
                || !worthIt(list.subList(list.size() - plan.taken(), list.size()), chunks.blockSize() / 4)) {
            return 0;
        }
        int len = plan.hi() - plan.lo();
        Slice merged = new Slice(meta.nextSliceId(), len, 0, len, plan.lo());
        int bs = chunks.blockSize();
        try {
            for (int b = 0; (long) b * bs < len; b++) {
                if (closing) {
                    throw new Closing();
                }
                byte[] block = new byte[ChunkStore.blockLength(bs, len, b)];
                long at = start + plan.lo() + (long) b * bs;
                int n = chunks.read(a, at, block, 0, block.length);
                if (n != block.length) {
                    throw new IOException("read " + n + " of " + block.length + " bytes at " + at);
                }
                chunks.putBlock(merged.id(), b, block, ino, idx);
            }
        } catch (io.partfs.engine.object.ObjectNotFoundException e) {
            abandon(merged);
            if (meta.getattrFromStore(ino).dataVersion() == a.dataVersion()) {
                throw e; // the layout read still stands: its object is lost
            }
            changedMeanwhile.incrementAndGet(); // another mount compacted or truncated it and freed what this one read
            return 0;
        } catch (IOException | RuntimeException e) {
            abandon(merged);
            throw e;
        }
        List<long[]> freed = new ArrayList<>();
        Attr done;
        try {
            done = meta.compactChunk(ino, idx, list, plan.apply(merged), merged, freed);
        } catch (IOException | RuntimeException e) {
            scheduleCheck(merged, ino, idx, outcomeSettleNanos); // it may have applied, or may still
            throw e;
        }
        meta.uploadsSettled(List.of(merged.id())); // in the chunk now, or (the chunk changed meanwhile) on the deletion list
        if (done == null) {
            changedMeanwhile.incrementAndGet();
            return 0;
        }
        trashed.accept(freed);
        compacted.incrementAndGet();
        log.debug("compacted chunk {} of inode {}: {} of {} slices into one of {} bytes at {}", idx, ino, plan.taken(), list.size(),
                len, plan.lo());
        return len;
    }

    /**
     * Whether merging {@code taken} gains anything: two of them are small (under {@code small}
     * bytes: small objects, a GET each), or they overlap (bytes written over, still stored). A
     * file fsynced every few MiB as it is written has many slices side by side, each a fine
     * object: rewriting them would cost the whole span for nothing.
     */
    static boolean worthIt(List<Slice> taken, int small) {
        List<Slice> written = taken.stream().filter(s -> !s.isHole()).sorted(java.util.Comparator.comparingInt(Slice::pos)).toList();
        int smallOnes = 0;
        int end = 0;
        for (Slice s : written) {
            if (s.pos() < end) {
                return true; // over bytes another of them wrote
            }
            end = s.end();
            smallOnes += s.len() < small ? 1 : 0;
        }
        return smallOnes >= 2;
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

    private final AtomicLong outcomesChecked = new AtomicLong();

    /** Failed replacements whose outcome was asked of the metadata ({@link #checkOutcome}); for tests. */
    public long outcomesChecked() {
        return outcomesChecked.get();
    }

    /** Compactions given up because the chunk's list changed under them (not by commits on top). */
    public long changedMeanwhile() {
        return changedMeanwhile.get();
    }

    /** Compacts every chunk waiting now, and waits for it (for tests). */
    public void awaitIdle() throws InterruptedException {
        java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
        pool.execute(() -> {
            for (String key : List.copyOf(waiting.keySet())) {
                long[] times = waiting.get(key);
                if (times != null) {
                    synchronized (times) {
                        times[0] = Long.MIN_VALUE / 2; // the longest wait is up
                    }
                    int colon = key.indexOf(':');
                    due(key, Long.parseLong(key, 0, colon, 10), Long.parseLong(key, colon + 1, key.length(), 10));
                }
            }
            done.countDown();
        });
        done.await();
    }

    /**
     * Puts the blocks of {@code merged} stored so far on the deletion list, so they are deleted.
     * Done with the thread's interrupt (an unmount that gave up waiting) set aside and kept: a
     * metadata engine may refuse a request on an interrupted thread, and the blocks would then
     * stay in the store with nothing naming them.
     */
    private void abandon(Slice merged) throws IOException {
        boolean interrupted = Thread.interrupted();
        try {
            meta.abandonSlice(merged);
            meta.uploadsSettled(List.of(merged.id()));
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private void scheduleCheck(Slice merged, long ino, long idx, long delayNanos) {
        try {
            pool.schedule(() -> checkOutcome(merged, ino, idx), delayNanos, TimeUnit.NANOSECONDS);
        } catch (java.util.concurrent.RejectedExecutionException closing) {
            // the mount is closing: once its session has ended, a mount deletes the slice's objects unless it applied
        }
    }

    /**
     * After a replacement's transaction failed and the time it could still apply has passed:
     * hands the merged slice to deletion unless the chunk lists it (it applied), or it was freed
     * since into the trash or the deletion list. Asked again a minute later while the metadata
     * does not answer. Dropped at unmount, as a chunk still waiting is.
     */
    private void checkOutcome(Slice merged, long ino, long idx) {
        try {
            boolean applied = !meta.knownSlices(List.of(new MetaEngine.WrittenSlice(merged.id(), ino, idx))).isEmpty();
            outcomesChecked.incrementAndGet();
            if (applied) {
                meta.uploadsSettled(List.of(merged.id()));
            } else {
                abandon(merged);
                log.info("the compaction of chunk {} of inode {} did not apply: its merged slice ({} bytes) is handed to deletion",
                        idx, ino, merged.size());
            }
            trashed.accept(List.of()); // wakes the deletion of freed slices: the merged one, or those it replaced
        } catch (IOException | RuntimeException e) {
            failures.warn(log, "cannot tell whether the compaction of chunk {} of inode {} applied, asking again in a minute: {}",
                    idx, ino, e.toString());
            scheduleCheck(merged, ino, idx, TimeUnit.MINUTES.toNanos(1));
        }
    }

    /** A compaction that stopped between two blocks because the mount is closing. */
    private static final class Closing extends IOException {
        private static final long serialVersionUID = 1L;

        Closing() {
            super("the mount is closing");
        }
    }

    private volatile boolean closing;

    /**
     * Drops the chunks still waiting and stops a compaction under way at its next block, which
     * leaves its chunk as it was and puts what it stored on the deletion list. It used to be
     * interrupted at once, in the middle of an object store request or of its last transaction
     * (whose outcome the compaction then did not know, and whose merged blocks nothing would
     * delete if it failed). Interrupted only if it has not stopped within a minute (a store that
     * does not answer).
     */
    @Override
    public void close() {
        closing = true;
        pool.shutdown();
        try {
            if (!pool.awaitTermination(1, TimeUnit.MINUTES)) {
                pool.shutdownNow();
                pool.awaitTermination(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            pool.shutdownNow();
            Thread.currentThread().interrupt();
        }
    }
}
