package io.partfs.engine;

import java.io.IOException;

/**
 * A filesystem operation failed for a reason that has exactly one POSIX errno. Each subclass
 * stands for one errno, so callers can catch what they handle and the FUSE boundary can map
 * every failure with {@link #errno()} in one place.
 *
 * <p>Failures of the backing services (object store, metadata engine) are plain
 * {@link IOException}s and map to {@link Errno#EIO}.
 */
public abstract class FsException extends IOException {
    private static final long serialVersionUID = 1L;

    private final Errno errno;

    FsException(Errno errno, String message) {
        super(message);
        this.errno = errno;
    }

    public final Errno errno() {
        return errno;
    }

    /**
     * No stack trace: an FsException is an answer to the caller (ENOENT for a name looked up
     * that is not there, ENODATA for an absent extended attribute), thrown on every such
     * request, and filling in the trace was most of its cost (0.56% of the sidecar's CPU in a
     * small-file bench, where the kernel looks up each new name and asks for its security
     * attribute). The message says which object it is about.
     */
    @Override
    public synchronized Throwable fillInStackTrace() {
        return this;
    }

    /** ENOENT: a path component or the named entry does not exist. */
    public static final class NoSuchEntry extends FsException {
        private static final long serialVersionUID = 1L;

        public NoSuchEntry(String what) {
            super(Errno.ENOENT, "no such file or directory: " + what);
        }
    }

    /** ENOSPC: no room left where the write must go (the metadata engine's memory, say). */
    public static final class NoSpace extends FsException {
        private static final long serialVersionUID = 1L;

        public NoSpace(String what) {
            super(Errno.ENOSPC, what);
        }
    }

    /** EEXIST: the name is taken. */
    public static final class Exists extends FsException {
        private static final long serialVersionUID = 1L;

        public Exists(String what) {
            super(Errno.EEXIST, "already exists: " + what);
        }
    }

    /**
     * EROFS: this mount refuses changes (it lost a flock(2) lock to another mount of a shared
     * volume while cut off from the metadata engine, and may no longer be the only writer).
     */
    public static final class ReadOnly extends FsException {
        private static final long serialVersionUID = 1L;

        public ReadOnly(String why) {
            super(Errno.EROFS, why);
        }
    }

    /** ENOTDIR: a directory was required. */
    public static final class NotDirectory extends FsException {
        private static final long serialVersionUID = 1L;

        public NotDirectory(String what) {
            super(Errno.ENOTDIR, "not a directory: " + what);
        }
    }

    /** EISDIR: the operation does not apply to a directory. */
    public static final class IsDirectory extends FsException {
        private static final long serialVersionUID = 1L;

        public IsDirectory(String what) {
            super(Errno.EISDIR, "is a directory: " + what);
        }
    }

    /** ENOTEMPTY: the directory still has entries. */
    public static final class NotEmpty extends FsException {
        private static final long serialVersionUID = 1L;

        public NotEmpty(String what) {
            super(Errno.ENOTEMPTY, "directory not empty: " + what);
        }
    }

    /** EINVAL: the arguments are not valid for this object (e.g. moving a directory into itself). */
    public static final class InvalidArgument extends FsException {
        private static final long serialVersionUID = 1L;

        public InvalidArgument(String what) {
            super(Errno.EINVAL, "invalid argument: " + what);
        }
    }

    /** EPERM: the operation is not permitted on this kind of object (e.g. a hard link to a directory). */
    public static final class NotPermitted extends FsException {
        private static final long serialVersionUID = 1L;

        public NotPermitted(String what) {
            super(Errno.EPERM, "operation not permitted: " + what);
        }
    }

    /** ENAMETOOLONG: a name is longer than 255 bytes. */
    public static final class NameTooLong extends FsException {
        private static final long serialVersionUID = 1L;

        public NameTooLong(String what) {
            super(Errno.ENAMETOOLONG, "file name too long: " + what);
        }
    }

    /** ENODATA: the extended attribute does not exist. */
    public static final class NoAttribute extends FsException {
        private static final long serialVersionUID = 1L;

        public NoAttribute(String what) {
            super(Errno.ENODATA, "no such attribute: " + what);
        }
    }

    /** EBADF: the file handle is not open, or not open for this kind of access. */
    public static final class BadHandle extends FsException {
        private static final long serialVersionUID = 1L;

        public BadHandle(String what) {
            super(Errno.EBADF, "bad file handle: " + what);
        }
    }

    /** EFBIG: the offset or size is beyond what PartFS stores. */
    public static final class TooLarge extends FsException {
        private static final long serialVersionUID = 1L;

        public TooLarge(String what) {
            super(Errno.EFBIG, "file too large: " + what);
        }
    }

    /** EMLINK: the file has too many hard links. */
    public static final class TooManyLinks extends FsException {
        private static final long serialVersionUID = 1L;

        public TooManyLinks(String what) {
            super(Errno.EMLINK, "too many links: " + what);
        }
    }

    /** ERANGE: an attribute value is larger than allowed. */
    public static final class OutOfRange extends FsException {
        private static final long serialVersionUID = 1L;

        public OutOfRange(String what) {
            super(Errno.ERANGE, "out of range: " + what);
        }
    }

    /** ETXTBSY: the file is open in a way that excludes this open (read by the kernel itself: FUSE passthrough). */
    public static final class TextBusy extends FsException {
        private static final long serialVersionUID = 1L;

        public TextBusy(String what) {
            super(Errno.ETXTBSY, "busy: " + what);
        }
    }

    /**
     * ELOOP: a symlink was to be opened as a file. The kernel follows symlinks before it opens
     * anything, so only a name another mount just made a symlink can get here (open(2) with
     * O_NOFOLLOW answers the same).
     */
    public static final class SymlinkOpened extends FsException {
        private static final long serialVersionUID = 1L;

        public SymlinkOpened(String what) {
            super(Errno.ELOOP, "a symlink, not a file: " + what);
        }
    }
}
