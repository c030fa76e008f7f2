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
 * close) finds out from the file: it fsyncs it and commits the runs of blocks that changed since
 * the last commit ({@link CommittedBlocks}), each as one new slice per chunk, staged in place
 * ({@link Staging#commitBacking}). The first commit takes the whole file without reading it, so
 * the usual create, write, fsync, close commits once and reads nothing back; a file fsynced as
 * it grows commits what each fsync added (from the second commit on, which reads the file to
 * compare). A commit with nothing written since the last one is skipped: the file's size and
 * mtime tell, as the backing filesystem gives a write after a stat a later mtime (multigrain
 * timestamps, Linux 6.13+; {@link Staging#fineTimestamps} checks it, and without it files are
 * written the usual way). Not the ctime: the commit's own attribute
 * ({@link Staging#SLICES_XATTR}) changes that. Truncations are applied to the backing file and
 * the metadata as they are made.
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
        long old = file.length();
        file.setLength(length);
        synchronized (backing.blocks) {
            backing.blocks.truncated(old, length);
        }
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
        CommittedBlocks.Changes run;
        int number;
        synchronized (backing.blocks) { // uploads of this file's blocks check what they read against the record
            // the attribute names each run of the commits still uploading: when that would be too many lines,
            // one run from the first change to the last, or (many commits wait) the whole file, named alone
            int kept = backing.linesKept();
            run = backing.blocks.changes(file.getChannel(), size, blockSize, kept >= Staging.MAX_LINES_KEPT);
            if (run == null) { // an empty file has nothing to commit: truncations were committed as they were made
                committedSize = size;
                committedMtime = mtime;
                return true;
            }
            if (kept + run.runs() > Staging.MAX_LINES_KEPT) {
                run = run.merged();
            }
            number = backing.nextCommit();
            backing.blocks.record(run);
        }
        try {
            List<CommittedBlocks.Span> spans = CommittedBlocks.spans(run.bounds());
            long first = meta.nextSliceIds(spans.size());
            staging.commitBacking(backing, number, volume, blockSize, first, run.bounds(), size);
            List<MetaEngine.ChunkSlice> slices = new ArrayList<>(spans.size());
            for (int s = 0; s < spans.size(); s++) {
                CommittedBlocks.Span span = spans.get(s);
                slices.add(new MetaEngine.ChunkSlice(span.chunk(), new Slice(first + s, span.len(), 0, span.len(), span.pos())));
            }
            meta.commitWrite(ino, slices);
            staging.committed(volume, blockSize, ino, slices);
        } catch (IOException | RuntimeException e) {
            synchronized (backing.blocks) {
                backing.blocks.forget(); // what the metadata holds is not known: the next commit takes all of it
            }
            throw e;
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
