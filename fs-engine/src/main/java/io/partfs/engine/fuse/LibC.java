package io.partfs.engine.fuse;

import jnr.ffi.LibraryLoader;
import jnr.ffi.Pointer;
import jnr.ffi.annotations.SaveError;
import jnr.ffi.types.size_t;
import jnr.ffi.types.ssize_t;

/**
 * The few C library calls the kernel FUSE driver needs: opening {@code /dev/fuse}, moving
 * requests and replies through it, mount(2)/umount2(2), and statfs(2) to tell a dead mount. Every call keeps errno, read with
 * {@link #errno()}. Public only because jnr-ffi generates its implementation in another class loader.
 */
public interface LibC {
    int O_RDONLY = 0;
    int O_RDWR = 02;
    int O_CLOEXEC = 02000000;
    long MS_NOSUID = 2;
    long MS_NODEV = 4;
    long MS_NOATIME = 1024;
    int MNT_DETACH = 2;

    int EINTR = 4;
    int ENOENT = 2;
    int EAGAIN = 11;
    int ENODEV = 19;
    int EBUSY = 16;
    int EINVAL = 22;
    int ENOTCONN = 107;

    @SaveError
    int open(String path, int flags);

    @SaveError
    int close(int fd);

    @SaveError
    @ssize_t long read(int fd, Pointer buf, @size_t long count);

    @SaveError
    @ssize_t long write(int fd, Pointer buf, @size_t long count);

    /** ioctl(2) with a pointer argument (the FUSE device's backing-file requests). */
    @SaveError
    int ioctl(int fd, @jnr.ffi.types.u_int64_t long request, Pointer arg);

    @SaveError
    int mount(String source, String target, String fstype, long flags, String data);

    @SaveError
    int umount2(String target, int flags);

    /** statfs(2) into {@code buf} (struct statfs: 120 bytes on 64-bit Linux). */
    @SaveError
    int statfs(String path, @jnr.ffi.annotations.Out byte[] buf);

    String strerror(int errnum);

    int getuid();

    int getgid();

    LibC INSTANCE = LibraryLoader.create(LibC.class).load("c");

    static int errno() {
        return jnr.ffi.Runtime.getRuntime(INSTANCE).getLastError();
    }

    static String error() {
        return INSTANCE.strerror(errno());
    }
}
