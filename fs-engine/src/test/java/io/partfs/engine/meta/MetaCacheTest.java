package io.partfs.engine.meta;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.Attr;
import io.partfs.engine.DirEntry;
import io.partfs.engine.FileType;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The cache's consistency rule, interleaving by interleaving: transactions and reads of one
 * process overlapping in every order the engine's threads can produce, each step driven by hand
 * ({@link MetaEngineContract} covers the same through both real stores).
 */
class MetaCacheTest {
    private final MetaCache cache = new MetaCache(Long.MAX_VALUE);

    private static Attr file(long ino, long size) {
        return new Attr(ino, FileType.FILE, 0644, 0, 0, 1, size, 0, 0, 0, 0, 0, 1);
    }

    private static Attr dir(long ino, int nlink) {
        return new Attr(ino, FileType.DIRECTORY, 0755, 0, 0, nlink, 4096, 0, 0, 0, 0, 1, 0);
    }

    /** What a transaction that wrote {@code attrs} noted. */
    private static MetaCache.TxnNotes wrote(Attr... attrs) {
        MetaCache.TxnNotes n = new MetaCache.TxnNotes();
        for (Attr a : attrs) {
            n.written().put(a.ino(), a);
        }
        return n;
    }

    /** What a transaction that created {@code name} (inode {@code ino}) in directory {@code d} noted. */
    private static MetaCache.TxnNotes created(long d, String name, long ino) {
        MetaCache.TxnNotes n = wrote(dir(d, 2), file(ino, 0));
        n.entries().add(new MetaCache.EntryChange(d, name, new DirEntry(name, ino, FileType.FILE)));
        n.created().add(ino);
        return n;
    }

    private static MetaCache.TxnNotes removed(long d, String name, long ino) {
        MetaCache.TxnNotes n = wrote(dir(d, 2));
        n.written().put(ino, null);
        n.entries().add(new MetaCache.EntryChange(d, name, null));
        return n;
    }

    @Test
    void aTransactionThatRanAloneKeepsWhatItWroteAndOverlappingOnesDropIt() {
        cache.end(wrote(file(10, 1)), true, cache.begin());
        assertEquals(1, cache.attr(10).size());
        long t1 = cache.begin();
        long t2 = cache.begin();
        cache.end(wrote(file(11, 7)), true, t2);
        cache.end(wrote(file(10, 5)), true, t1);
        assertEquals(7, cache.attr(11).size(), "nothing began or ended while the later one ran");
        assertNull(cache.attr(10), "another transaction ended meanwhile: which reached the store last is unknown");
    }

    @Test
    void aFailedTransactionDropsWhatItMeantToWrite() {
        cache.end(wrote(file(10, 1)), true, cache.begin());
        cache.end(wrote(file(10, 5)), false, cache.begin());
        assertNull(cache.attr(10));
    }

    @Test
    void aReadInstallsNothingWhenATransactionBeganOrEndedWhileItRan() {
        long read = cache.generation();
        cache.begin(); // still running
        cache.install(read, List.of(file(10, 1)), 1L, Map.of());
        assertNull(cache.attr(10));
        assertNull(cache.dir(1));
        cache.install(cache.generation(), List.of(file(10, 1)), 1L, Map.of());
        assertEquals(1, cache.attr(10).size());
        assertNotNull(cache.dir(1));
    }

    @Test
    void listingsArePatchedByOverlappingTransactionsOnOtherNamesAndDroppedOnTheSameName() {
        cache.install(cache.generation(), List.of(dir(1, 2)), 1L, Map.of());
        long t1 = cache.begin();
        long t2 = cache.begin();
        cache.end(created(1, "a", 10), true, t2);
        cache.end(created(1, "b", 11), true, t1);
        assertEquals(Map.of("a", new DirEntry("a", 10, FileType.FILE), "b", new DirEntry("b", 11, FileType.FILE)), cache.dir(1));
        assertNull(cache.attr(1), "both wrote the directory's attributes: read them again");
        assertEquals(0, cache.attr(10).size(), "each file's own attributes were written by one transaction");
        assertEquals(Map.of(), cache.xattrs(10));

        // Creating 'c', and removing it in a transaction that ends first: whichever order they
        // reached the store in, patching in end order could bring 'c' back.
        long create = cache.begin();
        long remove = cache.begin();
        cache.end(removed(1, "c", 12), true, remove);
        cache.end(created(1, "c", 12), true, create);
        assertNull(cache.dir(1), "the same name changed twice at once: listed again");
    }

    @Test
    void aDirectoryEmptiedWholeMeanwhileDropsTheListing() {
        cache.install(cache.generation(), List.of(), 1L, Map.of());
        long t = cache.begin();
        MetaCache.TxnNotes wipe = wrote(dir(1, 2));
        wipe.entries().add(new MetaCache.EntryChange(1, null, null));
        cache.end(wipe, true, cache.begin());
        cache.install(cache.generation(), List.of(), 1L, Map.of());
        cache.end(created(1, "a", 10), true, t);
        assertNull(cache.dir(1));
    }

    @Test
    void aTransactionOlderThanTheRememberedNamesPatchesNoListing() {
        cache.install(cache.generation(), List.of(), 1L, Map.of());
        long old = cache.begin();
        for (int i = 0; i <= MetaCache.MAX_ENDED; i++) { // one more name than remembered, in another directory
            cache.end(created(2, "f" + i, 1000 + i), true, cache.begin());
        }
        cache.end(created(1, "a", 10), true, old);
        assertNull(cache.dir(1), "whether a forgotten transaction changed 'a' is unknown");
    }

    @Test
    void clearingRefusesReadsBegunBefore() {
        long read = cache.generation();
        cache.clear();
        cache.install(read, List.of(file(10, 1)), 1L, Map.of());
        cache.installXattrs(read, 10, Map.of());
        assertNull(cache.attr(10));
        assertNull(cache.dir(1));
        assertNull(cache.xattrs(10));
    }

    /** What the deletion of unreachable inode {@code ino} notes: the inode and its extended attributes gone. */
    private static MetaCache.TxnNotes deleted(long ino) {
        MetaCache.TxnNotes n = new MetaCache.TxnNotes();
        n.written().put(ino, null);
        n.xattrs().add(ino);
        return n;
    }

    /** Runs the deletion of unreachable inode {@code ino} as a single-inode transaction, start to end. */
    private boolean endDeletion(long ino, MetaCache.TxnNotes notes) {
        return cache.endSingle(ino, notes, true, cache.beginSingle());
    }

    @Test
    void deletionsOfUnreachableInodesLeaveTheTransactionsAndReadsAroundThemAlone() {
        cache.install(cache.generation(), List.of(file(20, 1), file(21, 1), file(23, 1)), null, null);
        long t = cache.begin();
        assertEquals(true, endDeletion(23, deleted(23)));
        assertNull(cache.attr(23));
        cache.end(wrote(file(10, 5)), true, t);
        assertEquals(5, cache.attr(10).size(), "a deletion of another inode ended meanwhile: still alone");

        long read = cache.generation();
        endDeletion(20, deleted(20));
        cache.install(read, List.of(file(11, 3), file(20, 1)), null, null);
        assertEquals(3, cache.attr(11).size(), "a read of other inodes installs");
        assertNull(cache.attr(20), "but not the deleted inode, read before it went");
        cache.installXattrs(read, 20, Map.of());
        assertNull(cache.xattrs(20));

        long writer = cache.begin(); // a transaction writing the inode a deletion is about to drop
        endDeletion(21, deleted(21));
        cache.end(wrote(file(21, 9)), true, writer);
        assertNull(cache.attr(21), "begun before the deletion ended: it may have written what is now gone");
        cache.install(cache.generation(), List.of(file(22, 1)), null, null);
        assertEquals(1, cache.attr(22).size(), "readers beginning after the deletion install again");
    }

    @Test
    void aDeletionThatChangedMoreThanItsInodeClearsEverything() {
        cache.install(cache.generation(), List.of(file(10, 1)), 1L, Map.of());
        MetaCache.TxnNotes more = deleted(20);
        more.entries().add(new MetaCache.EntryChange(1, "x", null));
        assertEquals(false, endDeletion(20, more));
        assertNull(cache.attr(10));
        assertNull(cache.dir(1));
        MetaCache.TxnNotes other = deleted(20);
        other.written().put(10L, file(10, 4));
        cache.install(cache.generation(), List.of(file(10, 1)), null, null);
        assertEquals(false, endDeletion(20, other), "another inode written");
        assertNull(cache.attr(10));
    }

    @Test
    void readsOlderThanTheRememberedDeletionsInstallNoAttributes() {
        long read = cache.generation();
        cache.begin(); // so that the deletions below end after the read began
        long after = cache.generation();
        for (int i = 0; i <= MetaCache.MAX_ENDED; i++) {
            endDeletion(1000 + i, deleted(1000 + i));
        }
        cache.install(read, List.of(file(10, 1)), null, null);
        assertNull(cache.attr(10), "the read began before the generation (" + read + ") ended");
        cache.install(after, List.of(file(10, 1)), null, null);
        assertNull(cache.attr(10), "whether a forgotten deletion was of inode 10 is unknown");
        cache.begin();
        cache.install(cache.generation(), List.of(file(10, 1)), null, null);
        assertEquals(1, cache.attr(10).size());
    }

    @Test
    void writeCommitsOfOtherInodesLeaveEachOtherAndTheTransactionsAroundThemAlone() {
        long general = cache.begin();
        long a = cache.beginSingle();
        long b = cache.beginSingle();
        assertEquals(true, cache.endSingle(20, wrote(file(20, 5)), true, b));
        assertEquals(true, cache.endSingle(21, wrote(file(21, 6)), true, a));
        cache.end(wrote(file(10, 7)), true, general);
        assertEquals(5, cache.attr(20).size());
        assertEquals(6, cache.attr(21).size(), "another inode's commit ended meanwhile: kept");
        assertEquals(7, cache.attr(10).size(), "commits of other inodes do not count against the general rule");

        long read = cache.generation();
        cache.endSingle(20, wrote(file(20, 8)), true, cache.beginSingle());
        cache.install(read, List.of(file(20, 5), file(21, 6), file(22, 1)), null, null);
        assertEquals(8, cache.attr(20).size(), "the read began before that commit ended: it installs nothing of its inode");
        assertEquals(1, cache.attr(22).size(), "but the rest of what it read");
    }

    @Test
    void writeCommitsOfOneInodeKeepWhatTheyWroteOnlyInTurn() {
        cache.endSingle(20, wrote(file(20, 1)), true, cache.beginSingle());
        cache.endSingle(20, wrote(file(20, 2)), true, cache.beginSingle());
        assertEquals(2, cache.attr(20).size(), "one after the other");
        long first = cache.beginSingle();
        long second = cache.beginSingle();
        cache.endSingle(20, wrote(file(20, 4)), true, second);
        assertEquals(4, cache.attr(20).size());
        cache.endSingle(20, wrote(file(20, 3)), true, first);
        assertNull(cache.attr(20), "two commits of one file at once: which reached the store last is unknown");
        cache.install(cache.generation(), List.of(file(20, 4)), null, null);
        assertEquals(4, cache.attr(20).size(), "a read begun after both installs");
    }

    @Test
    void aWriteCommitOverlappingTheGeneralRuleOnItsInodeIsDroppedBySide() {
        long commit = cache.beginSingle();
        long link = cache.begin(); // e.g. a hard link to the same file, writing its link count
        cache.end(wrote(file(20, 1)), true, link);
        cache.endSingle(20, wrote(file(20, 9)), true, commit);
        assertNull(cache.attr(20), "a transaction of the general rule began while the commit ran");

        long unlink = cache.begin();
        long commit2 = cache.beginSingle();
        cache.endSingle(20, wrote(file(20, 9)), true, commit2);
        assertEquals(9, cache.attr(20).size(), "begun before the commit: nothing of the general rule began or ended since");
        cache.end(wrote(file(20, 9)), true, unlink);
        assertNull(cache.attr(20), "the commit on its inode ended while it ran");
    }

    @Test
    void aFailedWriteCommitDropsItsInode() {
        cache.install(cache.generation(), List.of(file(20, 1)), null, null);
        cache.endSingle(20, wrote(file(20, 9)), false, cache.beginSingle());
        assertNull(cache.attr(20));
    }

    @Test
    void pastItsBoundTheCacheEvictsTheEntriesInstalledFirstAndKeepsTheRecentOnes() {
        MetaCache small = new MetaCache(Long.MAX_VALUE, 100);
        for (long ino = 1; ino <= 300; ino++) {
            small.install(small.generation(), List.of(file(ino, ino)), null, null);
            assertTrue(small.size() <= 101, "at most one install past the bound: " + small.size());
            assertTrue(small.size() >= Math.min(ino, 75), "a quarter of the bound is freed, not the whole cache: " + small.size());
        }
        assertTrue(small.evicted() >= 200, "evicted " + small.evicted());
        assertNull(small.attr(1), "the first installed went first");
        for (long ino = 251; ino <= 300; ino++) {
            assertNotNull(small.attr(ino), "the 50 installed last stay: " + ino);
        }
    }

    @Test
    void oneInstallLargerThanTheBoundIsDroppedAtTheNextInstall() {
        MetaCache small = new MetaCache(Long.MAX_VALUE, 100);
        List<Attr> many = new java.util.ArrayList<>();
        java.util.Map<String, DirEntry> listing = new java.util.HashMap<>();
        for (long ino = 2; ino < 152; ino++) {
            many.add(file(ino, 1));
            listing.put("f" + ino, new DirEntry("f" + ino, ino, FileType.FILE));
        }
        small.install(small.generation(), many, 1L, listing);
        assertEquals(151, small.size(), "installed whole");
        small.install(small.generation(), List.of(file(500, 5)), null, null);
        assertEquals(1, small.size(), "all installed at one time, so all evicted at once");
        assertEquals(5, small.attr(500).size());
    }
}
