package io.partfs.engine.fuse;

import io.partfs.engine.FsException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import jnr.ffi.Memory;
import jnr.ffi.Pointer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * FUSE passthrough (Linux 6.9+) for the kernel driver: a read-only open of a file of a
 * committed MergeTree part whose whole content is one block already on local disk (block cache
 * or write-back staging) hands that local file to the kernel, which then reads it itself. No
 * READ request reaches this process; reads cost what reads of a local file cost. Most files of
 * a part qualify: its small metadata files and every column file up to one block (4 MiB).
 *
 * <p>The kernel keeps each inode in one I/O mode while files of it are open: while it has a
 * backing file, every open of it must be a passthrough open of that same file (any other open
 * fails with EIO), and a passthrough open fails while page-cache opens exist. A writer cannot
 * pass through to an immutable cached block, so this class keeps the modes apart per inode: a
 * read-only open takes passthrough only when no other open of the inode exists in page-cache
 * mode, later read-only opens share its backing file, and an open for writing, a create of an
 * existing name or a truncate while passthrough readers exist fails with ETXTBSY (as writing a
 * running executable does) instead of the kernel's EIO, after waiting briefly for RELEASEs of
 * readers that already closed.
 *
 * <p>Files the part-metadata cache keeps (a selected table's checksums.txt, columns.txt, ...)
 * are not passed through: their reads are answered from that cache and, on a miss, fill it.
 *
 * <p>Why only committed part files: ClickHouse never writes, truncates or rewrites a file of a
 * committed part (parts are immutable; changes make new parts), so nothing it does meets
 * ETXTBSY. Readers of a part file see its content as of the first of the overlapping
 * passthrough opens; only another client of a shared volume could change it meanwhile.
 * {@code --no-passthrough} turns it off.
 *
 * <p>Writes (write-back mode): a new file (a create that made it) may be written by the kernel
 * itself into a local backing file the data layer gives ({@link io.partfs.engine.data.ChunkStore#openBacked}),
 * opened for reading and writing. While it is open every other open of that inode, for reading
 * or writing, shares it, and truncations of it are allowed (the mount cuts the backing file as
 * well). Its opens get FLUSH requests: a close commits what the kernel wrote.
 *
 * <p>Concurrency: opens and releases of all inodes serialize on this object; each does at most
 * one open(2) and one ioctl(2) under it.
 */
final class Passthrough {
    private static final Logger log = LoggerFactory.getLogger(Passthrough.class);
    private static final LibC C = LibC.INSTANCE;

    // fuse_open_out.open_flags
    static final int FOPEN_PASSTHROUGH = 1 << 7;
    private static final int FOPEN_NOFLUSH = KernelFuse.FOPEN_NOFLUSH;
    // _IOW(229, 1, struct fuse_backing_map) and _IOW(229, 2, uint32_t)
    private static final long BACKING_OPEN = 0x4010E501L, BACKING_CLOSE = 0x4004E502L;
    private static final int EPERM = 1, ELOOP = 40, ENOTTY = 25, EOPNOTSUPP = 95;

    /** How one handle was opened. */
    private enum Mode { PAGE_CACHE, PASSTHROUGH }

    /** The open files of one inode, by mode, and the backing file its passthrough opens share. */
    private static final class Inode {
        int pageCache;
        int passthrough;
        int backingId;
        /** The backing file is a new file's data, opened for writing too. */
        boolean writable;
    }

    /** The reply to an open: its FOPEN flags and backing id (0: none). */
    record Opened(int openFlags, int backingId) {
    }

    /** How long an open for writing or a truncate waits for passthrough readers' RELEASEs in flight. */
    static final long RELEASE_GRACE_MS = 200;

    private final Map<Long, Inode> inodes = new HashMap<>();
    private final Map<Long, Mode> handles = new ConcurrentHashMap<>();
    private volatile int devFd = -1;
    private volatile boolean enabled;
    private long backingOpens;

    /** Turns passthrough on for the FUSE device {@code fd}, once the kernel agreed to it at INIT. */
    void enable(int fd) {
        this.devFd = fd;
        this.enabled = true;
    }

    boolean enabled() {
        return enabled;
    }

    /**
     * A read-only open of {@code ino}: {@code local} holds its whole content (null when it is not
     * one local block of a part file), {@code pageCacheFlags} are the flags it gets without
     * passthrough.
     */
    synchronized Opened readOpen(long ino, long fh, Path local, int pageCacheFlags) {
        Inode n = inodes.computeIfAbsent(ino, k -> new Inode());
        if (n.passthrough > 0) { // the kernel allows only passthrough opens of this backing file now
            n.passthrough++;
            handles.put(fh, Mode.PASSTHROUGH);
            return new Opened(FOPEN_PASSTHROUGH | FOPEN_NOFLUSH, n.backingId);
        }
        if (local != null && n.pageCache == 0 && enabled) {
            int id = backingOpen(local);
            if (id > 0) {
                backingOpens++;
                n.passthrough = 1;
                n.backingId = id;
                handles.put(fh, Mode.PASSTHROUGH);
                return new Opened(FOPEN_PASSTHROUGH | FOPEN_NOFLUSH, id);
            }
        }
        n.pageCache++;
        handles.put(fh, Mode.PAGE_CACHE);
        return new Opened(pageCacheFlags, 0);
    }

    /**
     * A create that made new file {@code ino}, handle {@code fh}: the kernel is to write it into
     * {@code backing} itself. Null, with nothing changed, when the kernel does not take it (the
     * file is then written the usual way).
     */
    synchronized Opened writeOpen(long ino, long fh, Path backing) {
        Inode n = inodes.computeIfAbsent(ino, k -> new Inode());
        int id = n.passthrough == 0 && n.pageCache == 0 && enabled ? backingOpen(backing, LibC.O_RDWR) : -1;
        if (id <= 0) {
            if (n.passthrough <= 0 && n.pageCache <= 0) {
                inodes.remove(ino);
            }
            return null;
        }
        n.passthrough = 1;
        n.backingId = id;
        n.writable = true;
        handles.put(fh, Mode.PASSTHROUGH);
        writeOpens++;
        return new Opened(FOPEN_PASSTHROUGH, id);
    }

    /** Another open of {@code ino} while the kernel writes it into a backing file: shares that file; null when it does not. */
    synchronized Opened shareWritable(long ino, long fh) {
        Inode n = inodes.get(ino);
        if (n == null || !n.writable || n.passthrough <= 0) {
            return null;
        }
        n.passthrough++;
        handles.put(fh, Mode.PASSTHROUGH);
        return new Opened(FOPEN_PASSTHROUGH, n.backingId);
    }

    /** Whether the kernel writes {@code ino} into a backing file now. */
    synchronized boolean writable(long ino) {
        Inode n = inodes.get(ino);
        return n != null && n.writable && n.passthrough > 0;
    }

    /**
     * Reserves a page-cache open of {@code ino} for a writer, before anything is changed; false
     * (nothing reserved) when passthrough is off. Follow with {@link #bind} or {@link #cancel}.
     *
     * @throws FsException.TextBusy while the kernel reads the file itself (passthrough readers)
     */
    synchronized boolean reserve(long ino) throws FsException.TextBusy {
        if (!enabled && inodes.isEmpty()) {
            return false;
        }
        awaitNoPassthroughReaders(ino);
        inodes.computeIfAbsent(ino, k -> new Inode()).pageCache++;
        return true;
    }

    /**
     * Returns once {@code ino} has no passthrough readers, waiting up to {@link #RELEASE_GRACE_MS}
     * for their RELEASEs: the kernel leaves passthrough mode at the last close(2) but sends
     * RELEASE afterwards, so a file just closed by its last reader still counts here for a
     * moment (an open for writing right after it failed with ETXTBSY now and then).
     *
     * @throws FsException.TextBusy when readers are still open after that
     */
    private void awaitNoPassthroughReaders(long ino) throws FsException.TextBusy {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(RELEASE_GRACE_MS);
        while (true) {
            Inode n = inodes.get(ino); // again after each wait: the last release removes it
            if (n == null || n.passthrough <= 0) {
                return;
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw busy(ino);
            }
            try {
                TimeUnit.NANOSECONDS.timedWait(this, left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw busy(ino);
            }
        }
    }

    private static FsException.TextBusy busy(long ino) {
        return new FsException.TextBusy("inode " + ino + " is open for reading through FUSE passthrough");
    }

    /** The reserved open became handle {@code fh}. */
    void bind(long fh) {
        handles.put(fh, Mode.PAGE_CACHE);
    }

    /** The reserved open of {@code ino} failed. */
    synchronized void cancel(long ino) {
        Inode n = inodes.get(ino);
        if (n != null && --n.pageCache <= 0 && n.passthrough <= 0) {
            inodes.remove(ino);
        }
    }

    /** Fails a truncate of {@code ino} while passthrough readers exist (they would keep reading the old content). */
    synchronized void checkChangeable(long ino) throws FsException.TextBusy {
        Inode n = inodes.get(ino);
        if (n != null && n.writable) {
            return; // the mount cuts the backing file itself
        }
        awaitNoPassthroughReaders(ino);
    }

    /**
     * The handle was released: the last passthrough handle of an inode closes its backing file.
     * True when that was a backing file the kernel wrote (see {@link #writeOpen}).
     */
    synchronized boolean release(long ino, long fh) {
        Mode m = handles.remove(fh);
        Inode n = inodes.get(ino);
        if (m == null || n == null) {
            return false;
        }
        boolean closedWritable = false;
        if (m == Mode.PAGE_CACHE) {
            n.pageCache--;
        } else if (m == Mode.PASSTHROUGH && --n.passthrough == 0) {
            backingClose(n.backingId);
            n.backingId = 0;
            closedWritable = n.writable;
            n.writable = false;
        }
        if (n.pageCache <= 0 && n.passthrough <= 0) {
            inodes.remove(ino);
        }
        notifyAll(); // a writer may be waiting for this reader's release
        return closedWritable;
    }

    /** Backing files registered so far, for tests and logs. */
    synchronized long backingOpens() {
        return backingOpens;
    }

    /** New files the kernel wrote into backing files so far. */
    synchronized long writeOpens() {
        return writeOpens;
    }

    private long writeOpens;

    private int backingOpen(Path local) {
        return backingOpen(local, LibC.O_RDONLY);
    }

    private int backingOpen(Path local, int accessMode) {
        int fd = C.open(local.toString(), accessMode | LibC.O_CLOEXEC);
        if (fd < 0) {
            return -1; // evicted or uploaded and moved meanwhile: read it the usual way
        }
        try {
            Pointer map = Memory.allocateDirect(jnr.ffi.Runtime.getRuntime(C), 16);
            map.putInt(0, fd);
            map.putInt(4, 0);
            map.putLong(8, 0);
            int id = C.ioctl(devFd, BACKING_OPEN, map);
            if (id <= 0) {
                int err = LibC.errno();
                if (err == EPERM || err == ELOOP || err == ENOTTY || err == EOPNOTSUPP) {
                    enabled = false;
                    log.warn("FUSE passthrough is not available ({}); reads go through this process", C.strerror(err));
                }
                return -1;
            }
            return id;
        } finally {
            C.close(fd); // the kernel holds its own reference to the file
        }
    }

    private void backingClose(int id) {
        Pointer p = Memory.allocateDirect(jnr.ffi.Runtime.getRuntime(C), 4);
        p.putInt(0, id);
        if (C.ioctl(devFd, BACKING_CLOSE, p) != 0) {
            log.debug("closing FUSE backing file {}: {}", id, LibC.error());
        }
    }
}
