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

    /**
     * A close's flush started on the pool, and the flush itself; {@code again}: it failed at an
     * earlier await, and the next one runs it anew.
     */
    private record Deferred(CompletableFuture<Void> done, Flush flush, boolean again) {
        Deferred(CompletableFuture<Void> done, Flush flush) {
            this(done, flush, false);
        }
    }

    /** The directories tracked, by inode, each with its files' deferred flushes by inode. */
    private final Map<Long, Map<Long, Deferred>> dirs = new ConcurrentHashMap<>();
    private final ThreadPoolExecutor pool = new ThreadPoolExecutor(PARALLEL, PARALLEL, 30, TimeUnit.SECONDS,
            new LinkedBlockingQueue<>(), r -> {
                Thread t = new Thread(r, "partfs-part-flush");
                t.setDaemon(true);
                return t;
            });

    /** Whether a file's last flush failed with nothing written to it since (its data still buffered). */
    private final java.util.function.LongPredicate failedSinceLastWrite;

    PartFlushes(java.util.function.LongPredicate failedSinceLastWrite) {
        this.failedSinceLastWrite = failedSinceLastWrite;
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
     * which costs nothing for a file already committed and commits what was written after its
     * close; throws the first failure. A deferred flush that failed has had every attempt its
     * close would have had, so its failure is reported as it is, not tried again here: a store
     * that is down costs the rename one flush's retries, not one more per file (a part has
     * dozens), and the INSERT or merge fails as soon as a close would have failed it. The
     * data stays buffered, and the next await (a rename tried again) flushes those files anew.
     */
    void await(long dir) throws IOException {
        Map<Long, Deferred> files = dirs.get(dir);
        IOException first = null;
        for (Map.Entry<Long, Deferred> file : waitFor(dir)) {
            long ino = file.getKey();
            Deferred d = file.getValue();
            IOException failed = null;
            if (!d.again && failedSinceLastWrite.test(ino)) { // a later flush of it may have succeeded: its writer knows
                failed = failure(d.done);
                if (failed == null) {
                    failed = new IOException("the upload of inode " + ino + "'s data failed; its next flush tries again");
                }
                synchronized (files) { // the next await flushes it anew, with every attempt
                    files.replace(ino, d, new Deferred(CompletableFuture.completedFuture(null), d.flush, true));
                }
            } else {
                try {
                    d.flush.run();
                } catch (IOException e) {
                    failed = e;
                }
            }
            if (failed != null && first == null) {
                first = failed;
            }
        }
        if (first != null) {
            throw first;
        }
    }

    /** Why a finished flush failed, or null when it succeeded. */
    private static IOException failure(CompletableFuture<Void> done) {
        try {
            done.join();
            return null;
        } catch (java.util.concurrent.CompletionException e) {
            return e.getCause() instanceof IOException io ? io : new IOException("flush failed: " + e.getCause(), e.getCause());
        }
    }

    /** Waits for the directory's deferred flushes, whatever their outcome (before deleting in it). */
    void awaitQuietly(long dir) throws IOException {
        waitFor(dir);
    }

    /** Waits for every deferred flush of {@code dir}; returns them by file inode. */
    private List<Map.Entry<Long, Deferred>> waitFor(long dir) throws InterruptedIOException {
        Map<Long, Deferred> files = dirs.get(dir);
        if (files == null) {
            return List.of();
        }
        List<Map.Entry<Long, Deferred>> all;
        synchronized (files) {
            all = new ArrayList<>();
            for (Map.Entry<Long, Deferred> e : files.entrySet()) {
                all.add(Map.entry(e.getKey(), e.getValue()));
            }
        }
        for (Map.Entry<Long, Deferred> file : all) {
            try {
                file.getValue().done.get();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new InterruptedIOException("waiting for the flushes of directory " + dir);
            } catch (ExecutionException ex) {
                // the caller reads the outcome where it needs it
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
