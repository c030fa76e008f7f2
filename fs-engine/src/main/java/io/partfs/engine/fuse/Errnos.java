package io.partfs.engine.fuse;

import io.partfs.engine.Errno;
import io.partfs.engine.FsException;
import java.io.IOException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one place where failures become errno values at the FUSE boundary. Filesystem errors
 * carry their own errno; anything else (the object store or metadata engine failing, a bug)
 * is logged and reported as EIO, never as EINTR, which applications such as ClickHouse treat
 * as a failed write.
 */
final class Errnos {
    private static final Logger log = LoggerFactory.getLogger(Errnos.class);
    /** An outage fails every operation that needs the store: a line a second says so. */
    private static final io.partfs.engine.LogLimit ioErrors = new io.partfs.engine.LogLimit(java.time.Duration.ofSeconds(1));

    private Errnos() {
    }

    /** The negated errno for {@code t}, as FUSE callbacks return it. */
    static int of(String op, String path, Throwable t) {
        return -errno(op, path, t).code();
    }

    static Errno errno(String op, String path, Throwable t) {
        if (t instanceof FsException fe) {
            return fe.errno();
        }
        if (t instanceof IllegalArgumentException) {
            log.debug("{} {}: {}", op, path, t.toString());
            return Errno.EINVAL;
        }
        if (t instanceof UnsupportedOperationException) {
            return Errno.EOPNOTSUPP;
        }
        if (t instanceof IOException) {
            ioErrors.warn(log, "{} {} failed: {}", op, path, t.toString());
        } else {
            log.error("{} {} failed unexpectedly", op, path, t);
        }
        return Errno.EIO;
    }
}
