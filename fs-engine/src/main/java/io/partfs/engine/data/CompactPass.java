package io.partfs.engine.data;

import io.partfs.engine.Attr;
import io.partfs.engine.FileType;
import io.partfs.engine.FsException;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.TreeWalk;
import java.io.IOException;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A compaction asked for ({@code partfs compact PATH}, as {@code juicefs compact}): every chunk
 * of the files at or under a path that holds more than one slice is compacted as the background
 * {@link Compactor} compacts a chunk, again while that shortens its list. The background
 * compactor acts on a commit that leaves a chunk with 32 slices; this reaches what it does not:
 * chunks under that, files no longer written whose compaction an unmount cut short, and a
 * mount's files after a change of policy. The same rules apply: slices that neither overlap nor
 * are small are left side by side, as is a span mostly of holes, and a file the kernel still
 * writes (FUSE passthrough) is skipped.
 *
 * <p>One chunk at a time, on the calling thread: it reads the chunk's blocks and stores the merged
 * slice, so it costs what the chunk's bytes cost to fetch and upload once.
 */
public final class CompactPass {
    /** Compactions of one chunk at most: each shortens its list, size-tiered, so a few suffice. */
    static final int MAX_ROUNDS = 64;

    /**
     * Counts so far: files and chunks looked at, chunks with more than one slice, chunks and
     * compactions that shortened a list, slices of the fragmented chunks before and after,
     * bytes written, files skipped (the kernel writes them), chunks that failed and the first
     * failure's message.
     */
    public record Progress(long files, long chunks, long fragmented, long compactedChunks, long compactions, long slicesBefore,
            long slicesAfter, long bytesWritten, long skipped, long failed, String firstError) {
    }

    private final MetaEngine meta;
    private final ChunkStore chunks;
    private final Compactor compactor;
    private final AtomicLong files = new AtomicLong();
    private final AtomicLong chunksSeen = new AtomicLong();
    private final AtomicLong fragmented = new AtomicLong();
    private final AtomicLong compactedChunks = new AtomicLong();
    private final AtomicLong compactions = new AtomicLong();
    private final AtomicLong slicesBefore = new AtomicLong();
    private final AtomicLong slicesAfter = new AtomicLong();
    private final AtomicLong bytesWritten = new AtomicLong();
    private final AtomicLong skipped = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private volatile String firstError;
    private volatile boolean cancelled;

    public CompactPass(MetaEngine meta, ChunkStore chunks, Compactor compactor) {
        this.meta = meta;
        this.chunks = chunks;
        this.compactor = compactor;
    }

    /** Stops at the next chunk (the client went away). */
    public void cancel() {
        cancelled = true;
    }

    public Progress progress() {
        return new Progress(files.get(), chunksSeen.get(), fragmented.get(), compactedChunks.get(), compactions.get(),
                slicesBefore.get(), slicesAfter.get(), bytesWritten.get(), skipped.get(), failed.get(), firstError);
    }

    /**
     * {@link #run} on this thread, which is made low priority first, as the background compactor's
     * (for a thread of its own: it stays so).
     */
    public Progress runAtLowPriority(Attr start) throws IOException {
        LowPriority.thisThread();
        return run(start);
    }

    /**
     * Compacts {@code start} (a file, or a directory and everything under it; symlinks are not
     * followed; a file with several links once) and returns the counts. A chunk that fails is
     * counted and left as it was; the metadata engine failing a walk ends it with the exception.
     */
    public Progress run(Attr start) throws IOException {
        if (start.type() == FileType.FILE) {
            compactFile(start);
        } else if (start.type() == FileType.DIRECTORY) {
            Set<Long> linked = new HashSet<>();
            TreeWalk.breadthFirst(meta, start.ino(), "", (dir, path, others, subdirectories) -> {
                TreeWalk.regularFiles(meta, others, linked, this::compactFile);
                return !cancelled;
            });
        }
        return progress();
    }

    private void compactFile(Attr a) throws IOException {
        if (cancelled) {
            return;
        }
        files.incrementAndGet();
        if (chunks.isBacked(a.ino())) {
            skipped.incrementAndGet();
            return;
        }
        long n = (a.size() + ChunkStore.CHUNK - 1) / ChunkStore.CHUNK;
        for (long idx = 0; idx < n && !cancelled; idx++) {
            chunksSeen.incrementAndGet();
            try {
                compactChunk(a.ino(), idx);
            } catch (FsException.NoSuchEntry e) {
                return; // deleted meanwhile
            } catch (IOException | RuntimeException e) {
                failed.incrementAndGet();
                if (firstError == null) {
                    firstError = "inode " + a.ino() + " chunk " + idx + ": " + e.getMessage();
                }
            }
        }
    }

    private void compactChunk(long ino, long idx) throws IOException {
        int before = slices(ino, idx);
        if (before < 2) {
            return;
        }
        fragmented.incrementAndGet();
        int rounds = 0;
        long written = 0;
        for (long w; rounds < MAX_ROUNDS && !cancelled && (w = compactor.compact(ino, idx)) > 0; rounds++) {
            written += w;
        }
        slicesBefore.addAndGet(before);
        slicesAfter.addAndGet(rounds == 0 ? before : slices(ino, idx));
        if (rounds > 0) {
            compactedChunks.incrementAndGet();
            compactions.addAndGet(rounds);
            bytesWritten.addAndGet(written);
        }
    }

    /** Slices in the list of chunk {@code idx} of {@code ino}, as it is now. */
    private int slices(long ino, long idx) throws IOException {
        Attr a = meta.getattr(ino);
        return meta.readChunk(ino, idx, a.dataVersion()).size();
    }
}
