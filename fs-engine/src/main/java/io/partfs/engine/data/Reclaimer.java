package io.partfs.engine.data;

import io.partfs.engine.meta.MetaEngine;
import java.io.Closeable;
import java.io.IOException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Deletes data nothing references any more, in the background: first the slices of unlinked
 * files (a metadata step), then the objects of freed slices; when the volume keeps a trash,
 * freed slices wait in it until {@link #expireTrash} finds their time over. Every list lives in
 * the metadata engine, so work left by a crash is picked up at the next start. One thread;
 * failures are logged and retried on the next pass.
 */
public final class Reclaimer implements Closeable {
    private static final Logger log = LoggerFactory.getLogger(Reclaimer.class);
    /** Warnings about deletions that an outage fails alike: a line in 10 s. */
    private final io.partfs.engine.LogLimit failures = new io.partfs.engine.LogLimit(java.time.Duration.ofSeconds(10));

    private final MetaEngine meta;
    private final ChunkStore chunks;
    private final java.util.concurrent.ScheduledThreadPoolExecutor worker =
            new java.util.concurrent.ScheduledThreadPoolExecutor(1, ChunkStore.daemon("partfs-reclaim"));
    private final long drainDelayMs;

    /**
     * @param drainDelay how long after the last file deletion of a burst the freed slices'
     *     objects are deleted ({@link #fileOrphaned})
     */
    public Reclaimer(MetaEngine meta, ChunkStore chunks, java.time.Duration drainDelay) {
        this.meta = meta;
        this.chunks = chunks;
        this.drainDelayMs = drainDelay.toMillis();
        worker.setRemoveOnCancelPolicy(true);
        worker.setExecuteExistingDelayedTasksAfterShutdownPolicy(false); // close() runs a waiting drain first
    }

    /** File deletions queued and not yet run. */
    private final java.util.concurrent.atomic.AtomicInteger queuedFiles = new java.util.concurrent.atomic.AtomicInteger();
    /** File deletions run since the last drain (only the worker thread touches it). */
    private int sinceDrain;
    /** The drain the last file deletion scheduled, or null (only the worker thread touches it). */
    private java.util.concurrent.ScheduledFuture<?> drainLater;
    /** Under a steady stream of deletions, drain at least this often. */
    private static final int DRAIN_EVERY = 1000;

    /**
     * Queues the data of an unlinked, closed file for deletion. Its slices' objects are deleted
     * when no other file deletion has come for the drain delay (or after {@value #DRAIN_EVERY}
     * files): removing a part's hundred files lists the freed slices once and sends one
     * DeleteObjects request, not one each. Deletions keep pace with the unlinks, so without the
     * delay the queue would empty after nearly every file.
     */
    public void fileOrphaned(long ino) {
        queuedFiles.incrementAndGet();
        submit(() -> {
            try {
                dropStaged(meta.deleteFileData(ino));
            } finally {
                boolean last = queuedFiles.decrementAndGet() == 0;
                if (++sinceDrain >= DRAIN_EVERY || (last && worker.isShutdown())) {
                    drainSlices(); // (closing: nothing can be scheduled, and close() waits for this)
                } else if (last) { // the drain waits until no deletion has come for the delay
                    if (drainLater != null) {
                        drainLater.cancel(false);
                    }
                    drainLater = schedule(this::drainSlices, drainDelayMs);
                }
            }
        });
    }

    /**
     * Slices were freed outside a file's deletion (a compaction): the objects of those on the
     * deletion list go at the next drain, which waits for the drain delay as after a deletion.
     */
    public void slicesFreed() {
        submit(() -> {
            if (drainLater == null) {
                drainLater = schedule(this::drainSlices, drainDelayMs);
            }
        });
    }

    /**
     * Slices a truncation put in the trash: their staged blocks are dropped in the background
     * when no backup can list them ({@link #dropStaged}).
     */
    public void trashed(java.util.List<long[]> slices) {
        if (!slices.isEmpty() && chunks.staging() != null) {
            submit(() -> dropStaged(slices));
        }
    }

    /**
     * Drops the staged, not yet uploaded blocks of slices put in the trash that were
     * staged after the last metadata backup was completed (with a margin for the clocks, see
     * {@link MetaBackup#unbackedSince}), and none is under way: no backup lists them, so no restore can need them. Slices
     * whose every block was dropped leave the trash.
     */
    private void dropStaged(java.util.List<long[]> trashed) throws IOException {
        if (trashed.isEmpty() || chunks.staging() == null) {
            return;
        }
        long since = MetaBackup.unbackedSince(meta.store());
        if (since != Long.MAX_VALUE) {
            // an upload under way when its block is dropped deletes the object it made itself
            meta.untrash(chunks.dropStagedTrash(trashed, since));
        }
    }

    /**
     * Resumes deletions recorded before this start (files unlinked while open, or a crash),
     * and those of crashed mounts: their sessions are removed first, so the unlinked files
     * they held open are deleted too.
     */
    public void resumePending() {
        submit(() -> {
            for (MetaEngine.Session s : meta.removeStaleSessions()) {
                log.warn("removed the session of a mount with no heartbeat for {}s (crashed, or cut off from the metadata"
                        + " engine): {}; the unlinked files it held open are deleted now",
                        MetaEngine.SESSION_TIMEOUT.toSeconds(), s.info());
            }
            int done = 0;
            for (long ino : meta.pendingFileDeletions()) {
                if (!meta.isOpen(ino)) {
                    // a file unlinked since this mount began is in the list too, its blocks maybe staged here
                    dropStaged(meta.deleteFileData(ino));
                    if (++done % DRAIN_EVERY == 0) {
                        drainSlices(); // a long list (a crash during a DROP DATABASE) does not pile up every slice first
                    }
                }
            }
            drainSlices();
        });
    }

    /** How long after a session ended its uploads not committed are deleted ({@link #sweepUncommittedUploads}). */
    private volatile java.time.Duration uploadSettle = java.time.Duration.ZERO;

    /**
     * How long a commit that an ended session sent may still be on its way to the metadata
     * engine: its uncommitted uploads are deleted only after that ({@link MetaEngine#claimUncommittedUploads}).
     */
    public void uploadSettle(java.time.Duration settle) {
        this.uploadSettle = settle;
    }

    /**
     * Deletes, in the background, the objects of slices that mounts whose session has ended
     * (unmounted, or crashed) uploaded and never committed: writes cut short by a crash between
     * their uploads and their commit, flushes that failed for good. See
     * {@link MetaEngine#claimUncommittedUploads}; a mount runs it at its start and now and then.
     */
    public void sweepUncommittedUploads() {
        submit(() -> {
            for (java.util.Map.Entry<Long, java.util.List<Long>> e : meta.claimUncommittedUploads(uploadSettle).entrySet()) {
                deleteUncommitted(e.getKey(), e.getValue());
            }
        });
    }

    /** Deletes the objects of {@code ids}, slices {@code session} uploaded and never committed; tries the rest again later on failure. */
    private void deleteUncommitted(long session, java.util.List<Long> ids) {
        int objects = 0;
        for (int i = 0; i < ids.size(); i++) {
            try {
                objects += chunks.deleteSliceObjects(ids.get(i));
                meta.uploadsSettled(java.util.List.of(ids.get(i))); // its note, now this mount's, is dropped
            } catch (IOException | RuntimeException e) {
                java.util.List<Long> rest = java.util.List.copyOf(ids.subList(i, ids.size()));
                failures.warn(log, "cannot delete the objects of {} slices that ended session {} uploaded and never committed,"
                        + " trying again in a minute: {}", rest.size(), session, e.toString());
                schedule(() -> deleteUncommitted(session, rest), TimeUnit.MINUTES.toMillis(1));
                return;
            }
        }
        if (!ids.isEmpty()) {
            log.info("deleted {} objects of {} slices that session {} uploaded and never committed (it ended, or crashed, before"
                    + " their commit)", objects, ids.size(), session);
        }
    }

    /**
     * Moves the slices whose trash time is over to the deletion list and deletes their objects,
     * in the background; a mount runs it now and then ({@code PartFs}).
     */
    public void expireTrash() {
        submit(() -> {
            long moved = meta.expireTrash();
            if (moved > 0) {
                log.info("trash: {} slices freed more than {} hours ago are deleted now", moved, meta.trashHours());
                drainSlices();
            }
        });
    }

    /**
     * Tells the reclaimer how to see that the local disk holding the objects has no room (an
     * embedded volume): then every drain, and {@link #relieveFullDisk}, also empties the trash,
     * oldest hour first, until there is room or the trash is empty. Its freed objects would
     * otherwise keep the disk full for the trash's hours, and deleting files would make no room.
     */
    public void whenDiskFull(java.util.function.BooleanSupplier full) {
        this.diskFull = full;
    }

    private volatile java.util.function.BooleanSupplier diskFull = () -> false;

    /** Empties the trash, oldest hour first, in the background while the local disk is full (see {@link #whenDiskFull}). */
    public void relieveFullDisk() {
        submit(this::emptyTrashWhileFull);
    }

    private void emptyTrashWhileFull() throws IOException {
        while (diskFull.getAsBoolean()) {
            long moved = meta.expireOldestTrash();
            if (moved == 0) {
                return;
            }
            log.warn("trash: the local disk holding the objects is full: {} slices of the oldest hour in the trash are"
                    + " deleted now, before their {} hours are over", moved, meta.trashHours());
            deleteFreedSlices();
        }
    }

    /**
     * Deletes the objects of every freed slice, then, on a full local disk, those the trash
     * holds; the worker thread's own, so no drain runs twice at once.
     */
    private void drainSlices() throws IOException {
        if (drainLater != null) {
            drainLater.cancel(false); // a no-op when it is the drain running now
            drainLater = null;
        }
        sinceDrain = 0;
        deleteFreedSlices();
        emptyTrashWhileFull();
    }

    private void deleteFreedSlices() throws IOException {
        while (chunks.reclaimSlices(1000) > 0) {
            // keep going until the list is empty
        }
    }

    /** A drain waiting for its delay runs now. */
    private void drainWaiting() throws IOException {
        if (drainLater != null) {
            drainSlices();
        }
    }

    private interface Work {
        void run() throws IOException;
    }

    private Future<?> submit(Work w) {
        return schedule(w, 0);
    }

    private java.util.concurrent.ScheduledFuture<?> schedule(Work w, long delayMs) {
        return worker.schedule(() -> {
            try {
                w.run();
            } catch (IOException | RuntimeException | Error e) {
                // an outage fails every deletion alike: a line in 10 s, with the stack trace at debug level
                failures.warn(log, "background deletion failed, will retry at the next deletion or start: {}", e.toString());
                log.debug("background deletion failed", e);
            }
        }, delayMs, TimeUnit.MILLISECONDS);
    }

    /**
     * Waits until all deletions queued so far are done, a drain waiting for its delay included
     * (run now); for tests and orderly shutdown.
     */
    public void awaitIdle() throws IOException {
        try {
            submit(this::drainWaiting).get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException("interrupted while waiting for deletions");
        } catch (java.util.concurrent.ExecutionException e) {
            throw new IOException(e.getCause());
        }
    }

    /** Runs a drain still waiting for its delay at once, then stops once the queue is done. */
    @Override
    public void close() {
        if (worker.isShutdown()) {
            return;
        }
        submit(this::drainWaiting);
        worker.shutdown();
        try {
            if (!worker.awaitTermination(30, TimeUnit.SECONDS)) {
                worker.shutdownNow();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
