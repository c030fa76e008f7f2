package io.partfs.engine.meta;

import io.partfs.engine.LogLimit;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * The slices this process uploads before it commits them (a write flushed without write-back,
 * a compaction's merged slice), written down in the metadata so that their objects do not
 * outlive a mount that never commits them: one killed between its uploads and its commit, or
 * whose flush failed for good. Hash {@code sliceIntents<session>} holds them (field: the slice
 * id; value: {@code "<inode> <chunk>"}, what it was written for). Once the session has ended
 * (unmounted, or removed for missing heartbeats) and a settle time has passed with no mount
 * taking it back, a mount asks {@link MetaEngine#knownSlices} about each slice and deletes the
 * objects of those that no chunk, trash or deletion list knows ({@link #claimEnded}). Before,
 * they stayed until {@code partfs gc --delete}.
 *
 * <p>Off the write path: a slice is noted in memory as its first upload starts, and a
 * background thread writes the notes down {@value #NOTE_DELAY_MS} ms later, many per
 * transaction, while the uploads run; a commit drops them, in batches, seconds later. A slice
 * committed before its note was due is never written down; a process killed within that time of
 * an upload's start leaks the slice, as all did before. Hash {@value #SESSIONS_WITH_NOTES} lists the sessions
 * with notes: its value is empty while the session is registered, or the volume-clock
 * milliseconds at which a mount first saw it ended, from which the settle is counted.
 *
 * <p>A mount cut off for so long that its session was removed, and then its notes swept, may
 * have lost objects of writes it has not committed yet: it refuses changes from the moment it
 * learns so, at its next heartbeat (which a change waits for once the session's lease lapsed,
 * see {@link Sessions#check}) or its next write of notes.
 */
final class SliceIntents {
    private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(SliceIntents.class);

    /** Sessions with notes: field the session id, value empty or when it was first seen ended. */
    static final String SESSIONS_WITH_NOTES = "intentSessions";
    private static final byte[] REGISTERED = new byte[0];
    /** How long the writer waits before it tries again after the engine did not answer. */
    private static final long RETRY_MS = 1000;
    /** How long an unmount waits for the notes under way to be written. */
    private static final long CLOSE_WAIT_MS = 10_000;

    static String key(long sid) {
        return "sliceIntents" + sid;
    }

    private final KvStore kv;
    private final Sessions sessions;
    private final Object lock = new Object();
    /** A slice noted and not written down yet: its value, and when it was noted ({@link System#nanoTime}). */
    private record Note(String owner, long atNanos) {
    }

    /** Noted, not written yet, by slice id. */
    private final Map<Long, Note> toWrite = new HashMap<>();
    /** Written (or being written) and committed since: to be dropped. */
    private final Set<Long> toDrop = new HashSet<>();
    /** When the oldest of {@link #toDrop} was settled ({@link System#nanoTime}). */
    private long firstDropNanos;
    /** In the metadata, or being written there. */
    private final Set<Long> written = new HashSet<>();
    /** In the metadata for sure (a transaction that wrote them succeeded): its list of sessions names this one. */
    private final Set<Long> inMeta = new HashSet<>();
    /** When the next write is scheduled ({@link System#nanoTime}), or 0 when none is. */
    private long scheduledAtNanos;
    /** Whether a write is running. */
    private boolean running;
    /** Unmounting: everything is written at once. */
    private boolean closing;
    private boolean closed;
    private ScheduledExecutorService writer;
    private final LogLimit failures = new LogLimit(java.time.Duration.ofMinutes(1));

    /**
     * How long a note waits before it is written down: a slice committed sooner (a small file's
     * one block uploaded to a fast store) needs none, and those noted meanwhile share the write.
     * A crash within this time of an upload's start may leak its object, as before notes existed;
     * an upload to S3 takes longer than this, so its note is written before its object exists.
     */
    static final long NOTE_DELAY_MS = 10;
    /** How long the notes of committed slices stay before they are dropped, unless a write of notes takes them along earlier. */
    static final long DROP_DELAY_MS = 5000;
    /** As many drops waiting are dropped at once. */
    static final int DROP_BATCH = 1000;

    SliceIntents(KvStore kv, Sessions sessions) {
        this.kv = kv;
        this.sessions = sessions;
    }

    /** Notes that slice {@code id}, written for chunk {@code chunk} of {@code ino}, is being uploaded. */
    void uploading(long id, long ino, long chunk) {
        if (sessions.id() == 0) {
            return; // no mount (a tool): nothing would end a session to sweep it
        }
        synchronized (lock) {
            if (closed || written.contains(id) || toWrite.containsKey(id)) {
                return;
            }
            toWrite.put(id, new Note(ino + " " + chunk, System.nanoTime()));
            schedule(NOTE_DELAY_MS);
        }
    }

    /** Drops the notes of slices committed (or handed to deletion) now. */
    void settled(Iterable<Long> ids) {
        synchronized (lock) {
            for (long id : ids) {
                if (toWrite.remove(id) == null && written.contains(id) && toDrop.add(id) && toDrop.size() == 1) {
                    firstDropNanos = System.nanoTime();
                }
            }
            if (!toDrop.isEmpty() && !closed) {
                schedule(toDrop.size() >= DROP_BATCH ? 0 : DROP_DELAY_MS);
            }
        }
    }

    /** Notes not dropped yet, written down or not: for tests and {@code partfs status}. */
    int pending() {
        synchronized (lock) {
            return toWrite.size() + written.size() - toDrop.size();
        }
    }

    /** Has the writer run within {@code delayMs} (sooner if already scheduled sooner); under the lock. */
    private void schedule(long delayMs) {
        long at = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(delayMs);
        if (closed || (scheduledAtNanos != 0 && scheduledAtNanos - at <= 0)) {
            return;
        }
        if (writer == null) {
            writer = java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "partfs-upload-notes");
                t.setDaemon(true);
                return t;
            });
        }
        scheduledAtNanos = at;
        writer.schedule(this::write, delayMs, TimeUnit.MILLISECONDS);
    }

    /**
     * Writes down the notes due (noted {@value #NOTE_DELAY_MS} ms ago or more), with the drops
     * waiting, one transaction a round until none is due; drops alone once they are due.
     */
    private void write() {
        long sid = sessions.id();
        while (true) {
            Map<Long, String> adds = new HashMap<>();
            Set<Long> drops;
            boolean hadWritten;
            synchronized (lock) {
                scheduledAtNanos = 0;
                long now = System.nanoTime();
                long due = now - TimeUnit.MILLISECONDS.toNanos(NOTE_DELAY_MS);
                long nextNote = Long.MAX_VALUE;
                for (Map.Entry<Long, Note> n : toWrite.entrySet()) {
                    if (closing || n.getValue().atNanos() - due <= 0) {
                        adds.put(n.getKey(), n.getValue().owner());
                    } else {
                        nextNote = Math.min(nextNote, n.getValue().atNanos() - due);
                    }
                }
                boolean dropsDue = !toDrop.isEmpty() && (closing || toDrop.size() >= DROP_BATCH
                        || now - firstDropNanos >= TimeUnit.MILLISECONDS.toNanos(DROP_DELAY_MS));
                if (sid == 0 || closed || (adds.isEmpty() && !dropsDue)) {
                    running = false;
                    if (sid != 0 && !closed) {
                        if (nextNote != Long.MAX_VALUE) {
                            schedule(Math.max(1, TimeUnit.NANOSECONDS.toMillis(nextNote)));
                        }
                        if (!toDrop.isEmpty()) {
                            schedule(Math.max(1, DROP_DELAY_MS - TimeUnit.NANOSECONDS.toMillis(now - firstDropNanos)));
                        }
                    }
                    lock.notifyAll();
                    return;
                }
                running = true;
                drops = new HashSet<>(toDrop); // they go along with the notes for free
                toDrop.clear();
                adds.keySet().forEach(toWrite::remove);
                hadWritten = !inMeta.isEmpty();
                written.addAll(adds.keySet());
            }
            String field = String.valueOf(sid);
            String[] gone = {null};
            try {
                boolean swept = kv.update(tx -> {
                    gone[0] = sessions.goneFrom(tx);
                    if (gone[0] != null) {
                        return true; // the volume's metadata is gone (a Redis restarted empty): nothing is written into it
                    }
                    byte[] mark = tx.hget(SESSIONS_WITH_NOTES, field);
                    if (mark == null && hadWritten) {
                        return true;
                    }
                    for (Map.Entry<Long, String> a : adds.entrySet()) {
                        tx.hset(key(sid), String.valueOf(a.getKey()), a.getValue().getBytes(StandardCharsets.US_ASCII));
                    }
                    for (long id : drops) {
                        tx.hdel(key(sid), String.valueOf(id));
                    }
                    if (mark == null || mark.length > 0) {
                        tx.hset(SESSIONS_WITH_NOTES, field, REGISTERED); // this session is alive: no settle runs for it
                    }
                    return false;
                });
                if (swept) {
                    sessions.fence(gone[0] != null ? gone[0] : sweptMessage(sid));
                    synchronized (lock) {
                        toWrite.clear();
                        toDrop.clear();
                        written.clear();
                        inMeta.clear();
                        closed = true;
                        running = false;
                        lock.notifyAll();
                    }
                    return;
                }
                synchronized (lock) {
                    inMeta.addAll(adds.keySet());
                    inMeta.removeAll(drops);
                    written.removeAll(drops);
                }
            } catch (IOException | RuntimeException e) {
                synchronized (lock) {
                    written.removeAll(adds.keySet());
                    long now = System.nanoTime();
                    for (Map.Entry<Long, String> a : adds.entrySet()) {
                        if (!toDrop.remove(a.getKey())) { // committed while its note was being written: no note needed
                            toWrite.putIfAbsent(a.getKey(), new Note(a.getValue(), now));
                        }
                    }
                    if (toDrop.isEmpty() && !drops.isEmpty()) {
                        firstDropNanos = now;
                    }
                    toDrop.addAll(drops);
                    running = false;
                    lock.notifyAll();
                    failures.warn(log, "cannot write down the slices being uploaded (tried again in {} s): {}", RETRY_MS / 1000,
                            e.toString());
                    schedule(RETRY_MS);
                }
                return;
            }
        }
    }

    static String sweptMessage(long sid) {
        return "this mount's session " + sid + " was taken for crashed (no heartbeat for " + MetaEngine.SESSION_TIMEOUT.toSeconds()
                + "s) and the objects of writes it had uploaded but not committed yet were deleted as a crashed mount's: it"
                + " refuses changes from now on, as those writes cannot be committed any more; unmount it and mount again";
    }

    /**
     * In a heartbeat's transaction: why this mount must refuse changes because its notes were
     * swept while its session was removed, or null.
     */
    String sweptWhileAway(KvStore.Writer tx, long sid) throws IOException {
        boolean any;
        synchronized (lock) {
            any = !inMeta.isEmpty();
        }
        byte[] mark = tx.hget(SESSIONS_WITH_NOTES, String.valueOf(sid));
        if (any && mark == null) {
            return sweptMessage(sid);
        }
        if (mark != null && mark.length > 0) {
            tx.hset(SESSIONS_WITH_NOTES, String.valueOf(sid), REGISTERED); // back before the settle ran out: still its own
        }
        return null;
    }

    /**
     * At unmount, before the session ends: waits a while for the notes under way to be written,
     * and leaves nothing behind when none is left (no file writes are under way then, so what is
     * left was never committed: the session's end lets a mount sweep it after the settle). Notes
     * after this, with no session, are not written.
     */
    void close() {
        long sid = sessions.id();
        boolean empty;
        synchronized (lock) {
            closing = true;
            if (!toWrite.isEmpty() || !toDrop.isEmpty()) {
                schedule(0);
            }
            long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(CLOSE_WAIT_MS);
            while ((running || scheduledAtNanos != 0) && !closed && System.nanoTime() < until) {
                try {
                    lock.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(until - System.nanoTime())));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
            empty = written.isEmpty() && toWrite.isEmpty() && toDrop.isEmpty() && !running;
            if (writer != null) {
                writer.shutdownNow();
                writer = null;
            }
            // what is left belongs to the session ending now; a session registered later starts afresh
            toWrite.clear();
            toDrop.clear();
            written.clear();
            inMeta.clear();
            running = false;
            scheduledAtNanos = 0;
            closing = false;
        }
        if (sid != 0 && empty) {
            try {
                kv.update(tx -> {
                    if (tx.hlen(key(sid)) == 0) {
                        tx.hdel(SESSIONS_WITH_NOTES, String.valueOf(sid));
                    }
                    return null;
                });
            } catch (IOException | RuntimeException e) {
                log.debug("cannot drop this session's empty list of uploads: {}", e.toString());
            }
        }
    }

    /** Stops the writer (the engine closes): what is not written stays unwritten. */
    void stop() {
        synchronized (lock) {
            closed = true;
            if (writer != null) {
                writer.shutdownNow();
                writer = null;
            }
        }
    }

    /** The slices noted by sessions still registered: uploads a live mount (or one not yet taken for crashed) may commit. */
    Set<Long> ofRegisteredSessions() throws IOException {
        return kv.read(r -> {
            Set<Long> ids = new HashSet<>();
            for (String field : r.hgetAll(SESSIONS_WITH_NOTES).keySet()) {
                long sid;
                try {
                    sid = Long.parseLong(field);
                } catch (NumberFormatException e) {
                    continue;
                }
                if (Sessions.registered(r, sid)) {
                    for (String id : r.hgetAll(key(sid)).keySet()) {
                        ids.add(Long.parseLong(id));
                    }
                }
            }
            return ids;
        });
    }

    /** Every session's notes: how many, and (0: none yet) when a mount first saw the session ended. */
    Map<Long, long[]> counts() throws IOException {
        return kv.read(r -> {
            Map<Long, long[]> out = new java.util.TreeMap<>();
            for (Map.Entry<String, byte[]> m : r.hgetAll(SESSIONS_WITH_NOTES).entrySet()) {
                try {
                    long sid = Long.parseLong(m.getKey());
                    long seen = m.getValue().length == 0 ? 0 : Long.parseLong(new String(m.getValue(), StandardCharsets.US_ASCII));
                    out.put(sid, new long[] {r.hlen(key(sid)), seen});
                } catch (NumberFormatException e) {
                    // not one of ours
                }
            }
            return out;
        });
    }

    /** A note ({@code <slice id>} -> {@code "<inode> <chunk>"}), or null when it cannot be read. */
    private static MetaEngine.WrittenSlice parse(String field, byte[] value) {
        String[] owner = new String(value, StandardCharsets.US_ASCII).split(" ");
        try {
            return new MetaEngine.WrittenSlice(Long.parseLong(field), Long.parseLong(owner[0]), Long.parseLong(owner[1]));
        } catch (NumberFormatException | ArrayIndexOutOfBoundsException e) {
            return null;
        }
    }

    /** Slices a session uploaded and never committed, claimed for deletion: by session. */
    record Claimed(long session, List<MetaEngine.WrittenSlice> slices) {
    }

    /**
     * Claims the notes of every session that ended at least {@code settleMillis} ago (by the
     * volume's clock, counted from when a mount first saw it ended, which this call records for
     * those it sees first): they are taken out of that session's notes, so no other mount sweeps
     * them too, and a mount whose session comes back after this learns that they are gone. A
     * session that registered again keeps its notes.
     *
     * <p>A mount (a session of its own) moves the notes into its own, in the same transaction,
     * until the caller has deleted what they name and {@link #settled} them: should it die
     * before, its notes are claimed in turn once its session has ended, and the objects are not
     * left behind. Without a session (a tool) they are dropped at once.
     */
    List<Claimed> claimEnded(long settleMillis) throws IOException {
        Map<String, byte[]> marks = kv.read(r -> r.hgetAll(SESSIONS_WITH_NOTES));
        List<Claimed> out = new ArrayList<>();
        if (marks.isEmpty()) {
            return out;
        }
        long now = sessions.nowMillis();
        Set<Long> registered = sessions.all().keySet();
        for (Map.Entry<String, byte[]> entry : marks.entrySet()) {
            String field = entry.getKey();
            long sid;
            try {
                sid = Long.parseLong(field);
            } catch (NumberFormatException e) {
                continue;
            }
            if (sid == sessions.id() || (registered.contains(sid) && entry.getValue().length == 0)) {
                continue; // a mount's own, or a registered one's (the common case): nothing to write
            }
            byte[] since = kv.update(tx -> {
                byte[] m = tx.hget(SESSIONS_WITH_NOTES, field);
                if (m == null) {
                    return null; // claimed meanwhile
                }
                if (Sessions.registered(tx, sid)) {
                    if (m.length > 0) {
                        tx.hset(SESSIONS_WITH_NOTES, field, REGISTERED);
                    }
                    return null;
                }
                if (m.length == 0) {
                    m = String.valueOf(now).getBytes(StandardCharsets.US_ASCII);
                    tx.hset(SESSIONS_WITH_NOTES, field, m);
                }
                return m;
            });
            if (since == null || now - Long.parseLong(new String(since, StandardCharsets.US_ASCII)) < settleMillis) {
                continue;
            }
            long own = sessions.id();
            boolean adopt;
            boolean hadWritten;
            synchronized (lock) {
                adopt = own != 0 && !closed && !closing;
                hadWritten = !inMeta.isEmpty();
            }
            Map<String, byte[]> notes = kv.update(tx -> {
                byte[] m = tx.hget(SESSIONS_WITH_NOTES, field);
                if (m == null || !java.util.Arrays.equals(m, since) || Sessions.registered(tx, sid)) {
                    return null; // claimed by another mount, or the session came back meanwhile
                }
                Map<String, byte[]> all = tx.hgetAll(key(sid));
                if (adopt) {
                    byte[] mine = tx.hget(SESSIONS_WITH_NOTES, String.valueOf(own));
                    if (mine == null && hadWritten) {
                        return null; // this mount's own notes were swept: it is fenced at its next heartbeat, claims nothing
                    }
                    for (Map.Entry<String, byte[]> n : all.entrySet()) {
                        if (parse(n.getKey(), n.getValue()) != null) { // an unreadable one would never be dropped
                            tx.hset(key(own), n.getKey(), n.getValue());
                        }
                    }
                    if (mine == null || mine.length > 0) {
                        tx.hset(SESSIONS_WITH_NOTES, String.valueOf(own), REGISTERED);
                    }
                }
                tx.hdelAll(key(sid));
                tx.hdel(SESSIONS_WITH_NOTES, field);
                return all;
            });
            if (notes == null) {
                continue;
            }
            List<MetaEngine.WrittenSlice> slices = new ArrayList<>();
            for (Map.Entry<String, byte[]> n : notes.entrySet()) {
                MetaEngine.WrittenSlice w = parse(n.getKey(), n.getValue());
                if (w != null) {
                    slices.add(w);
                } else {
                    log.warn("ignored an unreadable note of an upload of session {}: {}", sid, n.getKey());
                }
            }
            if (adopt) {
                synchronized (lock) {
                    for (MetaEngine.WrittenSlice w : slices) {
                        written.add(w.id());
                        inMeta.add(w.id());
                    }
                }
            }
            out.add(new Claimed(sid, slices));
        }
        return out;
    }
}
