package io.partfs.engine.fuse;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.partfs.engine.Errno;
import io.partfs.engine.FsException;
import io.partfs.engine.object.ObjectNotFoundException;
import io.partfs.engine.object.ObjectStoreException;
import java.io.IOException;
import java.io.InterruptedIOException;
import org.junit.jupiter.api.Test;

/** The one exception-to-errno table, checked entry by entry. */
class ErrnosTest {
    private static int errno(Throwable t) {
        return Errnos.of("op", "/p", t);
    }

    @Test
    void filesystemErrorsKeepTheirErrno() {
        assertEquals(-Errno.ENOENT.code(), errno(new FsException.NoSuchEntry("x")));
        assertEquals(-Errno.EEXIST.code(), errno(new FsException.Exists("x")));
        assertEquals(-Errno.ENOTDIR.code(), errno(new FsException.NotDirectory("x")));
        assertEquals(-Errno.EISDIR.code(), errno(new FsException.IsDirectory("x")));
        assertEquals(-Errno.ENOTEMPTY.code(), errno(new FsException.NotEmpty("x")));
        assertEquals(-Errno.EINVAL.code(), errno(new FsException.InvalidArgument("x")));
        assertEquals(-Errno.EPERM.code(), errno(new FsException.NotPermitted("x")));
        assertEquals(-Errno.ENAMETOOLONG.code(), errno(new FsException.NameTooLong("x")));
        assertEquals(-Errno.ENODATA.code(), errno(new FsException.NoAttribute("x")));
        assertEquals(-Errno.EBADF.code(), errno(new FsException.BadHandle("x")));
        assertEquals(-Errno.EFBIG.code(), errno(new FsException.TooLarge("x")));
        assertEquals(-Errno.EMLINK.code(), errno(new FsException.TooManyLinks("x")));
        assertEquals(-Errno.ERANGE.code(), errno(new FsException.OutOfRange("x")));
    }

    @Test
    void backendFailuresAreEioNeverEintr() {
        assertEquals(-Errno.EIO.code(), errno(new IOException("redis down")));
        assertEquals(-Errno.EIO.code(), errno(new ObjectNotFoundException("k")));
        assertEquals(-Errno.EIO.code(), errno(new ObjectStoreException(ObjectStoreException.Kind.UNAVAILABLE, "s3 down", null)));
        assertEquals(-Errno.EIO.code(), errno(new InterruptedIOException("interrupted")));
        assertEquals(-Errno.EIO.code(), errno(new NullPointerException()));
    }

    @Test
    void programmingErrorsOfTheCallerAreEinvalOrEopnotsupp() {
        assertEquals(-Errno.EINVAL.code(), errno(new IllegalArgumentException("bad")));
        assertEquals(-Errno.EOPNOTSUPP.code(), errno(new UnsupportedOperationException("punch hole")));
    }
}
