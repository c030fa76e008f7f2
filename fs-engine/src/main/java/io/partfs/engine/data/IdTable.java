package io.partfs.engine.data;

/**
 * Positive long ids, each with a value fixed when it is added and a counter: for a volume check,
 * the referenced slices (value: size; counter: blocks the object listing showed) and the files
 * found in the tree (value: nlink; counter: directory entries). An open-addressing table of
 * primitive arrays, 16 bytes a slot and at most 70% full (21-46 bytes per id), where a
 * {@code HashMap<Long, ...>} took ~100: tens of millions of files fit in a few hundred MiB.
 */
final class IdTable {
    private static final double MAX_LOAD = 0.7;

    /** Ids (0: an empty slot), their values and counters. */
    private long[] ids;
    private int[] values;
    private int[] counts;
    private int count;

    IdTable() {
        this(0);
    }

    /** A table that holds {@code expected} ids without growing (growing holds old and new arrays at once). */
    IdTable(long expected) {
        allocate((int) slotsFor(expected));
    }

    private static long slotsFor(long expected) {
        long slots = Long.highestOneBit(Math.max(1 << 12, (long) (expected / MAX_LOAD) + 1) - 1) << 1;
        return Math.min(1 << 30, slots);
    }

    /** The heap a table presized for {@code expected} ids takes. */
    static long bytesFor(long expected) {
        return slotsFor(expected) * (Long.BYTES + 2 * Integer.BYTES);
    }

    private void allocate(int slots) {
        ids = new long[slots];
        values = new int[slots];
        counts = new int[slots];
    }

    int size() {
        return count;
    }

    private int slot(long id) {
        int mask = ids.length - 1;
        int i = (int) (mix(id) & mask);
        while (ids[i] != 0 && ids[i] != id) {
            i = (i + 1) & mask;
        }
        return i;
    }

    /** A 64-bit finalizer (MurmurHash3's): ids are sequential, and slots must not be. */
    private static long mix(long x) {
        x ^= x >>> 33;
        x *= 0xff51afd7ed558ccdL;
        x ^= x >>> 33;
        x *= 0xc4ceb3f98ab2ec53L;
        return x ^ (x >>> 33);
    }

    /** Adds {@code id} with {@code value}; false (the first value kept) if it was there already. */
    boolean add(long id, int value) {
        if (id <= 0) {
            throw new IllegalArgumentException("id " + id + " is not positive");
        }
        int i = slot(id);
        if (ids[i] == id) {
            return false;
        }
        ids[i] = id;
        values[i] = value;
        count++;
        if (count > ids.length * MAX_LOAD) {
            grow();
        }
        return true;
    }

    private void grow() {
        long[] oldIds = ids;
        int[] oldValues = values;
        int[] oldCounts = counts;
        if (oldIds.length >= 1 << 30) {
            throw new IllegalStateException("more than " + count + " ids: too many for one table");
        }
        allocate(oldIds.length * 2);
        for (int j = 0; j < oldIds.length; j++) {
            if (oldIds[j] != 0) {
                int i = slot(oldIds[j]);
                ids[i] = oldIds[j];
                values[i] = oldValues[j];
                counts[i] = oldCounts[j];
            }
        }
    }

    /** The value of {@code id}, or -1 when it is not in the table. */
    int valueOf(long id) {
        if (id <= 0) {
            return -1; // 0 marks an empty slot
        }
        int i = slot(id);
        return ids[i] == id ? values[i] : -1;
    }

    /** Adds one to the counter of {@code id}; nothing when it is not in the table. */
    void count(long id) {
        int i = slot(id);
        if (ids[i] == id) {
            counts[i]++;
        }
    }

    /** Told each id with its value and counter. */
    @FunctionalInterface
    interface Visitor {
        void each(long id, int value, int count);
    }

    void forEach(Visitor v) {
        for (int i = 0; i < ids.length; i++) {
            if (ids[i] != 0) {
                v.each(ids[i], values[i], counts[i]);
            }
        }
    }
}
