package io.partfs.engine.fuse;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** What the kernel says is mounted, from /proc/self/mountinfo. */
public final class Mounts {
    private Mounts() {
    }

    /** The filesystem type mounted exactly at {@code dir} (e.g. "fuse.partfs"), or null. */
    public static String typeAt(Path dir) throws IOException {
        String want = escape(dir.toAbsolutePath().normalize().toString());
        String found = null;
        for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
            String[] f = line.split(" ");
            if (f.length > 4 && f[4].equals(want)) {
                int dash = java.util.Arrays.asList(f).indexOf("-");
                found = dash > 0 && dash + 1 < f.length ? f[dash + 1] : "unknown";
            }
        }
        return found; // the last one mounted there is the one in use
    }

    public static boolean isMounted(Path dir) throws IOException {
        return typeAt(dir) != null;
    }

    /**
     * Whether the FUSE mount at {@code dir} has lost its process: the kernel answers every call
     * there with ENOTCONN once the process that served it has exited (killed, out of memory)
     * without unmounting. Such a mount can serve nothing again; it can only be taken down.
     * Asked with statfs(2), which the kernel always sends to the process: a lookup or access(2)
     * of the mount's root may be answered from its attribute cache without it.
     */
    public static boolean disconnected(Path dir) {
        return LibC.INSTANCE.statfs(dir.toString(), new byte[256]) < 0 && LibC.errno() == LibC.ENOTCONN;
    }

    /** mountinfo escapes space, tab, newline and backslash as octal. */
    private static String escape(String s) {
        return s.replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011").replace("\n", "\\012");
    }
}
