package io.partfs.engine.data;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A bounded cache of whole data blocks in files on local disk, least recently used evicted
 * first. It survives restarts: at start it indexes what is on disk, oldest first by
 * modification time, and trims to the capacity. Blocks are immutable, so a cached block is
 * never stale; a corrupt or missing file is simply a miss.
 *
 * <p>Concurrency: {@link #lock} guards the index only; file reads and writes happen outside it.
 * A block is written to a temporary file and renamed in, so readers see all of it or nothing.
 */
public final class BlockCache {
    private static final Logger log = LoggerFactory.getLogger(BlockCache.class);
    private static final String TMP = ".tmp";
    /** Subdirectory of the cache directory that {@link Staging} uses; not part of the cache. */
    public static final String STAGING = "staging";

    private final Path dir;
    private final long capacity;
    private final Object lock = new Object();
    /** Access-ordered index of cached blocks: key to size. Guarded by {@link #lock}. */
    private final LinkedHashMap<String, Long> index = new LinkedHashMap<>(1024, 0.75f, true);
    private long used;
    private long hits;
    private long misses;

    /** A cache under {@code dir} holding at most {@code capacity} bytes; 0 disables it. */
    public BlockCache(Path dir, long capacity) throws IOException {
        this.dir = dir.toAbsolutePath().normalize();
        this.capacity = capacity;
        if (capacity > 0) {
            Files.createDirectories(this.dir);
            load();
        }
    }

    private void load() throws IOException {
        record Found(String key, long size, FileTime mtime, Path path) {
        }
        List<Found> found = new ArrayList<>();
        Path staging = dir.resolve(STAGING);
        try (Stream<Path> walk = Files.walk(dir)) {
            for (Path p : (Iterable<Path>) walk.filter(f -> !f.startsWith(staging) && Files.isRegularFile(f))::iterator) {
                String name = p.getFileName().toString();
                if (name.endsWith(TMP)) {
                    Files.deleteIfExists(p);
                    continue;
                }
                found.add(new Found(unflatten(name), Files.size(p), Files.getLastModifiedTime(p), p));
            }
        }
        found.sort((a, b) -> a.mtime().compareTo(b.mtime()));
        synchronized (lock) {
            for (Found f : found) {
                index.put(f.key(), f.size());
                used += f.size();
            }
        }
        evict();
        log.debug("block cache {}: {} blocks, {} bytes", dir, found.size(), used);
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
        synchronized (lock) {
            if (index.get(key) == null) {
                misses++;
                return false;
            }
            hits++;
        }
        try {
            LocalFiles.readRange(file(key), off, len, dst);
            return true;
        } catch (IOException e) {
            if (!(e instanceof NoSuchFileException)) {
                log.warn("dropping unreadable cached block {}: {}", key, e.toString());
            }
            remove(key);
            return false;
        }
    }

    /** The local file of a cached block, or null; it may be evicted (deleted) at any time after. */
    public Path pathIfCached(String key) {
        synchronized (lock) {
            if (capacity <= 0 || index.get(key) == null) {
                return null;
            }
        }
        return file(key);
    }

    public boolean contains(String key) {
        synchronized (lock) {
            return index.containsKey(key);
        }
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
            Files.move(tmp, f, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            log.warn("cannot cache block {}: {}", key, e.toString());
            try {
                Files.deleteIfExists(tmp);
            } catch (IOException ignored) {
                // nothing more to do: the block is simply not cached
            }
            return;
        }
        synchronized (lock) {
            if (index.put(key, (long) data.length) == null) {
                used += data.length;
            }
        }
        evict();
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
     */
    public void adopt(String key, Path src, long size) {
        boolean taken = false;
        if (capacity > 0 && size <= capacity) {
            Path f = file(key);
            try {
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
        synchronized (lock) {
            Long before = index.put(key, size);
            used += size - (before == null ? 0 : before);
        }
        evict();
    }

    public void remove(String key) {
        Long size;
        synchronized (lock) {
            size = index.remove(key);
            if (size != null) {
                used -= size;
            }
        }
        if (size != null) {
            deleteQuietly(file(key));
        }
    }

    private void evict() {
        List<String> victims = new ArrayList<>();
        synchronized (lock) {
            Iterator<Map.Entry<String, Long>> it = index.entrySet().iterator();
            while (used > capacity && it.hasNext()) {
                Map.Entry<String, Long> e = it.next();
                used -= e.getValue();
                victims.add(e.getKey());
                it.remove();
            }
        }
        for (String k : victims) {
            deleteQuietly(file(k));
        }
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
