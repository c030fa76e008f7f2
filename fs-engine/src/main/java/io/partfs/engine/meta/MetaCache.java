package io.partfs.engine.meta;

import io.partfs.engine.Attr;
import io.partfs.engine.DirEntry;
import java.util.Collection;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Attributes and directory listings held in memory by the metadata engine, so that a file
 * operation after the first in a directory needs no round trip to the store (ClickHouse loading
 * a part stats every file in it).
 *
 * <p>Consistency, decided inode by inode: a committed transaction of this process installs the
 * attributes it wrote unless another transaction of this process that changed the same inode
 * ended while it ran (the two may have reached the store in either order); otherwise it drops
 * them. Of two overlapping transactions on one inode the one ending first may install, and the
 * one ending second then drops, so no older write stays after a newer one, while transactions
 * on other inodes (the background deletion of unlinked files beside a foreground unlink) cost
 * nothing. A cached listing is patched name by name with the entries a committed transaction
 * set or removed (so creating n files in a directory does not reload its listing n times), and
 * dropped when another transaction that changed the same name ended meanwhile. A reader that
 * fetched from the store installs what it read only for inodes no transaction of this process
 * changed since the read began ({@link #generation}): a transaction still running then drops or
 * replaces them when it ends, so a slow read never puts back what a concurrent change
 * invalidated. For the only client of a volume the cache is exact; changes by other clients of
 * a shared volume are seen once an entry is older than {@code ttlNanos}.
 *
 * <p>What transactions changed, and when they ended, is remembered for the last
 * {@value #MAX_ENDED} inodes and names; a read or transaction that began before the oldest
 * forgotten end installs nothing.
 */
final class MetaCache {
    /** Entries beyond this many are dropped all at once (a crude bound on memory). */
    private static final int MAX_ENTRIES = 500_000; // ~150 MB of heap at most

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
    private final Map<Long, Timed<Attr>> attrs = new ConcurrentHashMap<>();
    private final Map<Long, Timed<Map<String, DirEntry>>> dirs = new ConcurrentHashMap<>();
    /** Extended attributes by inode, all of them (most often none). */
    private final Map<Long, Timed<Map<String, byte[]>>> xattrs = new ConcurrentHashMap<>();
    private final AtomicLong generation = new AtomicLong();

    /**
     * Remembered ends at most (~100 bytes each, ~6.5 MB in all): a transaction remembers 2 to 6,
     * so a read or transaction installs nothing only when it outlasts ~10,000 others.
     */
    static final int MAX_ENDED = 65_536;
    /** A directory entry, as a key of {@link #endedAt}; name null: all entries of the directory. */
    private record Name(long dir, String name) {
    }

    /**
     * The generation at which the last transaction that changed an inode ({@code Long} key) or a
     * directory entry ({@link Name} key) ended, oldest first; guarded by {@code this}.
     */
    private final java.util.LinkedHashMap<Object, Long> endedAt = new java.util.LinkedHashMap<>();
    /** Reads and transactions that began before this generation install nothing (ends were forgotten, or the cache cleared). */
    private long floor;

    long ttlNanos() {
        return ttlNanos;
    }

    /** @param ttlNanos how long an entry may be used; {@code Long.MAX_VALUE} for an exclusive volume */
    MetaCache(long ttlNanos) {
        this.ttlNanos = ttlNanos;
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

    /** Installs the extended attributes of {@code ino} read at {@code gen}, unless a transaction changed them since. */
    void installXattrs(long gen, long ino, Map<String, byte[]> all) {
        trim();
        synchronized (this) {
            if (!changedSince(ino, gen)) {
                xattrs.put(ino, new Timed<>(Map.copyOf(all), System.nanoTime()));
            }
        }
    }

    private void trim() {
        if (attrs.size() + dirs.size() + xattrs.size() > MAX_ENTRIES) {
            attrs.clear();
            dirs.clear();
            xattrs.clear();
        }
    }

    /** The generation to pass to {@link #install} after reading from the store. */
    long generation() {
        return generation.get();
    }

    /** Installs what was read at {@code gen}, except what a transaction changed since. */
    void install(long gen, Collection<Attr> read, Long dirIno, Map<String, DirEntry> listing) {
        trim();
        long now = System.nanoTime();
        synchronized (this) {
            if (gen < floor) {
                return;
            }
            for (Attr a : read) {
                if (!changedSince(a.ino(), gen)) {
                    attrs.put(a.ino(), new Timed<>(a, now));
                }
            }
            if (dirIno != null && !changedSince(dirIno, gen)) {
                dirs.put(dirIno, new Timed<>(new ConcurrentHashMap<>(listing), now));
            }
        }
    }

    /** Whether a transaction that changed {@code key} (an inode or a {@link Name}) ended after generation {@code since}; guarded by {@code this}. */
    private boolean changedSince(Object key, long since) {
        if (since < floor) {
            return true;
        }
        Long at = endedAt.get(key);
        return at != null && at > since;
    }

    /** Remembers that a transaction that changed {@code key} ended at {@code gen}, forgetting the oldest ends beyond {@link #MAX_ENDED}. */
    private void ended(Object key, long gen) {
        endedAt.remove(key); // so that the map stays ordered by end
        endedAt.put(key, gen);
        while (endedAt.size() > MAX_ENDED) {
            var oldest = endedAt.entrySet().iterator();
            floor = Math.max(floor, oldest.next().getValue());
            oldest.remove();
        }
    }

    /** Called before a transaction starts; returns the generation to pass to {@link #end}. */
    long begin() {
        return generation.incrementAndGet();
    }

    /**
     * Called after a transaction ended, with what it changed and whether it committed. The
     * attributes it wrote replace the cached ones, or are dropped where another transaction of
     * this process that changed the same inode ended while it ran, or when it failed; listings
     * it changed are patched (dropped where another transaction changed the same name
     * meanwhile); extended attributes it changed are dropped; inodes it created are known to
     * have none, and directories it created to be empty.
     */
    void end(TxnNotes notes, boolean committed, long began) {
        synchronized (this) {
            long gen = generation.incrementAndGet();
            long now = System.nanoTime();
            // Decide everything before this transaction's own end is remembered.
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
                if (committed && w.getValue() != null && !changedSince(ino, began)) {
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
            if (committed) {
                for (Long ino : notes.created()) {
                    if (!changedSince(ino, began)) {
                        xattrs.put(ino, new Timed<>(Map.of(), now));
                    }
                }
                for (Long ino : notes.createdDirs()) {
                    if (!changedSince(ino, began)) {
                        dirs.put(ino, new Timed<>(new ConcurrentHashMap<>(), now));
                    }
                }
            }
            for (EntryChange c : notes.entries()) {
                ended(c.dir(), gen);
                ended(new Name(c.dir(), c.name()), gen);
            }
            for (Long ino : notes.written().keySet()) {
                ended(ino, gen);
            }
            for (Long ino : notes.xattrs()) {
                ended(ino, gen);
            }
            for (Long ino : notes.created()) {
                ended(ino, gen);
            }
        }
    }

    void clear() {
        synchronized (this) {
            floor = generation.incrementAndGet();
            endedAt.clear();
            attrs.clear();
            dirs.clear();
            xattrs.clear();
        }
    }
}
