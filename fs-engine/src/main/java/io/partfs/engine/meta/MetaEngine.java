package io.partfs.engine.meta;

import io.partfs.engine.Attr;
import io.partfs.engine.DirEntry;
import io.partfs.engine.FileType;
import io.partfs.engine.FsException;
import io.partfs.engine.NameCodec;
import io.partfs.engine.TimeSource;
import io.partfs.engine.VolumeFormat;
import java.io.Closeable;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongConsumer;

/**
 * The inode-based metadata of one volume, on any {@link KvStore}: attributes, directories, hard
 * links, symlinks, extended attributes and each file's chunk slice lists. Every public method is
 * one atomic transaction, so the same code is correct on RocksDB (serialized) and on Redis
 * (optimistic, retried on conflict).
 *
 * <p>Layout in the store: {@code i<ino>} attributes, {@code d<ino>} hash name to entry,
 * {@code c<ino>_<chunk>} slice list, {@code s<ino>} symlink target, {@code x<ino>} hash of
 * xattrs, {@code delfiles} hash of unlinked inodes whose data awaits deletion,
 * {@code delslices} hash of slices whose objects await deletion, {@code trash<hour>} hash of
 * slices freed in that hour (hours since the epoch) whose objects are kept until the volume's
 * trash time is over, {@code trash} hash of those hours, {@code trashHours} how long (plain,
 * decimal; missing: 0), counters {@code nextInode}, {@code nextSlice}, {@code usedSpace},
 * {@code totalInodes}.
 *
 * <p>Deletion: when a file loses its last link its inode stays (nlink 0) and is recorded in
 * {@code delfiles}; once no handle of this process has it open, {@link #deleteFileData}
 * moves its slices to {@code delslices} (or, when the volume keeps a trash, to the trash bucket of
 * the hour, from which {@link #expireTrash} moves them on once their time is over) and removes
 * the inode; the object store side is the data layer's job. Thread-safe.
 */
public final class MetaEngine implements Closeable {
    private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(MetaEngine.class);
    public static final long ROOT = 1;
    /** Chunks a file deletion frees per transaction (each may list many slices). */
    private static final int CHUNKS_PER_DELETE = 16;
    /** Chunks past which a file's chunks are found by a key scan rather than index by index. */
    private static final long SCAN_CHUNKS_ABOVE = 1 << 16;
    public static final int MAX_NAME_BYTES = 255;
    public static final int MAX_LINKS = 65000;
    public static final int MAX_XATTR_VALUE = 64 << 10;
    /**
     * Room for a file's extended attribute names, each with its NUL, as listxattr(2) returns
     * them: Linux returns at most this (XATTR_LIST_MAX), and E2BIG for more, which would make
     * the file's attributes unlistable (cp -a, rsync -X and backups would fail on it).
     */
    public static final int MAX_XATTR_LIST = 64 << 10;
    private static final long CHUNK = VolumeFormat.CHUNK_SIZE;
    private static final long MAX_FILE_SIZE = CHUNK * Integer.MAX_VALUE;

    static final String SETTING = "setting";
    static final String DELFILES = "delfiles";
    static final String DELSLICES = "delslices";
    private static final String USED_SPACE = "usedSpace";
    private static final String TOTAL_INODES = "totalInodes";
    private static final String NEXT_INODE = "nextInode";
    static final String NEXT_SLICE = "nextSlice";
    static final String NEXT_SESSION = "nextSession";
    /** Every counter the engine keeps ({@link MetaDump} copies them). */
    static final java.util.List<String> COUNTERS = java.util.List.of(NEXT_INODE, NEXT_SLICE, NEXT_SESSION, USED_SPACE, TOTAL_INODES);

    private final KvStore kv;
    private final TimeSource clock;
    /** The volume's clock: heartbeats and trash hours ({@link StoreClock}). */
    private final StoreClock volumeClock;
    private final IdBatch inodeIds;
    private final IdBatch sliceIds;
    /** Open handles per inode in this process; an unlinked inode's data waits for zero. */
    private final Map<Long, Integer> openCount = new ConcurrentHashMap<>();
    private volatile LongConsumer orphanListener = ino -> { };
    /** Inodes unlinked while open here: only these need a look at nlink when released. */
    private final java.util.Set<Long> unlinkedWhileOpen = ConcurrentHashMap.newKeySet();
    /** Chunk slice lists by the data version they belong to. */
    private final ChunkLists chunkLists = new ChunkLists();
    /** In-memory attributes and listings, or null when caching is off. */
    private volatile MetaCache cache;
    /** What the transaction running on this thread changed, for {@link MetaCache}. */
    private static final ThreadLocal<MetaCache.TxnNotes> NOTES = ThreadLocal.withInitial(MetaCache.TxnNotes::new);
    private VolumeFormat format;
    /** The volume's trash: slices freed in the last {@link #trashHours()}, kept before their deletion. */
    private final TrashBuckets trashBuckets;

    /**
     * The engine of a mount, of gc or of status: file times by this machine's clock, heartbeats
     * and the trash by the metadata store's ({@link StoreClock}), on which the machines sharing
     * a volume agree whatever their own clocks say.
     */
    public MetaEngine(KvStore kv) {
        this(kv, TimeSource.SYSTEM, true);
    }

    /** An engine whose every time is {@code clock}'s, heartbeats and trash included: tests' fake clocks. */
    public MetaEngine(KvStore kv, TimeSource clock) {
        this(kv, clock, false);
    }

    /** File times by {@code clock}; heartbeats and trash by the store's clock measured against it when {@code followStore}. */
    MetaEngine(KvStore kv, TimeSource clock, boolean followStore) {
        this.kv = kv;
        this.clock = clock;
        this.volumeClock = new StoreClock(kv, clock, followStore);
        this.inodeIds = new IdBatch(kv, NEXT_INODE, 100);
        this.sliceIds = new IdBatch(kv, NEXT_SLICE, 1000);
        this.trashBuckets = new TrashBuckets(kv, volumeClock, this::mutate);
        this.sessionTable = new Sessions(kv, volumeClock);
        this.uploads = new SliceIntents(kv, sessionTable);
        sessionTable.checkOnBeat(uploads::sweptWhileAway);
    }

    public KvStore store() {
        return kv;
    }

    /**
     * Keeps attributes and directory listings in memory (see {@link MetaCache}): exact for the
     * only client of a volume ({@code ttl} null: forever), and for a volume shared with other
     * clients, their changes show after {@code ttl}. Zero turns caching off.
     */
    public void enableCache(java.time.Duration ttl) {
        enableCache(ttl, DEFAULT_CACHE_ENTRIES);
    }

    /** The default bound of {@link #enableCache(java.time.Duration, int)}: ~150 MB of heap at most. */
    public static final int DEFAULT_CACHE_ENTRIES = MetaCache.DEFAULT_MAX_ENTRIES;

    /**
     * {@link #enableCache(java.time.Duration)} holding at most about {@code maxEntries}
     * attributes, listings and extended-attribute sets; past that, those read or written longest
     * ago are evicted.
     */
    public void enableCache(java.time.Duration ttl, int maxEntries) {
        if (ttl != null && ttl.isZero()) {
            cache = null;
            return;
        }
        cache = new MetaCache(ttl == null ? Long.MAX_VALUE : ttl.toNanos(), maxEntries);
    }

    /** Entries the cache holds now (0 when off). */
    public int cacheEntries() {
        MetaCache c = cache;
        return c == null ? 0 : c.size();
    }

    /** Entries the cache evicted to stay within its bound (0 when off). */
    public long cacheEvictions() {
        MetaCache c = cache;
        return c == null ? 0 : c.evicted();
    }

    /** How long a cached listing or attribute may be used: 0 when caching is off, {@code Long.MAX_VALUE} for ever. */
    public long cacheTtlNanos() {
        MetaCache c = cache;
        return c == null ? 0 : c.ttlNanos();
    }

    /**
     * Runs a transaction and tells the cache what it changed ({@link MetaCache#end}): the
     * attributes it wrote, the directory entries and extended attributes it changed.
     */
    private <T> T mutate(KvStore.Txn<T> body) throws IOException {
        return mutateNoted(body, ANY_INODE);
    }

    /**
     * As {@link #mutate}, for a transaction that changes, of what the cache holds, only the
     * attributes of inode {@code ino} (a write commit, or freeing an unlinked file): it does not
     * make the transactions and reads around it drop what they have ({@link MetaCache#endSingle}).
     */
    private <T> T mutateSingle(long ino, KvStore.Txn<T> body) throws IOException {
        return mutateNoted(body, ino);
    }

    /** For {@link #mutateNoted}: the transaction may change anything the cache holds. */
    private static final long ANY_INODE = -1;

    /** {@link #mutate}, or with {@code single} an inode number, {@link #mutateSingle}. */
    private <T> T mutateNoted(KvStore.Txn<T> body, long single) throws IOException {
        sessionTable.check();
        MetaCache c = cache;
        if (c == null) {
            return kv.update(body);
        }
        MetaCache.TxnNotes notes = NOTES.get();
        notes.reset();
        boolean committed = false;
        long began = single == ANY_INODE ? c.begin() : c.beginSingle();
        try {
            T result = updateNoting(body, notes);
            committed = true;
            return result;
        } finally {
            if (single == ANY_INODE) {
                c.end(notes, committed, began); // end keeps none of the notes' collections
            } else if (!c.endSingle(single, notes, committed, began)) {
                log.warn("a transaction on inode {} changed more than that inode: in-memory metadata cleared", single);
            }
            notes.reset();
            lastUsage = null; // this process changed something: statfs reads again
        }
    }

    /** Runs {@code body} in a transaction whose changes are noted in {@code notes} (those of its last attempt). */
    private <T> T updateNoting(KvStore.Txn<T> body, MetaCache.TxnNotes notes) throws IOException {
        return kv.update(tx -> {
            notes.reset(); // a retried transaction starts over
            return body.run(new EntryRecorder(tx, notes));
        });
    }

    /** A transaction that also notes every directory entry it sets or removes, for {@link MetaCache}. */
    private static final class EntryRecorder extends ForwardingWriter {
        private final MetaCache.TxnNotes notes;

        EntryRecorder(KvStore.Writer tx, MetaCache.TxnNotes notes) {
            super(tx);
            this.notes = notes;
        }

        /** The directory inode of a {@link #dirKey} ("d" and digits; not "delfiles"), else -1. */
        private static long dirOf(String hash) {
            return inodeOf(hash, 'd');
        }

        /** The inode of an {@link #xattrKey} ("x" and digits), else -1. */
        private static long xattrsOf(String hash) {
            return inodeOf(hash, 'x');
        }

        private static long inodeOf(String hash, char kind) {
            if (hash.length() < 2 || hash.charAt(0) != kind) {
                return -1;
            }
            for (int i = 1; i < hash.length(); i++) {
                if (hash.charAt(i) < '0' || hash.charAt(i) > '9') {
                    return -1;
                }
            }
            return Long.parseLong(hash, 1, hash.length(), 10);
        }

        @Override
        public void hset(String hash, String field, byte[] value) {
            tx.hset(hash, field, value);
            long dir = dirOf(hash);
            if (dir >= 0) {
                notes.entries().add(new MetaCache.EntryChange(dir, field, decodeEntry(field, value)));
            }
            noteXattrs(hash);
        }

        @Override
        public void hdel(String hash, String field) {
            tx.hdel(hash, field);
            long dir = dirOf(hash);
            if (dir >= 0) {
                notes.entries().add(new MetaCache.EntryChange(dir, field, null));
            }
            noteXattrs(hash);
        }

        @Override
        public void hdelAll(String hash) {
            tx.hdelAll(hash);
            long dir = dirOf(hash);
            if (dir >= 0) {
                notes.entries().add(new MetaCache.EntryChange(dir, null, null));
            }
            noteXattrs(hash);
        }

        private void noteXattrs(String hash) {
            long ino = xattrsOf(hash);
            if (ino >= 0) {
                notes.xattrs().add(ino);
            }
        }
    }

    /**
     * Formats the volume, or checks that it already has this format. Idempotent for the same
     * name, block size and storage.
     *
     * @return the stored format (with the uuid of the first format)
     * @throws IOException when the volume exists with another name, block size or storage
     */
    public VolumeFormat format(VolumeFormat wanted, int rootUid, int rootGid) throws IOException {
        return format(wanted, rootUid, rootGid, 0);
    }

    /**
     * As {@link #format(VolumeFormat, int, int)}; a volume it creates keeps freed objects in its
     * trash for {@code trashHours} ({@link #trashHours()}). An existing volume keeps its own.
     */
    public VolumeFormat format(VolumeFormat wanted, int rootUid, int rootGid, int trashHours) throws IOException {
        TrashBuckets.checkHours(trashHours);
        checkFormattable(kv, wanted);
        VolumeFormat result = mutate(tx -> {
            byte[] existing = tx.get(SETTING);
            if (existing != null) {
                return sameVolume(kv, existing, wanted);
            }
            tx.put(SETTING, wanted.encode());
            TrashBuckets.recordHours(tx, trashHours);
            long now = clock.nowNanos();
            tx.put(inodeKey(ROOT), new Attr(ROOT, FileType.DIRECTORY, 0755, rootUid, rootGid, 2, 4096,
                    now, now, now, 0, ROOT, 0).encode());
            tx.add(TOTAL_INODES, 1);
            return wanted;
        });
        if (kv.read(r -> r.counter(NEXT_INODE)) < ROOT) {
            kv.increment(NEXT_INODE, ROOT);
        }
        this.format = result;
        trashHours();
        return result;
    }

    /** Reads the volume's format; fails with a message to run {@code partfs format} when there is none. */
    public VolumeFormat load() throws IOException {
        VolumeFormat f = loadIfFormatted();
        if (f == null) {
            throw new IOException("no volume is formatted at " + kv.describe() + ": run 'partfs format' first, or, if a"
                    + " volume's metadata was lost here, restore its backup ('partfs load --from-backup latest')");
        }
        return f;
    }

    /**
     * Reads the volume's format, or returns null when none is recorded yet ({@link #format}
     * records one); refuses a volume that {@code partfs destroy} began to delete.
     */
    public VolumeFormat loadIfFormatted() throws IOException {
        byte[][] b = kv.read(r -> new byte[][] {r.get(SETTING), r.get(DESTROYING)});
        if (b[0] == null) {
            return null;
        }
        VolumeFormat f = decodeFormat(kv, b[0]);
        refuseDestroying(kv, f, b[1]);
        this.format = f;
        trashHours();
        return format;
    }

    /**
     * Set by {@link #beginDestroy} while {@code partfs destroy} deletes the volume (its value: when
     * it began, epoch milliseconds), so that no mount or format opens it meanwhile.
     */
    static final String DESTROYING = "destroying";

    private static void refuseDestroying(KvStore kv, VolumeFormat f, byte[] destroying) throws IOException {
        if (destroying != null) {
            throw new IOException("volume '" + f.name() + "' (uuid " + f.uuid() + ") at " + kv.describe() + " is being destroyed: 'partfs destroy'"
                    + " began at " + java.time.Instant.ofEpochMilli(Long.parseLong(new String(destroying, StandardCharsets.US_ASCII)))
                    + " and did not finish; run it again to finish");
        }
    }

    /**
     * The volume's format for {@code partfs destroy}: also that of a volume a destroy began to
     * delete, which it then finishes.
     */
    public VolumeFormat loadForDestroy() throws IOException {
        byte[] b = kv.read(r -> r.get(SETTING));
        if (b == null) {
            throw new IOException("no volume is formatted at " + kv.describe() + ": nothing to destroy");
        }
        this.format = decodeFormat(kv, b);
        return format;
    }

    /**
     * Marks the volume as being destroyed ({@link #DESTROYING}) unless its uuid is not {@code
     * uuid}: from then on no mount or format opens it. A volume marked already stays marked (a
     * destroy that stopped half-way runs again).
     */
    public void beginDestroy(String uuid) throws IOException {
        mutate(tx -> {
            byte[] b = tx.get(SETTING);
            if (b == null || !decodeFormat(kv, b).uuid().equals(uuid)) {
                throw new IOException("the volume at " + kv.describe() + " changed meanwhile: nothing was deleted");
            }
            if (tx.get(DESTROYING) == null) {
                tx.put(DESTROYING, Long.toString(clock.nowNanos() / 1_000_000).getBytes(StandardCharsets.US_ASCII));
            }
            return null;
        });
    }

    /** Takes {@link #beginDestroy}'s mark away again, for a destroy refused before it deleted anything. */
    public void cancelDestroy() throws IOException {
        mutate(tx -> {
            tx.delete(DESTROYING);
            return null;
        });
    }

    /**
     * Deletes every key of the metadata, a transaction per page of a key scan, the volume's
     * format and {@link #DESTROYING} mark last (a delete that stopped half-way is still a volume
     * being destroyed, and runs again); {@code progress} is told the keys deleted so far. For a
     * shared store (Redis), whose database holds this volume alone ({@link #checkFormattable});
     * an embedded store's directory is deleted instead. Returns how many keys it deleted.
     */
    public long deleteAllMetadata(LongConsumer progress) throws IOException {
        if (kv.exclusive()) {
            throw new IllegalStateException("an embedded store's keys are not all scanned: delete its directory");
        }
        long[] deleted = {0};
        kv.read(r -> {
            r.scanKeys("", page -> {
                List<String> batch = page.stream().filter(k -> !k.equals(SETTING) && !k.equals(DESTROYING)).toList();
                if (!batch.isEmpty()) {
                    kv.update(tx -> {
                        batch.forEach(tx::delete);
                        return null;
                    });
                    deleted[0] += batch.size();
                    progress.accept(deleted[0]);
                }
            });
            return null;
        });
        kv.update(tx -> {
            tx.delete(SETTING);
            tx.delete(DESTROYING);
            return null;
        });
        return deleted[0] + 2;
    }

    /**
     * Refuses, before anything is written, metadata that {@link #format} could not make {@code
     * wanted}'s: another program's data, or a volume formatted differently. Empty metadata, or
     * the same volume already formatted, pass.
     */
    public static void checkFormattable(KvStore kv, VolumeFormat wanted) throws IOException {
        byte[][] b = kv.read(r -> new byte[][] {r.get(SETTING), r.get(DESTROYING)});
        byte[] existing = b[0];
        if (existing != null) {
            refuseDestroying(kv, sameVolume(kv, existing, wanted), b[1]);
        } else if (kv.read(r -> r.holdsAnyKey() && r.get(SETTING) == null)) {
            // (SETTING read again last: a format that ran meanwhile made a volume, not foreign data)
            throw new IOException("metadata at " + kv.describe() + " holds data but no PartFS volume"
                    + ": use an empty Redis database (another /DB number in the URL) or a new RocksDB directory");
        }
    }

    /**
     * The uuid of the volume {@code r} holds, or null when it holds none (a Redis that restarted
     * empty, or was flushed) or another program's value: what a background write of a mount
     * checks in its own transaction, so it never puts anything into metadata that is not its
     * volume's (the heartbeat then tells the operator).
     */
    public static String volumeUuid(KvStore.Reader r) throws IOException {
        byte[] b = r.get(SETTING);
        return b == null || !VolumeFormat.looksLikeOne(b) ? null : VolumeFormat.decode(b).uuid();
    }

    /** Whether {@code kv} holds a volume ({@link #format} recorded one). */
    public static boolean isFormatted(KvStore kv) throws IOException {
        return kv.read(r -> r.get(SETTING)) != null;
    }

    /** The volume {@code existing} records, if it is {@code wanted}'s (a second format of it); else an error. */
    private static VolumeFormat sameVolume(KvStore kv, byte[] existing, VolumeFormat wanted) throws IOException {
        VolumeFormat have = decodeFormat(kv, existing);
        if (!have.name().equals(wanted.name()) || have.blockSize() != wanted.blockSize()
                || !have.storage().equals(wanted.storage())) {
            throw new IOException("metadata at " + kv.describe() + " already holds volume '" + have.name()
                    + "' (block size " + have.blockSize() + ", storage " + have.storage()
                    + "): use that volume's settings or another metadata URL");
        }
        return have;
    }

    private static VolumeFormat decodeFormat(KvStore kv, byte[] b) throws IOException {
        if (!VolumeFormat.looksLikeOne(b)) {
            throw new IOException("metadata at " + kv.describe() + " holds a key '" + SETTING
                    + "' that is not a PartFS volume's format: the database is another program's"
                    + "; give PartFS an empty one (another /DB number in a Redis URL, or a new RocksDB directory)");
        }
        return VolumeFormat.decode(b);
    }

    public VolumeFormat volumeFormat() {
        return format;
    }

    /**
     * Points the volume at another object store, one that holds the same objects (the bucket
     * copied, an endpoint renamed, an option such as server-side encryption added), in one
     * transaction that fails if the recorded storage is no longer {@code from} (changed
     * meanwhile). Name, uuid and block size stay. Mounts running meanwhile keep the store they
     * opened: the caller checks none is.
     */
    public VolumeFormat changeStorage(String from, String to) throws IOException {
        VolumeFormat changed = mutate(tx -> {
            byte[] b = tx.get(SETTING);
            VolumeFormat have = b == null ? null : decodeFormat(kv, b);
            if (have == null || !have.storage().equals(from)) {
                throw new IOException("the volume's storage changed meanwhile (now " + (have == null ? "none" : have.storage())
                        + "): run the command again");
            }
            VolumeFormat next = new VolumeFormat(have.name(), have.uuid(), have.blockSize(), to);
            tx.put(SETTING, next.encode());
            return next;
        });
        this.format = changed;
        return changed;
    }

    /**
     * Up to {@code max} distinct slices that files use, as a scan of the chunks meets them (not
     * a uniform sample: the scan stops once it has them), for checking that an object store
     * holds the volume's objects without reading all of its metadata.
     */
    public List<Slice> someSlices(int max) throws IOException {
        Map<Long, Slice> found = new java.util.LinkedHashMap<>();
        try {
            forEachChunk((ino, slices) -> {
                for (Slice s : slices) {
                    if (!s.isHole() && found.size() < max) {
                        found.putIfAbsent(s.id(), s);
                    }
                }
                if (found.size() >= max) {
                    throw ScanFull.INSTANCE;
                }
            });
        } catch (ScanFull enough) {
            // the scan stopped early, as meant
        }
        return new ArrayList<>(found.values());
    }

    /** Ends a key scan that found all it was asked for. */
    private static final class ScanFull extends RuntimeException {
        static final ScanFull INSTANCE = new ScanFull();

        private ScanFull() {
            super(null, null, false, false);
        }
    }

    /** Called with an inode number when its data may be deleted (last link and last handle gone). */
    public void setOrphanListener(LongConsumer listener) {
        this.orphanListener = listener;
    }

    // ---- keys and encodings ----

    static String inodeKey(long ino) {
        return "i" + ino;
    }

    static String dirKey(long ino) {
        return "d" + ino;
    }

    static String chunkKey(long ino, long index) {
        return "c" + ino + "_" + index;
    }

    static String symlinkKey(long ino) {
        return "s" + ino;
    }

    static String xattrKey(long ino) {
        return "x" + ino;
    }

    private static byte[] encodeEntry(FileType type, long ino) {
        return ByteBuffer.allocate(9).put((byte) type.ordinal()).putLong(ino).array();
    }

    private static DirEntry decodeEntry(String name, byte[] b) {
        ByteBuffer buf = ByteBuffer.wrap(b);
        FileType t = FileType.values()[buf.get()];
        return new DirEntry(name, buf.getLong(), t);
    }

    /**
     * Hands a transaction what this process's cache holds for inode {@code ino}, as a belief
     * ({@link KvStore.Writer#believe}): a store whose reads cost a round trip need not read it.
     */
    private void believeInode(KvStore.Writer tx, long ino) {
        MetaCache c = cache;
        Attr a = c == null ? null : c.attr(ino);
        if (a != null) {
            tx.believe(inodeKey(ino), a.encode());
        }
    }

    /** As {@link #believeInode}, for the entry {@code name} of directory {@code dir} (believed missing when the cached listing lacks it). */
    private void believeEntry(KvStore.Writer tx, long dir, String name) {
        MetaCache c = cache;
        Map<String, DirEntry> listing = c == null ? null : c.dir(dir);
        if (listing != null) {
            DirEntry e = listing.get(name);
            tx.believeField(dirKey(dir), name, e == null ? null : encodeEntry(e.type(), e.ino()));
        }
    }

    /**
     * Beliefs for a name: the directory's inode, its entry {@code name} and, when the cache
     * knows both, the inode the entry points at.
     */
    private void believeName(KvStore.Writer tx, long dir, String name) {
        MetaCache c = cache;
        if (c == null) {
            return;
        }
        believeInode(tx, dir);
        believeEntry(tx, dir, name);
        Map<String, DirEntry> listing = c.dir(dir);
        DirEntry e = listing == null ? null : listing.get(name);
        if (e != null) {
            believeInode(tx, e.ino());
        }
    }

    /**
     * As {@link #believeInode}, with the slice lists of the chunks {@code indexes} the cache
     * knows at the cached data version; a file never written (data version 0) has none.
     */
    private void believeChunks(KvStore.Writer tx, long ino, List<Long> indexes) {
        MetaCache c = cache;
        Attr a = c == null ? null : c.attr(ino);
        if (a == null) {
            return;
        }
        tx.believe(inodeKey(ino), a.encode());
        for (long index : indexes) {
            List<Slice> known = a.dataVersion() == 0 ? List.of() : chunkLists.get(ino, index, a.dataVersion());
            if (known != null) {
                tx.believe(chunkKey(ino, index), Slice.encodeList(known));
            }
        }
    }

    private static long align4k(long n) {
        return (n + 4095) & ~4095L;
    }

    private static Attr attr(KvStore.Reader r, long ino) throws IOException {
        return decodeInode(ino, r.get(inodeKey(ino)));
    }

    /** The attributes of inode {@code ino} as stored in {@code raw}; NoSuchEntry when it is gone. */
    private static Attr decodeInode(long ino, byte[] raw) throws FsException {
        if (raw == null) {
            throw new FsException.NoSuchEntry("inode " + ino);
        }
        return Attr.decode(ino, raw);
    }

    private static Attr dir(KvStore.Reader r, long ino) throws IOException {
        return asDir(ino, r.get(inodeKey(ino)));
    }

    /** A directory's attributes and its entry for one name (null when there is none). */
    private record DirAndEntry(Attr dir, byte[] entry) {
    }

    /** Directory {@code parent} and its entry {@code name}, read in one request where the store allows. */
    private static DirAndEntry dirAndEntry(KvStore.Reader r, long parent, String name) throws IOException {
        byte[][] read = r.getAndHget(inodeKey(parent), dirKey(parent), name);
        return new DirAndEntry(asDir(parent, read[0]), read[1]);
    }

    /** The attributes of directory {@code ino} as stored in {@code raw}. */
    private static Attr asDir(long ino, byte[] raw) throws FsException {
        Attr a = decodeInode(ino, raw);
        if (!a.isDirectory()) {
            throw new FsException.NotDirectory("inode " + ino);
        }
        return a;
    }

    private static void checkName(String name) throws FsException {
        if (name.isEmpty() || name.indexOf('/') >= 0 || name.indexOf('\0') >= 0 || name.equals(".") || name.equals("..")) {
            throw new FsException.InvalidArgument("name '" + name + "'");
        }
        if (NameCodec.encode(name).length > MAX_NAME_BYTES) {
            throw new FsException.NameTooLong(name.substring(0, 32) + "...");
        }
    }

    private static void put(KvStore.Writer tx, Attr a) {
        byte[] encoded = a.encode();
        NOTES.get().written().put(a.ino(), Attr.decode(a.ino(), encoded)); // exactly what a read would return
        tx.put(inodeKey(a.ino()), encoded);
    }

    private static void deleteInode(KvStore.Writer tx, long ino) {
        NOTES.get().written().put(ino, null);
        tx.delete(inodeKey(ino));
    }

    // ---- reads ----

    public Attr getattr(long ino) throws IOException {
        MetaCache c = cache;
        Attr hit = c == null ? null : c.attr(ino);
        return hit != null ? hit : getattrFromStore(ino);
    }

    /**
     * Forgets what the cache holds of inode {@code ino}'s attributes: a request for it found it
     * gone from the store (another client deleted it), so that the lookup the kernel makes again
     * reads the name's inode from the store instead of meeting this one in a kept listing.
     */
    public void forgetCached(long ino) {
        MetaCache c = cache;
        if (c != null) {
            c.forgetAttr(ino);
        }
    }

    /**
     * The attributes as the store has them now, whatever the cache holds (and then cached): for
     * a shared volume's callers that must not act on an inode another client deleted within
     * the cache's ttl.
     */
    public Attr getattrFromStore(long ino) throws IOException {
        MetaCache c = cache;
        long gen = c == null ? 0 : c.generation();
        Attr a;
        try {
            a = kv.read(r -> attr(r, ino));
        } catch (FsException.NoSuchEntry gone) {
            forgetCached(ino);
            throw gone;
        }
        if (c != null) {
            c.install(gen, List.of(a), null, null);
        }
        return a;
    }

    /**
     * The attributes of several inodes, {@code null} where one is gone: those in the cache from
     * there, the rest in one request (a directory listing with attributes asks for a page of
     * entries at once, not one round trip each).
     */
    public Attr[] getattrs(long[] inos) throws IOException {
        MetaCache c = cache;
        Attr[] out = new Attr[inos.length];
        List<Integer> missing = new ArrayList<>();
        for (int i = 0; i < inos.length; i++) {
            out[i] = c == null ? null : c.attr(inos[i]);
            if (out[i] == null) {
                missing.add(i);
            }
        }
        if (missing.isEmpty()) {
            return out;
        }
        long gen = c == null ? 0 : c.generation();
        List<String> keys = new ArrayList<>(missing.size());
        for (int i : missing) {
            keys.add(inodeKey(inos[i]));
        }
        List<byte[]> raw = kv.read(r -> r.getAll(keys));
        List<Attr> read = new ArrayList<>(missing.size());
        for (int k = 0; k < missing.size(); k++) {
            if (raw.get(k) != null) {
                int i = missing.get(k);
                out[i] = Attr.decode(inos[i], raw.get(k));
                read.add(out[i]);
            }
        }
        if (c != null) {
            c.install(gen, read, null, null);
        }
        return out;
    }

    /**
     * The entry {@code name} in directory {@code parent} and its attributes. With the cache on, a
     * directory's listing is read whole (with its entries' attributes) at its first lookup and
     * kept; in a large directory whose listing has expired, one name is read instead, until that
     * has cost about what reading the listing again would ({@link MetaCache#lookUpOneName}).
     */
    public Attr lookup(long parent, String name) throws IOException {
        MetaCache c = cache;
        if (c == null || c.dir(parent) == null && c.lookUpOneName(parent)) {
            return lookUpInStore(parent, name);
        }
        DirEntry e = listing(parent).get(name);
        if (e == null) {
            throw new FsException.NoSuchEntry(name);
        }
        try {
            Attr a = getattr(e.ino());
            if (a.nlink() > 0) {
                return a;
            }
        } catch (FsException.NoSuchEntry gone) {
            // below
        }
        // The listing names an inode removed since it was read, or deleted and waiting for its
        // data to go (no links; an open for writing learnt that from the store): another client
        // replaced or removed the file, perhaps between the listing's two requests. The name
        // may lead elsewhere now; the listing is not to be trusted for its remaining time.
        c.forgetListing(parent);
        return lookUpInStore(parent, name);
    }

    /**
     * Entry {@code name} of {@code parent} read from the store, then its attributes: two
     * requests, between which another client may remove the inode the entry named (a file
     * replaced by a rename); the name is then read again, a few times at most.
     */
    private Attr lookUpInStore(long parent, String name) throws IOException {
        for (int attempt = 1; ; attempt++) {
            MetaCache c = cache;
            long gen = c == null ? 0 : c.generation();
            DirAndEntry de = kv.read(r -> dirAndEntry(r, parent, name));
            if (c != null) {
                c.install(gen, List.of(de.dir()), null, null);
            }
            if (de.entry() == null) {
                throw new FsException.NoSuchEntry(name);
            }
            try {
                return getattr(decodeEntry(name, de.entry()).ino());
            } catch (FsException.NoSuchEntry gone) {
                if (attempt == 3) {
                    throw gone;
                }
            }
        }
    }

    /**
     * A directory's entries by name, from the cache or read with every child's attributes in
     * two requests (the whole listing, then all attributes at once): one round trip pair per
     * directory instead of one per file. An entry whose inode is gone by the second request
     * (another client replaced or removed the file in between) has the listing read again, a
     * few times at most: otherwise the name would be kept, for the listing's life, leading to
     * nothing, where the file now under it may be another.
     */
    private Map<String, DirEntry> listing(long dirIno) throws IOException {
        MetaCache c = cache;
        Map<String, DirEntry> hit = c.dir(dirIno);
        if (hit != null) {
            return hit;
        }
        for (int attempt = 1; ; attempt++) {
            long gen = c.generation();
            Map<String, DirEntry> entries = new java.util.HashMap<>();
            List<Attr> attrs = new ArrayList<>();
            int[] children = {0};
            Attr known = c.attr(dirIno); // usually there, from the parent's listing: one round trip saved
            kv.read(r -> {
                if (known == null || !known.isDirectory()) {
                    attrs.add(dir(r, dirIno));
                }
                for (Map.Entry<String, byte[]> e : r.hgetAll(dirKey(dirIno)).entrySet()) {
                    entries.put(e.getKey(), decodeEntry(e.getKey(), e.getValue()));
                }
                List<Attr> of = attrsOf(r, new ArrayList<>(entries.values()));
                children[0] = of.size();
                attrs.addAll(of);
                return null;
            });
            if (children[0] < entries.size() && attempt < 3) {
                continue;
            }
            c.install(gen, attrs, dirIno, entries);
            c.listed(dirIno, entries.size());
            return entries;
        }
    }

    /** The attributes of the inodes {@code entries} name, in one request (entries whose inode is gone are left out). */
    private static List<Attr> attrsOf(KvStore.Reader r, List<DirEntry> entries) throws IOException {
        List<String> keys = new ArrayList<>(entries.size());
        for (DirEntry e : entries) {
            keys.add(inodeKey(e.ino()));
        }
        List<byte[]> raw = r.getAll(keys);
        List<Attr> out = new ArrayList<>(entries.size());
        for (int i = 0; i < entries.size(); i++) {
            if (raw.get(i) != null) {
                out.add(Attr.decode(entries.get(i).ino(), raw.get(i)));
            }
        }
        return out;
    }

    /**
     * Loads the listings of several directories, with every child's attributes, into the cache in
     * two requests (all listings, then all attributes) instead of two per directory: readahead
     * for a MergeTree table's parts. Directories already cached, or whose attributes are not, are
     * skipped; nothing happens without a cache. A change made meanwhile by this process discards
     * what was read (the directories then load one by one when used).
     */
    public void prefetchListings(List<Long> dirs) throws IOException {
        MetaCache c = cache;
        if (c == null) {
            return;
        }
        List<Long> wanted = new ArrayList<>();
        for (long d : dirs) {
            Attr a = c.attr(d);
            if (c.dir(d) == null && a != null && a.isDirectory()) {
                wanted.add(d);
            }
        }
        if (wanted.isEmpty()) {
            return;
        }
        long gen = c.generation();
        List<Map<String, DirEntry>> listings = new ArrayList<>();
        List<Attr> attrs = new ArrayList<>();
        kv.read(r -> {
            List<String> hashes = new ArrayList<>(wanted.size());
            for (long d : wanted) {
                hashes.add(dirKey(d));
            }
            List<DirEntry> children = new ArrayList<>();
            for (Map<String, byte[]> raw : r.hgetAllMany(hashes)) {
                Map<String, DirEntry> entries = new java.util.HashMap<>();
                for (Map.Entry<String, byte[]> e : raw.entrySet()) {
                    DirEntry de = decodeEntry(e.getKey(), e.getValue());
                    entries.put(e.getKey(), de);
                    children.add(de);
                }
                listings.add(entries);
            }
            attrs.addAll(attrsOf(r, children));
            return null;
        });
        c.install(gen, attrs, null, null);
        java.util.Set<Long> found = new java.util.HashSet<>();
        for (Attr a : attrs) {
            found.add(a.ino());
        }
        for (int i = 0; i < wanted.size(); i++) {
            if (listings.get(i).values().stream().allMatch(e -> found.contains(e.ino()))) {
                c.install(gen, List.of(), wanted.get(i), listings.get(i));
            } // else an inode named is gone (another client's change between the requests): listing() reads it
        }
    }

    /** The entries of a directory, sorted by name, without "." and "..". */
    public List<DirEntry> readdir(long ino) throws IOException {
        if (cache != null) {
            List<DirEntry> out = new ArrayList<>(listing(ino).values());
            out.sort(Comparator.comparing(DirEntry::name));
            return out;
        }
        return kv.read(r -> {
            dir(r, ino);
            List<DirEntry> out = new ArrayList<>();
            for (Map.Entry<String, byte[]> e : r.hgetAll(dirKey(ino)).entrySet()) {
                out.add(decodeEntry(e.getKey(), e.getValue()));
            }
            out.sort(Comparator.comparing(DirEntry::name));
            return out;
        });
    }

    /** Whether symlink {@code ino}'s target is stored (fsck: a symlink without one reads as EIO). */
    public boolean hasSymlinkTarget(long ino) throws IOException {
        return kv.read(r -> r.get(symlinkKey(ino)) != null);
    }

    public String readlink(long ino) throws IOException {
        return kv.read(r -> {
            byte[] t = r.get(symlinkKey(ino));
            if (t == null) {
                if (attr(r, ino).type() != FileType.SYMLINK) {
                    throw new FsException.InvalidArgument("inode " + ino + " is not a symlink");
                }
                throw new IOException("symlink inode " + ino + " has no target: run 'partfs fsck'");
            }
            return NameCodec.decode(t);
        });
    }

    /** The slices of one chunk of a file, oldest first, as the store has them now. */
    public List<Slice> readChunk(long ino, long index) throws IOException {
        return kv.read(r -> Slice.decodeList(r.get(chunkKey(ino, index))));
    }

    /**
     * The slices of one chunk of a file whose attributes the caller read at {@code dataVersion}:
     * from memory when they were read at that version (see {@link ChunkLists}), else from the
     * store together with the inode, in one request. A file changed since the caller's attributes
     * yields its current slices, as {@link #readChunk(long, long)} would.
     */
    public List<Slice> readChunk(long ino, long index, long dataVersion) throws IOException {
        List<Slice> hit = chunkLists.get(ino, index, dataVersion);
        if (hit != null) {
            return hit;
        }
        return readTogether(ino, index).slices();
    }

    /** A file's attributes and the slices of one of its chunks as they were at the attributes' data version. */
    public record ChunkAt(Attr attr, List<Slice> slices) {
    }

    /**
     * A file's attributes and the slices of chunk {@code index}, read together from the store in
     * one request, so that the slices are exactly those of the attributes' data version (size
     * included). {@link #readChunk(long, long, long)} does not promise that: given attributes
     * read earlier (from this mount's cache, or just before a commit), it returns the slices as
     * they are now. A reader may mix the two; a compaction may not: it decides from the size
     * which slices are past the file's end, and a size older than the slices made it replace a
     * slice appended meanwhile with one ending at the old size (the append was lost).
     *
     * @throws FsException.NoSuchEntry when the inode does not exist
     */
    public ChunkAt readChunkWithAttr(long ino, long index) throws IOException {
        ChunkAt read = readTogether(ino, index);
        if (read.attr() == null) {
            throw new FsException.NoSuchEntry("inode " + ino);
        }
        return read;
    }

    /** The inode (null when it does not exist) and one chunk's slices, in one request; noted in {@link #chunkLists}. */
    private ChunkAt readTogether(long ino, long index) throws IOException {
        List<byte[]> raw = kv.read(r -> r.getAll(List.of(inodeKey(ino), chunkKey(ino, index))));
        Attr a = raw.get(0) == null ? null : Attr.decode(ino, raw.get(0));
        List<Slice> slices = Slice.decodeList(raw.get(1));
        if (a != null) {
            chunkLists.put(ino, index, a.dataVersion(), slices);
        }
        return new ChunkAt(a, slices);
    }

    /** A file's attributes ({@code null} when the inode does not exist) and the slices of all its chunks. */
    public record FileSlices(long ino, Attr attr, List<Slice> slices) {
    }

    /**
     * The attributes and every chunk's slices of several files, in two requests however many
     * there are: for {@code partfs fsck}, which checks again what it found broken.
     */
    public List<FileSlices> fileSlices(List<Long> inos) throws IOException {
        List<Attr> attrs = attrs(inos);
        List<String> chunkKeys = new ArrayList<>();
        List<long[]> indexes = new ArrayList<>(attrs.size());
        for (Attr a : attrs) {
            long[] idx = a == null ? new long[0] : chunkIndexes(a.ino(), 0, chunkCount(a.size()));
            indexes.add(idx);
            for (long c : idx) {
                chunkKeys.add(chunkKey(a.ino(), c));
            }
        }
        List<byte[]> lists = chunkKeys.isEmpty() ? List.of() : kv.read(r -> r.getAll(chunkKeys));
        List<FileSlices> out = new ArrayList<>(inos.size());
        int next = 0;
        for (int i = 0; i < inos.size(); i++) {
            Attr a = attrs.get(i);
            List<Slice> slices = new ArrayList<>();
            for (int c = 0; c < indexes.get(i).length; c++) {
                slices.addAll(Slice.decodeList(lists.get(next++)));
            }
            out.add(new FileSlices(inos.get(i), a, slices));
        }
        return out;
    }

    private static long chunkCount(long size) {
        return (size + CHUNK - 1) / CHUNK;
    }

    /**
     * The indexes in [{@code from}, {@code to}) of file {@code ino}'s chunks that may exist, in
     * order: all of them for up to {@value #SCAN_CHUNKS_ABOVE} (4 TiB of file), else the ones a
     * scan of the chunk keys finds. A file that large is sparse (its size is set by a truncate
     * or a write far out): going through each of up to 2^31 indexes ran a truncate out of heap.
     * On Redis the scan walks the whole keyspace, as JuiceFS does for the same case.
     */
    private long[] chunkIndexes(long ino, long from, long to) throws IOException {
        if (to - from <= SCAN_CHUNKS_ABOVE) {
            return java.util.stream.LongStream.range(from, Math.max(from, to)).toArray();
        }
        String prefix = "c" + ino + "_";
        java.util.TreeSet<Long> found = new java.util.TreeSet<>();
        kv.read(r -> {
            r.scanKeys(prefix, page -> {
                for (String k : page) {
                    String rest = k.substring(prefix.length());
                    if (!rest.isEmpty() && rest.chars().allMatch(Character::isDigit) && rest.length() < 19) {
                        long idx = Long.parseLong(rest);
                        if (idx >= from && idx < to) {
                            found.add(idx);
                        }
                    }
                }
            });
            return null;
        });
        return found.stream().mapToLong(Long::longValue).toArray();
    }

    /** Told the slices of one chunk of inode {@code ino}. */
    @FunctionalInterface
    public interface ChunkVisitor {
        void visit(long ino, List<Slice> slices) throws IOException;
    }

    /**
     * Every chunk's slices in the volume, found by key rather than through the tree, so a file
     * renamed meanwhile, or unlinked but still open, is not missed: for {@code gc}, which must
     * not take an object some file uses for a leak. On RocksDB one snapshot; on Redis a SCAN,
     * which returns every chunk that exists throughout (a chunk written meanwhile may be seen
     * as it was before).
     */
    public void forEachChunk(ChunkVisitor each) throws IOException {
        kv.read(r -> {
            r.scanKeys("c", page -> {
                List<String> keys = new ArrayList<>(page.size());
                for (String k : page) {
                    if (k.matches("c\\d+_\\d+")) {
                        keys.add(k);
                    }
                }
                List<byte[]> lists = keys.isEmpty() ? List.of() : r.getAll(keys);
                for (int i = 0; i < keys.size(); i++) {
                    String k = keys.get(i);
                    each.visit(Long.parseLong(k.substring(1, k.indexOf('_'))), Slice.decodeList(lists.get(i)));
                }
            });
            return null;
        });
    }

    /** The attributes of several inodes in one request, null where an inode does not exist. */
    public List<Attr> attrs(List<Long> inos) throws IOException {
        if (inos.isEmpty()) {
            return List.of();
        }
        List<byte[]> raw = kv.read(r -> r.getAll(inos.stream().map(MetaEngine::inodeKey).toList()));
        List<Attr> out = new ArrayList<>(inos.size());
        for (int i = 0; i < inos.size(); i++) {
            out.add(raw.get(i) == null ? null : Attr.decode(inos.get(i), raw.get(i)));
        }
        return out;
    }

    // ---- creating and removing names ----

    /**
     * Creates an inode of {@code type} named {@code name} in {@code parent}. The new inode gets
     * the caller's uid, and its gid (or the parent's when the parent is setgid).
     */
    public Attr mknod(long parent, String name, FileType type, int mode, int uid, int gid, int rdev, String symlinkTarget)
            throws IOException {
        checkName(name);
        long ino = inodeIds.next();
        try {
            return mutate(tx -> {
                believeInode(tx, parent);
                believeEntry(tx, parent, name);
                DirAndEntry d = dirAndEntry(tx, parent, name);
                Attr p = d.dir();
                if (p.nlink() == 0) {
                    throw new FsException.NoSuchEntry("directory inode " + parent + " was removed");
                }
                if (d.entry() != null) {
                    throw new FsException.Exists(name);
                }
                long now = clock.nowNanos();
                int m = mode & 07777;
                int g = gid;
                if ((p.mode() & 02000) != 0) {
                    g = p.gid();
                    if (type == FileType.DIRECTORY) {
                        m |= 02000;
                    }
                }
                long size = 0;
                int nlink = 1;
                long parentField = 0;
                if (type == FileType.DIRECTORY) {
                    size = 4096;
                    nlink = 2;
                    parentField = parent;
                    if (p.nlink() >= MAX_LINKS) {
                        throw new FsException.TooManyLinks("directory inode " + parent);
                    }
                } else if (type == FileType.SYMLINK) {
                    byte[] target = NameCodec.encode(symlinkTarget);
                    size = target.length;
                    tx.put(symlinkKey(ino), target);
                }
                Attr a = new Attr(ino, type, m, uid, g, nlink, size, now, now, now, rdev, parentField, 0);
                put(tx, a);
                NOTES.get().created().add(ino); // a new inode number: it has no extended attributes
                if (type == FileType.DIRECTORY) {
                    NOTES.get().createdDirs().add(ino); // nor entries
                }
                tx.hset(dirKey(parent), name, encodeEntry(type, ino));
                Attr np = p.modified(now);
                if (type == FileType.DIRECTORY) {
                    np = np.withNlink(p.nlink() + 1);
                }
                put(tx, np);
                tx.add(TOTAL_INODES, 1);
                return a;
            });
        } catch (FsException.Exists e) {
            existsElsewhere(parent);
            throw e;
        }
    }

    /**
     * A transaction found a name in {@code dir} that this client's kept listing of it may lack:
     * another client made it within the listing's second. The listing goes, so that what
     * follows reads the directory from the store: an open with O_CREAT looks up the file that
     * its create found, and must find it.
     */
    private void existsElsewhere(long dir) {
        MetaCache c = cache;
        if (c != null) {
            c.forgetListing(dir);
        }
    }

    /** Adds the name {@code newName} in {@code newParent} for file {@code ino}. */
    public Attr link(long ino, long newParent, String newName) throws IOException {
        checkName(newName);
        try {
            return mutate(tx -> {
                believeInode(tx, ino);
                believeName(tx, newParent, newName);
                // Checks in the order Linux makes them: the new name first, then the source.
                Attr a = attr(tx, ino);
                DirAndEntry d = dirAndEntry(tx, newParent, newName);
                Attr p = d.dir();
                if (p.nlink() == 0) {
                    throw new FsException.NoSuchEntry("directory inode " + newParent + " was removed");
                }
                if (d.entry() != null) {
                    throw new FsException.Exists(newName);
                }
                if (a.isDirectory()) {
                    throw new FsException.NotPermitted("hard link to a directory");
                }
                if (a.nlink() == 0) {
                    throw new FsException.NoSuchEntry("inode " + ino + " was removed");
                }
                if (a.nlink() >= MAX_LINKS) {
                    throw new FsException.TooManyLinks("inode " + ino);
                }
                long now = clock.nowNanos();
                tx.hset(dirKey(newParent), newName, encodeEntry(a.type(), ino));
                put(tx, p.modified(now));
                Attr na = a.withNlink(a.nlink() + 1).changed(now);
                put(tx, na);
                return na;
            });
        } catch (FsException.Exists e) {
            existsElsewhere(newParent);
            throw e;
        }
    }

    /** Removes a non-directory name; returns the inode's attributes after the change. */
    public Attr unlink(long parent, String name) throws IOException {
        Attr result = mutate(tx -> {
            believeName(tx, parent, name);
            DirAndEntry d = dirAndEntry(tx, parent, name);
            Attr p = d.dir();
            byte[] e = d.entry();
            if (e == null) {
                throw new FsException.NoSuchEntry(name);
            }
            DirEntry entry = decodeEntry(name, e);
            Attr a = attr(tx, entry.ino());
            if (a.isDirectory()) {
                throw new FsException.IsDirectory(name);
            }
            long now = clock.nowNanos();
            tx.hdel(dirKey(parent), name);
            put(tx, p.modified(now));
            return dropLink(tx, a, now);
        });
        afterDrop(result);
        return result;
    }

    /** Removes an empty directory. */
    public void rmdir(long parent, String name) throws IOException {
        mutate(tx -> {
            believeName(tx, parent, name);
            DirAndEntry d = dirAndEntry(tx, parent, name);
            Attr p = d.dir();
            byte[] e = d.entry();
            if (e == null) {
                throw new FsException.NoSuchEntry(name);
            }
            Attr a = attr(tx, decodeEntry(name, e).ino());
            if (!a.isDirectory()) {
                throw new FsException.NotDirectory(name);
            }
            if (tx.hlen(dirKey(a.ino())) > 0) {
                throw new FsException.NotEmpty(name);
            }
            long now = clock.nowNanos();
            tx.hdel(dirKey(parent), name);
            put(tx, p.modified(now).withNlink(p.nlink() - 1));
            removeDirectory(tx, a);
            return null;
        });
    }

    private void removeDirectory(KvStore.Writer tx, Attr a) {
        deleteInode(tx, a.ino());
        tx.hdelAll(dirKey(a.ino()));
        tx.hdelAll(xattrKey(a.ino()));
        tx.add(TOTAL_INODES, -1);
    }

    /** One link of {@code a} is gone: decrement, and record the inode for deletion at zero. */
    private Attr dropLink(KvStore.Writer tx, Attr a, long now) {
        Attr na = a.withNlink(a.nlink() - 1).changed(now);
        put(tx, na);
        if (na.nlink() == 0) {
            if (a.type() == FileType.FILE) {
                tx.hset(DELFILES, String.valueOf(a.ino()), pendingFile(a.ino(), a.size()));
            } else {
                deleteInode(tx, a.ino());
                tx.delete(symlinkKey(a.ino()));
                tx.hdelAll(xattrKey(a.ino()));
                tx.add(TOTAL_INODES, -1);
            }
        }
        return na;
    }

    private void afterDrop(Attr a) {
        if (a != null && a.nlink() == 0 && a.type() == FileType.FILE) {
            if (openCount.containsKey(a.ino())) {
                unlinkedWhileOpen.add(a.ino());
            } else {
                orphanListener.accept(a.ino());
            }
        }
    }

    /** Flags of renameat2(2). */
    public static final int RENAME_NOREPLACE = 1;
    public static final int RENAME_EXCHANGE = 2;

    /**
     * Renames {@code srcName} in {@code srcParent} to {@code dstName} in {@code dstParent} with
     * POSIX semantics: replaces a file or an empty directory of compatible type, refuses to move
     * a directory into its own subtree, and is a no-op when both names are links of one inode.
     * {@code flags} takes {@link #RENAME_NOREPLACE} or {@link #RENAME_EXCHANGE}.
     *
     * @return the inode that the destination name used to hold and that lost a link, or null
     */
    public Attr rename(long srcParent, String srcName, long dstParent, String dstName, int flags) throws IOException {
        checkName(dstName);
        if ((flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) != 0
                || flags == (RENAME_NOREPLACE | RENAME_EXCHANGE)) {
            throw new FsException.InvalidArgument("rename flags " + flags);
        }
        Attr replaced = mutate(tx -> {
            // each directory with its entry, then both inodes: three requests (two in one
            // directory), fewer for what the cache knows
            believeName(tx, srcParent, srcName);
            believeName(tx, dstParent, dstName);
            DirAndEntry s = dirAndEntry(tx, srcParent, srcName);
            Attr sp = s.dir();
            Attr dp;
            byte[] de;
            if (srcParent == dstParent) {
                dp = sp;
                de = srcName.equals(dstName) ? s.entry() : tx.hget(dirKey(dstParent), dstName);
            } else {
                DirAndEntry d = dirAndEntry(tx, dstParent, dstName);
                dp = d.dir();
                de = d.entry();
            }
            byte[] se = s.entry();
            if (se == null) {
                throw new FsException.NoSuchEntry(srcName);
            }
            long srcIno = decodeEntry(srcName, se).ino();
            long dstIno = de == null ? -1 : decodeEntry(dstName, de).ino();
            List<byte[]> raw = tx.getAll(de == null ? List.of(inodeKey(srcIno)) : List.of(inodeKey(srcIno), inodeKey(dstIno)));
            Attr src = decodeInode(srcIno, raw.get(0));
            Attr dst = de == null ? null : decodeInode(dstIno, raw.get(1));
            // Checks in the order Linux's renameat2 makes them, so errno values match.
            boolean exchange = (flags & RENAME_EXCHANGE) != 0;
            if ((flags & RENAME_NOREPLACE) != 0 && dst != null) {
                throw new FsException.Exists(dstName);
            }
            if (exchange && dst == null) {
                throw new FsException.NoSuchEntry(dstName);
            }
            if (srcParent != dstParent) {
                if (src.isDirectory() && isAncestorOrSelf(tx, src.ino(), dstParent)) {
                    throw new FsException.InvalidArgument("cannot move a directory into its own subtree");
                }
                if (dst != null && dst.isDirectory() && isAncestorOrSelf(tx, dst.ino(), srcParent)) {
                    if (exchange) {
                        throw new FsException.InvalidArgument("cannot exchange a directory with its own ancestor");
                    }
                    throw new FsException.NotEmpty(dstName);
                }
            }
            if (dst != null && dst.ino() == src.ino()) {
                return null; // both names are links of one inode: POSIX says do nothing
            }
            long now = clock.nowNanos();
            if (exchange) {
                exchange(tx, sp, srcName, src, dp, dstName, dst, now);
                return null;
            }
            Attr dropped = null;
            int spLinks = sp.nlink();
            int dpLinks = dp.nlink();
            if (dst != null) {
                if (src.isDirectory() && !dst.isDirectory()) {
                    throw new FsException.NotDirectory(dstName);
                }
                if (!src.isDirectory() && dst.isDirectory()) {
                    throw new FsException.IsDirectory(dstName);
                }
                if (dst.isDirectory()) {
                    if (tx.hlen(dirKey(dst.ino())) > 0) {
                        throw new FsException.NotEmpty(dstName);
                    }
                    removeDirectory(tx, dst);
                    dpLinks--;
                } else {
                    dropped = dropLink(tx, dst, now);
                }
            }
            tx.hdel(dirKey(srcParent), srcName);
            tx.hset(dirKey(dstParent), dstName, encodeEntry(src.type(), src.ino()));
            Attr moved = src.changed(now);
            if (src.isDirectory() && srcParent != dstParent) {
                moved = moved.withParent(dstParent);
                spLinks--;
                dpLinks++;
            }
            put(tx, moved);
            if (srcParent == dstParent) {
                put(tx, sp.modified(now).withNlink(spLinks + dpLinks - sp.nlink()));
            } else {
                if (dpLinks > MAX_LINKS) {
                    throw new FsException.TooManyLinks("directory inode " + dstParent);
                }
                put(tx, sp.modified(now).withNlink(spLinks));
                put(tx, dp.modified(now).withNlink(dpLinks));
            }
            return dropped;
        });
        afterDrop(replaced);
        return replaced;
    }

    private void exchange(KvStore.Writer tx, Attr sp, String srcName, Attr src, Attr dp, String dstName, Attr dst, long now) {
        tx.hset(dirKey(sp.ino()), srcName, encodeEntry(dst.type(), dst.ino()));
        tx.hset(dirKey(dp.ino()), dstName, encodeEntry(src.type(), src.ino()));
        Attr ns = src.changed(now);
        Attr nd = dst.changed(now);
        int spLinks = sp.nlink();
        int dpLinks = dp.nlink();
        if (sp.ino() != dp.ino()) {
            if (src.isDirectory()) {
                ns = ns.withParent(dp.ino());
                spLinks--;
                dpLinks++;
            }
            if (dst.isDirectory()) {
                nd = nd.withParent(sp.ino());
                dpLinks--;
                spLinks++;
            }
        }
        put(tx, ns);
        put(tx, nd);
        put(tx, sp.modified(now).withNlink(spLinks));
        if (sp.ino() != dp.ino()) {
            put(tx, dp.modified(now).withNlink(dpLinks));
        }
    }

    /** True when directory {@code dir} is {@code node} or one of its ancestors. */
    private static boolean isAncestorOrSelf(KvStore.Reader tx, long dir, long node) throws IOException {
        long cur = node;
        for (int depth = 0; depth < 100_000; depth++) {
            if (cur == dir) {
                return true;
            }
            if (cur == ROOT) {
                return false;
            }
            cur = attr(tx, cur).parent();
        }
        throw new IOException("directory tree above inode " + node + " has a loop: run 'partfs fsck'");
    }

    // ---- attributes ----

    /**
     * Changes attributes. Null fields are left alone; ctime is always set. For times,
     * {@link SetAttr#NOW} means the current time.
     */
    public Attr setattr(long ino, SetAttr req) throws IOException {
        return mutate(tx -> {
            believeInode(tx, ino);
            Attr a = attr(tx, ino);
            long now = clock.nowNanos();
            if (req.mode() != null) {
                a = a.withMode(req.mode());
            }
            if (req.uid() != null || req.gid() != null) {
                a = a.withOwner(req.uid() == null ? a.uid() : req.uid(), req.gid() == null ? a.gid() : req.gid());
            }
            long at = req.atimeNs() == null ? a.atimeNs() : req.atimeNs() == SetAttr.NOW ? now : req.atimeNs();
            long mt = req.mtimeNs() == null ? a.mtimeNs() : req.mtimeNs() == SetAttr.NOW ? now : req.mtimeNs();
            a = a.withTimes(at, mt, now);
            put(tx, a);
            return a;
        });
    }

    /**
     * Records a read access the way Linux's relatime does: atime moves to now when it is older
     * than mtime or ctime, or more than a day old. Changes nothing else (not ctime).
     */
    public void touchAtime(long ino) throws IOException {
        mutate(tx -> {
            byte[] raw = tx.get(inodeKey(ino));
            if (raw == null) {
                return null;
            }
            Attr a = Attr.decode(ino, raw);
            long now = clock.nowNanos();
            if (atimeStale(a, now)) {
                put(tx, a.withTimes(now, a.mtimeNs(), a.ctimeNs()));
            }
            return null;
        });
    }

    /** relatime: a read should move atime when it is not newer than mtime or ctime, or a day old. */
    public boolean atimeStale(Attr a) {
        return atimeStale(a, clock.nowNanos());
    }

    private static boolean atimeStale(Attr a, long nowNs) {
        return a.atimeNs() <= a.mtimeNs() || a.atimeNs() <= a.ctimeNs() || nowNs - a.atimeNs() > 86_400_000_000_000L;
    }

    /** Attribute changes for {@link #setattr}; null means unchanged. */
    public record SetAttr(Integer mode, Integer uid, Integer gid, Long atimeNs, Long mtimeNs) {
        /** A time value meaning "the current time". */
        public static final long NOW = Long.MIN_VALUE;

        public static SetAttr mode(int mode) {
            return new SetAttr(mode, null, null, null, null);
        }

        public static SetAttr owner(Integer uid, Integer gid) {
            return new SetAttr(null, uid, gid, null, null);
        }

        public static SetAttr times(Long atimeNs, Long mtimeNs) {
            return new SetAttr(null, null, null, atimeNs, mtimeNs);
        }
    }

    /**
     * Sets the length of a file. Shrinking frees whole chunks past the end and covers the rest
     * of the last chunk with a hole, so growing again later reads zeros.
     */
    public Attr truncate(long ino, long length) throws IOException {
        return truncate(ino, length, new ArrayList<>());
    }

    /**
     * {@link #truncate(long, long)}, adding to {@code trashed} the slices ({id, size, hour} each)
     * the shrinking put in the trash.
     */
    public Attr truncate(long ino, long length, List<long[]> trashed) throws IOException {
        if (length < 0) {
            throw new FsException.InvalidArgument("negative length " + length);
        }
        if (length > MAX_FILE_SIZE) {
            throw new FsException.TooLarge("length " + length);
        }
        List<long[]> attempt = new ArrayList<>();
        Attr done = mutate(tx -> {
            attempt.clear(); // a transaction tried again frees again
            believeInode(tx, ino);
            Attr a = attr(tx, ino);
            if (a.isDirectory()) {
                throw new FsException.IsDirectory("inode " + ino);
            }
            if (a.type() != FileType.FILE) {
                throw new FsException.InvalidArgument("inode " + ino + " is not a regular file");
            }
            long now = clock.nowNanos();
            long old = a.size();
            if (length < old) {
                // read after the inode, so a chunk another mount writes meanwhile conflicts
                for (long idx : chunkIndexes(ino, chunkCount(length), chunkCount(old))) {
                    freeChunk(tx, ino, idx, now, attempt);
                }
                if (length % CHUNK != 0) {
                    long idx = length / CHUNK;
                    int pos = (int) (length % CHUNK);
                    String key = chunkKey(ino, idx);
                    byte[] list = tx.get(key);
                    if (list != null) {
                        tx.put(key, Slice.append(list, Slice.hole(pos, (int) (CHUNK - pos))));
                    }
                }
            }
            tx.add(USED_SPACE, align4k(length) - align4k(old));
            Attr na = a.contentChanged(length, now);
            put(tx, na);
            return na;
        });
        trashed.addAll(attempt);
        return done;
    }

    /**
     * Frees a chunk's slices; those that go to the trash are also added to {@code trashed}
     * ({id, size, hour of the trash bucket} each).
     */
    private void freeChunk(KvStore.Writer tx, long ino, long idx, long now, List<long[]> trashed) throws IOException {
        String key = chunkKey(ino, idx);
        freeSlices(tx, Slice.decodeList(tx.get(key)), now, trashed);
        tx.delete(key);
    }

    /** Puts {@code slices} (holes aside) in the trash, or on the deletion list without one; see {@link #freeChunk}. */
    private void freeSlices(KvStore.Writer tx, List<Slice> slices, long now, List<long[]> trashed) throws IOException {
        byte[] stamp = String.valueOf(now).getBytes(StandardCharsets.US_ASCII);
        String to = null;
        long hour = volumeClock.nowNanos() / TrashBuckets.HOUR_NANOS; // the trash's hours are the volume's
        for (Slice s : slices) {
            if (!s.isHole()) {
                if (to == null) {
                    to = trashBuckets.destination(tx, hour);
                }
                tx.hset(to, s.id() + "_" + s.size(), stamp);
                if (!to.equals(DELSLICES)) {
                    trashed.add(new long[] {s.id(), s.size(), hour});
                }
            }
        }
    }

    /** A chunk holding this many slices or more is worth compacting ({@link #onFragmented}). */
    public static final int COMPACT_AT = 32;

    private volatile java.util.function.BiConsumer<Long, Long> fragmented = (ino, idx) -> { };
    private volatile int compactAt = COMPACT_AT;

    /**
     * Tells {@code hint} of each chunk a write commit left with {@code atSlices} slices or more
     * (an inode number and a chunk index; {@value #COMPACT_AT} but in tests): a file appended to
     * a write at a time, or written over again and again, whose reads resolve ever more slices,
     * and whose overwritten bytes stay in the store until the file goes. Called on the committing
     * thread: it must hand the work on.
     */
    public void onFragmented(int atSlices, java.util.function.BiConsumer<Long, Long> hint) {
        this.compactAt = atSlices;
        this.fragmented = hint;
    }

    /**
     * Replaces, in chunk {@code idx} of {@code ino}, the slice list {@code from} a compaction
     * read by {@code replacement}, in which {@code merged} holds bytes the chunk showed through
     * {@code from} (or a list that grew from it): one transaction. Slices committed since stay on
     * top, so a file appended to all the time is compacted all the same. The slices of {@code
     * from} that the replacement does not keep are freed, to the trash (added to {@code trashed})
     * or the deletion list, and the data version moves on, so that nothing cached of the old
     * layout is read again; size and times stay. If the chunk's list no longer starts with {@code
     * from} (a truncation freed the chunk, another compaction came first) or the file is gone,
     * nothing changes, {@code merged} goes to the deletion list, and the answer is null.
     */
    public Attr compactChunk(long ino, long idx, List<Slice> from, List<Slice> replacement, Slice merged, List<long[]> trashed)
            throws IOException {
        List<String> keys = List.of(inodeKey(ino), chunkKey(ino, idx));
        List<long[]> attempt = new ArrayList<>();
        java.util.concurrent.atomic.AtomicReference<List<Slice>> written = new java.util.concurrent.atomic.AtomicReference<>();
        Attr done = mutateSingle(ino, tx -> {
            attempt.clear(); // a transaction tried again frees again
            believeChunks(tx, ino, List.of(idx));
            List<byte[]> stored = tx.getAll(keys);
            long now = clock.nowNanos();
            Attr a = stored.get(0) == null ? null : Attr.decode(ino, stored.get(0));
            List<Slice> current = Slice.decodeList(stored.get(1));
            if (a == null || a.nlink() == 0 || current.size() < from.size() || !current.subList(0, from.size()).equals(from)) {
                tx.hset(DELSLICES, merged.id() + "_" + merged.size(), String.valueOf(now).getBytes(StandardCharsets.US_ASCII));
                return null;
            }
            List<Slice> freed = new ArrayList<>(from);
            freed.removeAll(replacement);
            freeSlices(tx, freed, now, attempt);
            List<Slice> list = new ArrayList<>(replacement);
            list.addAll(current.subList(from.size(), current.size()));
            tx.put(chunkKey(ino, idx), Slice.encodeList(list));
            written.set(List.copyOf(list));
            Attr na = a.relaid();
            put(tx, na);
            return na;
        });
        if (done != null) {
            chunkLists.put(ino, idx, done.dataVersion(), written.get());
            trashed.addAll(attempt);
        }
        return done;
    }

    // ---- trash (kept by TrashBuckets) ----

    /**
     * The volume's trash time in hours, read from the metadata (so a change by {@code partfs
     * config} reaches every mount at its next read): the objects of slices freed by a deletion,
     * a truncation or an overwrite are kept at least this long, so metadata restored from a
     * backup of that time still finds its files' data. 0: deleted at once.
     */
    public int trashHours() throws IOException {
        return trashBuckets.hours();
    }

    /** Sets the volume's trash time ({@link #trashHours()}); 0 turns the trash off and empties it at the next {@link #expireTrash}. */
    public void setTrashHours(int hours) throws IOException {
        trashBuckets.setHours(hours);
    }

    public static final int MAX_TRASH_HOURS = TrashBuckets.MAX_HOURS;

    /** What the trash holds: slices, and the start of the hour the oldest were freed in (0 when empty). */
    public record Trash(long slices, long oldestHourStartMillis) {
    }

    /** Counts the slices in the trash, a request per hour bucket (for status and metrics). */
    public Trash trash() throws IOException {
        return trashBuckets.contents();
    }

    /** Told one freed slice: its id and size. */
    @FunctionalInterface
    public interface SliceVisitor {
        void visit(long id, long size) throws IOException;
    }

    /**
     * Hands every slice in the trash to {@code each}, a page of a bucket at a time (a busy
     * volume's trash holds millions): for fsck and gc, to which their objects are kept, not leaked.
     */
    public void forEachTrashSlice(SliceVisitor each) throws IOException {
        trashBuckets.forEachSlice(each);
    }

    /** Hands every slice of the deletion list to {@code each}, a page at a time: for fsck and gc. */
    public void forEachPendingSlice(SliceVisitor each) throws IOException {
        kv.read(r -> {
            visitFields(r, DELSLICES, each);
            return null;
        });
    }

    /** A slice a process wrote for chunk {@code chunk} of file {@code ino}, whose commit is in question. */
    public record WrittenSlice(long id, long ino, long chunk) {
    }

    /**
     * Of slices a process wrote, the ids the volume knows: listed by the chunk each was written
     * for, or freed since into the trash or the deletion list. The rest were never committed (the
     * process stopped before its fsync or close), or were committed, freed and their objects
     * deleted already. Read from the store, in the order a slice moves (chunk, trash, deletion
     * list), so one moved on meanwhile is still found; the trash and the deletion list are read
     * whole, and only when a chunk did not list some slice.
     */
    public java.util.Set<Long> knownSlices(java.util.Collection<WrittenSlice> written) throws IOException {
        return knownSliceSizes(written).keySet();
    }

    /** {@link #knownSlices}, each with its size (bytes), as the chunk, the trash or the deletion list has it. */
    public Map<Long, Integer> knownSliceSizes(java.util.Collection<WrittenSlice> written) throws IOException {
        Map<Long, Integer> known = listedByTheirChunk(written);
        java.util.Set<Long> rest = new java.util.HashSet<>();
        written.forEach(w -> rest.add(w.id()));
        rest.removeAll(known.keySet());
        SliceVisitor found = (id, size) -> {
            if (rest.remove(id)) {
                known.put(id, (int) size);
            }
        };
        if (!rest.isEmpty()) {
            forEachTrashSlice(found);
        }
        if (!rest.isEmpty()) {
            forEachPendingSlice(found);
        }
        return known;
    }

    /** Of {@code written}, the slices the chunk each was written for lists now: id and size. */
    private Map<Long, Integer> listedByTheirChunk(java.util.Collection<WrittenSlice> written) throws IOException {
        Map<Long, Integer> listed = new java.util.HashMap<>();
        Map<String, List<Long>> byChunk = new java.util.LinkedHashMap<>();
        for (WrittenSlice w : written) {
            byChunk.computeIfAbsent(chunkKey(w.ino(), w.chunk()), k -> new ArrayList<>()).add(w.id());
        }
        List<String> keys = new ArrayList<>(byChunk.keySet());
        for (int from = 0; from < keys.size(); from += 1000) {
            List<String> page = keys.subList(from, Math.min(keys.size(), from + 1000));
            List<byte[]> lists = kv.read(r -> r.getAll(page));
            for (int i = 0; i < page.size(); i++) {
                Map<Long, Integer> sizes = new java.util.HashMap<>();
                for (Slice s : Slice.decodeList(lists.get(i))) {
                    sizes.put(s.id(), s.size());
                }
                for (long id : byChunk.get(page.get(i))) {
                    Integer size = sizes.get(id);
                    if (size != null) {
                        listed.put(id, size);
                    }
                }
            }
        }
        return listed;
    }

    /**
     * A slice whose commit was confirmed: its id and size (-1 when not known), and the chunk of
     * the file it was committed to.
     */
    public record CommittedSlice(long id, int size, long ino, long chunk) {
        WrittenSlice written() {
            return new WrittenSlice(id, ino, chunk);
        }
    }

    /**
     * Of slices whose commit was confirmed, the ids of those freed since and past the trash:
     * listed neither by their chunk nor in the trash, so on the deletion list or gone from it,
     * their objects deleted or about to be. An object of one stored after that deletion (a
     * write-back upload from another machine) is named by nothing and its writer deletes it. Read
     * in the order a slice moves (chunk, then trash), so one moving on meanwhile is not taken for
     * kept; the trash is looked up by field, a request per bucket and slice not in its chunk (read
     * whole for a slice of unknown size).
     */
    public java.util.Set<Long> releasedSlices(java.util.Collection<CommittedSlice> committed) throws IOException {
        Map<Long, Integer> listed = listedByTheirChunk(committed.stream().map(CommittedSlice::written).toList());
        Map<Long, Integer> rest = new java.util.HashMap<>();
        for (CommittedSlice c : committed) {
            if (!listed.containsKey(c.id())) {
                rest.put(c.id(), c.size());
            }
        }
        if (!rest.isEmpty()) {
            rest.keySet().removeAll(trashBuckets.holding(rest));
        }
        return rest.keySet();
    }

    static void visitFields(KvStore.Reader r, String hash, SliceVisitor each) throws IOException {
        r.scanHash(hash, page -> {
            for (String f : page.keySet()) {
                long[] s = parseSliceField(f);
                each.visit(s[0], s[1]);
            }
        });
    }

    /**
     * Takes slices out of the trash without deleting anything ({id, size, hour} each, as
     * {@link #deleteFileData} and {@link #truncate(long, long, List)} report them): for those
     * whose blocks a write-back mount dropped before uploading them, so no object is left.
     */
    public void untrash(List<long[]> slices) throws IOException {
        trashBuckets.untrash(slices);
    }

    /**
     * Moves the slices whose trash time is over (freed in an hour that ended at least
     * {@link #trashHours()} ago, read again first; all of them once the trash is turned off)
     * to the deletion list, a thousand per transaction, and drops emptied buckets. Returns how
     * many it moved. Several mounts may run it at once: moving a slice twice is harmless.
     */
    public long expireTrash() throws IOException {
        return trashBuckets.expire();
    }

    /**
     * Moves the slices of the oldest hour in the trash to the deletion list, whatever their time
     * (a local disk that the objects filled needs the room more than the trash its time);
     * returns how many, 0 when the trash is empty.
     */
    public long expireOldestTrash() throws IOException {
        return trashBuckets.expireOldest();
    }

    // ---- data ----

    /** A new slice id, unique in the volume. */
    public long nextSliceId() throws IOException {
        return sliceIds.next();
    }

    /** {@code n} consecutive slice ids (n >= 1); returns the first. */
    public long nextSliceIds(int n) throws IOException {
        return sliceIds.next(n);
    }

    /** One written slice to commit: it goes to chunk {@code index}. */
    public record ChunkSlice(long index, Slice slice) {
    }

    /**
     * Appends written slices to their chunks and grows the file to cover them, in one
     * transaction: the step that makes uploaded data part of the file. When the inode no longer
     * exists the slices are handed straight to deletion; when the volume's metadata is gone with
     * it, the commit fails and writes nothing.
     */
    public Attr commitWrite(long ino, List<ChunkSlice> slices) throws IOException {
        java.util.concurrent.atomic.AtomicReference<Map<Long, byte[]>> written = new java.util.concurrent.atomic.AtomicReference<>();
        List<Long> indexes = slices.stream().map(ChunkSlice::index).distinct().toList();
        List<String> keys = new java.util.ArrayList<>(indexes.size() + 1);
        keys.add(inodeKey(ino));
        indexes.forEach(i -> keys.add(chunkKey(ino, i)));
        Attr committed = mutateSingle(ino, tx -> {
            believeChunks(tx, ino, indexes);
            List<byte[]> stored = tx.getAll(keys); // the inode and every chunk written to: one round trip
            byte[] raw = stored.get(0);
            long now = clock.nowNanos();
            if (raw == null) {
                String gone = sessionTable.goneFrom(tx);
                if (gone != null) {
                    throw new IOException(gone); // the file is missing as the whole volume is (a Redis restarted empty): nothing written
                }
                byte[] stamp = String.valueOf(now).getBytes(StandardCharsets.US_ASCII);
                for (ChunkSlice cs : slices) {
                    tx.hset(DELSLICES, cs.slice().id() + "_" + cs.slice().size(), stamp);
                }
                return null;
            }
            Attr a = Attr.decode(ino, raw);
            long end = a.size();
            Map<Long, byte[]> lists = new java.util.HashMap<>();
            for (int i = 0; i < indexes.size(); i++) {
                lists.put(indexes.get(i), stored.get(i + 1));
            }
            for (ChunkSlice cs : slices) {
                lists.put(cs.index(), Slice.append(lists.get(cs.index()), cs.slice()));
                end = Math.max(end, cs.index() * CHUNK + cs.slice().end());
            }
            for (Map.Entry<Long, byte[]> e : lists.entrySet()) {
                tx.put(chunkKey(ino, e.getKey()), e.getValue());
            }
            written.set(lists); // the last run's lists are the ones committed
            tx.add(USED_SPACE, align4k(end) - align4k(a.size()));
            Attr na = a.contentChanged(end, now);
            put(tx, na);
            if (na.nlink() == 0) {
                tx.hset(DELFILES, String.valueOf(ino), pendingFile(ino, end));
            }
            return na;
        });
        if (committed != null) {
            // committed together with the new data version: what a read at that version would get,
            // so reading back what was just written costs no round trip (see ChunkLists)
            for (Map.Entry<Long, byte[]> e : written.get().entrySet()) {
                List<Slice> list = Slice.decodeList(e.getValue());
                chunkLists.put(ino, e.getKey(), committed.dataVersion(), list);
                if (list.size() >= compactAt) {
                    fragmented.accept(ino, e.getKey());
                }
            }
        }
        return committed;
    }

    // ---- open files and deletion ----

    /** Notes an open handle, so an unlink does not delete the data under it. */
    public void opened(long ino) {
        openCount.merge(ino, 1, Integer::sum);
    }

    /** Notes a closed handle; the data of an unlinked file is released with the last one. */
    public void released(long ino) throws IOException {
        Integer left = openCount.computeIfPresent(ino, (k, n) -> n == 1 ? null : n - 1);
        if (left == null && unlinkedWhileOpen.remove(ino)) {
            byte[] raw = kv.read(r -> r.get(inodeKey(ino)));
            if (raw != null && Attr.decode(ino, raw).nlink() == 0) {
                orphanListener.accept(ino);
            }
        }
    }

    public boolean isOpen(long ino) {
        return openCount.containsKey(ino);
    }

    /**
     * Deletions not done yet: files unlinked whose data awaits deletion (or that a client still
     * has open), and slices whose objects await deletion. Two counts, one request each.
     */
    public record PendingDeletions(long files, long slices) {
    }

    public PendingDeletions pendingDeletions() throws IOException {
        return kv.read(r -> new PendingDeletions(r.hlen(DELFILES), r.hlen(DELSLICES)));
    }

    /**
     * Inodes whose data awaits deletion and that no live mount but this process holds open: to
     * resume after a restart, after another mount crashed, or for gc. An unlinked file another
     * live session holds open stays for it ({@link #released} there deletes it). Read a page at
     * a time, so while other clients change the list one may be listed twice on Redis
     * (deleting it again finds nothing to do).
     */
    public List<Long> pendingFileDeletions() throws IOException {
        long now = sessionTable.nowMillis();
        long session = sessionTable.id();
        return kv.read(r -> {
            Map<Long, Session> live = Sessions.live(Sessions.read(r), now);
            List<Long> out = new ArrayList<>();
            r.scanHash(DELFILES, page -> { // a page at a time: a crash during a DROP DATABASE leaves a long list
                for (Map.Entry<String, byte[]> e : page.entrySet()) {
                    long holder = pendingFileHolder(e.getValue());
                    if (holder == 0 || holder == session || !live.containsKey(holder)) {
                        out.add(Long.parseLong(e.getKey()));
                    }
                }
            });
            return out;
        });
    }

    /**
     * Moves the slices of an unlinked, closed file to the slice deletion list (or the trash) and
     * removes the inode, up to {@value #CHUNKS_PER_DELETE} chunks per transaction. Does nothing
     * if the inode has links or is open here. Returns the slices it put in the trash ({id, size,
     * hour} each): their staged blocks no backup can list need not be uploaded.
     */
    public List<long[]> deleteFileData(long ino) throws IOException {
        List<long[]> trashed = new ArrayList<>();
        if (openCount.containsKey(ino)) {
            return trashed;
        }
        // The deletion entry's length, from memory when this process took the last link away:
        // the entry is not read in the transactions below, since every unlink writes that
        // hash and Redis would WATCH it whole.
        Long length = unlinkedLength(ino);
        if (length == null) {
            length = kv.read(r -> {
                byte[] b = r.hget(DELFILES, String.valueOf(ino));
                return b == null ? null : ByteBuffer.wrap(b).getLong();
            });
            if (length == null) {
                return trashed;
            }
        }
        long lengthChunks = chunkCount(length);
        long[] chunks = {lengthChunks};
        // A huge (sparse) file's chunks are found by a scan, all at once: nothing writes to an
        // unlinked, closed file any more, so none appears later. Then chunks[0] counts them,
        // and the positions below are positions in that list rather than chunk indexes. The
        // inode read in the first transaction may show a larger file than the deletion entry
        // (extended while open after its unlink): then that transaction changes nothing and
        // the deletion starts over with a scan.
        long[][] listed = {lengthChunks > SCAN_CHUNKS_ABOVE ? chunkIndexes(ino, 0, Long.MAX_VALUE) : null};
        if (listed[0] != null) {
            chunks[0] = listed[0].length;
        }
        boolean[] huge = {false};
        // The chunks are freed in transactions of up to CHUNKS_PER_DELETE, the last of which
        // also deletes the inode: a small file goes in one transaction (one round trip when the
        // cache knows its inode and slice lists, as it does for a file this process unlinked).
        long from = 0;
        while (true) {
            long first = from;
            List<long[]> attempt = new ArrayList<>();
            long[] list = listed[0];
            java.util.function.LongUnaryOperator index = p -> list == null ? p : list[(int) p];
            boolean relinked = mutateSingle(ino, tx -> {
                attempt.clear(); // a transaction run again starts over
                huge[0] = false;
                believeChunks(tx, ino, java.util.stream.LongStream.range(first, Math.min(chunks[0], first + CHUNKS_PER_DELETE))
                        .map(index).boxed().toList());
                byte[] raw = tx.get(inodeKey(ino));
                Attr a = raw == null ? null : Attr.decode(ino, raw);
                if (a != null && a.nlink() > 0) {
                    tx.hdel(DELFILES, String.valueOf(ino)); // linked again meanwhile: nothing to delete
                    return true;
                }
                if (a != null && list == null) { // memory may have known a shorter file than the store holds
                    chunks[0] = Math.max(lengthChunks, chunkCount(a.size()));
                    if (chunks[0] > SCAN_CHUNKS_ABOVE) {
                        huge[0] = true;
                        return false;
                    }
                }
                boolean last = first + CHUNKS_PER_DELETE >= chunks[0];
                long now = clock.nowNanos();
                for (long p = first; p < Math.min(chunks[0], first + CHUNKS_PER_DELETE); p++) {
                    freeChunk(tx, ino, index.applyAsLong(p), now, attempt);
                }
                if (last) {
                    if (a != null) {
                        tx.add(USED_SPACE, -align4k(a.size()));
                        tx.add(TOTAL_INODES, -1);
                    }
                    deleteInode(tx, ino);
                    tx.hdelAll(xattrKey(ino));
                    tx.hdel(DELFILES, String.valueOf(ino));
                }
                return false;
            });
            if (relinked) {
                return trashed;
            }
            if (huge[0]) { // nothing was changed: start over with the chunks a scan finds
                listed[0] = chunkIndexes(ino, 0, Long.MAX_VALUE);
                chunks[0] = listed[0].length;
                from = 0;
                continue;
            }
            trashed.addAll(attempt);
            from += CHUNKS_PER_DELETE;
            if (from >= chunks[0]) {
                return trashed;
            }
        }
    }

    /**
     * The length of file {@code ino} when the cache holds its inode with no link left (as after
     * this process's unlink or rename over it), else null. What the deletion entry holds, unless
     * the file changed elsewhere since: the transactions that free it read the inode and go by
     * the larger of the two.
     */
    private Long unlinkedLength(long ino) {
        MetaCache c = cache;
        Attr a = c == null ? null : c.attr(ino);
        return a != null && a.nlink() == 0 && a.type() == FileType.FILE ? a.size() : null;
    }

    /** Slices whose objects await deletion, as {@code id_size} keys, at most {@code limit}. */
    public List<long[]> pendingSliceDeletions(int limit) throws IOException {
        return kv.read(r -> {
            List<long[]> out = new ArrayList<>();
            for (String k : r.hgetSome(DELSLICES, limit).keySet()) { // a large backlog is not read whole for each batch
                out.add(parseSliceField(k));
            }
            return out;
        });
    }

    /** A {@code id_size} field of the deletion list or a trash bucket as {id, size}. */
    private static long[] parseSliceField(String k) {
        int u = k.indexOf('_');
        return new long[] {Long.parseLong(k, 0, u, 10), Long.parseLong(k, u + 1, k.length(), 10)};
    }

    /** Hands a slice no file uses to deletion (its objects, as far as they were stored): a compaction that failed. */
    public void abandonSlice(Slice s) throws IOException {
        byte[] stamp = String.valueOf(clock.nowNanos()).getBytes(StandardCharsets.US_ASCII);
        mutate(tx -> {
            tx.hset(DELSLICES, s.id() + "_" + s.size(), stamp);
            return null;
        });
    }

    /** Forgets slices whose objects are deleted ({id, size} each), in one transaction. */
    public void slicesDeleted(List<long[]> slices) throws IOException {
        if (slices.isEmpty()) {
            return;
        }
        mutate(tx -> {
            for (long[] sl : slices) {
                tx.hdel(DELSLICES, sl[0] + "_" + sl[1]);
            }
            return null;
        });
    }

    /** Forgets a slice whose objects are deleted. */
    public void sliceDeleted(long id, long size) throws IOException {
        mutate(tx -> {
            tx.hdel(DELSLICES, id + "_" + size);
            return null;
        });
    }

    // ---- extended attributes ----

    public static final int XATTR_CREATE = 1;
    public static final int XATTR_REPLACE = 2;

    public byte[] getxattr(long ino, String name) throws IOException {
        MetaCache c = cache;
        if (c != null) {
            // Without FUSE_HANDLE_KILLPRIV_V2 (libfuse) the kernel asks for security.capability before every write: answer from memory.
            Map<String, byte[]> all = c.xattrs(ino);
            if (all == null) {
                long gen = c.generation();
                all = kv.read(r -> {
                    attr(r, ino);
                    return r.hgetAll(xattrKey(ino));
                });
                c.installXattrs(gen, ino, all);
            }
            byte[] v = all.get(name);
            if (v == null) {
                throw new FsException.NoAttribute(name);
            }
            return v;
        }
        return kv.read(r -> {
            byte[] v = r.hget(xattrKey(ino), name);
            if (v == null) {
                attr(r, ino);
                throw new FsException.NoAttribute(name);
            }
            return v;
        });
    }

    /** The extended attribute that holds a file's capabilities. */
    public static final String CAPABILITY_XATTR = "security.capability";
    private static final int S_ISUID = 04000, S_ISGID = 02000, S_IXGRP = 00010;

    /**
     * What Linux does to a regular file written, truncated or given another owner by a process
     * without CAP_FSETID, done here when the kernel leaves it to the filesystem
     * (FUSE_HANDLE_KILLPRIV_V2): clears set-user-ID, set-group-ID if the file is group-executable,
     * and the file's capabilities. For a file with none of them (nearly every file) it costs two
     * lookups in the cache, no request.
     */
    public void killPrivileges(long ino) throws IOException {
        Attr a = getattr(ino);
        if (a.type() != FileType.FILE) {
            return;
        }
        int mode = a.mode();
        int kill = (mode & S_ISUID) | ((mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP) ? S_ISGID : 0);
        if (kill != 0) {
            setattr(ino, SetAttr.mode(mode & ~kill & 07777));
        }
        if (hasXattr(ino, CAPABILITY_XATTR)) {
            try {
                removexattr(ino, CAPABILITY_XATTR);
            } catch (FsException.NoAttribute removedMeanwhile) {
                // another client did it first
            }
        }
    }

    private boolean hasXattr(long ino, String name) throws IOException {
        MetaCache c = cache;
        Map<String, byte[]> all = c == null ? null : c.xattrs(ino);
        if (all != null) {
            return all.containsKey(name);
        }
        try {
            getxattr(ino, name); // fills the cache, if there is one
            return true;
        } catch (FsException.NoAttribute e) {
            return false;
        }
    }

    public List<String> listxattr(long ino) throws IOException {
        return kv.read(r -> {
            attr(r, ino);
            List<String> names = new ArrayList<>(r.hgetAll(xattrKey(ino)).keySet());
            names.sort(null);
            return names;
        });
    }

    public void setxattr(long ino, String name, byte[] value, int flags) throws IOException {
        if (name.isEmpty() || NameCodec.encode(name).length > MAX_NAME_BYTES) {
            throw new FsException.OutOfRange("xattr name length");
        }
        if (value.length > MAX_XATTR_VALUE) {
            throw new FsException.OutOfRange("xattr value of " + value.length + " bytes");
        }
        mutate(tx -> {
            Attr a = attr(tx, ino);
            boolean exists = tx.hget(xattrKey(ino), name) != null;
            if ((flags & XATTR_CREATE) != 0 && exists) {
                throw new FsException.Exists("xattr " + name);
            }
            if ((flags & XATTR_REPLACE) != 0 && !exists) {
                throw new FsException.NoAttribute(name);
            }
            if (!exists) {
                long list = NameCodec.encode(name).length + 1;
                for (String other : tx.hgetAll(xattrKey(ino)).keySet()) {
                    list += NameCodec.encode(other).length + 1;
                }
                if (list > MAX_XATTR_LIST) {
                    throw new FsException.NoSpace("no room for another extended attribute name on inode " + ino
                            + ": a file's names take at most " + MAX_XATTR_LIST + " bytes, the most listxattr(2) returns");
                }
            }
            tx.hset(xattrKey(ino), name, value);
            put(tx, a.changed(clock.nowNanos()));
            return null;
        });
    }

    public void removexattr(long ino, String name) throws IOException {
        mutate(tx -> {
            Attr a = attr(tx, ino);
            if (tx.hget(xattrKey(ino), name) == null) {
                throw new FsException.NoAttribute(name);
            }
            tx.hdel(xattrKey(ino), name);
            put(tx, a.changed(clock.nowNanos()));
            return null;
        });
    }

    // ---- sessions and file locks (kept by Sessions) ----

    /** How often a mount tells the volume it is alive ({@link #heartbeat}). */
    public static final java.time.Duration HEARTBEAT = java.time.Duration.ofSeconds(20);
    /**
     * A session with no heartbeat for this long is taken for a crashed mount: removed by the next
     * mount or gc, and the unlinked files it held open are deleted. Fifteen missed heartbeats;
     * heartbeats are written and judged by the metadata store's clock ({@link StoreClock}), so
     * machines' clocks that disagree do not shorten it.
     */
    public static final java.time.Duration SESSION_TIMEOUT = java.time.Duration.ofMinutes(5);

    /**
     * A mount of the volume: {@code lastBeatMillis} is -1 for a session registered by a build
     * without heartbeats. Such a session counts as stale: those builds never kept unlinked files
     * for their sessions (any mount's start deleted them), so removing it takes nothing from them.
     */
    public record Session(long id, String info, long lastBeatMillis) {
        public boolean live(long nowMillis) {
            return lastBeatMillis >= 0 && nowMillis - lastBeatMillis < SESSION_TIMEOUT.toMillis();
        }
    }

    /** What {@link #flock} is asked to do: flock(2)'s LOCK_SH, LOCK_EX and LOCK_UN. */
    public enum Flock { SHARED, EXCLUSIVE, UNLOCK }

    /** The mounts of the volume and their flock(2) locks. */
    private final Sessions sessionTable;

    /**
     * Registers this process as a mount of the volume; {@code info} describes it for
     * {@code partfs status}. Unlinked files it holds open are then kept for it until it ends
     * the session, or stops beating for {@link #SESSION_TIMEOUT}.
     */
    public long registerSession(String info) throws IOException {
        if (format != null) {
            sessionTable.expectVolume(format, kv.describe());
        }
        return sessionTable.register(info);
    }

    /**
     * The metadata store's clock minus this machine's, in milliseconds (against the middle of
     * the round trip), or empty where the store has no clock of its own (RocksDB). Heartbeats
     * and the trash follow the store's clock ({@link StoreClock}); file times and write-back's
     * comparison with backups made elsewhere are this machine's, so {@link #CLOCK_SKEW_WARN}
     * and more is warned about.
     */
    public java.util.OptionalLong clockSkewMillis() throws IOException {
        java.util.OptionalLong nanos = StoreClock.measure(kv, TimeSource.SYSTEM);
        return nanos.isPresent() ? java.util.OptionalLong.of(nanos.getAsLong() / 1_000_000) : nanos;
    }

    /**
     * A clock this far off the metadata store's is warned about: the margin a write-back mount
     * allows for the clock of another machine that made a backup.
     */
    public static final java.time.Duration CLOCK_SKEW_WARN = java.time.Duration.ofMinutes(1);

    /**
     * What is wrong with this machine's clock being {@code skewMillis} off the store's, or null
     * when it is within {@link #CLOCK_SKEW_WARN}.
     */
    public String clockSkewProblem(long skewMillis) {
        if (Math.abs(skewMillis) < CLOCK_SKEW_WARN.toMillis()) {
            return null;
        }
        return String.format(java.util.Locale.ROOT, "this machine's clock is %.1f s %s the clock of %s: heartbeats and the"
                + " trash follow the store's clock, but the file times written here are as far off, and a write-back mount"
                + " allows only %d s for the clock of the machine that made the last backup when it decides which staged"
                + " blocks of deleted files that backup may name; synchronize the clocks (NTP)", Math.abs(skewMillis) / 1000.0,
                skewMillis > 0 ? "behind" : "ahead of", kv.describe(), CLOCK_SKEW_WARN.toSeconds());
    }

    /** Now by the volume's clock (the metadata store's, {@link StoreClock}), by which heartbeats are written and judged. */
    public long volumeNowMillis() throws IOException {
        return sessionTable.nowMillis();
    }

    /** This process's session id, 0 before {@link #registerSession}. */
    public long session() {
        return sessionTable.id();
    }

    /**
     * Tells the volume this process's session is alive. Returns false when another client had
     * removed it for missing heartbeats; it is registered again, with its flock(2) locks where
     * no other mount took them meanwhile, and otherwise this mount is {@link #fenced()}.
     */
    public boolean heartbeat() throws IOException {
        return sessionTable.heartbeat();
    }

    /**
     * Why this mount refuses changes (EROFS), or null while it takes them: set when it lost a
     * flock(2) lock to another mount ({@link #heartbeat}). Lasts until the process ends.
     */
    public String fenced() {
        return sessionTable.fenced();
    }

    /** Ends session {@code sid} (this process's at unmount), with its flock(2) locks. */
    public void unregisterSession(long sid) throws IOException {
        if (sid == sessionTable.id()) {
            uploads.close();
        }
        sessionTable.unregister(sid);
    }

    // ---- uploads not committed yet (kept by SliceIntents) ----

    /** The slices this process uploads before committing them, written down for its session. */
    private final SliceIntents uploads;

    /**
     * Notes that slice {@code id}, written for chunk {@code chunk} of {@code ino}, is being
     * uploaded before its commit: should this mount never commit it, its objects are deleted
     * once its session has ended ({@link #claimUncommittedUploads}). Costs no round trip here.
     */
    public void uploading(long id, long ino, long chunk) {
        uploads.uploading(id, ino, chunk);
    }

    /** Drops the notes of {@link #uploading} slices now committed, or handed to deletion. */
    public void uploadsSettled(Iterable<Long> ids) {
        uploads.settled(ids);
    }

    /** Slices noted {@link #uploading} and not settled yet. */
    public int uploadsNotSettled() {
        return uploads.pending();
    }

    /**
     * The slices that registered sessions have written down as uploaded and not committed yet:
     * a check must not take their objects for leaked (a file written slowly has whole blocks in
     * the store long before its commit).
     */
    public java.util.Set<Long> uploadsOfRegisteredSessions() throws IOException {
        return uploads.ofRegisteredSessions();
    }

    /**
     * Notes of uploads not committed, of one session: how many slices, and when a mount first saw
     * the session ended (volume clock, ms; 0 while it is registered or not seen ended yet).
     */
    public record UploadNotes(long session, long slices, long endSeenMillis) {
    }

    /** The notes of uploads not committed that sessions left in the metadata, by session. */
    public List<UploadNotes> uploadNotes() throws IOException {
        List<UploadNotes> out = new ArrayList<>();
        for (Map.Entry<Long, long[]> e : uploads.counts().entrySet()) {
            out.add(new UploadNotes(e.getKey(), e.getValue()[0], e.getValue()[1]));
        }
        return out;
    }

    /** The slices session {@code sid} has written down in the metadata as uploaded and not committed yet. */
    public java.util.Set<Long> uploadsRecorded(long sid) throws IOException {
        java.util.Set<Long> ids = new java.util.TreeSet<>();
        for (String f : kv.read(r -> r.hgetAll(SliceIntents.key(sid))).keySet()) {
            ids.add(Long.parseLong(f));
        }
        return ids;
    }

    /**
     * Takes the notes of the sessions that ended (unmounted, or removed as crashed) at least
     * {@code settle} ago, and returns, by session, the slices among them that the volume does not
     * know ({@link #knownSlices}): uploaded, never committed, their objects named by nothing. The
     * caller deletes those objects, then calls {@link #uploadsSettled} with them: until then a
     * mount's session keeps their notes as its own, so that they are claimed again should it die
     * first. {@code settle} is how long a commit the ended process sent may still be on its way:
     * nothing on an engine only one process opens.
     */
    public Map<Long, List<Long>> claimUncommittedUploads(java.time.Duration settle) throws IOException {
        Map<Long, List<Long>> out = new java.util.TreeMap<>();
        for (SliceIntents.Claimed c : uploads.claimEnded(settle.toMillis())) {
            java.util.Set<Long> known = c.slices().isEmpty() ? java.util.Set.of() : knownSlices(c.slices());
            List<Long> unknown = new ArrayList<>();
            for (WrittenSlice w : c.slices()) {
                if (!known.contains(w.id())) {
                    unknown.add(w.id());
                }
            }
            uploads.settled(known); // committed after all: nothing to delete
            out.put(c.session(), unknown);
        }
        return out;
    }

    /** Registered mounts, live or not: a crashed mount stays listed until a mount or gc removes it. */
    public Map<Long, Session> sessions() throws IOException {
        return sessionTable.all();
    }

    /** The mounts that beat within {@link #SESSION_TIMEOUT}. */
    public Map<Long, Session> liveSessions() throws IOException {
        return sessionTable.live();
    }

    /**
     * Removes the sessions of crashed mounts (no heartbeat for {@link #SESSION_TIMEOUT}), with
     * their locks, so the unlinked files they held open become {@link #pendingFileDeletions}.
     * Returns those removed.
     */
    public List<Session> removeStaleSessions() throws IOException {
        return sessionTable.removeStale();
    }

    /**
     * Removes session {@code sid} at once, as {@link #removeStaleSessions} removes a crashed
     * mount's: for a mount known to be dead (this machine's earlier mount at the same mount
     * point). Returns false if there was no such session.
     */
    public boolean removeSession(long sid) throws IOException {
        return sessionTable.remove(sid);
    }

    /**
     * Takes, converts or drops the flock(2) lock that {@code owner} (an open file of this
     * mount, as the kernel names it) holds on {@code ino}, for every mount of the volume.
     * Returns false, changing nothing, on a conflict. Locks end with this process's session.
     */
    public boolean flock(long ino, long owner, Flock what) throws IOException {
        return sessionTable.flock(ino, owner, what);
    }

    /**
     * A {@code delfiles} value: the file's size, and the session that holds it open (absent
     * when none does, as in values written before sessions held files).
     */
    private byte[] pendingFile(long ino, long size) {
        long holder = openCount.containsKey(ino) ? sessionTable.id() : 0;
        return holder == 0 ? ByteBuffer.allocate(8).putLong(size).array()
                : ByteBuffer.allocate(16).putLong(size).putLong(holder).array();
    }

    private static long pendingFileHolder(byte[] value) {
        return value.length >= 16 ? ByteBuffer.wrap(value).getLong(8) : 0;
    }

    // ---- volume ----

    /** Bytes used by file data (4 KiB granularity) and inodes in use. */
    public record Usage(long usedBytes, long inodes) {
    }

    /**
     * Space and inodes in use. With caching on, the value is reused for up to 1 s until this
     * process changes something: applications (ClickHouse among them) call statfs far more often
     * than it changes. Other clients' changes show within that second.
     */
    public Usage usage() throws IOException {
        Usage last = lastUsage;
        if (cache != null && last != null && System.nanoTime() - lastUsageAt < 1_000_000_000L) {
            return last;
        }
        Usage u = kv.read(r -> new Usage(r.counter(USED_SPACE), r.counter(TOTAL_INODES)));
        lastUsageAt = System.nanoTime();
        lastUsage = u;
        return u;
    }

    private volatile Usage lastUsage;
    private volatile long lastUsageAt;

    /** Makes all committed metadata durable. */
    public void sync() throws IOException {
        kv.sync();
    }

    @Override
    public void close() throws IOException {
        uploads.stop();
        kv.close();
    }

    /** Ids handed out from a counter in batches, so most allocations need no round trip. */
    private static final class IdBatch {
        private final KvStore kv;
        private final String counter;
        private final int batch;
        private long next;
        private long limit;

        IdBatch(KvStore kv, String counter, int batch) {
            this.kv = kv;
            this.counter = counter;
            this.batch = batch;
        }

        synchronized long next() throws IOException {
            return next(1);
        }

        /** {@code n} consecutive ids; returns the first. */
        synchronized long next(int n) throws IOException {
            if (limit - next < n) {
                if (n > batch) {
                    return kv.increment(counter, n) - n + 1; // the batch at hand stays for the next calls
                }
                long end = kv.increment(counter, batch);
                next = end - batch + 1;
                limit = end + 1;
            }
            long first = next;
            next += n;
            return first;
        }
    }
}
