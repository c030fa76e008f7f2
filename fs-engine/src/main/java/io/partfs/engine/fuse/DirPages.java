package io.partfs.engine.fuse;

import io.partfs.engine.DirEntry;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Directory listings in readdir cookie order, kept while the kernel reads a directory in
 * several READDIR(PLUS) requests (each reply holds a page of ~150-200 entries), so that reading
 * an n-entry directory lists and sorts it once, not n/150 times: the quadratic way read a
 * 20,000-entry directory in 3.2 s.
 *
 * <p>A request at offset 0 always takes a fresh listing. A later request uses the kept one only
 * while nothing changed the directory's entries through this mount since the listing was taken
 * ({@link #changed}, called after every create, link, unlink, rename and the like) and for at
 * most {@code maxAgeNanos}: what other clients of a shared volume change is seen after that, as
 * the metadata cache sees it. Entries removed meanwhile are skipped by the caller when their
 * inode is gone. At most {@link #MAX_KEPT} listings and {@link #MAX_KEPT_ENTRIES} entries are
 * kept; one read to its end is dropped.
 */
final class DirPages {
    static final int MAX_KEPT = 64;
    static final int MAX_KEPT_ENTRIES = 2_000_000; // ~32 MiB of arrays, on top of the entries themselves
    /** Change counters by directory, striped: a change elsewhere only rarely discards a listing. */
    private static final int STRIPES = 4096;

    private final AtomicLongArray changes = new AtomicLongArray(STRIPES);
    private final ConcurrentHashMap<Long, Listing> kept = new ConcurrentHashMap<>();
    private final long maxAgeNanos;

    /** @param maxAgeNanos how long a listing may be used; 0 takes a new listing for every request */
    DirPages(long maxAgeNanos) {
        this.maxAgeNanos = maxAgeNanos;
    }

    /**
     * One directory's entries in cookie order: {@code cookies[i]} is the readdir offset of
     * {@code entries[i]}, increasing.
     */
    record Listing(long dir, long stamp, long takenNanos, long[] cookies, DirEntry[] entries) {
        /** The index of the first entry after {@code offset}. */
        int after(long offset) {
            int i = Arrays.binarySearch(cookies, offset);
            return i >= 0 ? i + 1 : -i - 1;
        }

        int size() {
            return cookies.length;
        }
    }

    /** The change count of {@code dir}, to read before listing it. */
    long stamp(long dir) {
        return changes.get(stripe(dir));
    }

    /** Orders {@code entries} (just listed, after {@link #stamp}) by cookie. */
    static Listing listing(long dir, long stamp, List<DirEntry> entries) {
        KernelFuse.Cookie[] sorted = KernelFuse.Cookie.sorted(entries);
        long[] cookies = new long[sorted.length];
        DirEntry[] es = new DirEntry[sorted.length];
        for (int i = 0; i < sorted.length; i++) {
            cookies[i] = sorted[i].cookie();
            es[i] = sorted[i].entry();
        }
        return new Listing(dir, stamp, System.nanoTime(), cookies, es);
    }

    /** The kept listing of {@code dir} if it may still be used, else null. */
    Listing reusable(long dir) {
        Listing l = kept.get(dir);
        if (l == null) {
            return null;
        }
        if (l.stamp != stamp(dir) || System.nanoTime() - l.takenNanos > maxAgeNanos) {
            kept.remove(dir, l);
            return null;
        }
        return l;
    }

    /** Keeps a listing whose reading goes on in later requests. */
    void keep(Listing l) {
        if (maxAgeNanos <= 0 || l.size() > MAX_KEPT_ENTRIES) {
            return;
        }
        kept.put(l.dir, l);
        long entries = 0;
        for (Listing k : kept.values()) {
            entries += k.size();
        }
        while (kept.size() > MAX_KEPT || entries > MAX_KEPT_ENTRIES) {
            Listing oldest = null;
            for (Listing k : kept.values()) {
                if (k != l && (oldest == null || k.takenNanos < oldest.takenNanos)) {
                    oldest = k;
                }
            }
            if (oldest == null || !kept.remove(oldest.dir, oldest)) {
                return; // another thread changed the set meanwhile: good enough
            }
            entries -= oldest.size();
        }
    }

    /** Drops a listing read to its end. */
    void done(Listing l) {
        kept.remove(l.dir, l);
    }

    /** Records that {@code dir}'s entries changed through this mount; call after the change. */
    void changed(long dir) {
        changes.incrementAndGet(stripe(dir));
        kept.remove(dir);
    }

    int keptCount() {
        return kept.size();
    }

    private static int stripe(long dir) {
        return (int) ((dir ^ (dir >>> 32)) * 0x9E3779B9L >>> 20) & (STRIPES - 1);
    }
}
