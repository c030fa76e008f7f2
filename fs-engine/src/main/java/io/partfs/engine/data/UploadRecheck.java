package io.partfs.engine.data;

import io.partfs.engine.meta.MetaEngine.CommittedSlice;
import io.partfs.engine.object.ObjectStore;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Closes the gap write-back leaves on a shared volume: a block staged here is uploaded after its
 * slice's commit, and meanwhile another mount may free that slice and delete its objects (none
 * there yet), so the upload would store an object no file names. After the upload of a block of
 * a committed slice this asks the metadata whether the slice was freed past the trash
 * ({@link io.partfs.engine.meta.MetaEngine#releasedSlices}); if so it deletes what it uploaded.
 *
 * <p>A block uploaded before its commit was confirmed is asked about once the confirmation comes
 * ({@link #committed}): a slice can only be freed after its commit applied, and the confirmation
 * can come after that. A slice whose commit never comes (a flush that failed for good) is
 * forgotten after {@value #FORGET_UNCOMMITTED_MS} ms; its objects are gc's.
 *
 * <p>Questions are asked in batches, {@value #DELAY_MS} ms after the first upload of a batch, on
 * {@code timer}; a failed question is asked again later. An upload to ask about is written down
 * first ({@link UploadJournal}, when given one) until it was asked about: a process killed before
 * leaves it to the next start ({@link #uploadedEarlier}). Thread-safe: the maps are guarded by
 * this.
 */
final class UploadRecheck {
    private static final Logger log = LoggerFactory.getLogger(UploadRecheck.class);
    static final long DELAY_MS = 500;
    static final long RETRY_MS = 5_000;
    static final long FORGET_UNCOMMITTED_MS = 3_600_000;

    /** What the metadata says of committed slices: those freed past the trash. */
    interface Released {
        Set<Long> of(List<CommittedSlice> slices) throws IOException;
    }

    /** A committed slice and the keys of its blocks. */
    private record Confirmed(CommittedSlice slice, List<String> keys) {
    }

    /** Blocks of a slice uploaded before its commit was confirmed, and when the first one was. */
    private record Early(List<String> keys, long sinceNanos) {
    }

    private final ObjectStore objects;
    private final BlockCache cache;
    /** Whether a block is still staged or being uploaded: its slice's confirmation is kept for it. */
    private final Predicate<String> staged;
    private final ScheduledExecutorService timer;
    private final io.partfs.engine.LogLimit failures = new io.partfs.engine.LogLimit(java.time.Duration.ofMinutes(1));
    private volatile Released released;

    /** Committed slices with blocks still staged here. */
    private final Map<Long, Confirmed> confirmed = new HashMap<>();
    /** Slices with blocks uploaded before their commit was confirmed. */
    private final Map<Long, Early> early = new HashMap<>();
    /** Committed slices with blocks uploaded, to ask about, and those blocks. */
    private Map<Long, Confirmed> due = new HashMap<>();
    private boolean scheduled;
    private long deleted;

    /** Where the uploads still to ask about are written down, so a kill does not lose them; or null. */
    private final UploadJournal journal;

    UploadRecheck(ObjectStore objects, BlockCache cache, Predicate<String> staged, ScheduledExecutorService timer) {
        this(objects, cache, staged, timer, null);
    }

    UploadRecheck(ObjectStore objects, BlockCache cache, Predicate<String> staged, ScheduledExecutorService timer,
                  UploadJournal journal) {
        this.objects = objects;
        this.cache = cache;
        this.staged = staged;
        this.timer = timer;
        this.journal = journal;
    }

    /** Starts asking {@code released}; until then (and without it) uploads are not asked about. */
    void askWith(Released released) {
        this.released = released;
    }

    /**
     * Slice {@code slice}, whose blocks' keys are {@code keys} (or some of them: those named
     * again are added), was committed: the metadata confirmed it.
     */
    synchronized void committed(CommittedSlice slice, List<String> keys) {
        if (released == null) {
            return;
        }
        Early e = early.remove(slice.id());
        if (e != null) {
            dueFor(slice, e.keys());
        }
        for (String k : keys) {
            if (staged.test(k)) {
                confirmed.merge(slice.id(), new Confirmed(slice, keys), (had, now) -> {
                    List<String> all = new ArrayList<>(had.keys());
                    now.keys().stream().filter(x -> !all.contains(x)).forEach(all::add);
                    return new Confirmed(had.slice(), all);
                });
                return;
            }
        }
    }

    /**
     * Runs {@code note} unless the commit of {@code key}'s slice was confirmed ({@link
     * #committed}) while the block is staged or being uploaded. Under this lock, so a
     * confirmation comes either before the note (none is made) or after it (then the caller's
     * settle of the committed slice drops the note). Nothing runs before {@link #askWith}.
     */
    synchronized void unlessCommitted(String key, Runnable note) {
        long id = ChunkStore.sliceIdOf(key);
        if (released != null && !confirmed.containsKey(id) && !due.containsKey(id)) {
            note.run();
        }
    }

    /** Block {@code key} was uploaded (and is no longer staged). */
    synchronized void uploaded(String key) {
        if (released == null) {
            return;
        }
        long id = ChunkStore.sliceIdOf(key);
        Confirmed c = confirmed.get(id);
        if (c != null) {
            dueFor(c.slice(), List.of(key));
            return;
        }
        early.computeIfAbsent(id, x -> new Early(new ArrayList<>(), System.nanoTime())).keys().add(key);
        if (early.size() % 4096 == 0) {
            forgetOldEarly();
        }
    }

    private void forgetOldEarly() {
        long before = System.nanoTime() - TimeUnit.MILLISECONDS.toNanos(FORGET_UNCOMMITTED_MS);
        early.values().removeIf(e -> e.sinceNanos() - before < 0);
    }

    /**
     * Uploads an earlier process made and did not ask about before it stopped ({@link
     * UploadJournal}): asked about as this process's own.
     */
    synchronized void uploadedEarlier(List<UploadJournal.Entry> uploads) {
        if (released == null) {
            return;
        }
        for (UploadJournal.Entry e : uploads) {
            dueFor(e.slice(), List.of(e.key()));
        }
    }

    /** This mount freed the slice of {@code key}: its objects are deleted by this mount's own reclaimer. */
    synchronized void forget(String key) {
        long id = ChunkStore.sliceIdOf(key);
        confirmed.remove(id);
        early.remove(id);
        Confirmed d = due.remove(id);
        if (d != null && journal != null) {
            journal.answered(d.keys());
        }
    }

    private void dueFor(CommittedSlice slice, List<String> keys) {
        if (journal != null) {
            for (String k : keys) {
                journal.add(k, slice); // before the question: a kill meanwhile leaves it to the next start
            }
        }
        due.computeIfAbsent(slice.id(), x -> new Confirmed(slice, new ArrayList<>())).keys().addAll(keys);
        if (!scheduled) {
            scheduled = true;
            schedule(DELAY_MS);
        }
    }

    private void schedule(long delayMs) {
        try {
            timer.schedule(this::runScheduled, delayMs, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // closing: what was due is asked by the drain (askNow), or not at all
        }
    }

    private void runScheduled() {
        synchronized (this) {
            scheduled = false;
        }
        try {
            askNow();
        } catch (IOException | RuntimeException e) {
            failures.warn(log, "cannot ask the metadata whether slices uploaded from write-back staging were freed meanwhile,"
                    + " asking again in {} s: {}", RETRY_MS / 1000, e.toString());
            synchronized (this) {
                if (!scheduled) {
                    scheduled = true;
                    schedule(RETRY_MS);
                }
            }
        }
    }

    /**
     * Asks about every slice due now and deletes the uploads of those freed meanwhile; on failure
     * they stay due. Returns how many objects it deleted.
     */
    int askNow() throws IOException {
        Map<Long, Confirmed> asking;
        Released ask;
        synchronized (this) {
            asking = due;
            due = new HashMap<>();
            ask = released;
            forgetOldEarly();
        }
        if (asking.isEmpty() || ask == null) {
            return 0;
        }
        Set<Long> freed;
        List<String> keys = new ArrayList<>();
        try {
            freed = ask.of(asking.values().stream().map(Confirmed::slice).toList());
            for (long id : freed) {
                keys.addAll(asking.get(id).keys());
            }
            objects.deleteAll(keys);
        } catch (IOException | RuntimeException e) {
            synchronized (this) { // asked again later (asking or deleting twice is harmless)
                asking.forEach((id, c) -> dueFor(c.slice(), c.keys()));
            }
            throw e;
        }
        if (!keys.isEmpty()) {
            for (String k : keys) {
                cache.remove(k);
            }
            log.info("deleted {} object(s) of {} slice(s) uploaded from write-back staging after another mount had freed"
                    + " them and deleted their objects", keys.size(), freed.size());
        }
        if (journal != null) {
            List<String> asked = new ArrayList<>();
            asking.values().forEach(c -> asked.addAll(c.keys()));
            journal.answered(asked);
        }
        synchronized (this) {
            deleted += keys.size();
            // slices with no block staged any more (uploaded and asked about, or set aside) are done with
            confirmed.entrySet().removeIf(c -> !due.containsKey(c.getKey()) && c.getValue().keys().stream().noneMatch(staged));
        }
        return keys.size();
    }

    /** Objects deleted as uploaded after their slice was freed; for tests and metrics. */
    synchronized long deleted() {
        return deleted;
    }

    /** Slices remembered (confirmed with blocks staged, uploaded early, due); for tests. */
    synchronized int remembered() {
        return confirmed.size() + early.size() + due.size();
    }
}
