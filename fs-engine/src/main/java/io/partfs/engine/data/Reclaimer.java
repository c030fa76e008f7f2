package io.partfs.engine.data;

import io.partfs.engine.meta.MetaEngine;
import java.io.Closeable;
import java.io.IOException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
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

    private final MetaEngine meta;
    private final ChunkStore chunks;
    private final ExecutorService worker = Executors.newSingleThreadExecutor(ChunkStore.daemon("partfs-reclaim"));

    public Reclaimer(MetaEngine meta, ChunkStore chunks) {
        this.meta = meta;
        this.chunks = chunks;
    }

    /** File deletions queued and not yet run: the last of a burst drains the freed slices. */
    private final java.util.concurrent.atomic.AtomicInteger queuedFiles = new java.util.concurrent.atomic.AtomicInteger();
    /** File deletions run since the last drain (only the worker thread touches it). */
    private int sinceDrain;
    /** Under a steady stream of deletions, drain at least this often. */
    private static final int DRAIN_EVERY = 256;

    /**
     * Queues the data of an unlinked, closed file for deletion. Its slices' objects are deleted
     * once no other file deletion is queued behind it (or after {@value #DRAIN_EVERY}):
     * removing a part's hundred files lists the freed slices once, not a hundred times.
     */
    public void fileOrphaned(long ino) {
        queuedFiles.incrementAndGet();
        submit(() -> {
            try {
                dropStaged(meta.deleteFileData(ino));
            } finally {
                if (queuedFiles.decrementAndGet() == 0 || ++sinceDrain >= DRAIN_EVERY) {
                    sinceDrain = 0;
                    drainSlices();
                }
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

    /** Clock difference allowed for between this machine and the one that made the last backup. */
    private static final long CLOCK_MARGIN_MS = java.time.Duration.ofMinutes(1).toMillis();

    /**
     * Drops the staged, not yet uploaded blocks of slices put in the trash that were
     * staged after the last metadata backup was completed (with {@link #CLOCK_MARGIN_MS} to
     * spare), and none is under way: no backup lists them, so no restore can need them. Slices
     * whose every block was dropped leave the trash.
     */
    private void dropStaged(java.util.List<long[]> trashed) throws IOException {
        if (trashed.isEmpty() || chunks.staging() == null) {
            return;
        }
        long since = MetaBackup.unbackedSince(meta.store());
        if (since != Long.MAX_VALUE) {
            // an upload under way when its block is dropped deletes the object it made itself
            meta.untrash(chunks.dropStagedTrash(trashed, since == Long.MIN_VALUE ? since : since + CLOCK_MARGIN_MS));
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
                    meta.deleteFileData(ino);
                    if (++done % DRAIN_EVERY == 0) {
                        drainSlices(); // a long list (a crash during a DROP DATABASE) does not pile up every slice first
                    }
                }
            }
            drainSlices();
        });
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

    private void drainSlices() throws IOException {
        while (chunks.reclaimSlices(1000) > 0) {
            // keep going until the list is empty
        }
    }

    private interface Work {
        void run() throws IOException;
    }

    private Future<?> submit(Work w) {
        return worker.submit(() -> {
            try {
                w.run();
            } catch (IOException | RuntimeException | Error e) {
                log.warn("background deletion failed, will retry at the next deletion or start: {}", e.toString(), e);
            }
        });
    }

    /** Waits until all deletions queued so far are done; for tests and orderly shutdown. */
    public void awaitIdle() throws IOException {
        try {
            submit(() -> { }).get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException("interrupted while waiting for deletions");
        } catch (java.util.concurrent.ExecutionException e) {
            throw new IOException(e.getCause());
        }
    }

    @Override
    public void close() {
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
