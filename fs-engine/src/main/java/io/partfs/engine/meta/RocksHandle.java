package io.partfs.engine.meta;

import io.partfs.engine.FsException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.Status;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An open RocksDB database that survives its disk filling up: the embedded metadata engine's
 * ({@link RocksKvStore}) and the part-metadata cache's.
 *
 * <p>Why: once a write's log append got ENOSPC, RocksDB refuses every later write, deletions
 * too, with the same error until the database is opened again (measured on a tmpfs filled by
 * another file; RocksJava has no {@code Resume()}, and an {@code SstFileManager} does not recover
 * a log error). A write that fails so throws {@link FsException.NoSpace} and marks the database
 * stopped; the next write once the disk has {@link #REOPEN_ROOM} free closes and reopens it.
 *
 * <p>Every use of the database goes through {@link #read} or {@link #write}, which hold a shared
 * lock, so that the reopen, under the exclusive lock, never closes a handle in use: RocksDB
 * aborts the process when a closed handle is used.
 */
public final class RocksHandle {
    private static final Logger log = LoggerFactory.getLogger(RocksHandle.class);

    /** Free space a reopen needs: a new write-ahead log and MANIFEST, and the write that follows. */
    public static final long REOPEN_ROOM = 4L << 20;

    /** Opens the database (again). */
    @FunctionalInterface
    public interface Opener {
        RocksDB open() throws RocksDBException;
    }

    /** Work on the open database. */
    @FunctionalInterface
    public interface Use<T> {
        T apply(RocksDB db) throws RocksDBException, IOException;
    }

    private final Path dir;
    private final String what;
    private final Opener opener;
    private final Duration reopenWait;
    /** Replaced only by {@link #reopen}, under {@link #lock}'s write lock; null once closed. */
    private volatile RocksDB db;
    private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
    /** Why writes fail until the database is reopened, or null. */
    private volatile String stopped;
    private volatile boolean closed;

    /**
     * Opens the database of {@code dir} with {@code opener}. {@code what} names it in messages
     * ("metadata", "part-metadata cache"). A reopen waits at most {@code reopenWait} (null: as
     * long as it takes) for the uses in progress to end; past it, the write fails as if the disk
     * were still full, and a later one tries again.
     */
    public RocksHandle(Path dir, String what, Opener opener, Duration reopenWait) throws RocksDBException {
        this.dir = dir;
        this.what = what;
        this.opener = opener;
        this.reopenWait = reopenWait;
        this.db = opener.open();
    }

    /** Runs {@code use} on the database; for reads, and writes whose failure needs no reopen (none). */
    public <T> T read(Use<T> use) throws IOException, RocksDBException {
        lock.readLock().lock();
        try {
            return use.apply(db());
        } finally {
            lock.readLock().unlock();
        }
    }

    /**
     * Runs {@code use}, which writes, on the database: reopened first if a full disk stopped it
     * and the disk has room again. A write that finds the disk full throws
     * {@link FsException.NoSpace}, as does this call while the disk is still full.
     */
    public <T> T write(Use<T> use) throws IOException, RocksDBException {
        if (stopped != null) {
            reopen();
        }
        lock.readLock().lock();
        try {
            return use.apply(db());
        } catch (RocksDBException e) {
            if (!noSpace(e)) {
                throw e;
            }
            if (stopped == null) {
                log.warn("{} in {}: a write found the disk full ({}); RocksDB takes no more writes until it is reopened, "
                        + "which is tried at the next write once the disk has room", what, dir, e.getMessage());
            }
            stopped = e.getMessage();
            throw new FsException.NoSpace("the disk of the " + what + " in " + dir + " is full: free space on it ("
                    + e.getMessage() + ")");
        } finally {
            lock.readLock().unlock();
        }
    }

    /** Whether a full disk stopped writes and no reopen has cleared that yet. */
    public boolean stopped() {
        return stopped != null;
    }

    /**
     * The database, for a caller inside {@link #read} or {@link #write}; throws (unchecked, for
     * readers that declare nothing) when a reopen failed and left it closed.
     */
    private RocksDB db() {
        RocksDB d = db;
        if (d == null) {
            throw new UncheckedIOException(new IOException(what + " in " + dir + (closed ? " is closed"
                    : " is closed: it could not be reopened after its disk was full: free space on it and mount again")));
        }
        return d;
    }

    /** Whether RocksDB found its files damaged (a checksum mismatch, a truncated table or manifest). */
    public static boolean corrupted(RocksDBException e) {
        Status st = e.getStatus();
        return st != null && st.getCode() == Status.Code.Corruption
                || String.valueOf(e.getMessage()).startsWith("Corruption:");
    }

    /** Whether RocksDB failed for want of disk space (a log append, a flush or compaction). */
    public static boolean noSpace(RocksDBException e) {
        Status st = e.getStatus();
        if (st != null && st.getSubCode() == Status.SubCode.NoSpace) {
            return true;
        }
        return String.valueOf(e.getMessage()).contains("No space left on device");
    }

    /**
     * Closes the database and opens it again, which clears the error that stopped its writes,
     * once its disk has {@link #REOPEN_ROOM} free. Throws {@link FsException.NoSpace} while the
     * disk is still full, when the caller is itself inside {@link #read} or {@link #write} (it
     * would wait for itself), or when uses in progress outlast {@link #reopenWait}.
     */
    private void reopen() throws IOException {
        long room = Files.getFileStore(dir).getUsableSpace();
        if (room < REOPEN_ROOM || lock.getReadHoldCount() > 0 || !lockExclusively()) {
            throw new FsException.NoSpace("the disk of the " + what + " in " + dir + " is full (" + (room >> 10)
                    + " KiB free): free space on it (" + stopped + ")");
        }
        try {
            if (stopped == null) {
                return; // another writer reopened it while this one waited
            }
            if (closed) {
                throw new IOException(what + " in " + dir + " is closed");
            }
            RocksDB d = db;
            db = null; // a closed handle aborts the JVM when used: db() refuses instead
            if (d != null) { // null: the last reopen failed to open it; try again
                d.close();
            }
            try {
                db = opener.open();
            } catch (RocksDBException e) {
                throw new IOException(what + " in " + dir + " could not be reopened after its disk was full: "
                        + e.getMessage() + ": free space on it and mount again", e);
            }
            log.info("{} in {} reopened after its disk was full: writes go on", what, dir);
            stopped = null;
        } finally {
            lock.writeLock().unlock();
        }
    }

    private boolean lockExclusively() {
        if (reopenWait == null) {
            lock.writeLock().lock();
            return true;
        }
        try {
            return lock.writeLock().tryLock(reopenWait.toNanos(), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /**
     * Runs {@code last} (a final flush, say; skipped while writes are stopped) and closes the
     * database, once the uses in progress have ended. Later uses fail; a second close does nothing.
     */
    public void close(Use<Void> last) throws IOException, RocksDBException {
        lock.writeLock().lock();
        try {
            RocksDB d = db;
            if (closed) {
                return;
            }
            closed = true;
            db = null;
            if (d == null) {
                return; // a reopen failed and left it closed
            }
            try {
                if (stopped == null) {
                    last.apply(d);
                }
            } finally {
                d.close();
            }
        } finally {
            lock.writeLock().unlock();
        }
    }
}
