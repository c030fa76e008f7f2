package io.partfs.engine;

import java.io.Closeable;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/**
 * Closes of files in ClickHouse's temporary part directories, made to wait at the directory's
 * rename instead of one after another.
 *
 * <p>ClickHouse writes a part's files (two per column, then checksums.txt and the rest) into
 * {@code tmp_insert_*}, {@code tmp_merge_*} or {@code tmp_mut_*}, closes them one after another,
 * and then renames the directory to the part's name: only the rename makes the part exist, and
 * nothing reads the files before it. A close waits for the file's data to be in the object store
 * (or staged on local disk in write-back mode) and committed; over S3 at 20 ms that is ~50 ms a
 * file, ~2.5 s for the 53 files of a 20-column part. Here a close in such a directory (one this
 * mount made, named {@code tmp_*}) starts that flush on a pool and returns; the directory's
 * rename, an fsync of one of its files, a hard link out of it, or the unmount waits for its
 * flushes first, and a flush that failed fails the rename (EIO), so ClickHouse's INSERT or merge
 * fails as it would have at the close. Reads of such a file in this mount flush it first, as
 * every read does. What the rename returns for is committed, as before; a crash before it loses
 * only a temporary directory that ClickHouse deletes at its start anyway.
 */
final class PartFlushes implements Closeable {
    /** Flushes running at once: each mostly waits for the object store. */
    static final int PARALLEL = 32;

    /** A flush to run later (a close's). */
    @FunctionalInterface
    interface Flush {
        void run() throws IOException;
    }

    /** A close's flush started on the pool, and the flush itself, to run again where it failed. */
    private record Deferred(CompletableFuture<Void> done, Flush flush) {
    }

    /** The directories tracked, by inode, each with its files' deferred flushes by inode. */
    private final Map<Long, Map<Long, Deferred>> dirs = new ConcurrentHashMap<>();
    private final ThreadPoolExecutor pool = new ThreadPoolExecutor(PARALLEL, PARALLEL, 30, TimeUnit.SECONDS,
            new LinkedBlockingQueue<>(), r -> {
                Thread t = new Thread(r, "partfs-part-flush");
                t.setDaemon(true);
                return t;
            });

    PartFlushes() {
        pool.allowCoreThreadTimeOut(true);
    }

    /** ClickHouse's names for a part being written: tmp_insert_, tmp_merge_, tmp_mut_, tmp_fetch_, ... */
    static boolean isTemporaryPart(String dirName) {
        return dirName.startsWith("tmp_");
    }

    /** A directory this mount just made; closes in it are deferred if its name is a temporary part's. */
    void made(long dir, String name) {
        if (isTemporaryPart(name)) {
            dirs.put(dir, new java.util.HashMap<>());
        }
    }

    boolean tracks(long dir) {
        return dirs.containsKey(dir);
    }

    boolean isEmpty() {
        return dirs.isEmpty();
    }

    /**
     * Runs {@code flush} of file {@code ino} on the pool, to be awaited with the directory's other
     * flushes; false (nothing started) when the directory is no longer tracked or the pool is
     * closed: the caller flushes itself.
     */
    boolean defer(long dir, long ino, Flush flush) {
        Map<Long, Deferred> files = dirs.get(dir);
        if (files == null) {
            return false;
        }
        synchronized (files) {
            if (dirs.get(dir) != files) {
                return false; // forgotten (renamed) meanwhile
            }
            CompletableFuture<Void> done = new CompletableFuture<>();
            try {
                pool.execute(() -> {
                    try {
                        flush.run();
                        done.complete(null);
                    } catch (Throwable e) {
                        done.completeExceptionally(e);
                    }
                });
            } catch (RejectedExecutionException e) {
                return false;
            }
            Deferred before = files.put(ino, new Deferred(done, flush));
            if (before != null) {
                files.put(ino, new Deferred(before.done.runAfterBoth(done, () -> { }), flush)); // awaited together
            }
        }
        return true;
    }

    /**
     * Waits for the directory's deferred flushes, then flushes each of its files once more here,
     * which costs nothing for a file already committed and retries one whose flush failed (its
     * data stays buffered, as after a failed close); throws the first failure.
     */
    void await(long dir) throws IOException {
        IOException first = null;
        for (Deferred d : waitFor(dir)) {
            try {
                d.flush.run();
            } catch (IOException e) {
                if (first == null) {
                    first = e;
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    /** Waits for the directory's deferred flushes, whatever their outcome (before deleting in it). */
    void awaitQuietly(long dir) throws IOException {
        waitFor(dir);
    }

    private List<Deferred> waitFor(long dir) throws InterruptedIOException {
        Map<Long, Deferred> files = dirs.get(dir);
        if (files == null) {
            return List.of();
        }
        List<Deferred> all;
        synchronized (files) {
            all = new ArrayList<>(files.values());
        }
        for (Deferred d : all) {
            try {
                d.done.get();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new InterruptedIOException("waiting for the flushes of directory " + dir);
            } catch (ExecutionException e) {
                // the caller flushes again where it needs the outcome
            }
        }
        return all;
    }

    /** Stops tracking a directory (renamed to a part's name, or removed) after awaiting it. */
    void forget(long dir) {
        dirs.remove(dir);
    }

    /** Waits for every deferred flush, whatever its outcome: before an unmount's own flush of everything. */
    void awaitAll() throws IOException {
        for (Long dir : List.copyOf(dirs.keySet())) {
            awaitQuietly(dir);
        }
    }

    @Override
    public void close() throws IOException {
        awaitAll();
        pool.shutdown();
    }
}
