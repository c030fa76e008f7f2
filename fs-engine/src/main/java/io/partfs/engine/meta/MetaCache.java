package io.partfs.engine.meta;

import io.partfs.engine.Attr;
import io.partfs.engine.DirEntry;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Attributes and directory listings held in memory by the metadata engine, so that a file
 * operation after the first in a directory needs no round trip to the store (ClickHouse loading
 * a part stats every file in it).
 *
 * <p>Consistency: a committed transaction of this process installs the attributes it wrote when
 * no other transaction of this process began or ended while it ran (so no older write can land
 * after a newer one); otherwise it drops them (a changed directory always has its attributes
 * written too). A cached listing is patched name by name with the entries a committed
 * transaction set or removed (so creating n files in a directory does not reload its listing n
 * times), unless another transaction that changed the same name, or emptied the directory,
 * ended while it ran: the two may have reached the store in either order, so the listing is
 * dropped. A reader that fetched from the store installs its result only if no transaction
 * began or ended meanwhile ({@link #generation}), so a slow read never puts back what a
 * concurrent change invalidated. For the only client of a volume the cache is exact; changes
 * by other clients of a shared volume are seen once an entry is older than {@code ttlNanos}.
 *
 * <p>A per-inode rule (keep what a transaction wrote unless one that changed the same inode
 * ended meanwhile; let reads install what no ended transaction changed) passed every test here but
 * was withdrawn after ClickHouse's IT brought back removed parts after a restart in 3 of 13
 * runs with it; it then passed 12 of 12, so whether the rule is at fault is open: see
 * benchmarks/RESULTS.md, rounds 23 and 24.
 *
 * <p>The names changed by ended transactions are remembered for the last {@value #MAX_ENDED};
 * a transaction that began before the oldest forgotten one patches no listing.
 *
 * <p>One kind of transaction is exempt: one that changes, of what the cache holds, the
 * attributes (and extended attributes) of a single inode and nothing else ({@link #beginSingle},
 * {@link #endSingle}). Such are a file's write commit, which ClickHouse's part writes run dozens
 * at a time (closes in a temporary part directory flush side by side), and the deletion of a
 * file no name leads to, which its part removals and merges start in the background by the
 * thousand. It changes no listing and no other inode, so it does not count as a transaction for
 * the rule above (before this, every one made the transactions and reads around it drop what
 * they had). Instead it is ordered against the others on its inode alone: it keeps what it
 * wrote only if no transaction of the rule above began or ended while it ran and no other
 * single-inode transaction on that inode ended meanwhile; and for that inode alone, readers and
 * transactions that began before it ended install nothing.
 */
final class MetaCache {
    /** The default bound on entries (attributes, listings, extended attributes): ~150 MB of heap at most. */
    static final int DEFAULT_MAX_ENTRIES = 500_000;
    /** Entries of a sample taken to find the install time before which to evict ({@link #trim}). */
    private static final int EVICTION_SAMPLE = 4_096;

    private record Timed<T>(T value, long at) {
    }

    /**
     * What one transaction changed: attributes it wrote (null for deleted inodes), directory
     * entries it set or removed, inodes whose extended attributes it changed, inodes it created
     * (and which of them are directories).
     */
    record TxnNotes(Map<Long, Attr> written, java.util.List<EntryChange> entries, java.util.Set<Long> xattrs,
                    java.util.Set<Long> created, java.util.Set<Long> createdDirs) {
        TxnNotes() {
            this(new java.util.HashMap<>(), new java.util.ArrayList<>(), new java.util.HashSet<>(), new java.util.HashSet<>(),
                    new java.util.HashSet<>());
        }

        void reset() {
            written.clear();
            entries.clear();
            xattrs.clear();
            created.clear();
            createdDirs.clear();
        }
    }

    /** A directory entry a committed transaction set ({@code entry} non-null) or removed; name null: the whole directory. */
    record EntryChange(long dir, String name, DirEntry entry) {
    }

    private final long ttlNanos;
    private final int maxEntries;
    /** Set while one thread evicts; the others go on without waiting for it. */
    private final java.util.concurrent.atomic.AtomicBoolean evicting = new java.util.concurrent.atomic.AtomicBoolean();
    private final java.util.concurrent.atomic.LongAdder evicted = new java.util.concurrent.atomic.LongAdder();
    private final Map<Long, Timed<Attr>> attrs = new ConcurrentHashMap<>();
    private final Map<Long, Timed<Map<String, DirEntry>>> dirs = new ConcurrentHashMap<>();
    /** Extended attributes by inode, all of them (most often none). */
    private final Map<Long, Timed<Map<String, byte[]>>> xattrs = new ConcurrentHashMap<>();
    /**
     * Advances at every begin and end of a transaction of the general rule and at every end of a
     * single-inode one: readers and transactions are ordered by it.
     */
    private final AtomicLong generation = new AtomicLong();
    /** The generation at which a transaction of the general rule last began or ended; guarded by {@code this}. */
    private long lastGeneral;

    /** Remembered names at most (~100 bytes each, ~6.5 MB in all). */
    static final int MAX_ENDED = 65_536;
    /** A directory entry; name null: all entries of the directory. */
    private record Name(long dir, String name) {
    }

    /** The generation at which the last transaction that changed a directory entry ended, oldest first; guarded by {@code this}. */
    private final java.util.LinkedHashMap<Name, Long> endedAt = new java.util.LinkedHashMap<>();
    /** Transactions that began before this generation patch no listing (names were forgotten, or the cache cleared). */
    private long floor;
    /**
     * The generation at which a single-inode transaction last ended, by inode, oldest first;
     * guarded by {@code this}.
     */
    private final java.util.LinkedHashMap<Long, Long> singleEndedAt = new java.util.LinkedHashMap<>();
    /** Readers and transactions that began before this generation install no attributes (single-inode ends were forgotten). */
    private long singleFloor;

    long ttlNanos() {
        return ttlNanos;
    }

    /** Listings of at least this many entries are large: see {@link #lookUpOneName}. */
    static final int LARGE_LISTING = 1_000;
    /**
     * A lookup of one name costs about as much as reading this many entries of a listing with
     * their attributes (0.3 ms against ~2 us an entry, Redis on loopback).
     */
    static final int ENTRIES_PER_NAME_LOOKUP = 128;

    /** A directory whose listing was large when last read, and the lookups of one name made there since. */
    private record Large(int entries, java.util.concurrent.atomic.AtomicInteger lookups) {
    }

    private final Map<Long, Large> large = new ConcurrentHashMap<>();

    /** Records the size of the listing of {@code dir} just read from the store. */
    void listed(long dir, int entries) {
        if (entries >= LARGE_LISTING) {
            large.put(dir, new Large(entries, new java.util.concurrent.atomic.AtomicInteger()));
        } else {
            large.remove(dir);
        }
    }

    /**
     * Whether a lookup in {@code dir}, whose listing is not cached, should read the one name
     * rather than the whole listing (which it then keeps). On a shared volume a listing is kept
     * for a second, and reading a table directory of 20,000 parts again took ~45 ms for each
     * INSERT that looked up its new part's name. Yes for a directory found large, until its
     * lookups of one name since the last reading have cost about what reading it again would
     * ({@link #ENTRIES_PER_NAME_LOOKUP}): a burst of lookups (a server starting, stating every
     * part) then reads the listing again, and pays at most twice what the better of the two
     * would have.
     */
    boolean lookUpOneName(long dir) {
        Large d = large.get(dir);
        return d != null && d.lookups().incrementAndGet() <= d.entries() / ENTRIES_PER_NAME_LOOKUP;
    }

    /** @param ttlNanos how long an entry may be used; {@code Long.MAX_VALUE} for an exclusive volume */
    MetaCache(long ttlNanos) {
        this(ttlNanos, DEFAULT_MAX_ENTRIES);
    }

    /**
     * @param ttlNanos how long an entry may be used; {@code Long.MAX_VALUE} for an exclusive volume
     * @param maxEntries past this many entries the oldest are evicted ({@link #trim})
     */
    MetaCache(long ttlNanos, int maxEntries) {
        if (maxEntries < 1) {
            throw new IllegalArgumentException("the metadata cache must be allowed at least one entry, not " + maxEntries);
        }
        this.ttlNanos = ttlNanos;
        this.maxEntries = maxEntries;
    }

    /** Attributes, listings and extended-attribute sets held now. */
    int size() {
        return attrs.size() + dirs.size() + xattrs.size();
    }

    /** Entries evicted since this cache was made ({@link #trim}). */
    long evicted() {
        return evicted.sum();
    }

    private boolean fresh(Timed<?> t) {
        return t != null && (ttlNanos == Long.MAX_VALUE || System.nanoTime() - t.at() < ttlNanos);
    }

    Attr attr(long ino) {
        Timed<Attr> t = attrs.get(ino);
        return fresh(t) ? t.value() : null;
    }

    Map<String, DirEntry> dir(long ino) {
        Timed<Map<String, DirEntry>> t = dirs.get(ino);
        return fresh(t) ? t.value() : null;
    }

    Map<String, byte[]> xattrs(long ino) {
        Timed<Map<String, byte[]>> t = xattrs.get(ino);
        return fresh(t) ? t.value() : null;
    }

    /** Drops the attributes of {@code ino}: the store no longer has the inode. */
    void forgetAttr(long ino) {
        attrs.remove(ino);
    }

    /** Drops the listing of {@code dir}: it names something no longer there. */
    void forgetListing(long dir) {
        dirs.remove(dir);
    }

    /** Installs the extended attributes of {@code ino} read at {@code gen}, unless a transaction ran since. */
    void installXattrs(long gen, long ino, Map<String, byte[]> all) {
        trim();
        synchronized (this) {
            if (lastGeneral <= gen && !singleEndedSince(ino, gen)) {
                xattrs.put(ino, new Timed<>(Map.copyOf(all), System.nanoTime()));
            }
        }
    }

    /**
     * Past the bound, evicts the entries installed longest ago until a quarter of the bound is
     * free. Until this, the whole cache was dropped at the bound: a server starting on more
     * than ~13 tables x 350 parts x 50 columns (500,000 files) then lost, among the rest, the listings just
     * read ahead for the table it was loading (benchmarks/RESULTS.md, round 42). Which entries
     * are the oldest is found from a sample of their install times, so an eviction costs two
     * passes over the entries, once per quarter of the bound installed; entries installed at
     * the very time found go too, so that one install larger than the bound is dropped whole
     * instead of being scanned again at every install. Removing an entry is always safe: the
     * next use reads it from the store. One thread evicts at a time; the others go on.
     */
    private void trim() {
        int size = size();
        if (size <= maxEntries || !evicting.compareAndSet(false, true)) {
            return;
        }
        try {
            long cutoff = installedBy(size - maxEntries * 3L / 4, size);
            evicted.add(evictInstalledBy(attrs, cutoff) + evictInstalledBy(dirs, cutoff) + evictInstalledBy(xattrs, cutoff));
        } finally {
            evicting.set(false);
        }
    }

    /** About when the {@code count} entries installed first (of about {@code size}) were installed, from a sample. */
    private long installedBy(long count, int size) {
        int every = Math.max(1, size / EVICTION_SAMPLE);
        long[] sample = new long[size / every + 1];
        int n = 0;
        int i = 0;
        for (Map<Long, ? extends Timed<?>> m : List.of(attrs, dirs, xattrs)) {
            for (Timed<?> t : m.values()) {
                if (i++ % every == 0 && n < sample.length) {
                    sample[n++] = t.at();
                }
            }
        }
        if (n == 0) {
            return Long.MIN_VALUE;
        }
        java.util.Arrays.sort(sample, 0, n);
        return sample[(int) Math.min(n - 1, Math.max(0, count * n / Math.max(1, i) - 1))];
    }

    private static <T> int evictInstalledBy(Map<Long, Timed<T>> m, long cutoff) {
        int n = 0;
        for (Map.Entry<Long, Timed<T>> e : m.entrySet()) {
            if (e.getValue().at() - cutoff <= 0 && m.remove(e.getKey(), e.getValue())) {
                n++;
            }
        }
        return n;
    }

    /** The generation to pass to {@link #install} after reading from the store. */
    long generation() {
        return generation.get();
    }

    /** Installs what was read at {@code gen}, unless a transaction ran since. */
    void install(long gen, Collection<Attr> read, Long dirIno, Map<String, DirEntry> listing) {
        trim();
        long now = System.nanoTime();
        synchronized (this) {
            if (lastGeneral > gen) {
                return;
            }
            for (Attr a : read) {
                if (!singleEndedSince(a.ino(), gen)) {
                    attrs.put(a.ino(), new Timed<>(a, now));
                }
            }
            if (dirIno != null) {
                dirs.put(dirIno, new Timed<>(new ConcurrentHashMap<>(listing), now));
            }
        }
    }

    /** Whether a transaction that changed entry {@code name} ended after generation {@code since}; guarded by {@code this}. */
    private boolean changedSince(Name name, long since) {
        if (since < floor) {
            return true;
        }
        Long at = endedAt.get(name);
        return at != null && at > since;
    }

    /** Whether a single-inode transaction on {@code ino} ended after generation {@code since}; guarded by {@code this}. */
    private boolean singleEndedSince(long ino, long since) {
        if (since < singleFloor) {
            return true;
        }
        Long at = singleEndedAt.get(ino);
        return at != null && at > since;
    }

    /** Called before a transaction that changes only one inode's attributes ({@link #endSingle}); returns what to pass to it. */
    long beginSingle() {
        return generation.get();
    }

    /**
     * Called after a transaction begun by {@link #beginSingle} ended, whether or not it
     * committed: it keeps the attributes it wrote of {@code ino} when it committed, no
     * transaction of the general rule began or ended meanwhile and no other single-inode
     * transaction on {@code ino} ended meanwhile; otherwise it drops them. A deleted inode is
     * dropped. Either way, readers and transactions that began before now install nothing of
     * {@code ino}. Returns false, having cleared the whole cache, when the notes show the
     * transaction changed more than that inode: a caller's mistake, which must not leave
     * anything stale.
     */
    boolean endSingle(long ino, TxnNotes notes, boolean committed, long began) {
        boolean onlyIt = notes.entries().isEmpty() && notes.created().isEmpty()
                && notes.written().keySet().stream().allMatch(i -> i == ino) && notes.xattrs().stream().allMatch(i -> i == ino);
        if (!onlyIt) {
            clear();
            return false;
        }
        synchronized (this) {
            Attr wrote = notes.written().get(ino);
            if (committed && wrote != null && lastGeneral <= began && !singleEndedSince(ino, began)) {
                attrs.put(ino, new Timed<>(wrote, System.nanoTime()));
                if (notes.xattrs().contains(ino)) {
                    xattrs.remove(ino);
                }
            } else {
                attrs.remove(ino);
                xattrs.remove(ino);
            }
            dirs.remove(ino);
            singleEndedAt.remove(ino); // so that the map stays ordered by end
            singleEndedAt.put(ino, generation.incrementAndGet());
            while (singleEndedAt.size() > MAX_ENDED) {
                var oldest = singleEndedAt.entrySet().iterator();
                singleFloor = Math.max(singleFloor, oldest.next().getValue());
                oldest.remove();
            }
        }
        return true;
    }

    /** Remembers that a transaction that changed {@code name} ended at {@code gen}, forgetting the oldest beyond {@link #MAX_ENDED}. */
    private void ended(Name name, long gen) {
        endedAt.remove(name); // so that the map stays ordered by end
        endedAt.put(name, gen);
        while (endedAt.size() > MAX_ENDED) {
            var oldest = endedAt.entrySet().iterator();
            floor = Math.max(floor, oldest.next().getValue());
            oldest.remove();
        }
    }

    /** Called before a transaction of the general rule starts; returns the generation to pass to {@link #end}. */
    long begin() {
        synchronized (this) {
            lastGeneral = generation.incrementAndGet();
            return lastGeneral;
        }
    }

    /**
     * Called after a transaction ended, with what it changed and whether it committed. Entries
     * of the inodes it wrote are replaced (when it ran alone) or dropped; listings it changed
     * are patched (dropped where another transaction changed the same name meanwhile);
     * extended attributes it changed are dropped; inodes it created are known to
     * have none, and directories it created to be empty.
     */
    void end(TxnNotes notes, boolean committed, long began) {
        synchronized (this) {
            boolean alone = committed && lastGeneral == began;
            long gen = generation.incrementAndGet();
            lastGeneral = gen;
            long now = System.nanoTime();
            java.util.Set<Long> patched = new java.util.HashSet<>();
            if (committed) {
                java.util.Set<Long> dropped = new java.util.HashSet<>();
                for (EntryChange c : notes.entries()) {
                    if (c.name() == null || changedSince(new Name(c.dir(), c.name()), began)
                            || changedSince(new Name(c.dir(), null), began)) { // the same name, or all of them
                        dropped.add(c.dir());
                    }
                }
                for (EntryChange c : notes.entries()) {
                    Map<String, DirEntry> listing = dropped.contains(c.dir()) ? null : dir(c.dir());
                    if (listing == null) {
                        dirs.remove(c.dir());
                        continue;
                    }
                    if (c.entry() == null) {
                        listing.remove(c.name());
                    } else {
                        listing.put(c.name(), c.entry());
                    }
                    patched.add(c.dir());
                }
            }
            for (Map.Entry<Long, Attr> w : notes.written().entrySet()) {
                long ino = w.getKey();
                if (alone && w.getValue() != null && !singleEndedSince(ino, began)) {
                    attrs.put(ino, new Timed<>(w.getValue(), now));
                } else {
                    attrs.remove(ino);
                    xattrs.remove(ino);
                }
                if (!patched.contains(ino)) {
                    dirs.remove(ino);
                }
            }
            for (Long ino : notes.xattrs()) {
                xattrs.remove(ino);
            }
            if (alone) {
                for (Long ino : notes.created()) {
                    xattrs.put(ino, new Timed<>(Map.of(), now));
                }
                for (Long ino : notes.createdDirs()) {
                    dirs.put(ino, new Timed<>(new ConcurrentHashMap<>(), now));
                }
            }
            for (EntryChange c : notes.entries()) {
                ended(new Name(c.dir(), c.name()), gen);
            }
        }
    }

    void clear() {
        synchronized (this) {
            floor = generation.incrementAndGet();
            lastGeneral = floor;
            singleFloor = floor;
            endedAt.clear();
            singleEndedAt.clear();
            attrs.clear();
            dirs.clear();
            xattrs.clear();
        }
    }
}
