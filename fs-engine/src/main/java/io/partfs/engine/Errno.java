package io.partfs.engine;

/**
 * The POSIX error numbers PartFS reports, with their Linux values. The FUSE adapter returns
 * {@code -errno.code()}; nothing else in the filesystem deals in raw numbers.
 */
public enum Errno {
    EPERM(1),
    ENOENT(2),
    EINTR(4),
    EIO(5),
    EBADF(9),
    EAGAIN(11),
    EACCES(13),
    EBUSY(16),
    EEXIST(17),
    EXDEV(18),
    ENOTDIR(20),
    EISDIR(21),
    EINVAL(22),
    ETXTBSY(26),
    EFBIG(27),
    ENOSPC(28),
    EROFS(30),
    EMLINK(31),
    ERANGE(34),
    ENAMETOOLONG(36),
    ENOSYS(38),
    ENOTEMPTY(39),
    ELOOP(40),
    ENODATA(61),
    EOPNOTSUPP(95),
    ESTALE(116);

    private final int code;

    Errno(int code) {
        this.code = code;
    }

    /** The positive Linux errno value. */
    public int code() {
        return code;
    }
}
