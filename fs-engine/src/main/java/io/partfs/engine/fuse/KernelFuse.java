package io.partfs.engine.fuse;

import io.partfs.engine.Attr;
import io.partfs.engine.DirEntry;
import io.partfs.engine.Errno;
import io.partfs.engine.FileType;
import io.partfs.engine.FsException;
import io.partfs.engine.NameCodec;
import io.partfs.engine.PartFs;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.metrics.OperationMetrics;
import io.partfs.engine.spi.PathObserver;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import jnr.ffi.Pointer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * PartFS's own FUSE driver: speaks the kernel's FUSE protocol on {@code /dev/fuse} directly
 * (mount(2) as root, no libfuse), with the kernel's inode numbers being PartFS inode numbers.
 *
 * <p>Why not libfuse 2's path API: every name the kernel has not cached costs a round trip to
 * this process, and that API has no READDIRPLUS, so loading a MergeTree part costs one lookup per
 * file. Here a directory listing carries every entry's attributes (READDIRPLUS), the kernel
 * keeps one inode per file (so hard links share attributes and a cached {@code st_nlink} stays
 * right), and no path is resolved per call.
 *
 * <p>Workers block in read(2) on the device, each taking one request and writing its reply;
 * PartFs is thread-safe. Failures become errno values through {@link Errnos} (never EINTR).
 * flock(2) locks on a shared volume are held for every mount of it ({@link FlockWaits}); on an
 * exclusive one, and POSIX locks on any, they are not negotiated, so the kernel keeps them,
 * exact for every process on this machine. Protocol 7.31 (Linux 5.4+) at least, 7.36 when the kernel has it;
 * struct layouts follow {@code include/uapi/linux/fuse.h}.
 *
 * <p>What keeps calls away from this process: READDIRPLUS; directory listings the kernel keeps
 * (FOPEN_CACHE_DIR, dropped when the directory changes, and on a shared volume a second after it
 * was sent); no FLUSH after read-only opens
 * (FOPEN_NOFLUSH); the MergeTree readahead ({@link PartPrefetcher}), which lists parts
 * ahead of ClickHouse and stores their cached metadata files into the page cache; and FUSE
 * passthrough for part files held in one local block ({@link Passthrough}), read by the kernel.
 */
public final class KernelFuse implements FuseMount {
    private static final Logger log = LoggerFactory.getLogger(KernelFuse.class);
    private static final LibC C = LibC.INSTANCE;

    // ---- protocol ----
    private static final int MAJOR = 7;
    /** The oldest protocol this driver speaks (Linux 5.4), and the newest it knows of (5.17). */
    private static final int MINOR = 31, MINOR_KNOWN = 36;
    private static final int MAX_PAGES = 256;
    /** Largest write (and read) moved in one request. */
    static final int MAX_IO = MAX_PAGES * 4096;
    private static final int IN_HEADER = 40;
    private static final int OUT_HEADER = 16;
    private static final int BUFFER = MAX_IO + 4096;

    private static final int LOOKUP = 1, FORGET = 2, GETATTR = 3, SETATTR = 4, READLINK = 5, SYMLINK = 6,
            MKNOD = 8, MKDIR = 9, UNLINK = 10, RMDIR = 11, RENAME = 12, LINK = 13, OPEN = 14, READ = 15,
            WRITE = 16, STATFS = 17, RELEASE = 18, FSYNC = 20, SETXATTR = 21, GETXATTR = 22, LISTXATTR = 23,
            REMOVEXATTR = 24, FLUSH = 25, INIT = 26, OPENDIR = 27, READDIR = 28, RELEASEDIR = 29,
            FSYNCDIR = 30, SETLK = 32, SETLKW = 33, ACCESS = 34, CREATE = 35, INTERRUPT = 36, DESTROY = 38, BATCH_FORGET = 42,
            FALLOCATE = 43, READDIRPLUS = 44, RENAME2 = 45;
    private static final String[] OP_NAMES = new String[64];

    static {
        String[][] names = {{"lookup", "1"}, {"forget", "2"}, {"getattr", "3"}, {"setattr", "4"},
            {"readlink", "5"}, {"symlink", "6"}, {"mknod", "8"}, {"mkdir", "9"}, {"unlink", "10"},
            {"rmdir", "11"}, {"rename", "12"}, {"link", "13"}, {"open", "14"}, {"read", "15"},
            {"write", "16"}, {"statfs", "17"}, {"release", "18"}, {"fsync", "20"}, {"setxattr", "21"},
            {"getxattr", "22"}, {"listxattr", "23"}, {"removexattr", "24"}, {"flush", "25"}, {"init", "26"},
            {"opendir", "27"}, {"readdir", "28"}, {"releasedir", "29"}, {"fsyncdir", "30"},
            {"setlk", "32"}, {"setlkw", "33"},
            {"access", "34"}, {"create", "35"}, {"destroy", "38"}, {"fallocate", "43"},
            {"readdirplus", "44"}, {"rename2", "45"}};
        for (String[] n : names) {
            OP_NAMES[Integer.parseInt(n[1])] = n[0];
        }
    }

    // fuse_init flags
    private static final int ASYNC_READ = 1, BIG_WRITES = 1 << 5, FLOCK_LOCKS = 1 << 10, AUTO_INVAL_DATA = 1 << 12,
            DO_READDIRPLUS = 1 << 13, ASYNC_DIO = 1 << 15, PARALLEL_DIROPS = 1 << 18, MAX_PAGES_FLAG = 1 << 22,
            CACHE_SYMLINKS = 1 << 23, NO_OPENDIR_SUPPORT = 1 << 24, HANDLE_KILLPRIV_V2 = 1 << 28, INIT_EXT = 1 << 30;
    /** fuse_lk_in.lk_flags: the lock is flock(2)'s; fuse_release_in.release_flags: drop the file's flock lock. */
    private static final int LK_FLOCK = 1, RELEASE_FLOCK_UNLOCK = 1 << 1;
    /** fuse_file_lock.type */
    private static final int F_RDLCK = 0, F_WRLCK = 1, F_UNLCK = 2;
    /** What {@link #dispatch} returns when the reply is sent later, by another thread ({@link FlockWaits}). */
    private static final int REPLY_LATER = -1;
    /** fuse_write_in.write_flags: the writer lacks CAP_FSETID, so suid/sgid/capabilities go (with HANDLE_KILLPRIV_V2). */
    private static final int WRITE_KILL_SUIDGID = 1 << 2;
    /** fuse_init flags2 (bits 32 and up of the flags, with INIT_EXT): FUSE_PASSTHROUGH is bit 37. */
    private static final int PASSTHROUGH_FLAG2 = 1 << (37 - 32);
    // fuse_setattr_in.valid
    private static final int FATTR_MODE = 1, FATTR_UID = 2, FATTR_GID = 4, FATTR_SIZE = 8, FATTR_ATIME = 16,
            FATTR_MTIME = 32, FATTR_FH = 64, FATTR_ATIME_NOW = 128, FATTR_MTIME_NOW = 256, FATTR_KILL_SUIDGID = 1 << 11;
    private static final int S_IFMT = 0170000;
    // fuse_open_out.open_flags (FOPEN_NOFLUSH: 7.35, ignored by older kernels)
    private static final int FOPEN_KEEP_CACHE = 1 << 1, FOPEN_CACHE_DIR = 1 << 3;
    static final int FOPEN_NOFLUSH = 1 << 5;
    // notifications: written to the device unasked, "unique" 0 and the code in the error field
    private static final int NOTIFY_INVAL_INODE = 2, NOTIFY_STORE = 4;
    /** Largest file {@link #storeCached} puts into the page cache, and how many it remembers. */
    private static final int MAX_STORED_FILE = MAX_IO, MAX_STORED = 500_000;

    private final PartFs fs;
    private final ObservedFiles observed;
    /** The name each inode the kernel holds was given by (for the observer and the prefetcher). */
    private final NodeNames names = new NodeNames();
    private volatile PartPrefetcher prefetcher;
    private final OperationMetrics ops;
    private final io.partfs.engine.metrics.Metrics.Counter pageCacheStores;
    private final io.partfs.engine.metrics.Metrics.Counter readaheadParts;
    private final int workers;
    /** Listings of directories being read in several requests. */
    private final DirPages pages;
    private final java.util.concurrent.atomic.LongAdder listingsTaken = new java.util.concurrent.atomic.LongAdder();
    /** Whether the kernel opens directories without asking (FUSE_NO_OPENDIR_SUPPORT, Linux 5.1+). */
    private volatile boolean opendirless;
    /**
     * Whether other clients may change the volume (Redis): then the kernel keeps a directory
     * listing for a second only ({@link #expireListing}), and a request for an inode that is
     * gone gets ESTALE.
     */
    private final boolean sharedVolume;
    /**
     * flock(2) locks held for the whole volume, through the metadata engine, when it is shared
     * (FUSE_FLOCK_LOCKS): two ClickHouse servers started on one data path from two machines
     * then meet at the lock on its status file, as on one machine. POSIX (fcntl) locks stay the
     * kernel's, exact for the processes of this machine. On an exclusive volume the kernel keeps
     * both kinds, exact for every process that can reach the volume.
     */
    private final FlockWaits flockWaits;
    /** Directories whose kept listing the kernel is to drop, and the thread that tells it when. */
    private final Map<Long, Boolean> expiring = new java.util.concurrent.ConcurrentHashMap<>();
    private final java.util.concurrent.ScheduledThreadPoolExecutor expiry = new java.util.concurrent.ScheduledThreadPoolExecutor(1, r -> {
        Thread t = new Thread(r, "partfs-listing-expiry");
        t.setDaemon(true);
        return t;
    });
    private final long expiryNanos;
    /**
     * Files whose content this process stored into the kernel's page cache, by inode, with the
     * data version stored. The next read-only open of such a file keeps the page cache when the
     * version is still current (so its reads never reach this process); any open consumes it.
     */
    private final Map<Long, Long> stored = new ConcurrentHashMap<>();
    /**
     * Inodes whose content may be changing through this mount (open for writing, or being
     * truncated), with how many such opens or calls there are, and the write handles among the
     * open ones. {@link #storeCached} leaves these files alone, and undoes a store when a change
     * began while it ran ({@link #contentChanges} counts the beginnings).
     */
    private final Map<Long, Integer> changing = new ConcurrentHashMap<>();
    private final Map<Long, Long> writeHandles = new ConcurrentHashMap<>();
    private final AtomicLong contentChanges = new AtomicLong();
    private final ThreadLocal<ByteBuffer> notifyBuffers = new ThreadLocal<>();

    private volatile FuseOptions options;
    private volatile int fd = -1;
    private volatile Path mountedAt;
    /** The mount's directory in fusectl, to abort it once it is detached and no path reaches it. */
    private volatile Path connection;
    private volatile java.time.Duration unmountGrace = FuseOptions.DEFAULT_UNMOUNT_GRACE;
    /** The protocol minor version agreed with the kernel. */
    private volatile int minor = MINOR;
    /** Read-only opens of files held in one local block, served by the kernel itself. */
    private final Passthrough passthrough = new Passthrough();
    private final List<Thread> threads = new ArrayList<>();
    private final CountDownLatch initialized = new CountDownLatch(1);
    private final AtomicReference<String> initFailure = new AtomicReference<>();

    public KernelFuse(PartFs fs) {
        this(fs, null);
    }

    /** A filesystem whose file events also go to {@code observer} (null for none). */
    public KernelFuse(PartFs fs, PathObserver observer) {
        this.fs = fs;
        this.observed = new ObservedFiles(fs, observer);
        this.ops = new OperationMetrics(fs.config().metrics(), "partfs_fuse_operations",
                "FUSE operations (errors are calls answered with an errno, ENOENT included)");
        this.pageCacheStores = fs.config().metrics().counter("partfs_fuse_page_cache_stores_total",
                "Cached part metadata files the readahead put into the kernel's page cache");
        this.readaheadParts = fs.config().metrics().counter("partfs_fuse_readahead_parts_total",
                "Part directories the MergeTree readahead listed ahead of ClickHouse");
        this.workers = 16;
        // as long as the metadata cache keeps a listing (10 s at most: a reading takes far less)
        this.pages = new DirPages(Math.min(fs.meta().cacheTtlNanos(), 10_000_000_000L));
        this.sharedVolume = !fs.meta().store().exclusive();
        this.flockWaits = sharedVolume ? new FlockWaits(fs.meta(), this::replyLater) : null;
        this.expiryNanos = Math.max(1, Math.min(fs.meta().cacheTtlNanos(), 10_000_000_000L));
        fs.config().metrics().counterFrom("partfs_fuse_directory_listings_total",
                "Directory listings READDIR and READDIRPLUS took; reading a large directory in several requests takes one.",
                listingsTaken::sum);
    }

    // ---- mounting ----

    @Override
    public void mountAndWait(Path mountPoint, FuseOptions options) throws IOException {
        Path mp = FuseMount.checkMountPoint(mountPoint);
        this.options = options;
        fs.config().metrics().counterFrom("partfs_fuse_passthrough_opens_total",
                "Read-only opens of part files the kernel then read from the local block itself (FUSE passthrough).",
                passthrough::backingOpens);
        fs.config().metrics().counterFrom("partfs_fuse_write_passthrough_files_total",
                "New files the kernel wrote into local staging files itself (FUSE passthrough, write-back mode).",
                passthrough::writeOpens);
        long flags = LibC.MS_NOSUID | LibC.MS_NODEV;
        if (options.extra().contains("ro")) { // FuseOptions allows only ro, rw and nonempty here
            flags |= 1; // MS_RDONLY
        }
        if (fs.config().atimeMode() == io.partfs.engine.PartFsConfig.AtimeMode.NOATIME) {
            flags |= LibC.MS_NOATIME; // what reads do here, shown by mount(8) and /proc/mounts
        }
        StringBuilder data = new StringBuilder();
        int dev = C.open("/dev/fuse", LibC.O_RDWR | LibC.O_CLOEXEC);
        if (dev < 0) {
            throw new IOException("cannot open /dev/fuse: " + LibC.error() + " (run as root, or mount with --fuse-driver libfuse)");
        }
        data.append("fd=").append(dev).append(",rootmode=40000,user_id=").append(C.getuid())
                .append(",group_id=").append(C.getgid()).append(",default_permissions,max_read=").append(MAX_IO);
        if (options.allowOther()) {
            data.append(",allow_other");
        }
        if (C.mount("partfs", mp.toString(), "fuse.partfs", flags, data.toString()) != 0) {
            String why = LibC.error();
            C.close(dev);
            throw new IOException("cannot mount " + mp + ": " + why + " (the kernel driver needs root; else use --fuse-driver libfuse)");
        }
        fd = dev;
        mountedAt = mp;
        connection = Mounts.connectionIfKnown(mp);
        unmountGrace = options.unmountGrace();
        if (options.prefetchParts() && Math.min(options.entryTimeout(), options.attrTimeout()) > 0) {
            prefetcher = new PartPrefetcher(mp, Math.min(options.entryTimeout(), options.attrTimeout()), 2,
                    dirs -> fs.meta().prefetchListings(dirs), (path, ino) -> {
                        readaheadParts.inc();
                        storeCached(path, ino);
                    });
        }
        for (int i = 0; i < workers; i++) {
            Thread t = new Thread(this::serve, "partfs-fuse-" + i);
            t.setDaemon(true);
            threads.add(t);
            t.start();
        }
        try {
            boolean done = initialized.await(30, TimeUnit.SECONDS);
            if (!done || initFailure.get() != null) {
                unmount();
                throw new IOException("the kernel did not start FUSE on " + mp + ": "
                        + (done ? initFailure.get() : "no INIT request within 30 s"));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            unmount();
            throw new java.io.InterruptedIOException("interrupted while mounting " + mp);
        }
        KernelReadahead.apply(mp, options.readahead()); // after INIT, which would lower it again
        log.info("mounted volume {} at {} (kernel FUSE driver, protocol {}.{}; kernel caches {})", fs.format().name(), mp, MAJOR, minor,
                options.describeCaches());
    }

    @Override
    public void awaitUnmounted() throws InterruptedException {
        for (Thread t : List.copyOf(threads)) {
            t.join();
        }
    }

    @Override
    public boolean unmount() throws IOException {
        Path mp = mountedAt;
        if (mp == null) {
            return true;
        }
        PartPrefetcher p = prefetcher;
        if (p != null) {
            p.close(); // its listings hold the mount busy
            prefetcher = null;
        }
        boolean lazily = BusyUnmount.unmount(mp, unmountGrace, () -> umount2(mp, 0), () -> umount2(mp, LibC.MNT_DETACH));
        expiry.shutdownNow();
        if (flockWaits != null) {
            flockWaits.close(); // the kernel fails what still waits when the mount goes
        }
        // a mount detached lazily ends when its last file closes: serve those files a while longer
        Duration served = lazily ? unmountGrace : Duration.ofSeconds(30);
        boolean ended = threadsEnd(mp, served);
        if (!ended) {
            BusyUnmount.cutOff(mp, connection, served);
            if (!threadsEnd(mp, Duration.ofSeconds(10))) { // reading /dev/fuse fails at once after the abort
                log.warn("{}: the threads serving the aborted mount did not end; /dev/fuse stays open", mp);
                mountedAt = null;
                return false;
            }
        }
        mountedAt = null;
        C.close(fd);
        fd = -1;
        return ended;
    }

    /** Whether the threads serving the mount ended within {@code wait}. */
    private boolean threadsEnd(Path mp, Duration wait) throws IOException {
        long deadline = System.nanoTime() + wait.toNanos();
        try {
            for (Thread t : List.copyOf(threads)) {
                t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException("interrupted while unmounting " + mp);
        }
        return threads.stream().noneMatch(Thread::isAlive);
    }

    /** umount2(2) of {@code mp}: null once it is not mounted (EINVAL: no longer was), else why not. */
    private static String umount2(Path mp, int flags) throws IOException {
        if (C.umount2(mp.toString(), flags) == 0) {
            return null;
        }
        int e = LibC.errno();
        String error = LibC.error();
        if (e == LibC.EINVAL) {
            return null;
        }
        if (e != LibC.EBUSY) {
            throw new IOException("cannot unmount " + mp + ": " + error);
        }
        return error;
    }

    // ---- the request loop ----

    /** One worker's buffers: a request as read, a reply being built, and scratch for written data. */
    private static final class Buffers {
        final ByteBuffer in = ByteBuffer.allocateDirect(BUFFER).order(ByteOrder.LITTLE_ENDIAN);
        final Pointer inPtr = Pointer.wrap(jnr.ffi.Runtime.getRuntime(C), in);
        final ByteBuffer out = ByteBuffer.allocateDirect(BUFFER).order(ByteOrder.LITTLE_ENDIAN);
        final Pointer outPtr = Pointer.wrap(jnr.ffi.Runtime.getRuntime(C), out);
        private byte[] data = new byte[0];

        /**
         * Scratch for a WRITE of {@code size} bytes, grown as writes need it. Allocated up front,
         * 1 MiB for each of 16 workers was half of a just-mounted sidecar's live heap, copied by
         * every young collection while ClickHouse starts, which reads and hardly writes.
         */
        byte[] data(int size) {
            if (data.length < size) {
                int capacity = 64 << 10;
                while (capacity < size) {
                    capacity <<= 1;
                }
                data = new byte[capacity];
            }
            return data;
        }
    }

    private void serve() {
        Buffers b = new Buffers();
        int dev = fd;
        while (true) {
            long n = C.read(dev, b.inPtr, BUFFER);
            if (n < 0) {
                int e = LibC.errno();
                if (e == LibC.EINTR || e == LibC.EAGAIN || e == LibC.ENOENT) {
                    continue; // interrupted, or the request was withdrawn before we read it
                }
                if (e != LibC.ENODEV) { // ENODEV: unmounted
                    log.error("reading /dev/fuse failed: {}; the mount stops serving", LibC.error());
                }
                initialized.countDown();
                return;
            }
            b.in.clear().limit((int) n);
            handle(b);
        }
    }

    private void handle(Buffers b) {
        ByteBuffer in = b.in;
        int opcode = in.getInt(4);
        long unique = in.getLong(8);
        long node = in.getLong(16);
        in.position(IN_HEADER);
        switch (opcode) { // the requests that take no reply
            case FORGET -> {
                forget(node, in.getLong(IN_HEADER));
                return;
            }
            case BATCH_FORGET -> {
                int count = in.getInt(IN_HEADER);
                for (int i = 0, at = IN_HEADER + 8; i < count; i++, at += 16) {
                    forget(in.getLong(at), in.getLong(at + 8));
                }
                return;
            }
            case INTERRUPT -> {
                // operations finish on their own, but for a flock(2) that waits for a lock: it
                // ends with EINTR (the process got a signal; a killed one waits for this reply)
                if (flockWaits != null) {
                    flockWaits.interrupt(in.getLong(IN_HEADER));
                }
                return;
            }
            default -> { }
        }
        String op = opcode < OP_NAMES.length && OP_NAMES[opcode] != null ? OP_NAMES[opcode] : "op" + opcode;
        ByteBuffer out = b.out;
        out.clear().position(OUT_HEADER);
        long start = System.nanoTime();
        int error;
        try {
            error = dispatch(opcode, node, in, b);
            if (error == REPLY_LATER) {
                ops.record(op, System.nanoTime() - start, false);
                return; // a flock(2) waiting for a lock: FlockWaits replies when it gets it
            }
        } catch (Throwable t) {
            error = Errnos.errno(op, "inode " + node, t).code();
            out.clear().position(OUT_HEADER);
        }
        if (sharedVolume && error == Errno.ENOENT.code() && addressesOneInode(opcode)) {
            // The inode the kernel names is gone: another client deleted it, or replaced its
            // name by a rename, while this mount still knew the name. ENOENT would fail an open
            // or stat of a name that never stopped existing; on ESTALE the kernel looks the path
            // up once more and retries, as for NFS. A read or write of a file opened before is
            // not retried: it fails with ESTALE, as on NFS. (On an exclusive volume an inode only
            // goes through this mount, which the kernel knows of: ENOENT stays, as before.)
            // Its cached attributes go, or the second lookup would lead to it again through
            // the listing this mount keeps (a symlink replaced by a rename, read at once).
            fs.meta().forgetCached(node);
            error = Errno.ESTALE.code();
        }
        if (changesEntries(opcode)) {
            pages.changed(node); // before the reply: a listing read on after it must show the change
        }
        if (opcode != INIT) {
            ops.record(op, System.nanoTime() - start, error != 0);
        }
        if (log.isTraceEnabled()) { // PARTFS_LOG_LEVEL=TRACE: every request, for profiling what a client asks
            log.trace("{} {} -> {} ({} us, pid {})", op, pathOf(node), error == 0 ? "ok" : "errno " + error,
                    (System.nanoTime() - start) / 1000, in.getInt(32));
        }
        reply(b, unique, error);
        if (opcode == INIT) {
            if (error != 0) {
                initFailure.compareAndSet(null, "INIT failed with errno " + error);
            }
            initialized.countDown(); // after the reply: the kernel applies INIT's settings as it reads it
        }
    }

    /** Whether {@code opcode} acts on the inode the request names and on no name in it. */
    private static boolean addressesOneInode(int opcode) {
        return switch (opcode) {
            case GETATTR, SETATTR, OPEN, OPENDIR, READLINK, ACCESS, GETXATTR, LISTXATTR, SETXATTR, REMOVEXATTR,
                    READ, WRITE, FLUSH, FSYNC, FALLOCATE -> true;
            default -> false;
        };
    }

    /** Whether {@code opcode} adds or removes entries of the directory it names (RENAME's second one: {@link #rename}). */
    private static boolean changesEntries(int opcode) {
        return switch (opcode) {
            case CREATE, MKNOD, MKDIR, SYMLINK, LINK, UNLINK, RMDIR, RENAME, RENAME2 -> true;
            default -> false;
        };
    }

    private void reply(Buffers b, long unique, int error) {
        ByteBuffer out = b.out;
        int len = error == 0 ? out.position() : OUT_HEADER;
        out.putInt(0, len).putInt(4, -error).putLong(8, unique);
        if (C.write(fd, b.outPtr, len) < 0) {
            int e = LibC.errno();
            if (e != LibC.ENOENT) { // ENOENT: the request was interrupted and is no longer waited for
                log.warn("writing a FUSE reply failed: {}", LibC.error());
            }
        }
    }

    private static String name(ByteBuffer in) {
        int from = in.position();
        int end = from;
        while (in.get(end) != 0) {
            end++;
        }
        byte[] bytes = new byte[end - from];
        in.get(bytes);
        in.position(end + 1);
        return NameCodec.decode(bytes);
    }

    private int uid(ByteBuffer in) {
        return in.getInt(24);
    }

    private int gid(ByteBuffer in) {
        return in.getInt(28);
    }

    /** Runs one request; returns 0 with the reply's body in {@code b.out}, or a positive errno. */
    private int dispatch(int opcode, long node, ByteBuffer in, Buffers b) throws IOException {
        ByteBuffer out = b.out;
        switch (opcode) {
            case INIT -> init(in, out);
            case LOOKUP -> {
                String name = name(in);
                Attr a;
                try {
                    a = fs.lookup(node, name);
                } catch (FsException.NoSuchEntry e) {
                    double neg = options.negativeTimeout();
                    if (neg <= 0) {
                        throw e;
                    }
                    long sec = (long) neg; // nodeid 0: "no such name", cached for entry_valid
                    out.putLong(0).putLong(0).putLong(sec).putLong(0).putInt((int) ((neg - sec) * 1e9)).putInt(0)
                            .put(new byte[88]);
                    return 0;
                }
                entry(out, node, name, a);
            }
            case GETATTR -> attrOut(out, fs.getattr(node));
            case SETATTR -> attrOut(out, setattr(node, in));
            case READLINK -> out.put(NameCodec.encode(fs.readlink(node)));
            case SYMLINK -> {
                String name = name(in);
                String target = name(in);
                entry(out, node, name, fs.symlink(node, name, target, uid(in), gid(in)));
            }
            case MKNOD -> {
                int mode = in.getInt();
                int rdev = in.getInt();
                in.position(in.position() + 8);
                String name = name(in);
                FileType type = (mode & S_IFMT) == 0 ? FileType.FILE : FileType.fromMode(mode);
                entry(out, node, name, fs.mknod(node, name, type, mode & 07777, uid(in), gid(in), rdev));
            }
            case MKDIR -> {
                int mode = in.getInt();
                in.position(in.position() + 4);
                String name = name(in);
                entry(out, node, name, fs.mkdir(node, name, mode & 07777, uid(in), gid(in)));
            }
            case UNLINK -> {
                String name = name(in);
                String path = pathOf(node, name);
                fs.unlink(node, name);
                observed.removed(path);
            }
            case RMDIR -> {
                String name = name(in);
                String path = pathOf(node, name);
                fs.rmdir(node, name);
                observed.removed(path);
            }
            case RENAME -> {
                long newDir = in.getLong();
                rename(node, name(in), newDir, name(in), 0);
            }
            case RENAME2 -> {
                long newDir = in.getLong();
                int flags = in.getInt();
                in.getInt();
                rename(node, name(in), newDir, name(in), flags);
            }
            case LINK -> {
                long ino = in.getLong();
                String name = name(in);
                Attr a = fs.link(ino, node, name);
                observed.linked(pathOf(ino), pathOf(node, name), a);
                entry(out, node, name, a);
            }
            case OPEN -> {
                int flags = in.getInt();
                if ((flags & PartFs.O_ACCMODE) == PartFs.O_RDONLY) {
                    long fh = fs.open(node, flags);
                    int pageCacheFlags = readOnlyOpenFlags(node);
                    if (passthrough.enabled()) {
                        // Not passed through: a file whose content this process stored into the page
                        // cache (read from there), and a file the part-metadata cache keeps (its reads
                        // are served and fill the cache: warmup, a miss after a drop).
                        boolean keep = (pageCacheFlags & FOPEN_KEEP_CACHE) != 0 || !names.inPart(node)
                                || observed.active() && observed.observed(pathOf(node));
                        java.nio.file.Path local = keep ? null : fs.chunks().localWholeFile(fs.getattr(node));
                        Passthrough.Opened o = passthrough.readOpen(node, fh, local, pageCacheFlags);
                        openOut(out, fh, o.openFlags(), o.backingId());
                    } else {
                        openOut(out, fh, pageCacheFlags, 0);
                    }
                } else if (passthrough.writable(node)) {
                    // the kernel writes this new file into a backing file: this open shares it
                    long fh = openForWriting(node, () -> fs.open(node, flags));
                    Passthrough.Opened o = passthrough.shareWritable(node, fh);
                    if (o == null) { // its last open closed meanwhile: a page-cache open like any other
                        try {
                            if (passthrough.reserve(node)) {
                                passthrough.bind(fh);
                            }
                        } catch (IOException | RuntimeException e) {
                            fs.release(fh);
                            throw e;
                        }
                        o = new Passthrough.Opened(0, 0);
                    }
                    openOut(out, fh, o.openFlags(), o.backingId());
                } else {
                    boolean reserved = passthrough.reserve(node); // before the open truncates anything
                    long fh;
                    try {
                        stored.remove(node);
                        fh = openForWriting(node, () -> fs.open(node, flags));
                    } catch (IOException | RuntimeException e) {
                        if (reserved) {
                            passthrough.cancel(node);
                        }
                        throw e;
                    }
                    if (reserved) {
                        passthrough.bind(fh);
                    }
                    openOut(out, fh, 0, 0);
                }
            }
            case READ -> read(node, in, b);
            case WRITE -> {
                long fh = in.getLong();
                long offset = in.getLong();
                int size = in.getInt();
                if ((in.getInt() & WRITE_KILL_SUIDGID) != 0) {
                    fs.killPrivileges(node); // before the data, as Linux does
                }
                in.position(IN_HEADER + 40);
                byte[] data = b.data(size);
                in.get(data, 0, size);
                int n = fs.write(fh, offset, data, 0, size);
                observed.wrote(fh);
                out.putInt(n).putInt(0);
            }
            case STATFS -> {
                PartFs.StatFs s = fs.statfs();
                out.putLong(s.totalBlocks()).putLong(s.freeBlocks()).putLong(s.freeBlocks())
                        .putLong(s.files()).putLong(s.freeFiles()).putInt((int) s.blockSize()).putInt(s.nameMax())
                        .putInt((int) s.blockSize()).putInt(0);
                for (int i = 0; i < 6; i++) {
                    out.putInt(0);
                }
            }
            case RELEASE -> {
                long fh = in.getLong();
                in.getInt(); // open flags
                int releaseFlags = in.getInt();
                long lockOwner = in.getLong();
                if (flockWaits != null && (releaseFlags & RELEASE_FLOCK_UNLOCK) != 0) {
                    flockWaits.release(node, lockOwner); // the last close of a file flock(2) locked
                }
                try {
                    fs.flushUnlessFailed(fh);
                    committed(node, fh);
                } finally {
                    observed.released(fh);
                    boolean backingClosed = passthrough.release(node, fh);
                    fs.release(fh);
                    if (backingClosed) {
                        fs.chunks().closeBacked(node); // after the release's flush, which committed it
                    }
                    Long ino = writeHandles.remove(fh);
                    if (ino != null) {
                        doneChanging(ino);
                    }
                }
            }
            case FLUSH -> {
                long fh = in.getLong();
                fs.flush(fh);
                committed(node, fh);
            }
            case FSYNC -> fs.fsync(in.getLong());
            case SETLK, SETLKW -> {
                in.getLong(); // fh
                long owner = in.getLong();
                in.position(in.position() + 16); // start, end: flock(2) locks the whole file
                int type = in.getInt();
                in.getInt(); // pid
                int lkFlags = in.getInt();
                if (flockWaits == null || (lkFlags & LK_FLOCK) == 0) {
                    return Errno.ENOSYS.code(); // not negotiated: POSIX locks are the kernel's
                }
                if (type != F_RDLCK && type != F_WRLCK && type != F_UNLCK) {
                    return Errno.EINVAL.code();
                }
                MetaEngine.Flock what = type == F_UNLCK ? MetaEngine.Flock.UNLOCK
                        : type == F_WRLCK ? MetaEngine.Flock.EXCLUSIVE : MetaEngine.Flock.SHARED;
                if (fs.meta().flock(node, owner, what)) {
                    return 0;
                }
                if (opcode == SETLK) {
                    return Errno.EAGAIN.code(); // LOCK_NB: EWOULDBLOCK
                }
                flockWaits.await(in.getLong(8), node, owner, what);
                return REPLY_LATER;
            }
            case SETXATTR -> {
                int size = in.getInt();
                int flags = in.getInt();
                String name = name(in);
                byte[] value = new byte[size];
                in.get(value);
                fs.setxattr(node, name, value, flags);
            }
            case GETXATTR -> {
                int size = in.getInt();
                in.getInt();
                return xattrOut(out, fs.getxattr(node, name(in)), size);
            }
            case LISTXATTR -> {
                int size = in.getInt();
                java.io.ByteArrayOutputStream list = new java.io.ByteArrayOutputStream();
                for (String n : fs.listxattr(node)) {
                    list.writeBytes(NameCodec.encode(n));
                    list.write(0);
                }
                return xattrOut(out, list.toByteArray(), size);
            }
            case REMOVEXATTR -> fs.removexattr(node, name(in));
            case OPENDIR -> {
                if (opendirless) {
                    return Errno.ENOSYS.code(); // from now on the kernel opens directories by itself
                }
                if (!fs.getattr(node).isDirectory()) {
                    throw new FsException.NotDirectory("inode " + node);
                }
                // listings need no handle; the kernel keeps what it read (CACHE_DIR) for the next
                // opens until the directory changes here or its mtime does (or, on a shared
                // volume, a second has passed: expireListing)
                openOut(out, 0, FOPEN_KEEP_CACHE | FOPEN_CACHE_DIR, 0);
            }
            case READDIR -> readdir(node, in, out, false);
            case READDIRPLUS -> readdir(node, in, out, true);
            case RELEASEDIR -> { }
            case FSYNCDIR -> fs.meta().sync();
            case ACCESS -> fs.getattr(node); // default_permissions: the kernel checked; this says it exists
            case CREATE -> {
                int flags = in.getInt();
                int mode = in.getInt();
                in.position(in.position() + 8);
                String name = name(in);
                // an existing file is opened (and maybe truncated) by the create: reserve it first,
                // unless the kernel writes it into a backing file, which this open then shares
                long existing = (flags & PartFs.O_EXCL) == 0 && passthrough.enabled() ? existingFile(node, name) : 0;
                boolean sharing = existing != 0 && passthrough.writable(existing);
                boolean reserved = existing != 0 && !sharing && passthrough.reserve(existing);
                PartFs.Created c;
                try {
                    c = fs.create(node, name, mode & 07777, flags | PartFs.O_CREAT, uid(in), gid(in));
                } catch (IOException | RuntimeException e) {
                    if (reserved) {
                        passthrough.cancel(existing);
                    }
                    throw e;
                }
                if (reserved && c.attr().ino() != existing) {
                    passthrough.cancel(existing);
                    reserved = false;
                }
                Passthrough.Opened through = null;
                if (sharing && c.attr().ino() == existing) {
                    through = passthrough.shareWritable(existing, c.fh());
                } else if (c.isNew() && (flags & PartFs.O_ACCMODE) != PartFs.O_RDONLY && (flags & PartFs.O_APPEND) == 0) {
                    through = writeThrough(node, name, c);
                }
                if (through == null && (reserved || passthrough.reserve(c.attr().ino()))) {
                    passthrough.bind(c.fh());
                }
                if ((flags & PartFs.O_ACCMODE) != PartFs.O_RDONLY) {
                    startChanging(c.attr().ino()); // new to the kernel: nothing of it can be stored yet
                    writeHandles.put(c.fh(), c.attr().ino());
                }
                entry(out, node, name, c.attr());
                openOut(out, c.fh(), through == null ? 0 : through.openFlags(), through == null ? 0 : through.backingId());
            }
            case FALLOCATE -> {
                long fh = in.getLong();
                long offset = in.getLong();
                long length = in.getLong();
                fs.fallocate(fh, in.getInt(), offset, length);
            }
            case DESTROY -> { }
            default -> {
                return Errno.ENOSYS.code();
            }
        }
        return 0;
    }

    /**
     * Hands new file {@code c} (named {@code name} in {@code dir}) to the kernel to write into a
     * local backing file itself (write-back mode, see {@link io.partfs.engine.data.BackedFile});
     * null when it is written the usual way: write passthrough is off, the data layer has no
     * backing file to give, the kernel refused it, or the part-metadata cache keeps the file
     * (it learns a file's content from its WRITEs). Not called for a create with O_APPEND: a log
     * that appends and fsyncs each record (ClickHouse's write-ahead log, the Log engines) would
     * commit the whole file at every fsync, as the kernel says nothing of what it wrote; through
     * this process each commit takes only what was appended.
     */
    private Passthrough.Opened writeThrough(long dir, String name, PartFs.Created c) {
        if (!options.writePassthrough() || !passthrough.enabled() || observed.active() && observed.observed(pathOf(dir, name))) {
            return null;
        }
        long ino = c.attr().ino();
        java.nio.file.Path backing = fs.chunks().openBacked(ino);
        if (backing == null) {
            return null;
        }
        Passthrough.Opened o = passthrough.writeOpen(ino, c.fh(), backing);
        if (o == null) {
            fs.chunks().abandonBacked(ino);
        }
        return o;
    }

    /** The inode named {@code name} in {@code dir}, or 0 when there is none. */
    private long existingFile(long dir, String name) throws IOException {
        try {
            return fs.lookup(dir, name).ino();
        } catch (io.partfs.engine.FsException.NoSuchEntry e) {
            return 0;
        }
    }

    /** Directory listings taken for READDIR(PLUS) so far. */
    public long listingsTaken() {
        return listingsTaken.sum();
    }

    /** New files the kernel wrote into local backing files itself since the mount (write-back mode). */
    public long writePassthroughFiles() {
        return passthrough.writeOpens();
    }

    /** Whether the kernel agreed to FUSE passthrough at INIT (and has not refused it since). */
    public boolean passthroughAvailable() {
        return passthrough.enabled();
    }

    /** Read-only opens handed to FUSE passthrough since the mount (0 when the kernel lacks it). */
    public long passthroughOpens() {
        return passthrough.backingOpens();
    }

    private void init(ByteBuffer in, ByteBuffer out) {
        int major = in.getInt();
        int minor = in.getInt();
        int maxReadahead = in.getInt();
        int kernelFlags = in.getInt();
        int kernelFlags2 = (kernelFlags & INIT_EXT) != 0 ? in.getInt() : 0;
        if (major < MAJOR || (major == MAJOR && minor < MINOR)) {
            initFailure.set("kernel FUSE protocol " + major + "." + minor + " is older than " + MAJOR + "." + MINOR
                    + " (Linux 5.4); use --fuse-driver libfuse");
            log.error(initFailure.get());
        }
        opendirless = (kernelFlags & NO_OPENDIR_SUPPORT) != 0;
        // HANDLE_KILLPRIV_V2: the kernel stops asking for security.capability before every write(2)
        // (a round trip each) and leaves clearing suid/sgid/capabilities to us (killPrivileges)
        int wanted = ASYNC_READ | BIG_WRITES | AUTO_INVAL_DATA | DO_READDIRPLUS | ASYNC_DIO | PARALLEL_DIROPS
                | MAX_PAGES_FLAG | CACHE_SYMLINKS | HANDLE_KILLPRIV_V2 | (flockWaits != null ? FLOCK_LOCKS : 0);
        boolean withPassthrough = options.passthrough() && (kernelFlags2 & PASSTHROUGH_FLAG2) != 0;
        if (withPassthrough) {
            wanted |= INIT_EXT;
        }
        this.minor = Math.min(minor, MINOR_KNOWN);
        out.putInt(MAJOR).putInt(this.minor).putInt(Math.min(maxReadahead, MAX_IO)).putInt(kernelFlags & wanted)
                .putShort((short) 64).putShort((short) 48) // max_background, congestion_threshold
                .putInt(MAX_IO).putInt(1) // max_write, time_gran (ns)
                .putShort((short) MAX_PAGES).putShort((short) 0) // max_pages, map_alignment
                .putInt(withPassthrough ? PASSTHROUGH_FLAG2 : 0) // flags2
                .putInt(withPassthrough ? 1 : 0); // max_stack_depth: backing files live on a non-stacked filesystem
        for (int i = 0; i < 6; i++) {
            out.putInt(0);
        }
        if (withPassthrough) {
            passthrough.enable(fd);
        }
    }

    // ---- replies ----

    private void entry(ByteBuffer out, long parent, String name, Attr a) {
        double entry = a.isDirectory() ? options.dirEntryTimeout() : options.entryTimeout();
        double attr = options.attrTimeout();
        long eSec = (long) entry;
        long aSec = (long) attr;
        out.putLong(a.ino()).putLong(0).putLong(eSec).putLong(aSec)
                .putInt((int) ((entry - eSec) * 1e9)).putInt((int) ((attr - aSec) * 1e9));
        putAttr(out, a);
        names.looked(parent, name, a.ino());
    }

    private void attrOut(ByteBuffer out, Attr a) {
        double attr = options.attrTimeout();
        long aSec = (long) attr;
        out.putLong(aSec).putInt((int) ((attr - aSec) * 1e9)).putInt(0);
        putAttr(out, a);
    }

    private static void putAttr(ByteBuffer out, Attr a) {
        out.putLong(a.ino()).putLong(a.size()).putLong((a.size() + 511) / 512)
                .putLong(Math.floorDiv(a.atimeNs(), 1_000_000_000L))
                .putLong(Math.floorDiv(a.mtimeNs(), 1_000_000_000L))
                .putLong(Math.floorDiv(a.ctimeNs(), 1_000_000_000L))
                .putInt((int) Math.floorMod(a.atimeNs(), 1_000_000_000L))
                .putInt((int) Math.floorMod(a.mtimeNs(), 1_000_000_000L))
                .putInt((int) Math.floorMod(a.ctimeNs(), 1_000_000_000L))
                .putInt(a.stMode()).putInt(a.nlink()).putInt(a.uid()).putInt(a.gid())
                .putInt(a.rdev()).putInt(4096).putInt(0);
    }

    private static void openOut(ByteBuffer out, long fh, int openFlags, int backingId) {
        out.putLong(fh).putInt(openFlags).putInt(backingId);
    }

    /**
     * FOPEN flags of a read-only open: it needs no FLUSH on close (nothing to commit; RELEASE
     * still comes), and it keeps the page cache when this process stored the file's current
     * content there ({@link #storeCached}). Every other open drops what the kernel cached.
     */
    private int readOnlyOpenFlags(long node) throws IOException {
        Long version = stored.remove(node);
        if (version != null && fs.getattr(node).dataVersion() == version) {
            return FOPEN_NOFLUSH | FOPEN_KEEP_CACHE;
        }
        return FOPEN_NOFLUSH;
    }

    private interface Opener {
        long open() throws IOException;
    }

    /** Opens {@code ino} for writing, marking it as changing until the handle is released. */
    private long openForWriting(long ino, Opener opener) throws IOException {
        startChanging(ino);
        try {
            long fh = opener.open();
            writeHandles.put(fh, ino);
            return fh;
        } catch (IOException | RuntimeException e) {
            doneChanging(ino);
            throw e;
        }
    }

    private void startChanging(long ino) {
        changing.merge(ino, 1, Integer::sum);
        contentChanges.incrementAndGet();
    }

    private void doneChanging(long ino) {
        changing.computeIfPresent(ino, (k, n) -> n <= 1 ? null : n - 1);
    }

    private void forget(long ino, long count) {
        if (names.forget(ino, count)) {
            stored.remove(ino); // the kernel dropped the inode, and its pages with it
        }
    }

    /**
     * Stores the cached metadata files of a part directory the kernel has just listed into the
     * kernel's page cache (FUSE_NOTIFY_STORE), so ClickHouse's open, read and stat of each are
     * answered by the kernel: a READ would also make the kernel ask for the file's attributes
     * again (it marks atime stale after every read). Only what the part-metadata cache holds for
     * the file's current data version is stored, and only files the kernel knows (the listing
     * just gave it their inodes). Files open for writing or being truncated are left alone, and a
     * change that begins while a file is being stored undoes its store (FUSE_NOTIFY_INVAL_INODE),
     * so the page cache never holds content older than a write through this mount.
     */
    void storeCached(String partPath, long partIno) {
        if (!observed.active() || stored.size() >= MAX_STORED) {
            return;
        }
        try {
            for (DirEntry e : fs.readdir(partIno)) {
                long changes = contentChanges.get(); // read before the check below: see the javadoc
                String path = partPath + "/" + e.name();
                if (e.type() != FileType.FILE || changing.containsKey(e.ino()) || !observed.observed(path)) {
                    continue;
                }
                Attr a = fs.getattr(e.ino());
                byte[] content = a.size() <= MAX_STORED_FILE ? observed.cachedContent(path, a) : null;
                if (content == null) {
                    continue;
                }
                ByteBuffer buf = notifyBuffer(OUT_HEADER + 24 + content.length);
                buf.putInt(OUT_HEADER + 24 + content.length).putInt(NOTIFY_STORE).putLong(0)
                        .putLong(a.ino()).putLong(0).putInt(content.length).putInt(0).put(content);
                if (!notify(buf)) {
                    continue; // the kernel no longer has the inode
                }
                if (contentChanges.get() != changes) {
                    buf.clear();
                    buf.putInt(OUT_HEADER + 24).putInt(NOTIFY_INVAL_INODE).putLong(0).putLong(a.ino()).putLong(0).putLong(-1);
                    notify(buf);
                    continue;
                }
                stored.put(a.ino(), a.dataVersion());
                pageCacheStores.inc();
            }
        } catch (IOException | RuntimeException ex) {
            log.debug("storing the cached metadata of {} skipped: {}", partPath, ex.toString());
        }
        log.trace("stored the cached metadata of {}", partPath);
    }

    /** This thread's buffer for notifications, cleared, at least {@code size} bytes. */
    private ByteBuffer notifyBuffer(int size) {
        ByteBuffer b = notifyBuffers.get();
        if (b == null || b.capacity() < size) {
            b = ByteBuffer.allocateDirect(Math.max(size, 64 << 10)).order(ByteOrder.LITTLE_ENDIAN);
            notifyBuffers.set(b);
        }
        return b.clear();
    }

    /** Replies to request {@code unique} with {@code error} (0: done) from any thread: for {@link FlockWaits}. */
    private void replyLater(long unique, int error) {
        ByteBuffer buf = notifyBuffer(OUT_HEADER);
        buf.putInt(OUT_HEADER).putInt(-error).putLong(unique);
        notify(buf);
    }

    /** Writes a notification prepared in {@code buf} (up to its position); false if refused. */
    private boolean notify(ByteBuffer buf) {
        int len = buf.position();
        buf.flip(); // a wrapped direct buffer starts at its position
        if (C.write(fd, Pointer.wrap(jnr.ffi.Runtime.getRuntime(C), buf), len) == len) {
            return true;
        }
        int e = LibC.errno();
        if (e != LibC.ENOENT) {
            log.debug("FUSE notification refused: {}", LibC.error());
        }
        return false;
    }

    /** getxattr/listxattr: size 0 asks for the length; too small a buffer is ERANGE. */
    private static int xattrOut(ByteBuffer out, byte[] v, int size) {
        if (size == 0) {
            out.putInt(v.length).putInt(0);
            return 0;
        }
        if (size < v.length) {
            return Errno.ERANGE.code();
        }
        out.put(v);
        return 0;
    }

    // ---- operations with more to them ----

    private Attr setattr(long node, ByteBuffer in) throws IOException {
        int at = IN_HEADER;
        int valid = in.getInt(at);
        long fh = in.getLong(at + 8);
        long size = in.getLong(at + 16);
        long atime = in.getLong(at + 32);
        long mtime = in.getLong(at + 40);
        int atimeNs = in.getInt(at + 56);
        int mtimeNs = in.getInt(at + 60);
        int mode = in.getInt(at + 68);
        int uid = in.getInt(at + 76);
        int gid = in.getInt(at + 80);
        if ((valid & FATTR_MODE) != 0) {
            fs.setattr(node, MetaEngine.SetAttr.mode(mode & 07777));
        }
        if ((valid & (FATTR_UID | FATTR_GID)) != 0) {
            fs.setattr(node, MetaEngine.SetAttr.owner((valid & FATTR_UID) != 0 ? uid : null,
                    (valid & FATTR_GID) != 0 ? gid : null));
        }
        if ((valid & FATTR_SIZE) != 0) {
            long ino = (valid & FATTR_FH) != 0 ? fs.inodeOf(fh) : node;
            passthrough.checkChangeable(ino);
            stored.remove(ino);
            startChanging(ino);
            try {
                fs.truncate(ino, size);
            } finally {
                doneChanging(ino);
            }
            if (observed.active()) {
                observed.removed(pathOf(node));
            }
        }
        if ((valid & FATTR_KILL_SUIDGID) != 0) { // a truncate or chown by a process without CAP_FSETID
            fs.killPrivileges((valid & FATTR_FH) != 0 ? fs.inodeOf(fh) : node);
        }
        if ((valid & (FATTR_ATIME | FATTR_MTIME | FATTR_ATIME_NOW | FATTR_MTIME_NOW)) != 0) {
            fs.setattr(node, MetaEngine.SetAttr.times(
                    time(valid, FATTR_ATIME, FATTR_ATIME_NOW, atime, atimeNs),
                    time(valid, FATTR_MTIME, FATTR_MTIME_NOW, mtime, mtimeNs)));
        }
        return fs.getattr(node);
    }

    /** A time to set from setattr's fields: null (unchanged), now, or the given time. */
    private static Long time(int valid, int given, int now, long sec, int nsec) {
        if ((valid & now) != 0) {
            return MetaEngine.SetAttr.NOW;
        }
        return (valid & given) != 0 ? Long.valueOf(sec * 1_000_000_000L + nsec) : null;
    }

    private void rename(long dir, String name, long newDir, String newName, int flags) throws IOException {
        if ((flags & ~(MetaEngine.RENAME_NOREPLACE | MetaEngine.RENAME_EXCHANGE)) != 0) {
            throw new FsException.InvalidArgument("rename flags " + flags); // RENAME_WHITEOUT: overlayfs only
        }
        String from = pathOf(dir, name);
        String to = pathOf(newDir, newName);
        long moved = fs.lookup(dir, name).ino();
        long other = (flags & MetaEngine.RENAME_EXCHANGE) != 0 ? fs.lookup(newDir, newName).ino() : 0;
        try {
            fs.rename(dir, name, newDir, newName, flags);
        } finally {
            pages.changed(newDir); // dir's own listing: by handle(), as for every entry change
        }
        names.moved(moved, newDir, newName);
        if (other != 0) {
            names.moved(other, dir, name);
        }
        if ((flags & MetaEngine.RENAME_EXCHANGE) != 0) {
            observed.removed(from);
            observed.removed(to);
        } else {
            observed.renamed(from, to);
        }
    }

    private void read(long node, ByteBuffer in, Buffers b) throws IOException {
        long fh = in.getLong();
        long offset = in.getLong();
        int size = Math.min(in.getInt(), MAX_IO);
        ByteBuffer out = b.out;
        if (observed.active()) {
            String path = pathOf(node);
            if (observed.observed(path)) {
                byte[] whole = observed.content(path, fh);
                if (whole != null) {
                    int n = (int) Math.max(0, Math.min(size, whole.length - offset));
                    if (n > 0) {
                        out.put(whole, (int) offset, n);
                    }
                    return;
                }
            }
        }
        fs.read(fh, offset, out, size); // straight into the reply: blocks on local disk are read into it
    }

    /**
     * READDIR and READDIRPLUS, with no directory handle: a request at offset 0 lists the
     * directory as it is now, and each request sends the entries after {@code offset} in cookie
     * order. Later requests of the same reading use that listing again ({@link DirPages}: the
     * directory is listed once, not once per page) unless an entry changed through this mount
     * meanwhile, or it is older than the metadata cache's lifetime; then they list it anew. An
     * entry's cookie (its d_off) is a 62-bit hash of its name, so it stays the same whatever else
     * is added or removed meanwhile: a listing read in several requests never skips or repeats an
     * entry that stayed, and never brings back one that was removed (a stale answer would make
     * the kernel believe in a removed file for the whole entry timeout). Names whose hashes
     * collide get consecutive cookies in name order. "." and ".." are cookies 1 and 2.
     *
     * <p>With PLUS every entry carries its attributes, which the kernel caches as if each name had
     * been looked up: a part directory then costs one request instead of one per file.
     */
    private void readdir(long node, ByteBuffer in, ByteBuffer out, boolean plus) throws IOException {
        in.getLong(); // fh: none
        long offset = in.getLong();
        int limit = OUT_HEADER + Math.min(in.getInt(), MAX_IO);
        DirPages.Listing listing = offset == 0 ? null : pages.reusable(node);
        boolean kept = listing != null;
        if (listing == null) {
            long stamp = pages.stamp(node);
            listing = DirPages.listing(node, stamp, fs.readdir(node));
            listingsTaken.increment();
        }
        if (offset == 0 && sharedVolume) {
            expireListing(node);
        }
        PartPrefetcher p = prefetcher;
        if (offset == 0 && p != null) { // in the order the reader gets them: ClickHouse loads parts so
            p.listed(names.path(node), node, java.util.Arrays.asList(listing.entries()));
        }
        for (long dot = offset + 1; dot <= 2; dot++) {
            if (!dirent(out, limit, plus, node, dot == 1 ? "." : "..", null, node, 4, dot)) {
                if (!kept) {
                    pages.keep(listing);
                }
                return;
            }
        }
        int first = listing.after(offset);
        Attr[] attrs = null;
        int attrsFrom = first;
        for (int i = first; i < listing.size(); i++) {
            DirEntry e = listing.entries()[i];
            Attr a = null;
            if (plus) {
                if (attrs == null || i - attrsFrom >= attrs.length) { // the next entries' attributes, in one request
                    attrsFrom = i;
                    long[] inos = new long[Math.min(ATTRS_AT_ONCE, listing.size() - i)];
                    for (int k = 0; k < inos.length; k++) {
                        inos[k] = listing.entries()[i + k].ino();
                    }
                    attrs = fs.getattrs(inos);
                }
                a = attrs[i - attrsFrom];
                if (a == null) {
                    continue; // removed since the listing was taken
                }
            }
            int type = (a != null ? a.type() : e.type()).formatBits() >>> 12;
            if (!dirent(out, limit, plus, node, e.name(), a, e.ino(), type, listing.cookies()[i])) {
                if (!kept) {
                    pages.keep(listing); // the reader comes back for the rest
                }
                return;
            }
        }
        // The end. The kernel asks once more past the last entry sent, for an empty reply: a
        // listing read in several pages is kept for that, a directory that fit one page is not.
        if (first == listing.size() && offset > 2) {
            pages.done(listing);
        } else if (!kept && offset != 0) {
            pages.keep(listing);
        }
    }

    /**
     * On a shared volume, has the kernel drop its kept listing of {@code dir} (just sent from its
     * start) a metadata-cache lifetime from now (FUSE_NOTIFY_INVAL_INODE, from a thread of its
     * own). The kernel keeps a listing until the directory's mtime changes; the listing may come
     * from the metadata cache's last second while the mtime it is kept under came from a fresher
     * stat, and then nothing would ever drop it (SharedVolumeMountsTest). Dropped, the next
     * listing is read again; until then ClickHouse's second listing of each part it loads is
     * served by the kernel. A notification costs no request on the path of any call.
     */
    private void expireListing(long dir) {
        if (expiring.putIfAbsent(dir, Boolean.TRUE) != null) {
            return; // one is due already: it drops this listing too, early
        }
        try {
            expiry.schedule(() -> {
                expiring.remove(dir);
                ByteBuffer buf = notifyBuffer(OUT_HEADER + 24);
                buf.putInt(OUT_HEADER + 24).putInt(NOTIFY_INVAL_INODE).putLong(0).putLong(dir).putLong(0).putLong(-1);
                notify(buf);
            }, expiryNanos, TimeUnit.NANOSECONDS);
        } catch (java.util.concurrent.RejectedExecutionException unmounting) {
            expiring.remove(dir);
        }
    }

    /** Entries whose attributes READDIRPLUS asks for at once: about a third of a 32 KiB reply's. */
    private static final int ATTRS_AT_ONCE = 64;

    /** Adds one entry if it fits within {@code limit}; false when it does not. */
    private boolean dirent(ByteBuffer out, int limit, boolean plus, long dir, String name, Attr a, long ino,
            int type, long cookie) {
        byte[] nb = NameCodec.encode(name);
        int size = (24 + nb.length + 7) & ~7;
        if (out.position() + size + (plus ? 128 : 0) > limit) {
            return false;
        }
        if (plus) {
            if (a == null) {
                out.put(new byte[128]); // nodeid 0: no attributes ("." and "..")
            } else {
                entry(out, dir, name, a);
            }
        }
        int start = out.position();
        out.putLong(ino).putLong(cookie).putInt(nb.length).putInt(type).put(nb);
        while (out.position() < start + size) {
            out.put((byte) 0);
        }
        return true;
    }

    /** A directory entry with its readdir cookie. */
    record Cookie(long cookie, DirEntry entry) {
        /** The entries in cookie order, colliding hashes moved to the next free cookie in name order. */
        static Cookie[] sorted(List<DirEntry> entries) {
            long[] hashes = new long[entries.size()];
            Integer[] order = new Integer[entries.size()];
            for (int i = 0; i < hashes.length; i++) {
                hashes[i] = hash(entries.get(i).name());
                order[i] = i;
            }
            java.util.Arrays.sort(order, (x, y) -> hashes[x] != hashes[y] ? Long.compare(hashes[x], hashes[y])
                    : entries.get(x).name().compareTo(entries.get(y).name()));
            Cookie[] out = new Cookie[order.length];
            long last = 2;
            for (int i = 0; i < order.length; i++) {
                last = Math.max(hashes[order[i]], last + 1);
                out[i] = new Cookie(last, entries.get(order[i]));
            }
            return out;
        }

        /** FNV-1a over the name's chars, mixed (MurmurHash3's finalizer), in [3, 2^62). */
        static long hash(String name) {
            long h = 0xcbf29ce484222325L;
            for (int i = 0; i < name.length(); i++) {
                h = (h ^ name.charAt(i)) * 0x100000001b3L;
            }
            h ^= h >>> 33;
            h *= 0xff51afd7ed558ccdL;
            h ^= h >>> 33;
            h *= 0xc4ceb9fe1a85ec53L;
            h ^= h >>> 33;
            return Math.max(3, h & ((1L << 62) - 1));
        }
    }

    private void committed(long node, long fh) {
        if (observed.active()) {
            observed.committed(pathOf(node), fh);
        }
    }

    private String pathOf(long ino) {
        return names.path(ino);
    }

    private String pathOf(long dir, String name) {
        return names.path(dir, name);
    }
}
