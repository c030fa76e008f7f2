package io.partfs.engine.data;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.meta.MetaEngine.CommittedSlice;
import io.partfs.engine.object.LocalObjectStore;
import io.partfs.engine.testing.Poll;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The bookkeeping of {@link UploadRecheck} on a real local object store. What the metadata says
 * of a slice is a set the test fills (the question itself is {@code MetaEngine#releasedSlices},
 * tested in the metadata contract; the whole gap on a shared volume in {@code PartFsContract}).
 */
class UploadRecheckTest {
    private static final CommittedSlice SLICE = new CommittedSlice(42, 10, 7, 0);
    private static final List<String> KEYS = List.of("v/chunks/0/0/42_0_5", "v/chunks/0/0/42_1_5");

    @TempDir
    Path tmp;
    io.partfs.engine.testing.CountingObjectStore objects;
    ScheduledThreadPoolExecutor timer;
    /** Keys still staged, as the staging area would say. */
    final Set<String> staged = ConcurrentHashMap.newKeySet();
    /** Slices the metadata calls freed past the trash; null: the metadata does not answer. */
    volatile Set<Long> freed = Set.of();
    final List<List<CommittedSlice>> asked = new ArrayList<>();
    UploadRecheck recheck;

    @BeforeEach
    void setUp() throws IOException {
        objects = new io.partfs.engine.testing.CountingObjectStore(new LocalObjectStore(tmp.resolve("objects")));
        timer = new ScheduledThreadPoolExecutor(1);
        recheck = new UploadRecheck(objects, BlockCache.disabled(), staged::contains, timer);
        recheck.askWith(slices -> {
            synchronized (asked) {
                asked.add(slices);
            }
            if (freed == null) {
                throw new IOException("connection refused");
            }
            return freed;
        });
        staged.addAll(KEYS);
    }

    @AfterEach
    void tearDown() throws IOException {
        timer.shutdownNow();
        objects.close();
    }

    /** Stores block {@code key} as an upload from staging does, then tells the recheck. */
    private void upload(String key) throws IOException {
        objects.put(key, new byte[5]);
        staged.remove(key);
        recheck.uploaded(key);
    }

    private boolean stored(String key) {
        try {
            return objects.listAll(key).stream().anyMatch(o -> o.key().equals(key));
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Test
    void aBlockUploadedAfterItsSliceWasFreedIsDeletedAndTheSliceForgottenOnceAllAreAsked() throws IOException {
        recheck.committed(SLICE, KEYS);
        freed = Set.of(42L);
        upload(KEYS.get(0));
        assertEquals(1, recheck.askNow());
        assertFalse(stored(KEYS.get(0)), "deleted again");
        assertEquals(1, recheck.remembered(), "its other block is still staged");

        upload(KEYS.get(1));
        assertEquals(1, recheck.askNow());
        assertFalse(stored(KEYS.get(1)));
        assertEquals(0, recheck.remembered());
        assertEquals(2, recheck.deleted());
    }

    /**
     * An upload to ask about is written down until it was asked about; a process killed before
     * (here: the metadata never answered it) leaves it to the next, which asks and deletes.
     */
    @Test
    void anUploadIsWrittenDownUntilAskedAboutAndTheNextProcessAsksAboutOneLeftBehind() throws IOException {
        Path dir = tmp.resolve("staging");
        java.nio.file.Files.createDirectories(dir);
        UploadJournal journal = new UploadJournal(dir);
        UploadRecheck dying = new UploadRecheck(objects, BlockCache.disabled(), staged::contains, timer, journal);
        dying.askWith(slices -> {
            throw new IOException("connection refused"); // nothing answers before the kill
        });
        dying.committed(SLICE, KEYS);
        objects.put(KEYS.get(0), new byte[5]);
        staged.remove(KEYS.get(0));
        dying.uploaded(KEYS.get(0));
        assertThrows(IOException.class, dying::askNow);
        timer.shutdownNow(); // killed: its retries never run
        journal.close();

        freed = Set.of(42L);
        ScheduledThreadPoolExecutor nextTimer = new ScheduledThreadPoolExecutor(1);
        try (UploadJournal next = new UploadJournal(dir)) {
            assertEquals(List.of(new UploadJournal.Entry(KEYS.get(0), SLICE)), next.unanswered(), "the block and its slice");
            UploadRecheck restarted = new UploadRecheck(objects, BlockCache.disabled(), staged::contains, nextTimer, next);
            restarted.askWith(slices -> freed);
            restarted.uploadedEarlier(next.unanswered());
            assertEquals(1, restarted.askNow());
            assertFalse(stored(KEYS.get(0)), "deleted by the next process");
            assertEquals(List.of(), next.unanswered());
        } finally {
            nextTimer.shutdownNow();
        }
        assertFalse(java.nio.file.Files.exists(dir.resolve(UploadJournal.FILE)), "emptied once all were asked about");
    }

    /** A journal holding mostly answered lines is written again; a damaged line, or one a kill cut short, is not read. */
    @Test
    void theJournalIsWrittenAgainWhenMostOfItIsAnsweredAndIgnoresACutLine() throws IOException {
        Path dir = tmp.resolve("staging");
        java.nio.file.Files.createDirectories(dir);
        int n = UploadJournal.SLACK_LINES + 100;
        List<String> keys = new ArrayList<>();
        try (UploadJournal j = new UploadJournal(dir)) {
            for (int i = 0; i < n; i++) {
                keys.add("v/chunks/0/0/" + (1000 + i) + "_0_5");
                j.add(keys.get(i), new CommittedSlice(1000 + i, 5, 7, 0));
            }
            assertEquals(n, j.lines());
            j.answered(keys.subList(10, n));
            assertEquals(10, j.lines(), "written again with the 10 left");
        }
        java.nio.file.Files.write(dir.resolve(UploadJournal.FILE), new byte[] {'v', (byte) 0xe9, ' ', '5', '\n'},
                java.nio.file.StandardOpenOption.APPEND); // damaged
        java.nio.file.Files.writeString(dir.resolve(UploadJournal.FILE), "v/chunks/0/0/9_0_5 5 7", java.nio.file.StandardOpenOption.APPEND);
        try (UploadJournal j = new UploadJournal(dir)) {
            assertEquals(keys.subList(0, 10), j.unanswered().stream().map(UploadJournal.Entry::key).toList());
        }
    }

    @Test
    void aSliceStillListedKeepsItsObjects() throws IOException {
        recheck.committed(SLICE, KEYS);
        upload(KEYS.get(0));
        upload(KEYS.get(1));
        assertEquals(0, recheck.askNow());
        assertTrue(stored(KEYS.get(0)) && stored(KEYS.get(1)));
        assertEquals(1, asked.size(), "both blocks in one question");
        assertEquals(0, recheck.remembered());
    }

    @Test
    void aBlockUploadedBeforeTheCommitWasConfirmedIsAskedAboutOnlyOnceItIs() throws IOException {
        freed = Set.of(42L);
        upload(KEYS.get(0));
        assertEquals(0, recheck.askNow());
        assertTrue(asked.isEmpty(), "a slice not committed yet is not asked about: unknown is not freed");
        assertTrue(stored(KEYS.get(0)));

        recheck.committed(SLICE, KEYS);
        assertEquals(1, recheck.askNow());
        assertFalse(stored(KEYS.get(0)));
    }

    @Test
    void aQuestionTheMetadataDoesNotAnswerIsAskedAgain() throws IOException {
        askedAgainAfterAFailure(() -> freed = null, () -> freed = Set.of(42L));
    }

    @Test
    void aDeletionTheStoreRefusesIsTriedAgainWithTheNextQuestion() throws IOException {
        freed = Set.of(42L);
        askedAgainAfterAFailure(() -> objects.failDeletes(true), () -> objects.failDeletes(false));
    }

    /** An upload of a freed slice whose question fails while {@code breakIt} holds is deleted by the next one after {@code mendIt}. */
    private void askedAgainAfterAFailure(Runnable breakIt, Runnable mendIt) throws IOException {
        recheck.committed(SLICE, KEYS);
        upload(KEYS.get(0));
        breakIt.run();
        assertThrows(IOException.class, recheck::askNow);
        assertTrue(stored(KEYS.get(0)));
        mendIt.run();
        assertEquals(1, recheck.askNow());
        assertFalse(stored(KEYS.get(0)));
    }

    @Test
    void anUploadIsAskedAboutInTheBackground() throws IOException {
        recheck.committed(SLICE, KEYS);
        freed = Set.of(42L);
        upload(KEYS.get(0));
        Poll.until(() -> !stored(KEYS.get(0)), Duration.ofSeconds(30), "the upload deleted without an askNow");
    }

    @Test
    void aSliceWhoseBlocksLeftStagingWithoutAnUploadIsForgottenAtTheNextQuestion() throws IOException {
        recheck.committed(SLICE, KEYS);
        staged.removeAll(KEYS); // set aside as damaged, say: never uploaded
        String key = "v/chunks/0/0/43_0_5";
        staged.add(key);
        recheck.committed(new CommittedSlice(43, 5, 7, 1), List.of(key));
        upload(key);
        assertEquals(0, recheck.askNow());
        assertEquals(0, recheck.remembered());
    }

    @Test
    void aSliceThisMountFreedIsForgottenAndNotAskedAbout() throws IOException {
        recheck.committed(SLICE, KEYS);
        freed = Set.of(42L);
        upload(KEYS.get(0));
        recheck.forget(KEYS.get(0)); // its own reclaimer deletes the objects
        assertEquals(0, recheck.remembered());
        assertEquals(0, recheck.askNow());
        assertTrue(asked.isEmpty());
    }
}
