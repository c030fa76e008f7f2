package io.partfs.engine.fuse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import io.partfs.engine.DirEntry;
import io.partfs.engine.FileType;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** When a directory listing kept between readdir requests may be used again. */
class DirPagesTest {
    private static final long MINUTE = 60_000_000_000L;

    private static DirPages.Listing listing(DirPages pages, long dir, int n) {
        List<DirEntry> entries = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            entries.add(new DirEntry("f" + i, 100 + i, FileType.FILE));
        }
        return DirPages.listing(dir, pages.stamp(dir), entries);
    }

    @Test
    void aKeptListingServesLaterPagesInCookieOrderUntilReadToItsEnd() {
        DirPages pages = new DirPages(MINUTE);
        DirPages.Listing l = listing(pages, 7, 1000);
        for (int i = 1; i < l.size(); i++) {
            assertEquals(true, l.cookies()[i] > l.cookies()[i - 1]);
        }
        assertEquals(0, l.after(2), "after . and ..: the first entry");
        assertEquals(11, l.after(l.cookies()[10]), "after an entry's cookie: the next one");
        assertEquals(11, l.after(l.cookies()[10] + 1), "after a removed entry's cookie: the next one still there");
        pages.keep(l);
        assertSame(l, pages.reusable(7));
        pages.done(l);
        assertNull(pages.reusable(7));
    }

    @Test
    void aChangeToTheDirectoryThroughThisMountDiscardsIt() {
        DirPages pages = new DirPages(MINUTE);
        DirPages.Listing l = listing(pages, 7, 10);
        pages.changed(7); // while it was being listed: the stamp taken before no longer matches
        pages.keep(l);
        assertNull(pages.reusable(7));
        DirPages.Listing again = listing(pages, 7, 10);
        pages.keep(again);
        pages.changed(8);
        assertSame(again, pages.reusable(7), "another directory's change leaves it");
        pages.changed(7);
        assertNull(pages.reusable(7));
    }

    @Test
    void withoutALifetimeNothingIsKeptAndOldOnesExpire() throws Exception {
        DirPages none = new DirPages(0);
        none.keep(listing(none, 7, 10));
        assertNull(none.reusable(7));
        DirPages brief = new DirPages(1); // 1 ns: over by the time it is asked for
        DirPages.Listing l = listing(brief, 7, 10);
        brief.keep(l);
        long t = System.nanoTime();
        while (System.nanoTime() - t < 1_000) {
            Thread.onSpinWait();
        }
        assertNull(brief.reusable(7));
    }

    @Test
    void theOldestAreDroppedBeyondTheBound() {
        DirPages pages = new DirPages(MINUTE);
        for (long dir = 1; dir <= DirPages.MAX_KEPT + 10; dir++) {
            pages.keep(listing(pages, dir, 3));
        }
        assertEquals(DirPages.MAX_KEPT, pages.keptCount());
        assertNull(pages.reusable(1), "the first kept went first");
        assertEquals(DirPages.MAX_KEPT + 10, pages.reusable(DirPages.MAX_KEPT + 10).dir());
    }
}
