package io.partfs.cli;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserDefinedFileAttributeView;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps ClickHouse from writing into the bare directory beneath the mount. While no mount
 * serves the path (a sidecar killed and not yet back, the moment between taking its dead mount
 * down and mounting again), a lookup there reaches the mount point's own directory on the local
 * disk, and a part written into it would be hidden, and its space held, once the mount is back.
 * So the directory is given mode 000 beneath the mount: a ClickHouse that does not run as root
 * (the Debian package and the official image run it as {@code clickhouse}) then gets EACCES
 * instead of an empty disk. A clean unmount gives the directory back its mode; a killed mount
 * leaves it guarded, and the next mount, which finds mode 000, reads the mode to give back from
 * the directory's extended attribute {@value #MODE_XATTR} (0755 where there is none).
 *
 * <p>Only for a mount by root on an empty directory: an unprivileged mount needs write access
 * to its mount point, and {@code -o nonempty} means the files beneath are meant to be there.
 */
final class MountPointGuard {
    private static final Logger log = LoggerFactory.getLogger(MountPointGuard.class);
    /** The user extended attribute ({@code user.} is implied) holding the mode to give back. */
    static final String MODE_XATTR = "partfs.mode";
    static final Set<PosixFilePermission> GUARDED = Set.of();
    private static final Set<PosixFilePermission> FALLBACK = PosixFilePermissions.fromString("rwxr-xr-x");

    private final Path dir;
    private final Set<PosixFilePermission> restore;

    private MountPointGuard(Path dir, Set<PosixFilePermission> restore) {
        this.dir = dir;
        this.restore = restore;
    }

    /**
     * Sets mode 000 on the bare directory {@code dir} (not mounted yet) and returns the guard
     * whose {@link #lift} gives its mode back; null when the directory is left as it is.
     */
    static MountPointGuard apply(Path dir, boolean root, boolean nonEmptyAllowed) {
        if (!root || nonEmptyAllowed) {
            return null;
        }
        try {
            Set<PosixFilePermission> mode = Files.getPosixFilePermissions(dir);
            Set<PosixFilePermission> restore = mode.isEmpty() ? remembered(dir) : mode;
            if (!mode.isEmpty()) {
                remember(dir, mode);
            }
            Files.setPosixFilePermissions(dir, GUARDED);
            return new MountPointGuard(dir, restore);
        } catch (IOException e) {
            log.warn("cannot set mode 000 on {} beneath the mount ({}): while no mount serves it, ClickHouse could write"
                    + " into the local directory", dir, e.toString());
            return null;
        }
    }

    /** Gives the directory its mode back, once nothing is mounted there. */
    void lift() {
        try {
            Files.setPosixFilePermissions(dir, restore);
            forget(dir);
        } catch (IOException e) {
            log.warn("cannot give {} its mode {} back after unmounting: {}", dir, PosixFilePermissions.toString(restore), e.toString());
        }
    }

    private static void remember(Path dir, Set<PosixFilePermission> mode) {
        try {
            xattrs(dir).write(MODE_XATTR, StandardCharsets.US_ASCII.encode(PosixFilePermissions.toString(mode)));
        } catch (IOException | UnsupportedOperationException e) {
            // a filesystem without user extended attributes: after a killed mount, 0755 is given back
            log.debug("cannot remember the mode of {}: {}", dir, e.toString());
        }
    }

    private static Set<PosixFilePermission> remembered(Path dir) {
        try {
            UserDefinedFileAttributeView view = xattrs(dir);
            ByteBuffer b = ByteBuffer.allocate(view.size(MODE_XATTR));
            view.read(MODE_XATTR, b);
            Set<PosixFilePermission> mode = PosixFilePermissions.fromString(new String(b.array(), 0, b.position(), StandardCharsets.US_ASCII));
            return mode.isEmpty() ? FALLBACK : mode;
        } catch (IOException | RuntimeException e) {
            return FALLBACK; // none: the directory was 000 before PartFS, or the filesystem keeps no attributes
        }
    }

    private static void forget(Path dir) {
        try {
            xattrs(dir).delete(MODE_XATTR);
        } catch (IOException | UnsupportedOperationException e) {
            // not there (never written): nothing to forget
        }
    }

    private static UserDefinedFileAttributeView xattrs(Path dir) {
        UserDefinedFileAttributeView view = Files.getFileAttributeView(dir, UserDefinedFileAttributeView.class);
        if (view == null) {
            throw new UnsupportedOperationException("no user extended attributes");
        }
        return view;
    }
}
