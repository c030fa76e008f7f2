package io.partfs.engine.meta;

import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Slice lists of file chunks held in memory, each with the data version its inode had when it
 * was read (both in one request). A file's content, and so its slice lists, change only
 * together with its data version (write commits and truncates change both in one transaction,
 * and inode numbers are never reused), so a list is valid exactly for a reader holding
 * attributes of that version, on any volume, shared or not, without a timeout: a reader
 * reading small files whose attributes it has cached then needs no round trip for their data's
 * whereabouts.
 */
final class ChunkLists {
    /**
     * A bound on memory (~100 B an entry plus its slices); entries of changed or deleted files are
     * never looked at again and wait for an eviction.
     */
    static final int MAX_ENTRIES = 200_000;

    private record Id(long ino, long index) {
    }

    record Versioned(long dataVersion, List<Slice> slices) {
    }

    private final Map<Id, Versioned> lists = new ConcurrentHashMap<>();
    private final int maxEntries;
    private final AtomicBoolean evicting = new AtomicBoolean();

    ChunkLists() {
        this(MAX_ENTRIES);
    }

    ChunkLists(int maxEntries) {
        this.maxEntries = maxEntries;
    }

    /** The slices of chunk {@code index} of {@code ino} if they were read at {@code dataVersion}, else null. */
    List<Slice> get(long ino, long index, long dataVersion) {
        Versioned v = lists.get(new Id(ino, index));
        return v != null && v.dataVersion() == dataVersion ? v.slices() : null;
    }

    void put(long ino, long index, long dataVersion, List<Slice> slices) {
        if (lists.size() >= maxEntries) {
            evictAQuarter();
        }
        lists.put(new Id(ino, index), new Versioned(dataVersion, List.copyOf(slices)));
    }

    int size() {
        return lists.size();
    }

    /**
     * Drops a quarter of the entries, in the map's hash order, so about at random: the lists a
     * scan is still reading mostly stay (clearing the whole map made every one of them a round
     * trip again). One thread evicts; others go on meanwhile.
     */
    private void evictAQuarter() {
        if (!evicting.compareAndSet(false, true)) {
            return;
        }
        try {
            int drop = Math.max(1, maxEntries / 4);
            for (Iterator<Id> it = lists.keySet().iterator(); it.hasNext() && drop > 0; drop--) {
                it.next();
                it.remove();
            }
        } finally {
            evicting.set(false);
        }
    }
}
