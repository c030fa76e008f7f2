package io.partfs.engine.fuse;

import io.partfs.engine.Attr;
import io.partfs.engine.DirEntry;
import io.partfs.engine.Errno;
import io.partfs.engine.FileType;
import io.partfs.engine.FsException;
import io.partfs.engine.NameCodec;
import io.partfs.engine.PartFs;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.spi.PathObserver;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import jnr.ffi.Pointer;
import jnr.ffi.Struct;
import jnr.ffi.types.dev_t;
import jnr.ffi.types.gid_t;
import jnr.ffi.types.mode_t;
import jnr.ffi.types.off_t;
import jnr.ffi.types.size_t;
import jnr.ffi.types.uid_t;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import ru.serce.jnrfuse.FuseFillDir;
import ru.serce.jnrfuse.FuseStubFS;
import ru.serce.jnrfuse.struct.FileStat;
import ru.serce.jnrfuse.struct.FuseFileInfo;
import ru.serce.jnrfuse.struct.Statvfs;
import ru.serce.jnrfuse.struct.Timespec;

/**
 * The FUSE adapter (jnr-fuse on libfuse2, high-level path API): translates each callback into a
 * {@link PartFs} call. Every callback goes through {@link #call}, which returns 0 or a count,
 * or the negated errno chosen by {@link Errnos} — nothing is thrown across the native boundary.
 *
 * <p>libfuse runs callbacks on several threads; {@link PartFs} is thread-safe. Operations on
 * open files use the handle ({@code fi.fh}), so they keep working after the file was unlinked
 * ({@code hard_remove} and {@code nullpath_ok} are set). File locks (flock and POSIX) are left
 * to the kernel, which keeps them exact for every process on this machine.
 */
public final class PartFsFuse extends FuseStubFS implements FuseMount {
    private static final Logger log = LoggerFactory.getLogger(PartFsFuse.class);
    private static final long UTIME_NOW = (1L << 30) - 1;
    private static final long UTIME_OMIT = (1L << 30) - 2;
    private static final long NO_ID = 0xFFFFFFFFL;

    private final PartFs fs;
    private final ObservedFiles observed;
    private final io.partfs.engine.metrics.OperationMetrics ops;

    public PartFsFuse(PartFs fs) {
        this(fs, null);
    }

    /** A filesystem whose file events also go to {@code observer} (null for none). */
    public PartFsFuse(PartFs fs, PathObserver observer) {
        this.fs = fs;
        this.observed = new ObservedFiles(fs, observer);
        this.ops = new io.partfs.engine.metrics.OperationMetrics(fs.config().metrics(), "partfs_fuse_operations",
                "FUSE operations (errors are calls answered with an errno, ENOENT included)");
        // struct fuse_operations bit field: flag_nullpath_ok (bit 0) and flag_utime_omit_ok (bit 2).
        // jnr-fuse declares the bit field as padding, so it is set through the struct's memory.
        Struct.getMemory(fuseOperations).putInt(flagsOffset(), 0b101);
    }

    /** Offset of the flag bit field; its member class is not public in jnr-ffi, hence reflection. */
    private long flagsOffset() {
        try {
            Object member = ru.serce.jnrfuse.struct.FuseOperations.class.getField("flag_nullpath_ok").get(fuseOperations);
            java.lang.reflect.Method offset = member.getClass().getMethod("offset");
            offset.setAccessible(true);
            return (Long) offset.invoke(member);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("this jnr-fuse has an unexpected fuse_operations layout", e);
        }
    }

    @Override
    protected String getFSName() {
        return "partfs";
    }

    /** A callback body: returns 0 or a byte count. */
    private interface Body {
        int run() throws Exception;
    }

    private int call(String op, String path, Body body) {
        long start = System.nanoTime();
        int result;
        try {
            result = body.run();
        } catch (Throwable t) {
            result = Errnos.of(op, path, t);
        }
        ops.record(op, System.nanoTime() - start, result < 0);
        return result;
    }

    // ---- paths ----

    private static String parentOf(String path) {
        int i = path.lastIndexOf('/');
        return i <= 0 ? "/" : path.substring(0, i);
    }

    private static String nameOf(String path) {
        return path.substring(path.lastIndexOf('/') + 1);
    }

    private long parentIno(String path) throws IOException {
        Attr p = fs.resolve(parentOf(path));
        if (!p.isDirectory()) {
            throw new FsException.NotDirectory(parentOf(path));
        }
        return p.ino();
    }

    private int uid() {
        return getContext().uid.intValue();
    }

    private int gid() {
        return getContext().gid.intValue();
    }

    // ---- observer ----

    /** Mount-relative form of a FUSE path ("/a/b" is "a/b"). */
    private static String rel(String path) {
        return path == null ? null : path.startsWith("/") ? path.substring(1) : path;
    }

    // ---- attributes ----

    private static void fill(FileStat st, Attr a) {
        st.st_ino.set(a.ino());
        st.st_mode.set(a.stMode());
        st.st_nlink.set(a.nlink());
        st.st_uid.set(a.uid());
        st.st_gid.set(a.gid());
        st.st_rdev.set(a.rdev());
        st.st_size.set(a.size());
        st.st_blksize.set(4096);
        st.st_blocks.set((a.size() + 511) / 512);
        setTime(st.st_atim, a.atimeNs());
        setTime(st.st_mtim, a.mtimeNs());
        setTime(st.st_ctim, a.ctimeNs());
    }

    private static void setTime(Timespec t, long ns) {
        t.tv_sec.set(Math.floorDiv(ns, 1_000_000_000L));
        t.tv_nsec.set(Math.floorMod(ns, 1_000_000_000L));
    }

    @Override
    public int getattr(String path, FileStat stat) {
        return call("getattr", path, () -> {
            fill(stat, fs.resolve(path));
            return 0;
        });
    }

    @Override
    public int fgetattr(String path, FileStat stat, FuseFileInfo fi) {
        return call("fgetattr", path, () -> {
            fill(stat, fs.getattr(fs.inodeOf(fi.fh.get())));
            return 0;
        });
    }

    @Override
    public int chmod(String path, @mode_t long mode) {
        return call("chmod", path, () -> {
            fs.setattr(fs.resolve(path).ino(), MetaEngine.SetAttr.mode((int) mode & 07777));
            return 0;
        });
    }

    @Override
    public int chown(String path, @uid_t long uid, @gid_t long gid) {
        return call("chown", path, () -> {
            Integer u = uid == -1 || uid == NO_ID ? null : (int) uid;
            Integer g = gid == -1 || gid == NO_ID ? null : (int) gid;
            fs.setattr(fs.resolve(path).ino(), MetaEngine.SetAttr.owner(u, g));
            return 0;
        });
    }

    @Override
    public int utimens(String path, Timespec[] timespec) {
        return call("utimens", path, () -> {
            Long at = time(timespec[0]);
            Long mt = time(timespec[1]);
            fs.setattr(fs.resolve(path).ino(), MetaEngine.SetAttr.times(at, mt));
            return 0;
        });
    }

    private static Long time(Timespec t) {
        long nsec = t.tv_nsec.longValue();
        if (nsec == UTIME_OMIT) {
            return null;
        }
        if (nsec == UTIME_NOW) {
            return MetaEngine.SetAttr.NOW;
        }
        return t.tv_sec.get() * 1_000_000_000L + nsec;
    }

    @Override
    public int truncate(String path, @off_t long size) {
        return call("truncate", path, () -> {
            fs.truncate(fs.resolve(path).ino(), size);
            observed.removed(rel(path));
            return 0;
        });
    }

    @Override
    public int ftruncate(String path, @off_t long size, FuseFileInfo fi) {
        return call("ftruncate", path, () -> {
            fs.truncate(fs.inodeOf(fi.fh.get()), size);
            observed.removed(rel(path));
            return 0;
        });
    }

    @Override
    public int access(String path, int mask) {
        // With default_permissions the kernel checks permissions; this only says whether it exists.
        return call("access", path, () -> {
            fs.resolve(path);
            return 0;
        });
    }

    // ---- names ----

    @Override
    public int mknod(String path, @mode_t long mode, @dev_t long rdev) {
        return call("mknod", path, () -> {
            FileType type = (mode & 0170000) == 0 ? FileType.FILE : FileType.fromMode((int) mode);
            fs.mknod(parentIno(path), nameOf(path), type, (int) mode & 07777, uid(), gid(), (int) rdev);
            return 0;
        });
    }

    @Override
    public int mkdir(String path, @mode_t long mode) {
        return call("mkdir", path, () -> {
            fs.mkdir(parentIno(path), nameOf(path), (int) mode & 07777, uid(), gid());
            return 0;
        });
    }

    @Override
    public int unlink(String path) {
        return call("unlink", path, () -> {
            fs.unlink(parentIno(path), nameOf(path));
            observed.removed(rel(path));
            return 0;
        });
    }

    @Override
    public int rmdir(String path) {
        return call("rmdir", path, () -> {
            fs.rmdir(parentIno(path), nameOf(path));
            observed.removed(rel(path));
            return 0;
        });
    }

    @Override
    public int symlink(String target, String linkPath) {
        return call("symlink", linkPath, () -> {
            fs.symlink(parentIno(linkPath), nameOf(linkPath), target, uid(), gid());
            return 0;
        });
    }

    @Override
    public int readlink(String path, Pointer buf, @size_t long size) {
        return call("readlink", path, () -> {
            byte[] target = NameCodec.encode(fs.readlink(fs.resolve(path).ino()));
            int n = (int) Math.min(target.length, size - 1);
            buf.put(0, target, 0, n);
            buf.putByte(n, (byte) 0);
            return 0;
        });
    }

    @Override
    public int rename(String oldPath, String newPath) {
        return call("rename", oldPath, () -> {
            fs.rename(parentIno(oldPath), nameOf(oldPath), parentIno(newPath), nameOf(newPath), 0);
            observed.renamed(rel(oldPath), rel(newPath));
            return 0;
        });
    }

    @Override
    public int link(String oldPath, String newPath) {
        return call("link", newPath, () -> {
            Attr a = fs.link(fs.resolve(oldPath).ino(), parentIno(newPath), nameOf(newPath));
            observed.linked(rel(oldPath), rel(newPath), a);
            return 0;
        });
    }

    // ---- directories ----

    @Override
    public int opendir(String path, FuseFileInfo fi) {
        return call("opendir", path, () -> {
            if (!fs.resolve(path).isDirectory()) {
                throw new FsException.NotDirectory(path);
            }
            return 0;
        });
    }

    @Override
    public int readdir(String path, Pointer buf, FuseFillDir filler, @off_t long offset, FuseFileInfo fi) {
        return call("readdir", path, () -> {
            Attr dir = fs.resolve(path);
            List<DirEntry> entries = fs.readdir(dir.ino());
            filler.apply(buf, ".", null, 0);
            filler.apply(buf, "..", null, 0);
            for (DirEntry e : entries) {
                if (filler.apply(buf, e.name(), null, 0) != 0) {
                    break; // buffer full (does not happen with offset 0)
                }
            }
            return 0;
        });
    }

    @Override
    public int releasedir(String path, FuseFileInfo fi) {
        return 0;
    }

    @Override
    public int fsyncdir(String path, FuseFileInfo fi) {
        return call("fsyncdir", path, () -> {
            fs.meta().sync();
            return 0;
        });
    }

    // ---- files ----

    @Override
    public int create(String path, @mode_t long mode, FuseFileInfo fi) {
        return call("create", path, () -> {
            PartFs.Created c = fs.create(parentIno(path), nameOf(path), (int) mode & 07777,
                    fi.flags.get() | PartFs.O_CREAT, uid(), gid());
            fi.fh.set(c.fh());
            return 0;
        });
    }

    @Override
    public int open(String path, FuseFileInfo fi) {
        return call("open", path, () -> {
            fi.fh.set(fs.open(fs.resolve(path).ino(), fi.flags.get()));
            return 0;
        });
    }

    @Override
    public int read(String path, Pointer buf, @size_t long size, @off_t long offset, FuseFileInfo fi) {
        return call("read", path, () -> {
            long fh = fi.fh.get();
            if (observed.observed(rel(path))) {
                byte[] whole = observed.content(rel(path), fh);
                if (whole != null) {
                    int n = (int) Math.max(0, Math.min(size, whole.length - offset));
                    if (n > 0) {
                        buf.put(0, whole, (int) offset, n);
                    }
                    return n;
                }
            }
            byte[] tmp = new byte[(int) size];
            int n = fs.read(fh, offset, tmp, 0, (int) size);
            buf.put(0, tmp, 0, n);
            return n;
        });
    }

    @Override
    public int write(String path, Pointer buf, @size_t long size, @off_t long offset, FuseFileInfo fi) {
        return call("write", path, () -> {
            byte[] tmp = new byte[(int) size];
            buf.get(0, tmp, 0, (int) size);
            long fh = fi.fh.get();
            int n = fs.write(fh, offset, tmp, 0, (int) size);
            observed.wrote(fh);
            return n;
        });
    }

    @Override
    public int flush(String path, FuseFileInfo fi) {
        return call("flush", path, () -> {
            fs.flush(fi.fh.get());
            observed.committed(rel(path), fi.fh.get());
            return 0;
        });
    }

    @Override
    public int fsync(String path, int isdatasync, FuseFileInfo fi) {
        return call("fsync", path, () -> {
            fs.fsync(fi.fh.get());
            return 0;
        });
    }

    @Override
    public int release(String path, FuseFileInfo fi) {
        return call("release", path, () -> {
            long fh = fi.fh.get();
            try {
                fs.flushUnlessFailed(fh);
                observed.committed(rel(path), fh);
            } finally {
                observed.released(fh);
                fs.release(fh);
            }
            return 0;
        });
    }

    @Override
    public int fallocate(String path, int mode, @off_t long off, @off_t long length, FuseFileInfo fi) {
        return call("fallocate", path, () -> {
            fs.fallocate(fi.fh.get(), mode, off, length);
            return 0;
        });
    }

    // ---- extended attributes ----

    @Override
    public int setxattr(String path, String name, Pointer value, @size_t long size, int flags) {
        return call("setxattr", path, () -> {
            byte[] v = new byte[(int) size];
            value.get(0, v, 0, (int) size);
            fs.setxattr(fs.resolve(path).ino(), name, v, flags);
            return 0;
        });
    }

    @Override
    public int getxattr(String path, String name, Pointer value, @size_t long size) {
        return call("getxattr", path, () -> {
            byte[] v = fs.getxattr(fs.resolve(path).ino(), name);
            return copyOut(v, value, size);
        });
    }

    @Override
    public int listxattr(String path, Pointer list, @size_t long size) {
        return call("listxattr", path, () -> {
            List<String> names = fs.listxattr(fs.resolve(path).ino());
            java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
            for (String n : names) {
                out.writeBytes(NameCodec.encode(n));
                out.write(0);
            }
            return copyOut(out.toByteArray(), list, size);
        });
    }

    /** getxattr/listxattr convention: size 0 asks for the length; too small a buffer is ERANGE. */
    private static int copyOut(byte[] v, Pointer dst, long size) throws FsException {
        if (size == 0) {
            return v.length;
        }
        if (size < v.length) {
            throw new FsException.OutOfRange("buffer of " + size + " bytes");
        }
        dst.put(0, v, 0, v.length);
        return v.length;
    }

    @Override
    public int removexattr(String path, String name) {
        return call("removexattr", path, () -> {
            fs.removexattr(fs.resolve(path).ino(), name);
            return 0;
        });
    }

    // ---- volume ----

    @Override
    public int statfs(String path, Statvfs st) {
        return call("statfs", path, () -> {
            PartFs.StatFs s = fs.statfs();
            st.f_bsize.set(s.blockSize());
            st.f_frsize.set(s.blockSize());
            st.f_blocks.set(s.totalBlocks());
            st.f_bfree.set(s.freeBlocks());
            st.f_bavail.set(s.freeBlocks());
            st.f_files.set(s.files());
            st.f_ffree.set(s.freeFiles());
            st.f_favail.set(s.freeFiles());
            st.f_namemax.set(s.nameMax());
            return 0;
        });
    }

    // ---- mounting ----

    private volatile Thread fuseThread;
    private volatile Path mountedAt;
    /** The mount's directory in fusectl, to abort it once it is detached and no path reaches it. */
    private volatile Path connection;
    private volatile java.time.Duration unmountGrace = FuseOptions.DEFAULT_UNMOUNT_GRACE;

    /**
     * Mounts at {@code mountPoint} and returns once the kernel serves it (polling
     * /proc/self/mountinfo, 30 s at most). libfuse runs on a thread of its own until unmounted.
     *
     * @throws IOException when the mount point is missing, busy, or the mount fails
     */
    @Override
    public void mountAndWait(Path mountPoint, FuseOptions options) throws IOException {
        Path mp = FuseMount.checkMountPoint(mountPoint);
        List<String> argList = new ArrayList<>(options.toArgs());
        if (fs.config().atimeMode() == io.partfs.engine.PartFsConfig.AtimeMode.NOATIME) {
            argList.addAll(List.of("-o", "noatime")); // what reads do here, shown by mount(8)
        }
        String[] args = argList.toArray(String[]::new);
        java.util.concurrent.atomic.AtomicReference<Throwable> failure = new java.util.concurrent.atomic.AtomicReference<>();
        Thread t = new Thread(() -> {
            try {
                mount(mp, true, false, args);
            } catch (Throwable e) {
                failure.set(e);
            }
        }, "partfs-fuse");
        t.setDaemon(true);
        fuseThread = t;
        t.start();
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (!Mounts.isMounted(mp)) {
            if (!t.isAlive()) {
                Throwable e = failure.get();
                throw new IOException("cannot mount " + mp + (e == null ? "" : ": " + e.getMessage())
                        + " (is the fuse package installed and /dev/fuse usable?)", e);
            }
            if (System.nanoTime() > deadline) {
                unmount();
                throw new IOException("mount of " + mp + " did not appear within 30 s");
            }
            java.util.concurrent.locks.LockSupport.parkNanos(10_000_000L); // poll interval
        }
        mountedAt = mp;
        connection = Mounts.connectionIfKnown(mp);
        unmountGrace = options.unmountGrace();
        KernelReadahead.apply(mp, options.readahead());
        log.info("mounted volume {} at {} (libfuse driver; kernel caches {})", fs.format().name(), mp, options.describeCaches());
    }

    @Override
    public void awaitUnmounted() throws InterruptedException {
        Thread t = fuseThread;
        if (t != null) {
            t.join();
        }
    }

    @Override
    public boolean unmount() throws IOException {
        Path mp = mountedAt;
        Thread t = fuseThread;
        if (mp == null || t == null) {
            return true;
        }
        boolean lazily = BusyUnmount.unmount(mp, unmountGrace, () -> fusermount("-u", mp), () -> fusermount("-uz", mp));
        // a mount detached lazily ends when its last file closes: serve those files a while longer
        java.time.Duration served = lazily ? unmountGrace : java.time.Duration.ofSeconds(30);
        boolean ended = ends(t, mp, served);
        if (!ended) {
            BusyUnmount.cutOff(mp, connection, served);
            if (!ends(t, mp, java.time.Duration.ofSeconds(10))) { // libfuse's loop ends at once after the abort
                log.warn("{}: the thread serving the aborted mount did not end", mp);
            }
        }
        mountedAt = null;
        return ended;
    }

    /** Whether the thread serving the mount ended within {@code wait}. */
    private static boolean ends(Thread t, Path mp, java.time.Duration wait) throws java.io.InterruptedIOException {
        try {
            t.join(Math.max(1, wait.toMillis()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException("interrupted while unmounting " + mp);
        }
        return !t.isAlive();
    }

    /** fusermount {@code flags} {@code mp}: null once done, else what fusermount said. */
    private static String fusermount(String flags, Path mp) throws IOException {
        try {
            Process p = new ProcessBuilder("fusermount", flags, mp.toString()).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
            return p.waitFor() == 0 ? null : out.isEmpty() ? "fusermount " + flags + " failed" : out;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException("interrupted running fusermount");
        }
    }
}
