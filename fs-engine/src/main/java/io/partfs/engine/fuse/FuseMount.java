package io.partfs.engine.fuse;

import io.partfs.engine.PartFs;
import io.partfs.engine.spi.PathObserver;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A PartFS volume served to the kernel through FUSE at one mount point. Two drivers implement
 * it: {@link KernelFuse} speaks the kernel protocol on {@code /dev/fuse} itself (inode-based,
 * READDIRPLUS, one kernel inode per file; needs root), {@link PartFsFuse} goes through libfuse 2's
 * path API (jnr-fuse; works through fusermount for other users).
 */
public interface FuseMount {
    /** Mounts at {@code mountPoint} and returns once the kernel serves it. */
    void mountAndWait(Path mountPoint, FuseOptions options) throws IOException;

    /** Blocks until the filesystem is unmounted (by {@link #unmount()}, fusermount or umount). */
    void awaitUnmounted() throws InterruptedException;

    /**
     * Unmounts and waits until the driver has stopped. A mount with files still open stays
     * attached, serving, while the unmount is retried for {@link FuseOptions#unmountGrace()}; then
     * it is detached lazily (it disappears from the namespace and ends when its last file closes)
     * and its open files are served as long again at most; files still open then are cut off
     * (the connection is aborted: they get errors), and the driver stops. Returns whether the
     * mount ended with no file open; false when files were cut off.
     */
    boolean unmount() throws IOException;

    /** The driver {@code options} ask for, serving {@code fs} (and {@code observer}, may be null). */
    static FuseMount create(PartFs fs, PathObserver observer, FuseOptions options) {
        return options.driver() == FuseOptions.Driver.KERNEL ? new KernelFuse(fs, observer) : new PartFsFuse(fs, observer);
    }

    /** The absolute mount point, after checking it can be mounted on; one-line errors that say what to do. */
    static Path checkMountPoint(Path mountPoint) throws IOException {
        Path mp = mountPoint.toAbsolutePath().normalize();
        if (!Files.isDirectory(mp)) {
            throw new IOException("mount point " + mp + " does not exist or is not a directory: create it first (mkdir -p " + mp + ")");
        }
        if (Mounts.isMounted(mp)) {
            throw new IOException(mp + " is already a mount point: unmount it first (partfs umount " + mp + ")");
        }
        if (!Files.exists(Path.of("/dev/fuse"))) {
            throw new IOException("/dev/fuse is missing: load the fuse module (modprobe fuse) or give the container /dev/fuse");
        }
        return mp;
    }
}
