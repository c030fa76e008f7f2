package io.partfs.engine.data;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A bounded cache of whole data blocks in files on local disk, least recently used evicted
 * first, bounded in bytes and in blocks (its index lives on the heap, ~150 bytes a block), and
 * by the free space its filesystem must keep ({@link DiskSpace}): it evicts to stay above that
 * floor and caches nothing that would go under it.
 * It survives restarts: a background thread indexes what is on disk, oldest first by
 * modification time, then trims to the bounds; until it is done a block the index does not
 * know yet is looked for on disk, so a mount never waits for the walk. Blocks are immutable,
 * so a cached block is never stale; a corrupt or missing file is simply a miss.
 *
 * <p>Checksums ({@link BlockSums}): a block is cached with a CRC32C of each of its pieces, from
 * the bytes the object store has, and each piece is checked against it the first time this
 * process reads it. A block whose bytes on disk do not match is dropped and read again from the
 * object store, so bit rot on the cache disk, or a block a power loss left unwritten, never
 * reaches ClickHouse. Blocks cached by a version before checksums are served unchecked.
 *
 * <p>Concurrency: {@link #lock} guards the index only; file reads and writes happen outside it.
 * A block is written to a temporary file and renamed in, so readers see all of it or nothing.
 *
 * <p>Linked blocks ({@link #link}): a block uploaded from a range of a larger local file that
 * nothing writes any more (a closed write-back backing file) is cached as a hard link to that
 * file, named {@code <key>@<offset>}, not copied. The file's bytes count once, in full, for as
 * long as any of its links is cached, and are freed with the last one: what the cache counts is
 * what the disk holds.
 */
public final class BlockCache {
    private static final Logger log = LoggerFactory.getLogger(BlockCache.class);
    /** Warnings about blocks that a full or failing cache disk refuses alike: a line in 10 s. */
    private final io.partfs.engine.LogLimit failures = new io.partfs.engine.LogLimit(java.time.Duration.ofSeconds(10));
    private static final String TMP = ".tmp";
    /** Subdirectory of the cache directory that {@link Staging} uses; not part of the cache. */
    public static final String STAGING = "staging";
    /** Default bound on cached blocks: ~75 MiB of index, whatever the blocks' sizes. */
    public static final long DEFAULT_MAX_BLOCKS = 500_000;

    private final Path dir;
    private final long capacity;
    private final long maxBlocks;
    private final DiskSpace space;
    private final Object lock = new Object();
    /**
     * Access-ordered index of cached blocks: key to its size (low 32 bits) and the pieces of it
     * checked against their sums since the start (high 32 bits, see {@link BlockSums}; a block
     * is at most 16 MiB). Guarded by {@link #lock}.
     */
    private LinkedHashMap<String, Long> index = new LinkedHashMap<>(1024, 0.75f, true);
    /** True until the blocks a previous run left are indexed. Guarded by {@link #lock}. */
    private boolean loading;
    private final java.util.concurrent.CountDownLatch loaded = new java.util.concurrent.CountDownLatch(1);
    /** Cached blocks that are ranges of a shared file, by key. Guarded by {@link #lock}. */
    private final Map<String, Link> linked = new java.util.HashMap<>();
    /** The shared files of {@link #linked}, by file key (device and inode). Guarded by {@link #lock}. */
    private final Map<Object, Shared> shared = new java.util.HashMap<>();
    private long used;
    private long hits;
    private long misses;
    /** Blocks dropped because their bytes on disk did not match their sums. */
    private final java.util.concurrent.atomic.AtomicLong corrupt = new java.util.concurrent.atomic.AtomicLong();
    /** False once the cache's filesystem refused direct I/O: {@link #verify} then reads through the page cache. */
    private volatile boolean directReads = true;
    /** False once the cache's filesystem refused an extended attribute: blocks are then cached without sums. */
    private volatile boolean sumsKept = true;

    /** The size of the block of index value {@code v}. */
    private static long sizeOf(long v) {
        return v & 0xffff_ffffL;
    }

    /** The pieces of the block of index value {@code v} checked so far. */
    private static long checkedOf(long v) {
        return v >>> 32;
    }

    /** A cache under {@code dir} holding at most {@code capacity} bytes; 0 disables it. */
    public BlockCache(Path dir, long capacity) throws IOException {
        this(dir, capacity, DEFAULT_MAX_BLOCKS);
    }

    /** A cache under {@code dir} of at most {@code capacity} bytes and {@code maxBlocks} blocks. */
    public BlockCache(Path dir, long capacity, long maxBlocks) throws IOException {
        this(dir, capacity, maxBlocks, 0);
    }

    /**
     * A cache under {@code dir} of at most {@code capacity} bytes and {@code maxBlocks} blocks,
     * keeping {@code freeRatio} of its filesystem free.
     */
    public BlockCache(Path dir, long capacity, long maxBlocks, double freeRatio) throws IOException {
        this(dir, capacity, maxBlocks, freeRatio, task -> {
            Thread t = new Thread(task, "partfs-block-cache-index");
            t.setDaemon(true);
            t.start();
        });
    }

    /** As above, indexing what is on disk on {@code indexer} (tests hold it to see the cache while it loads). */
    BlockCache(Path dir, long capacity, long maxBlocks, double freeRatio, java.util.concurrent.Executor indexer) throws IOException {
        if (maxBlocks < 1) {
            throw new IllegalArgumentException("a block cache must be allowed at least one block, not " + maxBlocks);
        }
        this.dir = dir.toAbsolutePath().normalize();
        this.capacity = capacity;
        this.maxBlocks = maxBlocks;
        if (capacity > 0) {
            Files.createDirectories(this.dir);
            this.space = DiskSpace.keepFree(this.dir, freeRatio);
            loading = true;
            indexer.execute(this::load);
        } else {
            this.space = DiskSpace.unbounded();
            loaded.countDown();
        }
    }

    /** A file whose ranges are cached blocks: its bytes count once, while any of its links is cached. */
    private static final class Shared {
        final Object fileKey;
        final long bytes;
        int links;
        /** Known to have no name outside the cache ({@link #namedOutside}): such names do not come back. */
        boolean onlyLinks;

        Shared(Object fileKey, long bytes) {
            this.fileKey = fileKey;
            this.bytes = bytes;
        }
    }

    /** A cached block that is bytes {@code [offset, offset + size)} of a shared file, through the hard link {@code path}. */
    private record Link(Path path, long offset, Shared file) {
    }

    private static final char LINK_MARK = '@';

    /** Waits until the blocks found on disk at start are indexed (for tests and tools). */
    public void awaitLoaded() throws InterruptedException {
        loaded.await();
    }

    /** What the walk of the cache directory found: keys, sizes and modification times. */
    private static final class Found {
        final List<String> keys = new ArrayList<>();
        long[] sizes = new long[1024];
        long[] mtimes = new long[1024];
        /** Of the found blocks that are links ({@link #link}), by their index in {@link #keys}. */
        final Map<Integer, FoundLink> links = new java.util.HashMap<>();

        void add(String key, long size, long mtime) {
            int i = keys.size();
            if (i == sizes.length) {
                sizes = java.util.Arrays.copyOf(sizes, i * 2);
                mtimes = java.util.Arrays.copyOf(mtimes, i * 2);
            }
            keys.add(key);
            sizes[i] = size;
            mtimes[i] = mtime;
        }
    }

    /** A link found on disk: its path, the range's offset, its file's key and size. */
    private record FoundLink(Path path, long offset, Object fileKey, long fileBytes) {
    }

    /**
     * Indexes the blocks on disk (one stat each), as older than every block used since the
     * mount started, and trims to the bounds. Runs once, on its own thread.
     */
    private void load() {
        try {
            LowPriority.thisThread(); // nothing waits for it: lookups find unindexed blocks on disk
            index();
        } finally {
            synchronized (lock) {
                loading = false; // whatever happened: lookups go by the index from now on
            }
            loaded.countDown();
        }
    }

    private void index() {
        long t0 = System.nanoTime();
        // kernel timestamps can lag the clock by a tick: only files older than this are surely leftovers
        long leftoverBefore = System.currentTimeMillis() - 10_000;
        Found found = new Found();
        Path staging = dir.resolve(STAGING);
        try {
            Files.walkFileTree(dir, new java.nio.file.SimpleFileVisitor<>() {
                @Override
                public java.nio.file.FileVisitResult preVisitDirectory(Path d, java.nio.file.attribute.BasicFileAttributes a) {
                    return d.equals(staging) ? java.nio.file.FileVisitResult.SKIP_SUBTREE : java.nio.file.FileVisitResult.CONTINUE;
                }

                @Override
                public java.nio.file.FileVisitResult visitFile(Path f, java.nio.file.attribute.BasicFileAttributes a) throws IOException {
                    String name = f.getFileName().toString();
                    if (name.endsWith(TMP)) {
                        if (a.lastModifiedTime().toMillis() < leftoverBefore) {
                            Files.deleteIfExists(f); // a put a crash interrupted, not one of this run's in flight
                        }
                    } else if (a.isRegularFile()) {
                        int mark = name.lastIndexOf(LINK_MARK);
                        if (mark < 0) {
                            found.add(unflatten(name), a.size(), a.lastModifiedTime().toMillis());
                        } else {
                            String key = unflatten(name.substring(0, mark));
                            long size = linkedSize(key, name.substring(mark + 1));
                            if (size < 0 || a.fileKey() == null) {
                                Files.deleteIfExists(f); // not a name this cache makes
                            } else {
                                found.links.put(found.keys.size(), new FoundLink(f, Long.parseLong(name.substring(mark + 1)),
                                        a.fileKey(), a.size()));
                                found.add(key, size, a.lastModifiedTime().toMillis());
                            }
                        }
                    }
                    return java.nio.file.FileVisitResult.CONTINUE;
                }

                @Override
                public java.nio.file.FileVisitResult visitFileFailed(Path f, IOException e) throws IOException {
                    if (e instanceof NoSuchFileException) {
                        return java.nio.file.FileVisitResult.CONTINUE; // evicted or removed meanwhile
                    }
                    throw e;
                }
            });
        } catch (IOException | RuntimeException e) {
            log.warn("block cache {}: indexing what is on disk stopped after {} blocks ({}); blocks not indexed are not used"
                    + " and count against no bound until the next mount", dir, found.keys.size(), e.toString());
        }
        Integer[] order = new Integer[found.keys.size()];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        long[] mtimes = found.mtimes;
        java.util.Arrays.sort(order, (a, b) -> Long.compare(mtimes[a], mtimes[b]));
        int blocks;
        List<Path> duplicates = new ArrayList<>();
        synchronized (lock) {
            LinkedHashMap<String, Long> merged = new LinkedHashMap<>(Math.max(1024, (order.length + index.size()) * 4 / 3 + 1), 0.75f, true);
            for (int i : order) {
                String key = found.keys.get(i);
                FoundLink l = found.links.get(i);
                if (index.containsKey(key) || merged.containsKey(key)) {
                    if (l != null) {
                        duplicates.add(l.path()); // the block is cached twice (fetched again while this walk ran): one goes
                    }
                    continue;
                }
                merged.put(key, found.sizes[i]);
                if (l != null) {
                    Shared sh = shared.computeIfAbsent(l.fileKey(), k -> new Shared(k, l.fileBytes()));
                    sh.links++;
                    linked.put(key, new Link(l.path(), l.offset(), sh));
                }
            }
            merged.putAll(index); // in the order of use since the start: after everything older
            index = merged;
            used = 0;
            for (Map.Entry<String, Long> e : index.entrySet()) {
                used += linked.containsKey(e.getKey()) ? 0 : sizeOf(e.getValue());
            }
            for (Shared sh : shared.values()) {
                used += sh.bytes;
            }
            loading = false;
            blocks = index.size();
        }
        duplicates.forEach(BlockCache::deleteQuietly);
        evict();
        log.info("block cache {}: {} blocks found on disk, indexed in {} ms", dir, blocks, (System.nanoTime() - t0) / 1_000_000);
    }

    /**
     * The size of block {@code key} (its name ends in {@code _<size>}, see ChunkStore.blockKey) when
     * {@code offset} is a valid offset, else -1.
     */
    private static long linkedSize(String key, String offset) {
        try {
            long size = Long.parseLong(key.substring(key.lastIndexOf('_') + 1));
            return Long.parseLong(offset) >= 0 && size > 0 ? size : -1;
        } catch (NumberFormatException | IndexOutOfBoundsException e) {
            return -1;
        }
    }

    /** A cache that holds nothing. */
    public static BlockCache disabled() throws IOException {
        return new BlockCache(Path.of("."), 0);
    }

    public boolean enabled() {
        return capacity > 0;
    }

    /** The most bytes the cache holds (0: disabled). */
    public long capacity() {
        return capacity;
    }

    private static String flatten(String key) {
        return key.replace("/", "%");
    }

    private static String unflatten(String name) {
        return name.replace("%", "/");
    }

    private static final String[] BUCKETS = new String[256];

    static {
        for (int i = 0; i < 256; i++) {
            BUCKETS[i] = String.format("%02x", i);
        }
    }

    /** Bucket directories known to exist: creating an existing one costs an exception with a stack trace. */
    private final java.util.Set<Path> buckets = java.util.concurrent.ConcurrentHashMap.newKeySet();

    /** Creates the bucket directory {@code d} unless this cache already did. */
    private void ensureBucket(Path d) throws IOException {
        if (!buckets.contains(d)) {
            Files.createDirectories(d);
            buckets.add(d);
        }
    }

    private Path file(String key) {
        String flat = flatten(key);
        return dir.resolve(BUCKETS[(flat.hashCode() >>> 8) & 0xff]).resolve(flat);
    }

    private Path linkFile(String key, long offset) {
        Path f = file(key);
        return f.resolveSibling(f.getFileName().toString() + LINK_MARK + offset);
    }

    /** Bytes {@code [off, off+len)} of a cached block, or null when it is not cached. */
    public byte[] read(String key, int off, int len) {
        byte[] out = new byte[len];
        return read(key, off, len, ByteBuffer.wrap(out)) ? out : null;
    }

    /**
     * Reads bytes {@code [off, off+len)} of a cached block into {@code dst} at its position (which
     * moves past them); false, with nothing read, when the block is not cached.
     */
    public boolean read(String key, int off, int len, ByteBuffer dst) {
        if (capacity <= 0) {
            return false;
        }
        if (!lookup(key, true, true)) {
            return false;
        }
        return readChecked(key, off, len, dst);
    }

    /**
     * Reads bytes {@code [off, off+len)} of cached block {@code key} into {@code dst} (null: only
     * checks them), checking the pieces they touch that were not checked yet against the block's
     * sums. False, the block dropped, when its file is gone, unreadable or does not match.
     */
    private boolean readChecked(String key, int off, int len, ByteBuffer dst) {
        Link l;
        Long v;
        synchronized (lock) {
            l = linked.get(key);
            v = index.get(key);
        }
        Path f = l == null ? file(key) : l.path();
        long base = l == null ? 0 : l.offset();
        int start = dst == null ? 0 : dst.position();
        try {
            if (v == null) { // evicted since the lookup; the file may still be there to read
                if (dst != null) {
                    LocalFiles.readRange(f, base + off, len, dst);
                }
                return true;
            }
            long blockLen = sizeOf(v);
            int piece = BlockSums.pieceSize(blockLen);
            int first = off / piece;
            long wanted = BlockSums.mask(first, Math.max(first, (off + len - 1) / piece));
            if ((checkedOf(v) & wanted) == wanted || len <= 0) {
                if (dst != null) {
                    LocalFiles.readRange(f, base + off, len, dst);
                }
                return true;
            }
            byte[] sums = BlockSums.read(f, BlockSums.name(l != null, base));
            if (!BlockSums.readChecked(f, base, blockLen, sums, off, len, dst)) {
                dropDamaged(key);
                return false;
            }
            checked(key, sums == null ? BlockSums.all(blockLen) : wanted);
            return true;
        } catch (IOException e) {
            if (dst != null) {
                dst.position(start); // a part read before the failure is no answer either
            }
            if (!(e instanceof NoSuchFileException)) {
                failures.warn(log, "dropping unreadable cached block {}: {}", key, e.toString());
            }
            remove(key);
            return false;
        }
    }

    /** Counts, reports and drops cached block {@code key}, whose bytes did not match its sums. */
    private void dropDamaged(String key) {
        corrupt.incrementAndGet();
        failures.warn(log, "cached block {} does not match its checksum (the cache disk {} returned other bytes than"
                + " were cached): dropped, read again from the object store; check that disk", key, dir);
        remove(key);
    }

    /** What {@link #verify} found of a block. */
    public enum Verdict {
        /** Not cached (also: evicted, or its file deleted, while it was checked). */
        ABSENT,
        /** Cached, read whole, and every piece matches its sum. */
        GOOD,
        /** Cached without sums (cached before sums were kept, or on a disk without extended attributes). */
        UNCHECKABLE,
        /** Cached, but unreadable or not matching its sums: dropped, to be read from the object store again. */
        DAMAGED
    }

    /**
     * Reads cached block {@code key} whole from the disk (not the page cache) and checks it
     * against its sums, even where reads have checked it before (bytes on disk may rot at any
     * time; reads check each piece once a process). A damaged block is dropped and counted as
     * by a read. Neither a hit nor a use: the block keeps its place in the eviction order, and
     * reads still check its pieces once.
     */
    public Verdict verify(String key) {
        Link l;
        synchronized (lock) {
            if (capacity <= 0 || !index.containsKey(key)) { // (get would move it in the eviction order)
                return Verdict.ABSENT;
            }
            l = linked.get(key);
        }
        Path f = l == null ? file(key) : l.path();
        long base = l == null ? 0 : l.offset();
        try {
            long blockLen = l == null ? Files.size(f) : linkedSize(key, "0");
            byte[] sums = BlockSums.read(f, BlockSums.name(l != null, base));
            if (sums == null) {
                return Verdict.UNCHECKABLE;
            }
            if (blockLen < 0 || !BlockSums.matches(sums, blockLen, 0, ByteBuffer.wrap(readFromDisk(f, base, (int) blockLen)))) {
                dropDamaged(key);
                return Verdict.DAMAGED;
            }
            return Verdict.GOOD;
        } catch (NoSuchFileException e) {
            remove(key); // evicted while it was checked, or deleted behind the cache's back
            return Verdict.ABSENT;
        } catch (IOException e) {
            failures.warn(log, "dropping unreadable cached block {}: {}", key, e.toString());
            remove(key);
            return Verdict.DAMAGED;
        }
    }

    /**
     * Bytes {@code [off, off+len)} of {@code f} as the disk holds them (direct I/O, see {@link
     * LocalFiles#readDirect}); through the page cache where the cache's filesystem does no
     * direct I/O (told once).
     */
    private byte[] readFromDisk(Path f, long off, int len) throws IOException {
        byte[] out = new byte[len];
        if (directReads && LocalFiles.readDirect(f, off, out)) {
            return out;
        }
        if (directReads) {
            directReads = false;
            log.info("block cache {}: its filesystem does no direct I/O: a verify reads blocks through the page cache,"
                    + " which may still hold bytes the disk has lost", dir);
        }
        LocalFiles.readRange(f, off, len, ByteBuffer.wrap(out));
        return out;
    }

    /** Notes pieces {@code bits} of block {@code key} as checked. */
    private void checked(String key, long bits) {
        synchronized (lock) {
            Long v = index.get(key);
            if (v != null) {
                index.put(key, v | (bits << 32));
            }
        }
    }

    /** Checks the whole of cached block {@code key} (once a process): false, the block dropped, if it does not match. */
    private boolean checkedWhole(String key) {
        Long v;
        synchronized (lock) {
            v = index.get(key);
        }
        return v == null || readChecked(key, 0, (int) sizeOf(v), null);
    }

    /** Blocks dropped so far because their bytes on disk did not match their checksums. */
    public long corruptBlocks() {
        return corrupt.get();
    }

    /**
     * Writes the sums of block {@code data} into attribute {@code name} of {@code f}; a filesystem
     * without extended attributes turns sums off for the rest of the run (logged once).
     */
    private void keepSums(Path f, String name, byte[] sums) {
        if (!sumsKept || sums == null) {
            return;
        }
        try {
            BlockSums.write(f, name, sums);
        } catch (IOException | UnsupportedOperationException e) {
            boolean unsupported = e instanceof UnsupportedOperationException
                    || (e instanceof java.nio.file.FileSystemException fse && String.valueOf(fse.getReason()).contains("not supported"));
            if (unsupported) {
                sumsKept = false;
                log.warn("block cache {}: its filesystem refuses extended attributes ({}): blocks are cached without"
                        + " checksums, so bit rot on that disk would reach ClickHouse; put the cache on ext4 or XFS", dir, e.toString());
            } else {
                log.debug("block cache {}: no checksums kept for {}: {}", dir, f, e.toString()); // e.g. a file with too many links for its attributes
            }
        }
    }

    /**
     * The local file that is exactly a cached block, or null (also for a {@linkplain #link linked}
     * block, a range of a larger file); it may be evicted (deleted) at any time after.
     */
    public Path pathIfCached(String key) {
        if (capacity <= 0 || !lookup(key, false, true) || isLinked(key)) {
            return null;
        }
        return checkedWhole(key) ? file(key) : null; // the kernel reads it past any check of ours
    }

    /** Whether block {@code key} is cached as a {@linkplain #link link} into a larger file. */
    public boolean isLinked(String key) {
        synchronized (lock) {
            return linked.containsKey(key);
        }
    }

    /**
     * A file that holds exactly {@code size} bytes made of the cached blocks {@code keys}, each
     * at its offset in {@code offsets}, when they are all {@linkplain #link links} into one file
     * of that size; else null. It is one of their links, a name of that whole file, which may
     * be evicted (deleted) at any time after.
     */
    public Path linkedWholeFile(List<String> keys, long[] offsets, long size) {
        if (capacity <= 0 || keys.isEmpty()) {
            return null;
        }
        synchronized (lock) {
            Shared file = null;
            for (int i = 0; i < keys.size(); i++) {
                Link l = linked.get(keys.get(i));
                if (l == null || l.offset() != offsets[i] || (file != null && l.file() != file)) {
                    return null;
                }
                file = l.file();
            }
            if (file.bytes != size) {
                return null;
            }
            for (String k : keys) {
                index.get(k); // used: the blocks of an open file stay as long as others
            }
        }
        for (String k : keys) {
            if (!checkedWhole(k)) {
                return null; // the kernel reads it past any check of ours
            }
        }
        synchronized (lock) {
            Link l = linked.get(keys.get(0));
            return l == null ? null : l.path();
        }
    }

    /** Whether block {@code key} is cached; it keeps its place in the eviction order (see {@link #touch}). */
    public boolean contains(String key) {
        return capacity > 0 && lookup(key, false, false);
    }

    /** Marks block {@code key} used, as a read does, if it is cached: the last to be evicted. */
    public void touch(String key) {
        if (capacity > 0) {
            lookup(key, false, true);
        }
    }

    /**
     * Whether a block is cached, marking it used if {@code use}; while the index is loading, a
     * block it does not know yet is looked for on disk and indexed when found.
     */
    private boolean lookup(String key, boolean count, boolean use) {
        synchronized (lock) {
            if (use ? index.get(key) != null : index.containsKey(key)) {
                hits += count ? 1 : 0;
                return true;
            }
            if (!loading) {
                misses += count ? 1 : 0;
                return false;
            }
        }
        long size;
        try {
            size = Files.size(file(key));
        } catch (IOException e) {
            size = -1;
        }
        synchronized (lock) {
            if (size >= 0 && index.putIfAbsent(key, size) == null) {
                used += size;
            }
            if (count) {
                if (size >= 0) {
                    hits++;
                } else {
                    misses++;
                }
            }
        }
        return size >= 0;
    }

    /** Caches a whole block; failures only cost a future miss. */
    public void put(String key, byte[] data) {
        if (capacity <= 0 || data.length > capacity) {
            return;
        }
        synchronized (lock) {
            if (index.containsKey(key)) {
                return;
            }
        }
        // blocks being cached side by side count as written already: together they must not pass the floor
        long reserved = writing.addAndGet(data.length);
        try {
            long missing = space.shortfall(reserved);
            if (missing > 0 && evictBytes(missing) < missing) {
                return; // not under the free-space floor, even with every block evicted
            }
            write(key, data);
        } finally {
            writing.addAndGet(-data.length);
        }
        evict();
    }

    /** Bytes {@link #put} calls are writing now. */
    private final java.util.concurrent.atomic.AtomicLong writing = new java.util.concurrent.atomic.AtomicLong();

    private void write(String key, byte[] data) {
        Path f = file(key);
        Path tmp = f.resolveSibling(f.getFileName() + "." + Long.toHexString(ThreadLocalRandom.current().nextLong()) + TMP);
        try {
            ensureBucket(f.getParent());
            try {
                writeNew(tmp, data);
            } catch (NoSuchFileException e) {
                buckets.remove(f.getParent()); // the directory was removed under us: once more
                ensureBucket(f.getParent());
                writeNew(tmp, data);
            }
            keepSums(tmp, BlockSums.XATTR, BlockSums.of(data));
            Files.move(tmp, f, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            failures.warn(log, "cannot cache block {}: {}", key, e.toString());
            try {
                Files.deleteIfExists(tmp);
            } catch (IOException ignored) {
                // nothing more to do: the block is simply not cached
            }
            return;
        }
        boolean linkedMeanwhile;
        synchronized (lock) {
            linkedMeanwhile = linked.containsKey(key);
            if (!linkedMeanwhile && index.put(key, (long) data.length) == null) {
                used += data.length;
            }
        }
        if (linkedMeanwhile) {
            deleteQuietly(f); // the link serves it
        }
    }

    private static void writeNew(Path f, byte[] data) throws IOException {
        // one write per 256 KiB piece (LocalFiles): Files.write would make 512 writes of 8 KiB per block
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            LocalFiles.writeAll(ch, data);
        }
    }

    /**
     * Takes over a whole block already on local disk at {@code src} (a staged block just
     * uploaded) by renaming it in; deletes it when the cache is off or the rename fails.
     * {@code sums}: {@link BlockSums#of} the bytes uploaded, or null if unknown.
     */
    public void adopt(String key, Path src, long size, byte[] sums) {
        boolean taken = false;
        if (capacity > 0 && size <= capacity) {
            Path f = file(key);
            try {
                keepSums(src, BlockSums.XATTR, sums);
                ensureBucket(f.getParent());
                try {
                    Files.move(src, f, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                } catch (NoSuchFileException e) {
                    buckets.remove(f.getParent()); // the directory was removed under us: once more
                    ensureBucket(f.getParent());
                    Files.move(src, f, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                }
                taken = true;
            } catch (IOException e) {
                log.debug("cannot move {} into the block cache: {}", src, e.toString());
            }
        }
        if (!taken) {
            deleteQuietly(src);
            return;
        }
        Path stale;
        synchronized (lock) {
            Long before = index.put(key, size);
            Link l = linked.get(key);
            used -= before == null ? 0 : forget(key, sizeOf(before));
            used += size;
            stale = l == null ? null : l.path();
        }
        if (stale != null) {
            deleteQuietly(stale);
        }
        evict();
    }

    /**
     * Caches block {@code key} of {@code size} bytes as the range at {@code offset} of
     * {@code src}, a file nothing writes any more, by a hard link to it instead of a copy. The
     * caller may delete its own name of the file afterwards. False when it cannot link (the
     * caller may {@link #put} a copy instead); true when cached (or not to be cached at all).
     * {@code sums}: {@link BlockSums#of} the bytes uploaded, or null if unknown.
     */
    public boolean link(String key, Path src, long offset, int size, byte[] sums) {
        if (capacity <= 0) {
            return true;
        }
        Path f = linkFile(key, offset);
        Object fileKey;
        long bytes;
        try {
            java.nio.file.attribute.BasicFileAttributes a = Files.readAttributes(src, java.nio.file.attribute.BasicFileAttributes.class);
            fileKey = a.fileKey();
            bytes = a.size();
            if (fileKey == null || offset + size > bytes) {
                return false;
            }
            if (bytes > capacity / 2) {
                return false; // counted whole, it would crowd out everything else: copies of its blocks instead
            }
            synchronized (lock) {
                if (index.containsKey(key)) {
                    return true;
                }
            }
            ensureBucket(f.getParent());
            try {
                Files.createLink(f, src);
            } catch (NoSuchFileException e) {
                buckets.remove(f.getParent()); // the directory was removed under us: once more
                ensureBucket(f.getParent());
                Files.createLink(f, src);
            }
            keepSums(f, BlockSums.name(true, offset), sums);
        } catch (IOException | UnsupportedOperationException e) {
            log.debug("cannot cache block {} as a link to {}: {}", key, src, e.toString());
            return false;
        }
        boolean taken = false;
        synchronized (lock) {
            if (!index.containsKey(key)) {
                Shared sh = shared.computeIfAbsent(fileKey, k -> new Shared(k, bytes));
                if (sh.links++ == 0) {
                    used += sh.bytes;
                }
                linked.put(key, new Link(f, offset, sh));
                index.put(key, (long) size);
                taken = true;
            }
        }
        if (!taken) {
            deleteQuietly(f); // cached meanwhile
        }
        evict();
        return true;
    }

    /**
     * Takes the accounting of {@code key} (of {@code size} bytes), just removed from the index,
     * off the books: returns the bytes that frees on disk, 0 for a link whose file other links
     * still hold. Call with {@link #lock} held.
     */
    private long forget(String key, long size) {
        Link l = linked.remove(key);
        if (l == null) {
            return size;
        }
        if (--l.file().links > 0) {
            return 0;
        }
        shared.remove(l.file().fileKey);
        return l.file().bytes;
    }

    public void remove(String key) {
        Long size;
        boolean unindexed;
        Path f = file(key);
        synchronized (lock) {
            Link l = linked.get(key);
            f = l == null ? f : l.path();
            size = index.remove(key);
            if (size != null) {
                used -= forget(key, sizeOf(size));
            }
            unindexed = loading; // the block may be on disk and not indexed yet
        }
        if (size != null || unindexed) {
            deleteQuietly(f);
        }
    }

    /** Evicts down to the bounds and above the free-space floor. */
    private void evict() {
        evict(space.shortfall(0));
    }

    /**
     * Evicts least recently used blocks until at least {@code bytes} are freed (or the cache is
     * empty), for what must go on the same disk (a staged block); returns the bytes freed.
     */
    public long evictBytes(long bytes) {
        return bytes <= 0 || capacity <= 0 ? 0 : evict(bytes);
    }

    /**
     * Evicts down to the bounds and at least {@code bytes} more; returns the bytes freed.
     *
     * <p>Where only the disk's room asks for more, links into a file that still has a name outside
     * the cache (a write-back file whose upload is in progress: staging deletes its name when the
     * last block is up) are passed over. Evicting them would free nothing on disk yet count the
     * whole file as freed, so that the next check of the floor would find it still short and evict
     * what it could have kept.
     */
    private long evict(long bytes) {
        List<Path> victims = new ArrayList<>();
        long freed = 0;
        synchronized (lock) {
            Iterator<Map.Entry<String, Long>> it = index.entrySet().iterator();
            while ((used > capacity || index.size() > maxBlocks || freed < bytes) && it.hasNext()) {
                Map.Entry<String, Long> e = it.next();
                Link l = linked.get(e.getKey());
                if (l != null && used <= capacity && index.size() <= maxBlocks && namedOutside(l)) {
                    continue;
                }
                victims.add(l == null ? file(e.getKey()) : l.path());
                long gone = forget(e.getKey(), sizeOf(e.getValue()));
                used -= gone;
                freed += gone;
                it.remove();
            }
        }
        for (Path f : victims) {
            deleteQuietly(f);
        }
        return freed;
    }

    /**
     * Whether the file of link {@code l} has more names than the cache's links to it (one stat).
     * Such files are the ones whose upload is in progress, a few at a time. Once a file has no
     * other name it is remembered so: the answer must stay the same within an eviction, whose
     * links leave the books before their names leave the disk. Call with {@link #lock} held.
     */
    private static boolean namedOutside(Link l) {
        Shared f = l.file();
        if (f.onlyLinks) {
            return false;
        }
        try {
            if (((Number) Files.getAttribute(l.path(), "unix:nlink")).intValue() > f.links) {
                return true;
            }
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
            // gone, or a filesystem that cannot tell: evict as before
        }
        f.onlyLinks = true;
        return false;
    }

    private static void deleteQuietly(Path p) {
        try {
            Files.deleteIfExists(p);
        } catch (IOException e) {
            log.warn("cannot delete cached block {}: {}", p, e.toString());
        }
    }

    /** Cached bytes, blocks, hits and misses, for stats. */
    public record Stats(long bytes, long blocks, long hits, long misses) {
    }

    public Stats stats() {
        synchronized (lock) {
            return new Stats(used, index.size(), hits, misses);
        }
    }
}
