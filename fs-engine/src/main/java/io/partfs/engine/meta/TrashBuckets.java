package io.partfs.engine.meta;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;

/**
 * The volume's trash, kept in the metadata engine for {@link MetaEngine}: slices freed by a
 * deletion, a truncation or an overwrite wait in a bucket per hour ({@code trash<hour>}, hours
 * since the epoch; {@code trash} lists the hours) for the volume's trash time
 * ({@code trashHours}), so that metadata restored from a backup of that time still finds its
 * files' data; then {@link #expire} moves them to the deletion list ({@code delslices}), whose
 * objects the data layer deletes.
 */
final class TrashBuckets {
    static final String TRASH = "trash";
    static final String TRASH_HOURS = "trashHours";
    static final long HOUR_NANOS = 3_600_000_000_000L;
    /** The longest trash time: a year. */
    static final int MAX_HOURS = 24 * 366;
    /** Slices moved from a bucket to the deletion list per transaction. */
    private static final int BATCH = 1000;

    /** Runs a filesystem change: MetaEngine's, which refuses changes while the mount is fenced. */
    interface Mutator {
        <T> T mutate(KvStore.Txn<T> body) throws IOException;
    }

    private final KvStore kv;
    /** The volume's clock, which names and expires the hours. */
    private final StoreClock clock;
    private final Mutator mutator;
    /** The trash time in hours, as last read ({@link #hours()}); 0: no trash. */
    private volatile int hours;

    TrashBuckets(KvStore kv, StoreClock clock, Mutator mutator) {
        this.kv = kv;
        this.clock = clock;
        this.mutator = mutator;
    }

    static String key(long hour) {
        return TRASH + hour;
    }

    static void checkHours(int hours) {
        if (hours < 0 || hours > MAX_HOURS) {
            throw new IllegalArgumentException("invalid trash time " + hours + " hours: use 0 (no trash) to "
                    + MAX_HOURS + " (a year)");
        }
    }

    /** Records a new volume's trash time in the transaction that formats it. */
    static void recordHours(KvStore.Writer tx, int hours) {
        if (hours > 0) {
            tx.put(TRASH_HOURS, String.valueOf(hours).getBytes(StandardCharsets.US_ASCII));
        }
    }

    /** The trash time, read from the metadata: a change by another process reaches this one here. */
    int hours() throws IOException {
        byte[] b = kv.read(r -> r.get(TRASH_HOURS));
        int h = b == null ? 0 : Integer.parseInt(new String(b, StandardCharsets.US_ASCII).trim());
        hours = h;
        return h;
    }

    void setHours(int h) throws IOException {
        checkHours(h);
        mutator.mutate(tx -> {
            tx.put(TRASH_HOURS, String.valueOf(h).getBytes(StandardCharsets.US_ASCII));
            return null;
        });
        hours = h;
    }

    /**
     * Where a slice freed in {@code hour} (of the volume's clock) goes, as the trash time was
     * last read: the deletion list, or the bucket of the hour (recorded in the bucket list by
     * {@code tx}).
     */
    String destination(KvStore.Writer tx, long hour) {
        if (hours == 0) {
            return MetaEngine.DELSLICES;
        }
        tx.hset(TRASH, String.valueOf(hour), new byte[0]);
        return key(hour);
    }

    /** Counts the slices in the trash, a request per hour bucket. */
    MetaEngine.Trash contents() throws IOException {
        return kv.read(r -> {
            long slices = 0;
            long oldest = Long.MAX_VALUE;
            for (String hour : r.hgetAll(TRASH).keySet()) {
                long n = r.hlen(key(Long.parseLong(hour)));
                if (n > 0) {
                    slices += n;
                    oldest = Math.min(oldest, Long.parseLong(hour));
                }
            }
            return new MetaEngine.Trash(slices, oldest == Long.MAX_VALUE ? 0 : oldest * (HOUR_NANOS / 1_000_000));
        });
    }

    /** Hands every slice in the trash to {@code each}, a page of a bucket at a time. */
    void forEachSlice(MetaEngine.SliceVisitor each) throws IOException {
        kv.read(r -> {
            for (String hour : r.hgetAll(TRASH).keySet()) {
                MetaEngine.visitFields(r, key(Long.parseLong(hour)), each);
            }
            return null;
        });
    }

    /**
     * Of slices ({@code id -> size}), the ids some bucket of the trash holds: a request per bucket;
     * those of size -1 (not known) are looked for in the whole trash.
     */
    java.util.Set<Long> holding(Map<Long, Integer> slices) throws IOException {
        List<Long> ids = new java.util.ArrayList<>();
        List<String> fields = new java.util.ArrayList<>();
        slices.forEach((id, size) -> {
            if (size >= 0) {
                ids.add(id);
                fields.add(id + "_" + size);
            }
        });
        java.util.Set<Long> held = kv.read(r -> {
            java.util.Set<Long> found = new java.util.HashSet<>();
            if (!fields.isEmpty()) {
                for (String hour : r.hgetAll(TRASH).keySet()) {
                    List<byte[]> in = r.hmget(key(Long.parseLong(hour)), fields);
                    for (int i = 0; i < in.size(); i++) {
                        if (in.get(i) != null) {
                            found.add(ids.get(i));
                        }
                    }
                }
            }
            return found;
        });
        if (slices.containsValue(-1)) {
            forEachSlice((id, size) -> {
                if (slices.get(id) != null && slices.get(id) == -1) {
                    held.add(id);
                }
            });
        }
        return held;
    }

    /** Takes slices ({id, size, hour} each) out of the trash without deleting anything. */
    void untrash(List<long[]> slices) throws IOException {
        if (slices.isEmpty()) {
            return;
        }
        mutator.mutate(tx -> { // no reads: a slice listed nowhere any more is simply not there
            for (long[] s : slices) {
                tx.hdel(key(s[2]), s[0] + "_" + s[1]);
            }
            return null;
        });
    }

    /**
     * Moves the slices whose trash time is over (freed in an hour that ended at least
     * {@link #hours()} ago, read again first; all of them once the trash is turned off) to the
     * deletion list; returns how many.
     */
    long expire() throws IOException {
        int h = hours();
        clock.fresh();
        long now = clock.nowNanos();
        List<Long> due = kv.read(r -> r.hgetAll(TRASH).keySet().stream().map(Long::parseLong)
                .filter(hour -> h == 0 || (hour + 1 + h) * HOUR_NANOS <= now).sorted().toList());
        long moved = 0;
        for (long hour : due) {
            moved += emptyHour(hour);
        }
        return moved;
    }

    /** Moves the slices of the oldest hour to the deletion list, whatever their time; 0 when the trash is empty. */
    long expireOldest() throws IOException {
        java.util.Optional<Long> oldest = kv.read(r -> r.hgetAll(TRASH).keySet().stream().map(Long::parseLong).min(Long::compare));
        return oldest.isPresent() ? Math.max(1, emptyHour(oldest.get())) : 0;
    }

    /** Moves every slice of the bucket of {@code hour} to the deletion list; returns how many. */
    private long emptyHour(long hour) throws IOException {
        String bucket = key(hour);
        long moved = 0;
        for (Map<String, byte[]> some; !(some = kv.read(r -> r.hgetSome(bucket, BATCH))).isEmpty(); ) {
            Map<String, byte[]> batch = some;
            mutator.mutate(tx -> { // no reads: nothing to conflict on, and the same move twice is harmless
                for (Map.Entry<String, byte[]> e : batch.entrySet()) {
                    tx.hset(MetaEngine.DELSLICES, e.getKey(), e.getValue());
                    tx.hdel(bucket, e.getKey());
                }
                return null;
            });
            moved += batch.size();
        }
        mutator.mutate(tx -> {
            if (tx.hlen(bucket) == 0) { // a slice freed meanwhile by a client whose clock is far behind stays listed
                tx.hdel(TRASH, String.valueOf(hour));
            }
            return null;
        });
        return moved;
    }
}
