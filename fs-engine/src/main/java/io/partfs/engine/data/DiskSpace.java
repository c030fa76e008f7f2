package io.partfs.engine.data;

import java.io.IOException;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The free space a local directory's filesystem must keep: a share of its size
 * ({@code --free-space-ratio}, 0.1 by default as in JuiceFS). The block cache evicts to stay
 * above it and write-back staging uploads directly instead of going under it, so that neither
 * fills the disk that ClickHouse, its logs or the staged blocks themselves need. One statfs a
 * question: a few microseconds, next to a block's write and fsync.
 */
public final class DiskSpace {
    private static final DiskSpace UNBOUNDED = new DiskSpace(null, 0);

    private final FileStore store;
    private final long minFree;

    private DiskSpace(FileStore store, long minFree) {
        this.store = store;
        this.minFree = minFree;
    }

    /** Keeps {@code ratio} (0 to 1) of the filesystem that holds {@code dir} free; {@code dir} must exist. */
    public static DiskSpace keepFree(Path dir, double ratio) throws IOException {
        return keepFree(dir, ratio, Long.MAX_VALUE);
    }

    /** As {@link #keepFree(Path, double)}, keeping at most {@code maxBytes} free. */
    public static DiskSpace keepFree(Path dir, double ratio, long maxBytes) throws IOException {
        if (!(ratio >= 0 && ratio < 1)) {
            throw new IllegalArgumentException("the free space ratio must be at least 0 and below 1, not " + ratio);
        }
        FileStore store = Files.getFileStore(dir);
        return new DiskSpace(store, ratio == 0 ? 0 : Math.min(maxBytes, (long) (store.getTotalSpace() * ratio)));
    }

    /** No floor and no filesystem: every question answers "room enough" (caches without a directory, tests). */
    public static DiskSpace unbounded() {
        return UNBOUNDED;
    }

    /** The bytes this keeps free. */
    public long minFree() {
        return minFree;
    }

    /**
     * How many bytes are missing for {@code more} more bytes to fit above the floor: 0 when they
     * fit. A filesystem that cannot be asked counts as having room (the write itself then tells).
     */
    public long shortfall(long more) {
        if (store == null || minFree == 0) {
            return 0;
        }
        try {
            return Math.max(0, minFree + more - store.getUsableSpace());
        } catch (IOException e) {
            return 0;
        }
    }

    /** The filesystem's size in bytes; -1 when unknown. */
    public long total() {
        try {
            return store == null ? -1 : store.getTotalSpace();
        } catch (IOException e) {
            return -1;
        }
    }

    /** Bytes that may still be written above the floor (0 when at or under it); -1 when unknown. */
    public long room() {
        long free = usable();
        return free < 0 ? -1 : Math.max(0, free - minFree);
    }

    /** Free bytes of the filesystem, for messages; -1 when unknown. */
    public long usable() {
        try {
            return store == null ? -1 : store.getUsableSpace();
        } catch (IOException e) {
            return -1;
        }
    }

    /** Whether {@code e} says the filesystem is full (ENOSPC) or the user's quota used up (EDQUOT). */
    public static boolean full(IOException e) {
        String m = e instanceof java.nio.file.FileSystemException fse ? fse.getReason() : e.getMessage();
        if (m == null) {
            m = e.getMessage();
        }
        return m != null && (m.contains("No space left on device") || m.contains("Disk quota exceeded"));
    }
}
