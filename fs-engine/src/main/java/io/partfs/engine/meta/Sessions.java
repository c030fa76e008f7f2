package io.partfs.engine.meta;

import io.partfs.engine.FsException;
import io.partfs.engine.meta.MetaEngine.Flock;
import io.partfs.engine.meta.MetaEngine.Session;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The mounts of a volume and the flock(2) locks they hold, kept in the metadata engine for
 * {@link MetaEngine}: this process's session (registered, kept alive by heartbeats, ended at
 * unmount), the removal of crashed mounts' sessions with their locks, and this process's hold
 * on its own session: a mount cut off for longer than others wait finds its session removed,
 * takes its locks again, or refuses changes if another mount took one.
 */
final class Sessions {
    private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(Sessions.class);

    private static final String SESSIONS = "sessions";
    /** Session id to the wall-clock milliseconds of its last heartbeat, in decimal. */
    private static final String SESSION_BEATS = "sessionBeats";
    /** This process's session, 0 when it has none. */
    private volatile long session;
    private volatile byte[] sessionInfo;
    /** Why this process refuses changes ({@link #fenced}), or null. */
    private volatile String fenced;
    /** {@code clock} reading of the last heartbeat this process recorded (or its registration). */
    private volatile long lastBeatNanos;
    /** Serializes heartbeats, and the renewals of a lapsed lease ({@link #check}). */
    private final Object renewal = new Object();
    /** Why the last renewal of a lapsed lease failed, and when; null once one succeeded. */
    private IOException lastRenewalFailure;
    private long lastRenewalFailureNanos;
    /**
     * How long changes fail at once, without asking the engine again, after a renewal failed:
     * requests queued behind it then fail after one timeout, not one each.
     */
    static final java.time.Duration RENEWAL_RETRY = java.time.Duration.ofSeconds(1);

    /**
     * How long after its last heartbeat a mount beats again, before it changes anything, to
     * learn whether its session is still its own: a minute less than other clients wait before
     * they take it for crashed. Without it, a mount cut off from Redis for longer than that
     * would go on writing, on its return, for up to a heartbeat interval as the holder of locks
     * that another mount may have taken meanwhile.
     */
    static final java.time.Duration LEASE = MetaEngine.SESSION_TIMEOUT.minus(java.time.Duration.ofMinutes(1));

    /**
     * The store holding the sessions. Sessions and locks are no filesystem change: their
     * transactions run on it directly, not through MetaEngine's mutate, which calls
     * {@link #check} and so renews a lapsed session.
     */
    private final KvStore kv;
    /** The volume's clock: every mount writes and judges heartbeats by the same one. */
    private final StoreClock clock;

    Sessions(KvStore kv, StoreClock clock) {
        this.kv = kv;
        this.clock = clock;
    }

    /** What else a heartbeat checks, in its transaction: why this mount must refuse changes, or null. */
    interface BeatCheck {
        String check(KvStore.Writer tx, long sid) throws IOException;
    }

    private volatile BeatCheck beatCheck = (tx, sid) -> null;

    /** Has every heartbeat also run {@code check} (see {@link SliceIntents#sweptWhileAway}). */
    void checkOnBeat(BeatCheck check) {
        this.beatCheck = check;
    }

    /** Whether session {@code sid} is registered (ended sessions, and those removed as crashed, are not). */
    static boolean registered(KvStore.Reader r, long sid) throws IOException {
        return r.hget(SESSIONS, String.valueOf(sid)) != null;
    }

    /** Makes this mount refuse changes from now on, for {@code why} (logged once). */
    void fence(String why) {
        synchronized (renewal) {
            if (fenced == null) {
                fenced = why;
                log.error(why);
            }
        }
    }

    /** Now by the volume's clock, measured again first unless that was done within a heartbeat interval. */
    long nowMillis() throws IOException {
        clock.fresh();
        return clock.nowMillis();
    }

    /**
     * Registers this process as a mount of the volume; {@code info} describes it for
     * {@code partfs status}. Unlinked files it holds open are then kept for it until it ends
     * the session, or stops beating for {@link MetaEngine#SESSION_TIMEOUT}.
     */
    long register(String info) throws IOException {
        long sid = kv.increment(MetaEngine.NEXT_SESSION, 1);
        byte[] bytes = info.getBytes(StandardCharsets.UTF_8);
        clock.sync();
        long now = clock.nowMillis();
        kv.update(tx -> {
            tx.hset(SESSIONS, String.valueOf(sid), bytes);
            tx.hset(SESSION_BEATS, String.valueOf(sid), String.valueOf(now).getBytes(StandardCharsets.US_ASCII));
            return null;
        });
        sessionInfo = bytes;
        lastBeatNanos = now * 1_000_000;
        session = sid;
        return sid;
    }

    /** This process's session id, 0 before {@link #register}. */
    long id() {
        return session;
    }

    /**
     * Tells the volume this process's session is alive. Returns false when another client had
     * removed it for missing heartbeats (this process paused, or was cut off from the metadata
     * engine, for {@link MetaEngine#SESSION_TIMEOUT}); it is registered again under the same
     * id, and the flock(2) locks this process holds are taken again, in the same transaction. A lock
     * another mount took meanwhile cannot be: then this mount {@linkplain #fenced() refuses
     * changes} from then on, as it may no longer be the only writer its lock promised.
     */
    boolean heartbeat() throws IOException {
        synchronized (renewal) {
            long sid = session;
            if (sid == 0) {
                return true;
            }
            String id = String.valueOf(sid);
            clock.sync(); // each beat measures the volume's clock again: this machine's may have been set meanwhile
            long now = clock.nowMillis(); // read before the write: the beat is recorded as no later than it is
            List<Long> lost = new ArrayList<>();
            String[] gone = {null};
            String[] refused = {null};
            boolean known = kv.update(tx -> {
                lost.clear(); // a retried transaction starts over
                gone[0] = goneFrom(tx);
                if (gone[0] != null) {
                    return true; // nothing written into metadata that is not the volume's
                }
                refused[0] = beatCheck.check(tx, sid);
                boolean k = tx.hget(SESSIONS, id) != null;
                if (!k) {
                    tx.hset(SESSIONS, id, sessionInfo);
                    retakeFlocks(tx, sid, lost);
                }
                tx.hset(SESSION_BEATS, id, String.valueOf(now).getBytes(StandardCharsets.US_ASCII));
                return k;
            });
            if (gone[0] != null) {
                if (fenced == null) {
                    fenced = gone[0];
                    log.error(fenced);
                }
                return true;
            }
            if (refused[0] != null) {
                fence(refused[0]);
            }
            lastBeatNanos = now * 1_000_000;
            if (!known) {
                log.warn("this mount's session {} had been removed by another client for missing heartbeats (this process"
                        + " paused, or was cut off from the metadata engine, for {}s): registered again; unlinked files it"
                        + " held open may have been deleted{}", sid, MetaEngine.SESSION_TIMEOUT.toSeconds(),
                        heldFlocks.isEmpty() ? "" : lost.isEmpty() ? "; its " + heldFlocks.size() + " flock(2) locks, which no"
                                + " other mount took meanwhile, are held again" : "");
                if (!lost.isEmpty()) {
                    fenced = "this mount lost its flock(2) lock on inode " + lost.get(0) + (lost.size() > 1 ? " (and "
                            + (lost.size() - 1) + " more)" : "") + " to another mount while its session was taken for crashed"
                            + " (no heartbeat for " + MetaEngine.SESSION_TIMEOUT.toSeconds() + "s): it refuses changes from now on, as"
                            + " another writer may be at work; unmount it and mount again";
                    log.error(fenced);
                }
            }
            return known;
        }
    }

    /** The volume this process mounted, set at {@link #register}; null for no check. */
    private volatile io.partfs.engine.VolumeFormat volume;
    private volatile String volumeAt;

    /**
     * Has every heartbeat check that the metadata still holds {@code format}'s volume (its
     * uuid): a Redis that restarted empty (no append-only file), was flushed, or a URL that now
     * leads elsewhere holds none, and this mount must not write sessions, locks or files into it.
     */
    void expectVolume(io.partfs.engine.VolumeFormat format, String metaDescription) {
        this.volumeAt = metaDescription;
        this.volume = format;
    }

    /**
     * Why the metadata {@code r} reads is not this mount's volume any more, or null when it is (or
     * no volume is expected): checked by each transaction a mount writes in the background, so
     * none writes into metadata that restarted empty before a heartbeat finds it gone.
     */
    String goneFrom(KvStore.Reader r) throws IOException {
        return volume == null ? null : gone(r.get(MetaEngine.SETTING));
    }

    /** Why the metadata holding {@code setting} is not this mount's volume any more, or null when it is. */
    private String gone(byte[] setting) throws IOException {
        io.partfs.engine.VolumeFormat v = volume;
        String other = setting == null ? null : io.partfs.engine.VolumeFormat.looksLikeOne(setting)
                ? io.partfs.engine.VolumeFormat.decode(setting).uuid() : "";
        if (v.uuid().equals(other)) {
            return null;
        }
        return "the metadata of volume '" + v.name() + "' (uuid " + v.uuid() + ") is gone from " + volumeAt + ": "
                + (other == null ? "it holds no volume (a Redis that restarted with nothing to load, or was flushed)"
                        : "it holds another volume's or program's data now")
                + "; this mount refuses changes from now on and its files read as stale. Unmount it, restore the metadata "
                + "with 'partfs load --meta URL --storage '" + v.storage() + "' --name " + v.name()
                + " --from-backup latest', and mount again";
    }

    /**
     * Why this mount refuses changes (EROFS), or null while it takes them: set when it lost a
     * flock(2) lock to another mount ({@link #heartbeat}), or its volume is gone from the
     * metadata ({@link #expectVolume}). Lasts until the process ends.
     */
    String fenced() {
        return fenced;
    }

    /** Refuses a change when this mount is {@link #fenced()}; renews a lapsed session first ({@link #LEASE}). */
    void check() throws IOException {
        if (fenced == null && session != 0 && clock.nowNanos() - lastBeatNanos > LEASE.toNanos()) {
            synchronized (renewal) {
                long now = clock.nowNanos();
                if (now - lastBeatNanos > LEASE.toNanos()) {
                    IOException failed = lastRenewalFailure;
                    if (failed != null && now - lastRenewalFailureNanos < RENEWAL_RETRY.toNanos()) {
                        // the engine did not answer the renewal a moment ago: fail as it did, rather than
                        // have every waiting request wait out its own timeout, one after the other
                        throw new IOException(failed.getMessage(), failed);
                    }
                    try {
                        heartbeat();
                        lastRenewalFailure = null;
                    } catch (IOException e) {
                        lastRenewalFailure = e;
                        lastRenewalFailureNanos = clock.nowNanos();
                        throw e;
                    }
                }
            }
        }
        String why = fenced;
        if (why != null) {
            throw new FsException.ReadOnly(why);
        }
    }

    void unregister(long sid) throws IOException {
        if (sid == session) {
            session = 0;
            heldFlocks.clear();
        }
        kv.update(tx -> {
            tx.hdel(SESSIONS, String.valueOf(sid));
            tx.hdel(SESSION_BEATS, String.valueOf(sid));
            dropFlocks(tx, sid);
            return null;
        });
    }

    /** Registered mounts, live or not: a crashed mount stays listed until a mount or gc removes it. */
    Map<Long, Session> all() throws IOException {
        return kv.read(Sessions::read);
    }

    /** The mounts that beat within {@link MetaEngine#SESSION_TIMEOUT}. */
    Map<Long, Session> live() throws IOException {
        return live(all(), nowMillis());
    }

    static Map<Long, Session> live(Map<Long, Session> all, long nowMillis) {
        Map<Long, Session> out = new java.util.TreeMap<>();
        for (Session s : all.values()) {
            if (s.live(nowMillis)) {
                out.put(s.id(), s);
            }
        }
        return out;
    }

    static Map<Long, Session> read(KvStore.Reader r) throws IOException {
        Map<String, byte[]> beats = r.hgetAll(SESSION_BEATS);
        Map<Long, Session> out = new java.util.TreeMap<>();
        for (Map.Entry<String, byte[]> e : r.hgetAll(SESSIONS).entrySet()) {
            byte[] beat = beats.get(e.getKey());
            long id = Long.parseLong(e.getKey());
            out.put(id, new Session(id, new String(e.getValue(), StandardCharsets.UTF_8),
                    beat == null ? -1 : Long.parseLong(new String(beat, StandardCharsets.US_ASCII))));
        }
        return out;
    }

    /**
     * Removes the sessions of crashed mounts (no heartbeat for {@link MetaEngine#SESSION_TIMEOUT}), so
     * the unlinked files they held open become {@link MetaEngine#pendingFileDeletions}. Each is checked
     * again inside the transaction: a session that beat meanwhile stays. Returns those removed.
     */
    List<Session> removeStale() throws IOException {
        long now = nowMillis();
        List<Session> stale = new ArrayList<>();
        for (Session s : all().values()) {
            if (!s.live(now) && s.id() != session) {
                stale.add(s);
            }
        }
        if (stale.isEmpty()) {
            return stale;
        }
        return kv.update(tx -> {
            List<Session> removed = new ArrayList<>();
            for (Session s : stale) {
                String id = String.valueOf(s.id());
                byte[] beat = tx.hget(SESSION_BEATS, id);
                if (beat != null && new Session(s.id(), s.info(), Long.parseLong(new String(beat, StandardCharsets.US_ASCII))).live(now)) {
                    continue;
                }
                tx.hdel(SESSIONS, id);
                tx.hdel(SESSION_BEATS, id);
                dropFlocks(tx, s.id());
                removed.add(s);
            }
            return removed;
        });
    }

    // ---- file locks ----

    private static final byte[] FLOCK_SHARED = {'R'};
    private static final byte[] FLOCK_EXCLUSIVE = {'W'};

    /** The flock(2) locks on an inode: field {@code <session>/<owner>}, value R (shared) or W (exclusive). */
    private static String flockKey(long ino) {
        return "flock" + ino;
    }

    /** The inodes a session holds flock(2) locks on (the fields), so that its locks end with it. */
    private static String sessionFlocksKey(long sid) {
        return "sessionFlocks" + sid;
    }

    /**
     * Takes, converts or drops the flock(2) lock that {@code owner} (an open file of this
     * mount, as the kernel names it) holds on {@code ino}, for every mount of the volume: a
     * shared lock conflicts with another holder's exclusive one, an exclusive lock with any
     * other holder's. Returns false, changing nothing, on a conflict. Locks belong to this
     * process's session: they end with it ({@link #unregister}), and a crashed mount's
     * with its removal ({@link #removeStale}, {@link #remove}).
     */
    boolean flock(long ino, long owner, Flock what) throws IOException {
        if (what != Flock.UNLOCK) {
            check(); // a lapsed session renews before it takes a lock; a fenced mount takes none
        }
        long sid = session;
        String me = sid + "/" + owner;
        String key = flockKey(ino);
        boolean done = kv.update(tx -> {
            Map<String, byte[]> holders = tx.hgetAll(key);
            if (what == Flock.UNLOCK) {
                if (holders.containsKey(me)) {
                    tx.hdel(key, me);
                    if (holders.keySet().stream().noneMatch(h -> !h.equals(me) && h.startsWith(sid + "/"))) {
                        tx.hdel(sessionFlocksKey(sid), String.valueOf(ino));
                    }
                }
                return true;
            }
            if (conflicts(holders, me, what)) {
                return false;
            }
            tx.hset(key, me, what == Flock.EXCLUSIVE ? FLOCK_EXCLUSIVE : FLOCK_SHARED);
            tx.hset(sessionFlocksKey(sid), String.valueOf(ino), new byte[0]);
            return true;
        });
        if (what == Flock.UNLOCK) {
            heldFlocks.remove(new FlockOwner(ino, owner));
        } else if (done) {
            heldFlocks.put(new FlockOwner(ino, owner), what);
        }
        return done;
    }

    /** Whether {@code holders} of a lock hold it in a way that keeps {@code me} from taking it as {@code what}. */
    private static boolean conflicts(Map<String, byte[]> holders, String me, Flock what) {
        for (Map.Entry<String, byte[]> h : holders.entrySet()) {
            if (!h.getKey().equals(me) && (what == Flock.EXCLUSIVE || h.getValue()[0] == 'W')) {
                return true;
            }
        }
        return false;
    }

    /** An open file of this mount holding a flock(2) lock on an inode. */
    private record FlockOwner(long ino, long owner) {
    }

    /** The flock(2) locks this process holds, to take again should its session have been removed. */
    private final Map<FlockOwner, Flock> heldFlocks = new java.util.concurrent.ConcurrentHashMap<>();

    /**
     * Takes again, inside {@code tx}, the locks this process holds, for its session {@code sid}
     * registered anew; adds to {@code lost} the inodes whose lock another mount holds now.
     */
    private void retakeFlocks(KvStore.Writer tx, long sid, List<Long> lost) throws IOException {
        for (Map.Entry<FlockOwner, Flock> h : heldFlocks.entrySet()) {
            long ino = h.getKey().ino();
            String key = flockKey(ino);
            String me = sid + "/" + h.getKey().owner();
            if (conflicts(tx.hgetAll(key), me, h.getValue())) {
                if (!lost.contains(ino)) {
                    lost.add(ino);
                }
                continue;
            }
            tx.hset(key, me, h.getValue() == Flock.EXCLUSIVE ? FLOCK_EXCLUSIVE : FLOCK_SHARED);
            tx.hset(sessionFlocksKey(sid), String.valueOf(ino), new byte[0]);
        }
    }

    /** Drops, inside {@code tx}, every flock(2) lock session {@code sid} holds. */
    private static void dropFlocks(KvStore.Writer tx, long sid) throws IOException {
        String prefix = sid + "/";
        for (String ino : tx.hgetAll(sessionFlocksKey(sid)).keySet()) {
            String key = flockKey(Long.parseLong(ino));
            for (String holder : tx.hgetAll(key).keySet()) {
                if (holder.startsWith(prefix)) {
                    tx.hdel(key, holder);
                }
            }
        }
        tx.hdelAll(sessionFlocksKey(sid));
    }

    /**
     * Removes session {@code sid} at once, as {@link #removeStale} removes a crashed
     * mount's: for a mount known to be dead (this machine's earlier mount at the same mount
     * point), whose locks and kept-open files must not wait out {@link MetaEngine#SESSION_TIMEOUT}.
     * Returns false if there was no such session.
     */
    boolean remove(long sid) throws IOException {
        if (sid == session) {
            throw new IllegalArgumentException("session " + sid + " is this process's own");
        }
        String id = String.valueOf(sid);
        return kv.update(tx -> {
            boolean known = tx.hget(SESSIONS, id) != null;
            tx.hdel(SESSIONS, id);
            tx.hdel(SESSION_BEATS, id);
            dropFlocks(tx, sid);
            return known;
        });
    }
}
