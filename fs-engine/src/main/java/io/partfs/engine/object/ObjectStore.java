package io.partfs.engine.object;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Where file data lives: a flat namespace of immutable objects addressed by key.
 *
 * <p>PartFS writes every object once and never rewrites it, so implementations need only
 * read-after-write consistency for new keys. All methods are thread-safe. Failures of the
 * backing service are {@link ObjectStoreException}s; a missing key is
 * {@link ObjectNotFoundException}. Messages never contain credentials.
 */
public interface ObjectStore extends java.io.Closeable {

    /**
     * Stores {@code data} under {@code key}, replacing nothing that a reader could observe torn.
     * Keeps no reference to {@code data} once it returns or throws: the caller reuses the array
     * for the next block (see {@code BlockBuffers}).
     */
    void put(String key, byte[] data) throws IOException;

    /**
     * Reads {@code length} bytes starting at {@code offset}, or to the end when {@code length} is
     * negative. Reading past the end returns the bytes that exist (possibly none).
     */
    byte[] get(String key, long offset, int length) throws IOException;

    /** Size and key of an object, or empty when it does not exist. */
    Optional<ObjectInfo> head(String key) throws IOException;

    /** Deletes {@code key}; deleting a missing key is not an error. */
    void delete(String key) throws IOException;

    /**
     * Deletes every key of {@code keys}, in as few requests as the store allows (S3: a thousand
     * a request); missing keys are not an error. On failure some of them may be deleted.
     */
    default void deleteAll(List<String> keys) throws IOException {
        for (String k : keys) {
            delete(k);
        }
    }

    /**
     * One page of keys that start with {@code prefix} and sort after {@code startAfter} (null for
     * the first page), in ascending UTF-8 byte order, at most {@code limit} of them.
     */
    List<ObjectInfo> list(String prefix, String startAfter, int limit) throws IOException;

    /** Where {@code partfs format} writes (and deletes) its probe object; otherwise empty. */
    String PROBE_PREFIX = "partfs-probe/";

    /**
     * Checks that the store answers these credentials with one small read (a list of at most
     * one key under {@link #PROBE_PREFIX}), so that a mount with a wrong key, a missing bucket or
     * an unreachable endpoint fails at once, not at ClickHouse's first write. Not a listing of
     * the whole volume: servers that keep objects as files (s3proxy, MinIO in FS mode, the local
     * store) walk every object under the prefix to answer even one key.
     */
    default void checkAccess() throws IOException {
        list(PROBE_PREFIX, null, 1);
    }

    /**
     * The local file that holds all of object {@code key}, for a store that keeps objects as
     * files on this machine (so the kernel can read it directly: FUSE passthrough); null for
     * remote stores. The file may not exist.
     */
    default java.nio.file.Path localFile(String key) {
        return null;
    }

    /** A local disk's size and the bytes objects may still take of it. */
    record LocalSpace(long total, long available) {
    }

    /**
     * For a store that keeps objects on this machine's disk: that disk's size and what objects
     * may still use of it (statfs reports them, so ClickHouse sees the disk fill as it would a
     * local one); empty for remote stores.
     */
    default Optional<LocalSpace> localSpace() {
        return Optional.empty();
    }

    /**
     * Whether the store is known to be unreachable now: a request failed all its attempts for
     * want of a connection or an answer, and none has succeeded since. Requests are then tried
     * once each, so that they fail fast until the store answers again. Local stores: never.
     */
    default boolean unreachable() {
        return false;
    }

    /**
     * Whether the store answers now: at once true while it is not {@link #unreachable}; while it
     * is, a probe decides (S3: one cheap request with a short timeout, or the outcome of the probe
     * another caller has out). For background work waiting out an outage (staged write-back
     * blocks, flushes that failed), so that it resumes as soon as the store is back rather than at
     * its own backoff, and without holding anything while it asks.
     */
    default boolean answers() {
        return !unreachable();
    }

    /** Every key under {@code prefix}; for tests and small prefixes. */
    default List<ObjectInfo> listAll(String prefix) throws IOException {
        List<ObjectInfo> all = new ArrayList<>();
        String after = null;
        while (true) {
            List<ObjectInfo> page = list(prefix, after, 1000);
            all.addAll(page);
            if (page.size() < 1000) {
                return all;
            }
            after = page.get(page.size() - 1).key();
        }
    }

    /**
     * Hands every object under {@code prefix} to {@code each}, in no particular order, holding
     * at most a page of them at a time: for {@code partfs fsck} and {@code gc}, which read a
     * whole volume. {@code each} may delete the object it is given.
     */
    default void scan(String prefix, IoConsumer<ObjectInfo> each) throws IOException {
        String after = null;
        while (true) {
            List<ObjectInfo> page = list(prefix, after, 1000);
            for (ObjectInfo o : page) {
                each.accept(o);
            }
            if (page.size() < 1000) {
                return;
            }
            after = page.get(page.size() - 1).key();
        }
    }

    /**
     * As {@link #scan(String, IoConsumer)}, for a whole volume: a store where a listing is a
     * round trip lists the "directories" {@code depth} levels below {@code prefix} (keys cut at
     * '/') separately, {@code threads} listings at once ({@link ParallelScan}). {@code each} is
     * called on the calling thread only. Stores that walk their own files ignore both.
     */
    default void scan(String prefix, int depth, int threads, IoConsumer<ObjectInfo> each) throws IOException {
        scan(prefix, each);
    }

    /** A consumer that may throw {@link IOException}. */
    @FunctionalInterface
    interface IoConsumer<T> {
        void accept(T t) throws IOException;
    }

    /** Where the data goes, for logs and {@code status}; never includes secrets. */
    String describe();

    @Override
    void close() throws IOException;

    /** A key, its size in bytes and when it was last written (milliseconds since the epoch). */
    record ObjectInfo(String key, long size, long modifiedMillis) {
    }

    /** Rejects keys that could escape a directory or are not valid object names. */
    static String checkKey(String key) {
        if (key == null || key.isEmpty() || key.startsWith("/") || key.contains("//")
                || key.equals("..") || key.startsWith("../") || key.contains("/../") || key.endsWith("/..")
                || key.endsWith("/") || key.indexOf('\0') >= 0) {
            throw new IllegalArgumentException("invalid object key: '" + key + "'");
        }
        return key;
    }
}
