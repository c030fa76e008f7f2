package io.partfs.engine.fuse;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The kernel's readahead window of a mount: {@code /sys/class/bdi/MAJOR:MINOR/read_ahead_kb}
 * of the mount's device. The kernel gives a FUSE mount 128 KiB, so a sequential reader of a big
 * file asks this process for one 128 KiB piece after another, each waiting for the last; with a
 * window of several MiB the kernel asks for up to that much at once, in 1 MiB requests that
 * workers serve in parallel (measured on a cold 256 MiB file: 626 MB/s at 128 KiB, 976 at 4 MiB,
 * 1.1 GB/s at 16 MiB). The window grows only for sequential reads; a random reader still reads
 * what it asks for. Setting it needs root (sysfs); anyone else keeps the kernel's window.
 */
final class KernelReadahead {
    private static final Logger log = LoggerFactory.getLogger(KernelReadahead.class);

    private KernelReadahead() {
    }

    /**
     * The sysfs file that holds the readahead window of the filesystem mounted at {@code mp}. The
     * stat this takes waits, in the kernel, for the mount's INIT to be answered.
     */
    static Path sysfsFile(Path mp) throws IOException {
        long dev = ((Number) Files.getAttribute(mp, "unix:dev")).longValue();
        long major = ((dev >>> 8) & 0xfff) | ((dev >>> 32) & ~0xfffL);
        long minor = (dev & 0xff) | ((dev >>> 12) & ~0xffL);
        return Path.of("/sys/class/bdi", major + ":" + minor, "read_ahead_kb");
    }

    /**
     * Sets the readahead window of the mount at {@code mp} to {@code bytes} (rounded up to KiB);
     * 0 leaves the kernel's. Failing is not fatal: it is logged, and reads are only slower.
     */
    static void apply(Path mp, long bytes) {
        if (bytes <= 0) {
            return;
        }
        long kb = (bytes + 1023) / 1024;
        if (LibC.INSTANCE.getuid() != 0) {
            log.debug("not root: the kernel readahead of {} stays at the kernel's window", mp);
            return;
        }
        try {
            Path f = sysfsFile(mp);
            Files.writeString(f, kb + "\n");
            log.debug("kernel readahead of {} set to {} KiB ({})", mp, kb, f);
        } catch (IOException | RuntimeException e) {
            log.warn("cannot set the kernel readahead of {} to {} KiB ({}): sequential reads of big files stay "
                    + "at the kernel's 128 KiB window; setting it needs root", mp, kb, e.toString());
        }
    }
}
