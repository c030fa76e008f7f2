package io.partfs.cache;

import io.partfs.engine.meta.RocksHandle;
import io.partfs.engine.meta.RocksNative;
import java.io.Closeable;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.zip.CRC32C;
import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.BloomFilter;
import org.rocksdb.LRUCache;
import org.rocksdb.Options;
import org.rocksdb.ReadOptions;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.RocksIterator;
import org.rocksdb.Slice;
import org.rocksdb.WriteBatch;
import org.rocksdb.WriteOptions;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The RocksDB store of the part-metadata cache: key {@code disk:relative_path}, value the
 * file's bytes with what proves them current (inode, size, data version) and a CRC32C of the bytes.
 *
 * <p>It is a cache: every value is a copy of a file on the volume, so losing the store loses
 * nothing. A directory that cannot be opened is moved aside and replaced by an empty store when
 * {@code continueIfCorrupted} (ClickHouse's {@code continue_if_corrupted}); otherwise opening
 * fails with {@link CacheCorruptedException}. A single value whose checksum does not match is
 * a miss, deleted so it is written again, and never served.
 *
 * <p>A full disk: a write fails with {@link io.partfs.engine.FsException.NoSpace} and stops
 * RocksDB's writes; the first write once the disk has room reopens the database
 * ({@link RocksHandle}), so the cache fills again without a restart. Reads go on meanwhile.
 *
 * <p>Thread-safe: RocksDB handles concurrency; a rename of a prefix is one atomic WriteBatch.
 */
public final class PartMetadataStore implements Closeable {
    private static final Logger log = LoggerFactory.getLogger(PartMetadataStore.class);
    private static final byte VERSION = 1;
    private static final int HEADER = 1 + 8 + 8 + 8 + 4;
    /** About 1% false positives (RocksDB's usual setting). */
    private static final double BLOOM_BITS_PER_KEY = 10;

    static {
        RocksNative.load();
    }

    /** A cached file: its bytes and the attributes they were read or written with. */
    public record Entry(long ino, long size, long version, byte[] bytes) {
        @Override
        public boolean equals(Object o) {
            return o instanceof Entry e && e.ino == ino && e.size == size && e.version == version && Arrays.equals(e.bytes, bytes);
        }

        @Override
        public int hashCode() {
            return Long.hashCode(ino) * 31 + Arrays.hashCode(bytes);
        }

        @Override
        public String toString() {
            return "Entry{ino=" + ino + ", size=" + size + ", version=" + version + ", " + bytes.length + " bytes}";
        }
    }

    /** Counters for {@code partfs cache stats} and metrics. */
    public record Stats(long entries, long bytes, long hits, long misses, long corrupt) {
    }

    /** How long a reopen after a full disk waits for reads in progress (a system-table scan streaming rows) before the write fails. */
    private static final java.time.Duration REOPEN_WAIT = java.time.Duration.ofSeconds(1);

    private final Path dir;
    /** The database; every use of it goes through the handle, which reopens it after a full disk. */
    private final RocksHandle handle;
    private final Options options;
    private final LRUCache blockCache;
    private final BloomFilter bloom;
    private final WriteOptions writeOptions = new WriteOptions();
    private final AtomicLong hits = new AtomicLong();
    private final AtomicLong misses = new AtomicLong();
    private final AtomicLong corrupt = new AtomicLong();

    private final boolean readOnly;

    private PartMetadataStore(Path dir, RocksHandle handle, Options options, LRUCache blockCache, BloomFilter bloom, boolean readOnly) {
        this.readOnly = readOnly;
        this.dir = dir;
        this.handle = handle;
        this.options = options;
        this.blockCache = blockCache;
        this.bloom = bloom;
        loadCounters();
    }

    /**
     * Opens the store in {@code dir}, creating it if missing.
     *
     * @param lruCacheSize        RocksDB block cache bytes (ClickHouse's {@code lru_cache_size})
     * @param continueIfCorrupted move an unopenable directory aside and start empty, instead of failing
     */
    public static PartMetadataStore open(Path dir, long lruCacheSize, boolean continueIfCorrupted) throws IOException {
        Path d = dir.toAbsolutePath().normalize();
        Files.createDirectories(d.getParent());
        try {
            return tryOpen(d, lruCacheSize);
        } catch (RocksDBException e) {
            String why = String.valueOf(e.getMessage());
            if (why.contains("lock")) {
                throw new IOException("part-metadata cache " + d + " is in use by another process: use another --metadata-cache-dir", e);
            }
            if (!continueIfCorrupted) {
                throw new CacheCorruptedException("part-metadata cache " + d + " cannot be opened (" + why + "): it holds only"
                        + " copies, so delete it (rm -rf " + d + ") or mount with --continue-if-corrupted; no table data is lost", e);
            }
            Path aside = d.resolveSibling(d.getFileName() + ".corrupted." + (System.currentTimeMillis() / 1000));
            Files.move(d, aside);
            log.warn("part-metadata cache {} could not be opened ({}); moved it to {} and starting empty", d, why, aside);
            try {
                return tryOpen(d, lruCacheSize);
            } catch (RocksDBException again) {
                throw new IOException("cannot create a new part-metadata cache at " + d + ": " + again.getMessage(), again);
            }
        }
    }

    /**
     * Opens an existing store for reading only; works while a mount has it open for writing,
     * and sees what was written before this open.
     */
    public static PartMetadataStore openReadOnly(Path dir) throws IOException {
        Path d = dir.toAbsolutePath().normalize();
        if (!Files.isDirectory(d)) {
            throw new IOException("no part-metadata cache at " + d + ": check --metadata-cache-dir");
        }
        LRUCache cache = new LRUCache(8L << 20);
        BloomFilter bloom = new BloomFilter(BLOOM_BITS_PER_KEY);
        Options options = new Options().setTableFormatConfig(tableConfig(cache, bloom));
        try {
            return new PartMetadataStore(d, new RocksHandle(d, "part-metadata cache", () -> RocksDB.openReadOnly(options, d.toString()),
                    REOPEN_WAIT), options, cache, bloom, true);
        } catch (RocksDBException e) {
            options.close();
            bloom.close();
            cache.close();
            throw new CacheCorruptedException("part-metadata cache " + d + " cannot be opened (" + e.getMessage()
                    + "): it holds only copies, so it can be deleted without losing table data", e);
        }
    }

    private static PartMetadataStore tryOpen(Path d, long lruCacheSize) throws RocksDBException {
        LRUCache cache = new LRUCache(lruCacheSize);
        BloomFilter bloom = new BloomFilter(BLOOM_BITS_PER_KEY);
        Options options = new Options().setCreateIfMissing(true).setParanoidChecks(true)
                .setTableFormatConfig(tableConfig(cache, bloom));
        try {
            return new PartMetadataStore(d, new RocksHandle(d, "part-metadata cache", () -> RocksDB.open(options, d.toString()),
                    REOPEN_WAIT), options, cache, bloom, false);
        } catch (RocksDBException e) {
            options.close();
            bloom.close();
            cache.close();
            throw e;
        }
    }

    /**
     * Tables with a Bloom filter per file: most keys the volume asks about are not stored (every
     * column file of a merged or dropped part is removed, and {@link #delete} looks it up first),
     * and the filter answers those without reading a data block. Files written before the filter
     * was added get one when compaction rewrites them.
     */
    private static BlockBasedTableConfig tableConfig(LRUCache cache, BloomFilter bloom) {
        return new BlockBasedTableConfig().setBlockCache(cache).setFilterPolicy(bloom);
    }

    public Path dir() {
        return dir;
    }

    /** Reserved key (not a disk:path) holding the hit/miss counters of the last mount. */
    private static final String COUNTERS = "\u0000counters";

    /** Saves hits, misses and corrupt counts, so {@code partfs cache stats} can show them. */
    public void saveCounters() throws IOException {
        writing("save counters", this::putCounters);
    }

    private Void putCounters(RocksDB db) throws RocksDBException {
        db.put(writeOptions, k(COUNTERS), ByteBuffer.allocate(24).putLong(hits.get()).putLong(misses.get())
                .putLong(corrupt.get()).array());
        return null;
    }

    /** Runs a read on the database; RocksDB's failures become an IOException naming {@code op}. */
    private <T> T reading(String op, RocksHandle.Use<T> use) throws IOException {
        try {
            return handle.read(use);
        } catch (RocksDBException e) {
            throw wrap(op, e);
        }
    }

    /** As {@link #reading}, for a write: a full disk fails it with {@link io.partfs.engine.FsException.NoSpace}. */
    private <T> T writing(String op, RocksHandle.Use<T> use) throws IOException {
        try {
            return handle.write(use);
        } catch (RocksDBException e) {
            throw wrap(op, e);
        }
    }

    /** As {@link #reading}, for the methods that declare no IOException (iterations, counts). */
    private <T> T readingUnchecked(String op, RocksHandle.Use<T> use) {
        try {
            return reading(op, use);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /** Reserved key holding the tables registered with the sidecar ({@code partfs sql}), one line each (db.table, a tab, its UUID if any). */
    private static final String REGISTERED = "\u0000registered-tables";

    /** The tables registered to be cached, as saved by {@link #saveRegisteredTables}. */
    public java.util.Set<String> registeredTables() throws IOException {
        byte[] v = reading("read registered tables", db -> db.get(k(REGISTERED)));
        java.util.Set<String> out = new java.util.TreeSet<>();
        if (v != null) {
            new String(v, StandardCharsets.UTF_8).lines().filter(l -> !l.isBlank()).forEach(out::add);
        }
        return out;
    }

    public void saveRegisteredTables(java.util.Collection<String> tables) throws IOException {
        byte[] v = String.join("\n", new java.util.TreeSet<>(tables)).getBytes(StandardCharsets.UTF_8);
        writing("save registered tables", db -> {
            db.put(writeOptions, k(REGISTERED), v);
            return null;
        });
    }

    private void loadCounters() {
        try {
            byte[] v = reading("read counters", db -> db.get(k(COUNTERS)));
            if (v != null && v.length == 24) {
                ByteBuffer b = ByteBuffer.wrap(v);
                hits.set(b.getLong());
                misses.set(b.getLong());
                corrupt.set(b.getLong());
            }
        } catch (IOException e) {
            log.debug("no saved counters: {}", e.getMessage());
        }
    }

    private static byte[] k(String key) {
        return key.getBytes(StandardCharsets.UTF_8);
    }

    static byte[] encode(Entry e) {
        CRC32C crc = new CRC32C();
        crc.update(e.bytes());
        return ByteBuffer.allocate(HEADER + e.bytes().length).put(VERSION).putLong(e.ino()).putLong(e.size())
                .putLong(e.version()).putInt((int) crc.getValue()).put(e.bytes()).array();
    }

    /** The entry, or null when the value is not one this build wrote or its checksum fails. */
    static Entry decode(byte[] v) {
        if (v == null || v.length < HEADER || v[0] != VERSION) {
            return null;
        }
        ByteBuffer b = ByteBuffer.wrap(v);
        b.get();
        long ino = b.getLong();
        long size = b.getLong();
        long version = b.getLong();
        int crc = b.getInt();
        byte[] bytes = Arrays.copyOfRange(v, HEADER, v.length);
        CRC32C c = new CRC32C();
        c.update(bytes);
        if ((int) c.getValue() != crc || bytes.length != size) {
            return null;
        }
        return new Entry(ino, size, version, bytes);
    }

    private IOException wrap(String op, RocksDBException e) {
        return new IOException("part-metadata cache " + op + " failed in " + dir + ": " + e.getMessage(), e);
    }

    /** The cached entry; a corrupt value counts as a miss and is removed. */
    public Optional<Entry> get(String key) throws IOException {
        byte[] raw;
        try {
            raw = reading("get", db -> db.get(k(key)));
        } catch (IOException e) {
            log.warn("unreadable part-metadata cache entry {} treated as a miss: {}", key, e.getMessage());
            corrupt.incrementAndGet();
            misses.incrementAndGet();
            delete(key);
            return Optional.empty();
        }
        if (raw == null) {
            misses.incrementAndGet();
            return Optional.empty();
        }
        Entry e = decode(raw);
        if (e == null) {
            corrupt.incrementAndGet();
            misses.incrementAndGet();
            delete(key);
            return Optional.empty();
        }
        hits.incrementAndGet();
        return Optional.of(e);
    }

    /** The raw stored bytes of a key without checks (for verify and the system-table view). */
    public Optional<Entry> peek(String key) throws IOException {
        return Optional.ofNullable(decode(reading("read", db -> db.get(k(key)))));
    }

    public void put(String key, Entry e) throws IOException {
        byte[] v = encode(e);
        writing("put", db -> {
            db.put(writeOptions, k(key), v);
            return null;
        });
    }

    /**
     * Deletes {@code key} if it is stored. A key that is not costs a lookup and writes nothing:
     * RocksDB would otherwise keep a tombstone for it until compaction, and the volume removes
     * many files the cache never held (every column file of a dropped or merged part).
     */
    public void delete(String key) throws IOException {
        byte[] kb = k(key);
        if (reading("delete", db -> db.keyExists(kb))) {
            writing("delete", db -> {
                db.delete(writeOptions, kb);
                return null;
            });
        }
    }

    /** The sequence number of the last write; for tests that check a call wrote nothing. */
    long lastSequence() {
        return readingUnchecked("sequence", RocksDB::getLatestSequenceNumber);
    }

    /** How many deleted keys RocksDB stepped over while {@code r} ran on this thread; for tests. */
    long deletedKeysSkippedBy(Runnable r) {
        return readingUnchecked("perf context", db -> {
            db.setPerfLevel(org.rocksdb.PerfLevel.ENABLE_COUNT);
            try {
                db.getPerfContext().reset();
                r.run();
                return db.getPerfContext().getInternalDeleteSkippedCount();
            } finally {
                db.setPerfLevel(org.rocksdb.PerfLevel.DISABLE);
            }
        });
    }

    /** Writes a raw value as is; for tests that plant corruption. */
    void putRaw(String key, byte[] value) throws IOException {
        writing("put", db -> {
            db.put(writeOptions, k(key), value);
            return null;
        });
    }

    /**
     * An iterator positioned at the first key starting with {@code prefix}, bounded by the
     * prefix's end. Without the bound, a seek past the last live key of the prefix walks on over
     * every deleted key after it (tombstones until compaction) to find the next live one: with
     * the tombstones of many removed parts, every file removal paid for all of them.
     */
    private static final class PrefixScan implements AutoCloseable {
        final RocksIterator it;
        private final ReadOptions options = new ReadOptions();
        private final Slice bound;

        /** On {@code db}, inside a {@link RocksHandle} call. */
        PrefixScan(RocksDB db, byte[] prefix) {
            byte[] end = successor(prefix);
            bound = end == null ? null : new Slice(end);
            if (bound != null) {
                options.setIterateUpperBound(bound);
            }
            it = db.newIterator(options);
            it.seek(prefix);
        }

        @Override
        public void close() {
            it.close();
            options.close();
            if (bound != null) {
                bound.close();
            }
        }
    }

    /**
     * The smallest key above every key starting with {@code prefix} (bytes compared unsigned, as
     * RocksDB's default comparator does), or null when there is none: an empty prefix or one of
     * 0xFF bytes only.
     */
    static byte[] successor(byte[] prefix) {
        for (int i = prefix.length - 1; i >= 0; i--) {
            if (prefix[i] != (byte) 0xFF) {
                byte[] s = Arrays.copyOf(prefix, i + 1);
                s[i]++;
                return s;
            }
        }
        return null;
    }

    /** Calls {@code each} with every key that starts with {@code prefix}, in order. */
    public void forEachKey(String prefix, Consumer<String> each) {
        byte[] p = k(prefix);
        readingUnchecked("scan", db -> {
            try (PrefixScan scan = new PrefixScan(db, p)) {
                for (RocksIterator it = scan.it; it.isValid() && startsWith(it.key(), p); it.next()) {
                    if (it.key().length > 0 && it.key()[0] != 0) {
                        each.accept(new String(it.key(), StandardCharsets.UTF_8));
                    }
                }
            }
            return null;
        });
    }

    /** Receives entries in key order; returns false to stop. */
    @FunctionalInterface
    public interface EntryVisitor {
        boolean visit(String key, Entry entry) throws IOException;
    }

    /**
     * Visits every entry whose key starts with {@code prefix}, in key order, from a consistent
     * snapshot; corrupt values are skipped. For the system-table view, which streams them.
     */
    public void forEachEntry(String prefix, EntryVisitor visitor) throws IOException {
        byte[] p = k(prefix);
        reading("scan", db -> {
            try (PrefixScan scan = new PrefixScan(db, p)) {
                for (RocksIterator it = scan.it; it.isValid() && startsWith(it.key(), p); it.next()) {
                    if (it.key().length == 0 || it.key()[0] == 0) {
                        continue;
                    }
                    Entry e = decode(it.value());
                    if (e != null && !visitor.visit(new String(it.key(), StandardCharsets.UTF_8), e)) {
                        break;
                    }
                }
            }
            return null;
        });
    }

    /** Entries and value bytes, counted at most {@link #COUNT_MAX_AGE_NANOS} ago; for metrics. */
    public record Approximate(long entries, long bytes) {
    }

    /** RocksDB's own key estimate is far off after many deletes (every part rename deletes), so count. */
    private static final long COUNT_MAX_AGE_NANOS = 60_000_000_000L;
    private Approximate lastCount;
    private long lastCountAt;

    public synchronized Approximate approximate() {
        if (lastCount == null || System.nanoTime() - lastCountAt > COUNT_MAX_AGE_NANOS) {
            Stats s = stats();
            lastCount = new Approximate(s.entries(), s.bytes());
            lastCountAt = System.nanoTime();
        }
        return lastCount;
    }

    public List<String> keys(String prefix) {
        List<String> out = new ArrayList<>();
        forEachKey(prefix, out::add);
        return out;
    }

    private static boolean startsWith(byte[] b, byte[] prefix) {
        return b.length >= prefix.length && Arrays.equals(b, 0, prefix.length, prefix, 0, prefix.length);
    }

    /** Deletes every key under {@code prefix} atomically; returns how many. */
    public int deletePrefix(String prefix) throws IOException {
        List<String> keys = keys(prefix);
        if (keys.isEmpty()) {
            return 0; // the usual case: a file removed, or a directory the cache held nothing of
        }
        writing("delete", db -> {
            try (WriteBatch batch = new WriteBatch()) {
                for (String key : keys) {
                    batch.delete(k(key));
                }
                db.write(writeOptions, batch);
            }
            return null;
        });
        return keys.size();
    }

    /**
     * Moves every key under {@code from} to the same suffix under {@code to} in one atomic batch
     * (a part directory renamed from tmp_insert_* to its name, into detached/, ...); keys
     * already under {@code to} are dropped first, as the rename replaced that directory.
     */
    public int renamePrefix(String from, String to) throws IOException {
        List<String> old = keys(from);
        List<String> replaced = keys(to);
        writing("rename", db -> {
            try (WriteBatch batch = new WriteBatch()) {
                for (String key : replaced) {
                    batch.delete(k(key));
                }
                for (String key : old) {
                    byte[] v = db.get(k(key));
                    batch.delete(k(key));
                    if (v != null) {
                        batch.put(k(to + key.substring(from.length())), v);
                    }
                }
                db.write(writeOptions, batch);
            }
            return null;
        });
        return old.size();
    }

    public Stats stats() {
        long[] counted = readingUnchecked("count", db -> {
            long entries = 0;
            long bytes = 0;
            try (RocksIterator it = db.newIterator()) {
                for (it.seekToFirst(); it.isValid(); it.next()) {
                    if (it.key().length > 0 && it.key()[0] == 0) {
                        continue;
                    }
                    entries++;
                    bytes += Math.max(0, it.value().length - HEADER);
                }
            }
            return new long[] {entries, bytes};
        });
        return new Stats(counted[0], counted[1], hits.get(), misses.get(), corrupt.get());
    }

    @Override
    public void close() {
        try {
            handle.close(db -> readOnly ? null : putCounters(db)); // the counters: not while a full disk stopped writes
        } catch (IOException | RocksDBException e) {
            log.debug("counters not saved: {}", e.toString());
        }
        writeOptions.close();
        options.close();
        bloom.close();
        blockCache.close();
    }
}
