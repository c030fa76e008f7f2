package io.partfs.engine.data;

import io.partfs.engine.Attr;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.Slice;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A new file the kernel writes itself, through FUSE passthrough, into a local backing file
 * ({@link Staging.Backing}; write-back mode only). No WRITE request reaches this process and no
 * byte of it is copied through here: a big write runs at the local disk's pace, with the
 * sidecar's CPU left to ClickHouse.
 *
 * <p>The kernel tells this process nothing about those writes, so a commit (a flush: fsync,
 * close) takes the whole file as it is: it fsyncs it and commits {@code size} bytes as one new
 * slice per chunk, staged in place ({@link Staging#commitBacking}). A commit with nothing
 * written since the last one is skipped: the file's size and mtime tell, as the backing
 * filesystem gives a write after a stat a later mtime (multigrain timestamps, Linux 6.13+;
 * {@link Staging#fineTimestamps} checks it, and without it files are written the usual way).
 * Not the ctime: the commit's own attribute ({@link Staging#SLICES_XATTR}) changes that.
 * So the usual create, write, fsync, close commits once; each further commit of a changed file
 * commits all of it again. Truncations are applied to the backing file and the metadata as they
 * are made.
 *
 * <p>Concurrency: commits and truncations synchronize on the file.
 */
final class BackedFile {
    private final long ino;
    final Staging.Backing backing;
    private final RandomAccessFile file;
    private long committedSize = -1;
    private FileTime committedMtime;
    /** The kernel closed it: forgotten once committed. */
    private boolean closed;
    /** Forgotten: committed (or given up) and closed; its backing file may be gone. */
    private boolean released;
    /** The last commit failed (the metadata engine did not answer, say). */
    private volatile boolean failed;

    BackedFile(long ino, Staging.Backing backing) throws IOException {
        this.ino = ino;
        this.backing = backing;
        this.file = new RandomAccessFile(backing.file().toFile(), "rw");
    }

    long size() throws IOException {
        return Files.size(backing.file()); // also after a clean close closed this process's handle
    }

    /** {@code a} with the backing file's size and, when later, its modification time. */
    Attr attr(Attr a) throws IOException {
        Map<String, Object> st = Files.readAttributes(backing.file(), "unix:size,lastModifiedTime", LinkOption.NOFOLLOW_LINKS);
        long size = (Long) st.get("size");
        long mtime = nanos((FileTime) st.get("lastModifiedTime"));
        return mtime > a.mtimeNs() ? a.contentChanged(size, mtime) : a.withSize(size);
    }

    private static long nanos(FileTime t) {
        return t.to(java.util.concurrent.TimeUnit.NANOSECONDS);
    }

    /**
     * Cuts (or extends) the backing file while the kernel has it open; false once it closed it
     * (the caller then commits it and truncates the metadata as for any file).
     */
    synchronized boolean truncate(long length) throws IOException {
        if (closed || released) {
            return false;
        }
        file.setLength(length);
        return true;
    }

    /**
     * Commits the file as it is, unless nothing was written since the last commit; true when it
     * committed.
     */
    synchronized boolean commit(MetaEngine meta, Staging staging, String volume, int blockSize) throws IOException {
        if (released) {
            return false; // a flush that found it just before another one's commit forgot it
        }
        try {
            boolean committed = commitNow(meta, staging, volume, blockSize);
            failed = false;
            return committed;
        } catch (IOException | RuntimeException e) {
            failed = true;
            throw e;
        }
    }

    /** Whether the last commit failed: the release after a failed close does not wait for the metadata engine again. */
    boolean failed() {
        return failed;
    }

    private boolean commitNow(MetaEngine meta, Staging staging, String volume, int blockSize) throws IOException {
        Map<String, Object> st = Files.readAttributes(backing.file(), "unix:size,lastModifiedTime", LinkOption.NOFOLLOW_LINKS);
        long size = (Long) st.get("size");
        FileTime mtime = (FileTime) st.get("lastModifiedTime");
        if (size == committedSize && mtime.equals(committedMtime)) {
            return false;
        }
        int chunks = (int) ((size + ChunkStore.CHUNK - 1) / ChunkStore.CHUNK);
        if (chunks > 0) { // an empty file has nothing to commit: truncations were committed as they were made
            long first = meta.nextSliceIds(chunks);
            staging.commitBacking(backing, volume, blockSize, first, size);
            List<MetaEngine.ChunkSlice> slices = new ArrayList<>(chunks);
            for (int c = 0; c < chunks; c++) {
                int len = (int) Math.min(ChunkStore.CHUNK, size - (long) c * ChunkStore.CHUNK);
                slices.add(new MetaEngine.ChunkSlice(c, new Slice(first + c, len, 0, len, 0)));
            }
            meta.commitWrite(ino, slices);
        }
        committedSize = size;
        committedMtime = mtime;
        return true;
    }

    /** Whether something was written since the last commit (or none was made). */
    synchronized boolean dirty() throws IOException {
        Map<String, Object> st = Files.readAttributes(backing.file(), "unix:size,lastModifiedTime", LinkOption.NOFOLLOW_LINKS);
        return (Long) st.get("size") != committedSize || !st.get("lastModifiedTime").equals(committedMtime);
    }

    synchronized boolean closed() {
        return closed;
    }

    /** The kernel closed the file; true when it is clean and may be forgotten at once. */
    synchronized boolean close() throws IOException {
        closed = true;
        boolean clean = !dirty();
        if (clean) {
            file.close();
        }
        return clean;
    }

    /** Forgets the file once its last commit is made (or it is given up). */
    synchronized void release(Staging staging) {
        if (released) {
            return;
        }
        released = true;
        try {
            file.close();
        } catch (IOException ignored) {
            // closed already (clean at its close): nothing is buffered in it
        }
        staging.closeBacking(backing);
    }
}
