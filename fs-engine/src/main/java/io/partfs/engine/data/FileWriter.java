package io.partfs.engine.data;

import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.Slice;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutionException;

/**
 * Buffered writes of one file. Each continuous run of writes within a chunk becomes one slice;
 * a block of a slice is uploaded as soon as it is full, the last partial block at flush. Flush
 * waits for every upload of every slice and only then commits all slices in one metadata
 * transaction, in the order they were started, so later writes cover earlier ones. In
 * write-back mode "uploaded" means staged durably on local disk ({@link Staging}).
 *
 * <p>Concurrency: all methods synchronize on the writer. A failed upload keeps its bytes, so
 * a later flush tries it again; nothing is committed until all uploads succeed. Once flushed
 * empty a writer is retired (under its lock) and refuses further writes, so the store can drop
 * it from its map without losing a write that raced with the flush.
 */
final class FileWriter {
    private static final int UPLOAD_ATTEMPTS = 3;

    private final ChunkStore store;
    private final MetaEngine meta;
    private final long ino;
    private final List<PendingSlice> slices = new ArrayList<>();
    private long pendingBytes;
    /**
     * End offset of the furthest buffered byte, -1 when nothing is buffered; written under the
     * lock, read without it ({@link #end}). A flush sets it to -1 only after its commit.
     */
    private volatile long end = -1;
    private boolean retired;
    /** The last flush failed and nothing was written since; read without the lock (a background check must not wait out a flush). */
    private volatile boolean failed;

    FileWriter(ChunkStore store, MetaEngine meta, long ino) {
        this.store = store;
        this.meta = meta;
        this.ino = ino;
    }

    synchronized long pendingBytes() {
        return pendingBytes;
    }

    /**
     * End offset of the furthest buffered byte, or -1 when nothing is buffered. Does not wait for
     * a flush in progress, which may wait for the object store for a whole request timeout: until
     * its commit this is the end of what it commits, after it -1.
     */
    long end() {
        return end;
    }

    /** Buffers the write; false (nothing written) when this writer was retired. */
    synchronized boolean write(long off, byte[] src, int srcOff, int len) throws IOException {
        if (retired) {
            return false;
        }
        int done = 0;
        while (done < len) {
            long pos = off + done;
            long idx = pos / ChunkStore.CHUNK;
            int inChunk = (int) (pos % ChunkStore.CHUNK);
            int n = (int) Math.min(len - done, ChunkStore.CHUNK - inChunk);
            PendingSlice s = continuing(idx, inChunk, n);
            if (s == null) {
                s = new PendingSlice(idx, inChunk, meta.nextSliceId());
                slices.add(s);
            }
            s.append(src, srcOff + done, n);
            done += n;
        }
        pendingBytes += len;
        failed = false;
        store.buffered(len);
        if (len > 0) { // a write of nothing buffers nothing: the end stays -1 while nothing is buffered
            end = Math.max(end, off + len);
        }
        return true;
    }

    /** The last slice, if this write continues it exactly within its chunk. */
    private PendingSlice continuing(long idx, int inChunk, int n) {
        if (slices.isEmpty()) {
            return null;
        }
        PendingSlice last = slices.get(slices.size() - 1);
        boolean contiguous = !last.finished && last.chunk == idx && last.pos + last.length == inChunk
                && (long) last.length + n <= ChunkStore.CHUNK;
        return contiguous ? last : null;
    }

    /** Flushes, then retires the writer; true when it is retired (nothing left pending). */
    synchronized boolean flushAndRetire() throws IOException {
        flush();
        retired = slices.isEmpty();
        return retired;
    }

    synchronized void flush() throws IOException {
        if (slices.isEmpty()) {
            return;
        }
        startUploads();
        try {
            awaitUploads();
            store.beforeCommit();
        } catch (IOException e) {
            failed = true;
            throw e;
        }
        List<MetaEngine.ChunkSlice> commit = new ArrayList<>(slices.size());
        for (PendingSlice s : slices) {
            commit.add(new MetaEngine.ChunkSlice(s.chunk, new Slice(s.id, s.length, 0, s.length, s.pos)));
        }
        meta.commitWrite(ino, commit);
        store.committed(ino, commit);
        List<Long> ids = new ArrayList<>(slices.size());
        for (PendingSlice s : slices) {
            ids.add(s.id);
        }
        meta.uploadsSettled(ids);
        for (PendingSlice s : slices) {
            for (Upload u : s.uploads) {
                store.giveBuffer(u.data); // stored and committed: nothing reads it any more
            }
        }
        slices.clear();
        store.buffered(-pendingBytes);
        pendingBytes = 0;
        end = -1;
    }

    boolean failedSinceLastWrite() {
        return failed;
    }

    /** Drops what is buffered and retires the writer; returns the bytes dropped. */
    synchronized long discard() {
        long dropped = pendingBytes;
        slices.clear();
        store.buffered(-pendingBytes);
        pendingBytes = 0;
        end = -1;
        retired = true;
        return dropped;
    }

    /** Starts uploading the last partial block of every slice, without waiting (a flush still commits them). */
    synchronized void startUploads() {
        for (PendingSlice s : slices) {
            s.finish();
        }
    }

    /**
     * Waits for every upload of every slice. Failed ones are tried again all at once, so an
     * object store that is down costs {@value #UPLOAD_ATTEMPTS} rounds of the client's own
     * retries for the whole file, not that many per block, one block after another; and one
     * round once the store counts as unreachable (see {@link ChunkStore#storeUnreachable}), as
     * its requests then are tried once.
     */
    private void awaitUploads() throws IOException {
        List<Upload> waiting = new ArrayList<>();
        for (PendingSlice s : slices) {
            for (Upload u : s.uploads) {
                if (u.failedBefore) {
                    u.retry(); // an earlier flush gave up on it: this one gets its full attempts too
                }
                waiting.add(u);
            }
        }
        for (int attempt = 1; ; attempt++) {
            List<Upload> failedUploads = new ArrayList<>();
            IOException last = null;
            for (Upload u : waiting) {
                IOException e = u.await();
                if (e != null) {
                    failedUploads.add(u);
                    last = e;
                }
            }
            if (failedUploads.isEmpty()) {
                return;
            }
            if (attempt >= UPLOAD_ATTEMPTS || store.storeUnreachable()) {
                for (Upload u : failedUploads) {
                    u.failedBefore = true;
                }
                throw last;
            }
            for (Upload u : failedUploads) {
                u.retry();
            }
            waiting = failedUploads;
        }
    }

    /** One block on its way to the object store; keeps its bytes until the upload succeeded. */
    private final class Upload {
        final String key;
        final byte[] data;
        /** The file and chunk it is written for. */
        final Staging.Owner owner;
        ChunkStore.BlockUpload future;
        /** A flush gave up on this block; the next one starts it again. */
        boolean failedBefore;

        /** {@code byFlush}: started by a flush, which waits for it (see {@link ChunkStore#upload}). */
        Upload(String key, byte[] data, boolean byFlush, long chunk) {
            this.key = key;
            this.data = data;
            this.owner = new Staging.Owner(ino, chunk);
            this.future = store.upload(key, data, byFlush, owner);
        }

        /** Waits for this attempt: null when the block is stored, else why not. */
        IOException await() throws IOException {
            try {
                future.await();
                return null;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new InterruptedIOException("interrupted while uploading " + key);
            } catch (ExecutionException e) {
                Throwable c = e.getCause();
                return c instanceof IOException io ? io : new IOException("upload of " + key + " failed", c);
            }
        }

        void retry() {
            failedBefore = false;
            future = store.upload(key, data, true, owner); // tried again by a flush
        }
    }

    /** A slice being written: position in its chunk, its id, and blocks uploaded or buffered. */
    private final class PendingSlice {
        final long chunk;
        final int pos;
        final long id;
        int length;
        final List<Upload> uploads = new ArrayList<>();
        /** The block being filled; grows up to one block, so small files stay small in memory. */
        byte[] current = new byte[0];
        int currentLen;
        boolean finished;

        PendingSlice(long chunk, int pos, long id) {
            this.chunk = chunk;
            this.pos = pos;
            this.id = id;
        }

        void append(byte[] src, int off, int n) {
            int bs = store.blockSize();
            int done = 0;
            while (done < n) {
                int room = bs - currentLen;
                int k = Math.min(room, n - done);
                if (currentLen + k > current.length) {
                    // small files grow their buffer as they go; a slice that already filled a
                    // block, or a write of a quarter block, is big: its buffer is a whole block
                    // at once, not three growing copies of it, and a reused one (BlockBuffers)
                    boolean big = !uploads.isEmpty() || k >= bs / 4;
                    if (big) {
                        byte[] block = store.takeBuffer();
                        System.arraycopy(current, 0, block, 0, currentLen);
                        current = block;
                    } else {
                        current = Arrays.copyOf(current, (int) Math.min(bs, Math.max(currentLen + k, 2L * current.length)));
                    }
                }
                System.arraycopy(src, off + done, current, currentLen, k);
                currentLen += k;
                done += k;
                length += k;
                if (currentLen == bs) {
                    uploads.add(new Upload(store.blockKey(id, uploads.size(), bs), current, false, chunk));
                    current = new byte[0];
                    currentLen = 0;
                }
            }
        }

        /** Uploads the last partial block; the slice takes no more writes after this. */
        void finish() {
            if (!finished && currentLen > 0) {
                byte[] last = currentLen == current.length ? current : Arrays.copyOf(current, currentLen);
                if (last != current) {
                    store.giveBuffer(current);
                }
                uploads.add(new Upload(store.blockKey(id, uploads.size(), currentLen), last, true, chunk));
                current = new byte[0];
                currentLen = 0;
            }
            finished = true;
        }
    }
}
