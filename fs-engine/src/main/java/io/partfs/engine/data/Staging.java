package io.partfs.engine.data;

import io.partfs.engine.object.ObjectNotFoundException;
import io.partfs.engine.object.ObjectStore;
import java.io.Closeable;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Blocks written in write-back mode: a write's blocks are made durable on local disk here
 * (written and fsynced, then the directory fsynced by {@link #syncDir}) before their slices are
 * committed, and uploaded to the object store in the background. Once uploaded a block moves
 * into the {@link BlockCache} (a rename) and its staged file is gone.
 *
 * <p>Crash safety: a block is committed to metadata only after its staged file is durable, so
 * after a crash every committed block is either in the object store or here. Opening a staging
 * directory uploads what it holds ({@link #recover}); a file shorter or longer than the size in
 * its key was being written when the process died, was never committed, and is deleted. A
 * whole block names the file and chunk it was written for ({@value #OWNER_XATTR}), so the
 * metadata can say whether the dead process committed its slice: if not, it is deleted rather
 * than uploaded into an object no file names. The directory is one process's at a time
 * ({@link #lockDir}). A block uploaded before its slice's commit (no upload delay, a file still
 * being written) has left the directory: it is noted for the mount's session as an upload
 * without write-back is ({@link SliceCheck#uploadingUncommitted}), so a process killed before
 * the commit does not leak its object.
 *
 * <p>Spare files: a new file's name is durable only after an fsync of the directory (0.13-0.15
 * ms here, on top of the file's own fsync). So blocks are written into empty files created
 * ahead, {@value #SPARE_BATCH} at a time with one directory fsync ({@code .spare-N}): the block's
 * key goes into the file's extended attribute {@value #KEY_XATTR}, which the file's fsync makes
 * durable with its data, and the file is then renamed to its key without a directory fsync.
 * After a crash a spare holding a key is that block (whichever name survived); one without is
 * deleted. Where the filesystem has no user extended attributes, every block gets a new file
 * and a directory fsync, as before.
 *
 * <p>Files the kernel writes itself (FUSE passthrough, see {@link Backing}): a new file's data
 * goes straight from the writer into a spare, its backing file, with no copy through this
 * process. A commit of it ({@link #commitBacking}) fsyncs the file with an attribute
 * {@value #SLICES_XATTR} naming the slices committed by each commit whose blocks are not all
 * uploaded yet: {@code <volume> <block size> <first slice id> <length>} for the whole file
 * (slice {@code first + c} holding chunk {@code c}), or a line {@code <volume> <block size>
 * <first slice id> <to> <from>} for each run {@code [from, to)} that changed since the last
 * commit (one slice per chunk the run spans, in order, its blocks counted from the run's start
 * in the chunk). Its blocks are then staged where they are, at
 * their offsets in the file, and uploaded from there. Once
 * the kernel closed the file ({@link #kernelClosed}), its uploaded blocks go into the block
 * cache as hard links to it ({@link BlockCache#link}); blocks uploaded while it was open are
 * linked at its close if it did not change since their commit, else not cached. The file's
 * staging name is deleted once it is closed and every block of it is uploaded. After a crash a spare
 * with that attribute stages the blocks it names (the file as it is then: writes after the last
 * commit may show in them, as writes not fsynced may after a crash; bytes a truncation took read
 * as zeros).
 *
 * <p>Checksums: a block written through this process carries the {@link BlockSums} of its bytes
 * (in memory, and in a spare's extended attribute {@value BlockSums#XATTR}, made durable with
 * it), and its upload checks what it read against them. A block the local disk damaged is not
 * uploaded but set aside ({@link #setAsideDamaged}): a read of it then fails instead of
 * returning other bytes, now and from every other client. Reads of a staged block before its
 * upload are not checked; once uploaded, the block cache checks it. Blocks the kernel wrote into
 * a backing file have none (this process never held their bytes).
 *
 * <p>A full disk: a block that would take the filesystem under its free-space floor
 * ({@link DiskSpace}), after the block cache evicted what it could, or whose write fails for
 * want of space, is not staged: {@link #stage} says so and the caller uploads it directly, so
 * writes go on at the object store's pace and nothing fails for the local disk.
 *
 * <p>Until a block is uploaded only this machine can read it: another client of a shared
 * volume gets an error for it, as with JuiceFS's {@code --writeback}. Another client may also
 * delete its file meanwhile and its objects (none there yet): after the upload of a committed
 * block {@link UploadRecheck} asks whether that happened and deletes the object again; what it
 * has still to ask about is written down ({@link UploadJournal}, {@code .uploaded}), so the next
 * start asks if this process dies first.
 *
 * <p>Concurrency: {@link #pending} is the index of staged blocks; the uploaders are a pool of
 * their own, so an object store that is down delays uploads (retried forever: the data is safe
 * on disk) without holding up writes, which only need the local disk. A block whose upload
 * found the store unreachable waits, with the others, for a probe to get an answer, and then
 * all are uploaded at once; other failures are retried with a backoff of their own.
 */
public final class Staging implements Closeable {
    private static final Logger log = LoggerFactory.getLogger(Staging.class);
    private static final long MAX_BACKOFF_MS = 30_000;
    /** During an outage every staged block fails the same way, again and again: one line in 10 s. */
    private final io.partfs.engine.LogLimit uploadFailures = new io.partfs.engine.LogLimit(java.time.Duration.ofSeconds(10));
    static final String SPARE_PREFIX = ".spare-";
    /** The user extended attribute ({@code user.} is implied) holding a spare's block key. */
    static final String KEY_XATTR = "partfs.key";
    static final int SPARE_BATCH = 64;
    /**
     * The user extended attribute naming the file a staged block was written for: {@code <inode>
     * <chunk index>} on a block's file, {@code <inode>} on a backing file (its commits give the
     * chunks). {@link #recover} asks the metadata whether an earlier process committed the block.
     */
    static final String OWNER_XATTR = "partfs.owner";
    /** The user extended attribute of a backing file naming the slices committed from it. */
    static final String SLICES_XATTR = "partfs.slices";
    static final String PROBE_PREFIX = ".mtime-probe-";
    /** Before the name of a staged block set aside as damaged ({@link #setAsideDamaged}): kept, not uploaded. */
    static final String DAMAGED_PREFIX = ".damaged-";
    /** The file naming the uuid of the volume whose blocks the directory stages ({@link #claim}). */
    static final String VOLUME = ".volume";
    /** The file whose lock says a process has the directory open ({@link #lockDir}). */
    static final String LOCK = ".lock";
    /** Room a new backing file needs above the free-space floor: the kernel writes it without asking. */
    public static final long BACKING_ROOM = 256L << 20;
    /**
     * Lines a backing file's attribute holds at most: a line per run of each commit with blocks
     * still to upload, up to ~130 bytes each, and ext4 keeps ~4 KiB of attributes a file (a write
     * past that fails, and with it the fsync). {@link BackedFile} merges a commit's runs into one,
     * or commits the whole file again (which makes the older commits needless), to stay within it.
     */
    static final int MAX_LINES_KEPT = 24;
    /**
     * How often the disk's free space is looked at while the kernel writes backing files: at
     * ~1.5 GB/s that is ~75 MB between looks, well inside {@link #BACKING_ROOM}.
     */
    static final long SPACE_WATCH_MS = 50;

    private final Path dir;
    private final ObjectStore objects;
    private final BlockCache cache;
    /** Staged blocks not yet uploaded, by key. */
    private final Map<String, Staged> pending = new ConcurrentHashMap<>();

    /**
     * A staged block: its size, and when this process staged it ({@link System#currentTimeMillis},
     * the clock backups are timed by; {@link Long#MIN_VALUE} for a block an earlier process left).
     * Kept here rather than read from the file's time, which a cache directory on a network
     * filesystem would take from the server's clock.
     */
    private record Staged(int size, long at, Backing in, long offset, boolean whole, int commit, byte[] sums, Owner owner) {
        /** A block in a file of its own, with the {@link BlockSums} of its bytes (null: none known). */
        Staged(int size, long at, byte[] sums) {
            this(size, at, sums, null);
        }

        /** A block in a file of its own, written by this process for {@code owner}'s file and chunk. */
        Staged(int size, long at, byte[] sums, Owner owner) {
            this(size, at, null, 0, false, 0, sums, owner);
        }
    }

    /**
     * A spare the kernel writes a new file into itself (FUSE passthrough, write-back mode): its
     * committed blocks are staged in it, at their offsets, until uploaded. It is deleted when it
     * is closed ({@link #closeBacking}) and no block of it is left to upload.
     */
    public final class Backing {
        private final Path file;
        /** Blocks of it still staged, and 1 while its file is open. Guarded by the Backing. */
        private int users;
        /**
         * Its commits with blocks still to upload, oldest first: their {@value #SLICES_XATTR}
         * entries, which the next commit writes. Guarded by the Backing.
         */
        private final List<Commit> commits = new ArrayList<>();
        /** What its blocks held at their last commit: lock it to compare ({@link CommittedBlocks}). */
        final CommittedBlocks blocks = new CommittedBlocks();
        /**
         * The kernel has closed it (or an earlier process left it): nothing writes it any more, so
         * a block read from it for upload stays what it uploaded, and the block cache may link it.
         * Guarded by the Backing.
         */
        private boolean closed;
        /** The number of its last commit, and its size and mtime right after that commit's fsync. Guarded by the Backing. */
        private int commit;
        private long committedSize = -1;
        private java.nio.file.attribute.FileTime committedMtime;
        /** Blocks uploaded while the kernel still had it open: linked at its close if it did not change. Guarded by the Backing. */
        private List<Uploaded> uploadedOpen = new ArrayList<>();

        private Backing(Path file, boolean open) {
            this.file = file;
            this.users = open ? 1 : 0;
            this.closed = !open;
        }

        private synchronized boolean closed() {
            return closed;
        }

        /** The number the next commit of it takes. */
        synchronized int nextCommit() {
            return ++commit;
        }

        /** The attribute's lines: a line per run of each commit whose blocks are not all uploaded yet. */
        synchronized int linesKept() {
            int n = 0;
            for (Commit c : commits) {
                n += c.lines;
            }
            return n;
        }

        /**
         * Reads a block of it for upload; while the kernel may still write it, checked against
         * {@link #blocks}: a block written again since its commit is taken again by the next one.
         */
        private byte[] readForUpload(Staged st) throws IOException {
            synchronized (blocks) {
                return blocks.tracking() && !closed() ? blocks.readChecked(file, st.offset(), st.size()) : readBacked(st);
            }
        }

        /** A block of commit {@code u.commit()} uploaded from a read made while the kernel had the file open. */
        private void uploadedWhileOpen(Uploaded u) {
            synchronized (this) {
                if (!closed) {
                    uploadedOpen.add(u);
                    return;
                }
            }
            linkIfUnchanged(u); // closed since the read
        }

        /** The kernel closed it: blocks uploaded while it was open are linked into the cache if it did not change since. */
        private void kernelClosed() {
            List<Uploaded> waiting;
            synchronized (this) {
                if (closed) {
                    return;
                }
                closed = true;
                openBackings.decrementAndGet();
                waiting = uploadedOpen;
                uploadedOpen = new ArrayList<>();
                if (waiting.isEmpty()) {
                    return;
                }
                users++; // held while linking: a release racing this one must not delete the file meanwhile
            }
            try {
                for (Uploaded u : waiting) {
                    linkIfUnchanged(u);
                }
            } finally {
                unuse(0, null, null);
            }
        }

        /**
         * Links uploaded block {@code u} into the block cache when it belongs to the last commit and
         * the file has not changed since that commit: its size and mtime are those seen right after
         * the commit's fsync, before any of its blocks was read (a write after a stat gets a later
         * mtime: {@link #fineTimestamps}), so the range holds what was uploaded. Else it is not
         * cached: a later read fetches it.
         */
        private void linkIfUnchanged(Uploaded u) {
            long size;
            java.nio.file.attribute.FileTime mtime;
            synchronized (this) {
                if (u.commit() != commit || committedMtime == null) {
                    return;
                }
                size = committedSize;
                mtime = committedMtime;
            }
            try {
                Map<String, Object> st = Files.readAttributes(file, "unix:size,lastModifiedTime", java.nio.file.LinkOption.NOFOLLOW_LINKS);
                if ((Long) st.get("size") == size && mtime.equals(st.get("lastModifiedTime"))) {
                    cache.link(u.key(), file, u.offset(), u.size(), u.sums());
                }
            } catch (IOException e) {
                log.debug("not caching block {} of {}: {}", u.key(), file, e.toString());
            }
        }

        /** The file the kernel writes. */
        public Path file() {
            return file;
        }

        private boolean sizeIs(long size) {
            try {
                return Files.size(file) == size;
            } catch (IOException e) {
                return false;
            }
        }

        /**
         * Names commit {@code c} in the attribute from now on (after those still named, or alone
         * when it takes the whole file); returns the attribute's text.
         */
        private synchronized String addCommit(Commit c, boolean wholeFile) {
            if (wholeFile) {
                // the older commits' slices are covered by this one: only a crash that also lost their
                // uploads would miss them, and then only gc and fsck would, not a read
                commits.clear();
            }
            commits.add(c);
            StringBuilder desc = new StringBuilder();
            for (Commit k : commits) {
                desc.append(desc.isEmpty() ? "" : "\n").append(k.entry);
            }
            return desc.toString();
        }

        /** Every block of commit {@code number} is queued: its hold is released. */
        private synchronized void queued(int number) {
            done(number);
        }

        /** One user more: a hold, or (with {@code commit} above 0) a block of that commit staged. */
        private synchronized void use(int commit) {
            users++;
            Commit c = commitNumbered(commit);
            if (c != null) {
                c.staged++;
            }
        }

        private Commit commitNumbered(int number) {
            if (number > 0) {
                for (Commit c : commits) {
                    if (c.number == number) {
                        return c;
                    }
                }
            }
            return null;
        }

        /**
         * A block of commit {@code number} is uploaded (or no longer staged): a commit with none
         * left is dropped from those the attribute names. Guarded by the Backing.
         */
        private void done(int number) {
            Commit c = commitNumbered(number);
            if (c != null && --c.staged <= 0) {
                commits.remove(c);
            }
        }

        /**
         * One user fewer; the last one deletes the file. With {@code adoptAs}, an uploaded block
         * of {@code data}, it goes into the block cache: the last user renames the file in when it
         * holds just that block, else (or while others use the file) a copy is cached.
         */
        private void unuse(int commit, String adoptAs, byte[] data) {
            boolean last;
            synchronized (this) {
                last = --users <= 0;
                done(commit);
            }
            if (!last) {
                if (adoptAs != null) {
                    cache.put(adoptAs, data);
                }
                return;
            }
            backings.remove(this);
            if (adoptAs != null) {
                if (sizeIs(data.length)) { // a one-block file the kernel did not make longer since its commit
                    cache.adopt(adoptAs, file, data.length, BlockSums.of(data));
                    return;
                }
                cache.put(adoptAs, data);
            }
            try {
                Files.deleteIfExists(file);
            } catch (IOException e) {
                log.warn("cannot delete write-back backing file {}: {}", file, e.toString());
            }
        }
    }

    /**
     * A commit of a backing file: its number, its lines of the {@value #SLICES_XATTR} attribute,
     * and its blocks still staged (plus 1 while they are being queued).
     */
    private static final class Commit {
        final int number;
        final String entry;
        final int lines;
        int staged = 1;

        Commit(int number, String entry) {
            this.number = number;
            this.entry = entry;
            this.lines = (int) entry.lines().count();
        }
    }

    /**
     * A block of a backing file, uploaded from a read made while the kernel had the file open,
     * with the {@link BlockSums} of the bytes uploaded.
     */
    private record Uploaded(String key, long offset, int size, int commit, byte[] sums) {
    }

    /** Backing files with blocks staged or open: kept by {@link #close}. */
    private final java.util.Set<Backing> backings = ConcurrentHashMap.newKeySet();
    /**
     * Of {@link #backings}, those the kernel has open: counted, since the space watch asks every
     * {@value #SPACE_WATCH_MS} ms while thousands of closed ones may wait for their upload.
     */
    private final java.util.concurrent.atomic.AtomicInteger openBackings = new java.util.concurrent.atomic.AtomicInteger();
    private final ScheduledThreadPoolExecutor uploaders;
    /** Runs {@link #watchSpace}; {@link #watchingSpace} while it is scheduled or running. */
    private final ScheduledThreadPoolExecutor spaceWatch = new ScheduledThreadPoolExecutor(1, ChunkStore.daemon("partfs-space-watch"));
    private final java.util.concurrent.atomic.AtomicBoolean watchingSpace = new java.util.concurrent.atomic.AtomicBoolean();
    private final java.util.concurrent.atomic.AtomicLong evictedForBackings = new java.util.concurrent.atomic.AtomicLong();
    private final io.partfs.engine.LogLimit spaceShort = new io.partfs.engine.LogLimit(java.time.Duration.ofMinutes(1));
    private final Object drained = new Object();
    private final long drainStallMs;
    private final long uploadDelayMs;
    /** Keys an uploader is working on: a block queued twice (delayed, then hurried by a drain) is uploaded once. */
    private final java.util.Set<String> uploading = ConcurrentHashMap.newKeySet();
    /** Empty files whose names are durable, ready to take a block ({@link #stage}). */
    private final java.util.concurrent.ConcurrentLinkedQueue<Path> spares = new java.util.concurrent.ConcurrentLinkedQueue<>();
    private final java.util.concurrent.atomic.AtomicBoolean refilling = new java.util.concurrent.atomic.AtomicBoolean();
    private final java.util.concurrent.atomic.AtomicLong nextSpare = new java.util.concurrent.atomic.AtomicLong();
    /** False once the filesystem refused an extended attribute: then no spares. */
    private volatile boolean sparesWork = true;
    /** Files created by {@link #stage} itself (no spare at hand), and how many of them the last directory fsync covered. */
    private final java.util.concurrent.atomic.AtomicLong namesCreated = new java.util.concurrent.atomic.AtomicLong();
    private volatile long namesSynced;
    private final Object dirSync = new Object();
    private final DiskSpace space;
    /** Blocks {@link #stage} turned away for want of space, and whether the last one was (for the log). */
    private final java.util.concurrent.atomic.AtomicLong turnedAway = new java.util.concurrent.atomic.AtomicLong();
    private final java.util.concurrent.atomic.AtomicBoolean full = new java.util.concurrent.atomic.AtomicBoolean();

    /**
     * A staging area in {@code dir} uploading with {@code threads} threads; call {@link #recover}
     * to upload what an earlier run left. A staged block is uploaded {@code uploadDelay} after
     * it was written (so a file deleted within that time is never uploaded: ClickHouse's
     * temporary parts). {@link #drain} gives up after {@code drainStall} without an upload.
     */
    public Staging(Path dir, ObjectStore objects, BlockCache cache, int threads, java.time.Duration uploadDelay,
                   java.time.Duration drainStall) throws IOException {
        this(dir, objects, cache, threads, uploadDelay, drainStall, 0);
    }

    /** As above, keeping {@code freeRatio} of the filesystem free (blocks that would not fit are not staged). */
    public Staging(Path dir, ObjectStore objects, BlockCache cache, int threads, java.time.Duration uploadDelay,
                   java.time.Duration drainStall, double freeRatio) throws IOException {
        this.dir = dir.toAbsolutePath().normalize();
        this.uploadDelayMs = uploadDelay.toMillis();
        this.drainStallMs = drainStall.toMillis();
        this.objects = objects;
        this.cache = cache;
        Files.createDirectories(this.dir);
        this.lock = lockDir(this.dir);
        this.space = DiskSpace.keepFree(this.dir, freeRatio);
        this.uploaders = new ScheduledThreadPoolExecutor(threads, ChunkStore.daemon("partfs-writeback"));
        uploaders.setRemoveOnCancelPolicy(true);
        UploadJournal journal;
        try {
            journal = new UploadJournal(this.dir);
        } catch (IOException | RuntimeException e) {
            lock.channel().close();
            throw e;
        }
        this.journal = journal;
        this.recheck = new UploadRecheck(objects, cache, k -> pending.containsKey(k) || uploading.contains(k), uploaders,
                journal);
    }

    /** The uploads {@link #recheck} has still to ask about, written down for the next start should this process die. */
    private final UploadJournal journal;

    /** Asks, after an upload, whether another mount freed the block's slice meanwhile ({@link UploadRecheck}). */
    private final UploadRecheck recheck;

    /** Held while this staging area is open: see {@link #lockDir}. */
    private final java.nio.channels.FileLock lock;

    /** A staging directory another open staging area holds (another mount, or another volume opened here). */
    public static final class InUseException extends IOException {
        InUseException(Path dir) {
            super("the write-back staging directory " + dir + " is in use by another mount on this machine: give each"
                    + " mount a --cache-dir of its own");
        }
    }

    /**
     * Locks the directory ({@value #LOCK}, an fcntl lock the kernel drops with the process): its
     * files are this process's alone. A second mount on the same cache directory would otherwise
     * take the blocks the first one is still writing for an earlier process's ({@link #recover})
     * and upload or delete them, and rename the spares it is about to fill.
     */
    private static java.nio.channels.FileLock lockDir(Path dir) throws IOException {
        FileChannel ch = FileChannel.open(dir.resolve(LOCK), StandardOpenOption.CREATE, StandardOpenOption.WRITE);
        java.nio.channels.FileLock l;
        try {
            l = ch.tryLock();
        } catch (java.nio.channels.OverlappingFileLockException e) {
            l = null; // this process has it open already
        } catch (IOException | RuntimeException e) {
            ch.close();
            throw e;
        }
        if (l == null) {
            ch.close();
            throw new InUseException(dir);
        }
        return l;
    }

    private Path file(String key) {
        return dir.resolve(key.replace("/", "%"));
    }

    /** The size a block key ends with ({@code ..._<index>_<size>}), or -1 when it has none. */
    static int sizeOf(String key) {
        int at = key.lastIndexOf('_');
        try {
            return at < 0 ? -1 : Integer.parseInt(key.substring(at + 1));
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /** {@link #recover(SliceCheck)} asking nothing: every block an earlier process staged whole is uploaded. */
    public int recover() throws IOException {
        return recover(null);
    }

    /** The file and chunk a staged block was written for: kept with it ({@value #OWNER_XATTR}) for {@link #recover}. */
    public record Owner(long ino, long chunk) {
        String text() {
            return ino + " " + chunk;
        }

        /** The attribute's text, or null when it names none (malformed, or a backing file's inode alone). */
        static Owner parse(String text) {
            String[] f = text == null ? new String[0] : text.trim().split(" ");
            try {
                return f.length == 2 ? new Owner(Long.parseLong(f[0]), Long.parseLong(f[1])) : null;
            } catch (NumberFormatException e) {
                return null;
            }
        }
    }

    /**
     * What the metadata says of the slices whose blocks an earlier process left staged: whether it
     * committed them before it stopped. The staging area knows only its blocks; this asks the
     * volume's metadata engine.
     */
    public interface SliceCheck {
        /** The volume asked about: blocks of another one (a cache directory used for two) are uploaded unasked. */
        String volume();

        /**
         * The volume's uuid: a staging directory holding blocks of another volume of the same
         * name (formatted again since) is refused ({@link #claim}), not uploaded into this one.
         */
        String volumeUuid();

        /**
         * Of slices by id, each with the file and chunk it was written for, those the volume
         * still knows, with their sizes: listed by that chunk, or freed into the trash or the
         * deletion list.
         */
        Map<Long, Integer> known(Map<Long, Owner> slices) throws IOException;

        /**
         * How long a commit the earlier process sent may still apply after it stopped (a
         * transaction on its way to a shared metadata server): what is unknown is looked at again
         * after this, before it is deleted. Zero for an embedded engine, which only that process wrote.
         */
        java.time.Duration settle();

        /**
         * Of slices committed from blocks staged here, those freed since past the trash
         * ({@link io.partfs.engine.meta.MetaEngine#releasedSlices}): a block of one uploaded after
         * that is deleted again ({@link UploadRecheck}). None by default.
         */
        default java.util.Set<Long> released(List<io.partfs.engine.meta.MetaEngine.CommittedSlice> slices) throws IOException {
            return java.util.Set.of();
        }

        /**
         * A block of slice {@code slice}, written for {@code owner}, is uploaded before its commit:
         * noted for this mount's session ({@link io.partfs.engine.meta.MetaEngine#uploading}), so
         * its objects are deleted should the commit never come. Nothing by default.
         */
        default void uploadingUncommitted(long slice, Owner owner) {
        }

        /** Asks {@code meta}, the metadata of {@code volume} ({@link io.partfs.engine.meta.MetaEngine#knownSlices}). */
        static SliceCheck asking(io.partfs.engine.meta.MetaEngine meta, io.partfs.engine.VolumeFormat volume, java.time.Duration settle) {
            return new SliceCheck() {
                @Override
                public String volume() {
                    return volume.name();
                }

                @Override
                public String volumeUuid() {
                    return volume.uuid();
                }

                @Override
                public Map<Long, Integer> known(Map<Long, Owner> slices) throws IOException {
                    List<io.partfs.engine.meta.MetaEngine.WrittenSlice> written = new ArrayList<>(slices.size());
                    slices.forEach((id, o) -> written.add(new io.partfs.engine.meta.MetaEngine.WrittenSlice(id, o.ino(), o.chunk())));
                    return meta.knownSliceSizes(written);
                }

                @Override
                public java.util.Set<Long> released(List<io.partfs.engine.meta.MetaEngine.CommittedSlice> slices) throws IOException {
                    return meta.releasedSlices(slices);
                }

                @Override
                public java.time.Duration settle() {
                    return settle;
                }

                @Override
                public void uploadingUncommitted(long slice, Owner owner) {
                    meta.uploading(slice, owner.ino(), owner.chunk());
                }
            };
        }
    }

    /** The metadata {@link #recover} was given; null before, or without one. */
    private volatile SliceCheck check;

    /** A block an earlier process staged whose commit {@link #recover} is asking about: not uploaded meanwhile. */
    private record Held(long slice, Owner owner) {
    }

    /** Blocks {@link #recover} holds back until their commit is known: in {@link #pending} too, so reads find them. */
    private final Map<String, Held> held = new ConcurrentHashMap<>();
    /**
     * {@link #held} blocks the metadata has not been asked about yet: an unmount waits for the
     * answer ({@link #drain}), so what was committed is uploaded, as without the question.
     */
    private volatile boolean unasked;

    /**
     * Queues for upload every block an earlier process staged and did not upload; deletes the
     * ones it was still writing. With {@code check}, a block that names the file and chunk it was
     * written for ({@value #OWNER_XATTR}) is held back until the metadata says whether its slice
     * was committed: if so (also if it was freed since into the trash or the deletion list) it is
     * uploaded, else the process died before its fsync or close and it is deleted rather than
     * uploaded into an object no file names ({@link #judge}). Returns how many blocks were queued
     * or held.
     */
    public int recover(SliceCheck check) throws IOException {
        List<Path> found;
        try (Stream<Path> s = Files.list(dir)) {
            found = s.filter(Files::isRegularFile).toList();
        }
        if (check != null) {
            claim(check.volumeUuid(), found);
            this.check = check;
            recheck.askWith(check::released);
            askAboutEarlierUploads(check.volume());
        }
        int damagedKept = 0;
        int queued = 0;
        long bytes = 0;
        for (Path p : found) {
            String name = p.getFileName().toString();
            if (name.startsWith(PROBE_PREFIX)) {
                Files.deleteIfExists(p); // a process died while probing the filesystem's times
                continue;
            }
            if (name.startsWith(DAMAGED_PREFIX)) {
                damagedKept++;
                continue;
            }
            if (name.equals(LOCK) || name.startsWith(VOLUME) || name.equals(UploadJournal.FILE)) {
                continue;
            }
            if (name.equals(UploadJournal.FILE + ".tmp")) {
                Files.deleteIfExists(p); // a process died while writing the journal again: the old one holds it all
                continue;
            }
            if (name.startsWith(SPARE_PREFIX)) {
                int blocks = recoverBacking(p, check);
                if (blocks >= 0) {
                    queued += blocks;
                    bytes += blocks > 0 ? Files.size(p) : 0;
                    continue;
                }
                p = recoverSpare(p);
                if (p == null) {
                    continue;
                }
                name = p.getFileName().toString();
            }
            String key = name.replace("%", "/");
            long size = Files.size(p);
            if (sizeOf(key) != size) {
                log.warn("deleting staged block {}: {} bytes, its key says {} (written when the process died, never committed)",
                        key, size, sizeOf(key));
                Files.deleteIfExists(p);
                continue;
            }
            byte[] sums;
            try {
                sums = BlockSums.read(p, BlockSums.XATTR); // null for a block staged before sums were kept
            } catch (IOException | UnsupportedOperationException e) {
                sums = null;
            }
            Held hold = holdFor(check, key, readOwner(p));
            if (pending.putIfAbsent(key, new Staged((int) size, Long.MIN_VALUE, sums)) == null) {
                if (hold != null) {
                    held.put(key, hold);
                } else {
                    schedule(key, 0, 0);
                }
                queued++;
                bytes += size;
            }
        }
        if (queued > 0) {
            log.info("{} block(s), {} MiB, staged in {} by an earlier mount in write-back mode: {}", queued, bytes >> 20, dir,
                    held.isEmpty() ? "uploading them" : (queued - held.size()) + " uploaded now, " + held.size()
                            + " once the metadata says they were committed (those it does not are deleted)");
        }
        if (!held.isEmpty()) {
            unasked = true;
            long settleAt = System.nanoTime() + check.settle().toNanos();
            uploaders.execute(() -> judge(check, settleAt, 0));
        }
        if (damagedKept > 0) {
            log.warn("{} staged block(s) found damaged on the local disk by an earlier mount are kept in {} ({}*), not uploaded:"
                    + " delete them once looked at", damagedKept, dir, DAMAGED_PREFIX);
        }
        return queued;
    }

    /**
     * Uploads an earlier process made from here and had not asked about when it stopped
     * ({@link UploadJournal}): asked about now, as this process's own are. Those of another
     * volume (the directory was claimed for this one) are dropped.
     */
    private void askAboutEarlierUploads(String volume) {
        List<UploadJournal.Entry> ours = new ArrayList<>();
        List<String> others = new ArrayList<>();
        for (UploadJournal.Entry e : journal.unanswered()) {
            if (e.key().startsWith(volume + "/chunks/")) {
                ours.add(e);
            } else {
                others.add(e.key());
            }
        }
        journal.answered(others);
        if (!ours.isEmpty()) {
            log.info("{} block(s) an earlier mount uploaded from write-back staging and had not asked about yet: asking"
                    + " whether another mount freed their slices meanwhile", ours.size());
            recheck.uploadedEarlier(ours);
        }
    }

    /**
     * A spare an earlier process left: renamed to the key it holds and returned, or deleted
     * (null) when it holds none (it was never used, or its block was not yet durable).
     */
    private Path recoverSpare(Path spare) throws IOException {
        String key;
        try {
            key = readKey(spare);
        } catch (IOException | UnsupportedOperationException e) {
            key = null;
        }
        if (key == null) {
            Files.deleteIfExists(spare);
            return null;
        }
        Path f = file(key);
        Files.move(spare, f, java.nio.file.StandardCopyOption.ATOMIC_MOVE, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        return f;
    }

    private static String readKey(Path f) throws IOException {
        return readXattr(f, KEY_XATTR);
    }

    /**
     * Records that the directory stages the blocks of volume {@code uuid} ({@value #VOLUME});
     * refuses, changing nothing, when it holds blocks (of {@code files}) of another volume: a
     * volume formatted again under the same name, mounted with the old one's cache directory,
     * would otherwise take those blocks for its own and upload them over its objects of the same
     * keys. A directory without the file (an earlier build's) is taken to be this volume's.
     */
    private void claim(String uuid, List<Path> files) throws IOException {
        Path marker = dir.resolve(VOLUME);
        String had = Files.exists(marker) ? Files.readString(marker).trim() : null;
        if (uuid.equals(had)) {
            return;
        }
        if (had != null) {
            long blocks = files.stream().filter(Staging::holdsBlocks).count();
            if (blocks > 0) {
                throw new IOException("the write-back staging directory " + dir + " holds " + blocks + " file(s) of blocks of"
                        + " another volume (uuid " + had + "), not of this one (" + uuid + "): mount that volume with this cache"
                        + " directory to upload them, or move them away, or give this mount another --cache-dir");
            }
        }
        Path tmp = dir.resolve(VOLUME + ".tmp");
        Files.writeString(tmp, uuid + "\n");
        Files.move(tmp, marker, java.nio.file.StandardCopyOption.ATOMIC_MOVE, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    }

    /**
     * Whether a file {@link #recover} finds holds blocks it would upload: a block's own, or a
     * spare with a block's key or a backing file's slices (not an unused spare, a damaged block
     * set aside, or the directory's own files).
     */
    private static boolean holdsBlocks(Path f) {
        String name = f.getFileName().toString();
        if (!name.startsWith(SPARE_PREFIX)) {
            return !name.startsWith(".");
        }
        try {
            return readXattr(f, KEY_XATTR) != null || readXattr(f, SLICES_XATTR) != null;
        } catch (IOException | UnsupportedOperationException e) {
            return false;
        }
    }

    /** The {@value #OWNER_XATTR} attribute of a block's file, or null (none, or unreadable). */
    private static Owner readOwner(Path f) {
        try {
            return Owner.parse(readXattr(f, OWNER_XATTR));
        } catch (IOException | UnsupportedOperationException e) {
            return null;
        }
    }

    /** Whether {@code check} is to be asked about block {@code key} written for {@code owner}: its hold, else null. */
    private static Held holdFor(SliceCheck check, String key, Owner owner) {
        if (check == null || owner == null) {
            return null;
        }
        int chunks = key.indexOf("/chunks/");
        int name = key.lastIndexOf('/');
        int u = key.indexOf('_', name + 1);
        if (chunks < 0 || u < 0 || !key.substring(0, chunks).equals(check.volume())) {
            return null;
        }
        try {
            return new Held(Long.parseLong(key, name + 1, u, 10), owner);
        } catch (NumberFormatException e) {
            return null;
        }
    }

    /**
     * Asks {@code check} about the blocks {@link #recover} held back: those of slices the volume
     * knows are uploaded; the others, once {@code settleAt} ({@link System#nanoTime}) passed
     * without a commit of theirs showing, are deleted. A metadata engine that does not answer is
     * asked again (the blocks wait, safe on disk).
     */
    private void judge(SliceCheck check, long settleAt, int failures) {
        Map<Long, Owner> slices = new java.util.HashMap<>();
        for (Held h : held.values()) {
            slices.put(h.slice(), h.owner());
        }
        if (slices.isEmpty()) { // uploaded or deleted meanwhile (their slices freed)
            unasked = false;
            signal();
            return;
        }
        Map<Long, Integer> known;
        try {
            known = check.known(slices);
        } catch (IOException | RuntimeException e) {
            long delay = Math.min(MAX_BACKOFF_MS, 1000L << Math.min(failures, 5));
            uploadFailures.warn(log, "cannot ask the metadata whether {} staged block(s) an earlier mount left were committed,"
                    + " asking again in {} ms (they wait on local disk): {}", held.size(), delay, e.toString());
            scheduleJudge(check, settleAt, failures + 1, delay);
            return;
        }
        boolean settled = System.nanoTime() - settleAt >= 0;
        int unknown = 0;
        int deleted = 0;
        long deletedBytes = 0;
        for (Map.Entry<String, Held> e : held.entrySet()) {
            String key = e.getKey();
            Integer size = known.get(e.getValue().slice());
            if (size != null) {
                if (held.remove(key, e.getValue())) {
                    Owner o = e.getValue().owner();
                    // committed, maybe freed since: asked about again after the upload
                    recheck.committed(new io.partfs.engine.meta.MetaEngine.CommittedSlice(e.getValue().slice(), size, o.ino(),
                            o.chunk()), List.of(key));
                    schedule(key, 0, 0);
                }
            } else if (!settled) {
                unknown++;
            } else {
                Staged st = pending.get(key);
                if (held.remove(key, e.getValue()) && remove(key)) {
                    deleted++;
                    deletedBytes += st == null ? 0 : st.size();
                }
            }
        }
        unasked = false; // after the known ones left held: what is still held from here on waits for its commit only
        signal();
        if (deleted > 0) {
            log.info("deleted {} staged block(s), {} KiB, of writes an earlier mount never committed (it stopped before"
                    + " their fsync or close): not uploaded", deleted, deletedBytes >> 10);
        }
        if (unknown > 0) {
            long wait = Math.max(0, TimeUnit.NANOSECONDS.toMillis(settleAt - System.nanoTime()));
            log.info("{} staged block(s) an earlier mount left are not committed (yet): asking again in {} s, in case"
                    + " a commit it sent is still on its way, then deleting what is still not", unknown, (wait + 999) / 1000);
            scheduleJudge(check, settleAt, 0, wait);
        }
    }

    private void scheduleJudge(SliceCheck check, long settleAt, int failures, long delayMs) {
        try {
            uploaders.schedule(() -> judge(check, settleAt, failures), delayMs, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.RejectedExecutionException closing) {
            // the blocks stay staged; the next start asks again
        }
    }

    /** Blocks held back until the metadata says whether they were committed ({@link #recover}); for tests and logs. */
    public int heldBlocks() {
        return held.size();
    }

    private static String readXattr(Path f, String name) throws IOException {
        java.nio.file.attribute.UserDefinedFileAttributeView view =
                Files.getFileAttributeView(f, java.nio.file.attribute.UserDefinedFileAttributeView.class);
        if (view == null || !view.list().contains(name)) {
            return null;
        }
        ByteBuffer b = ByteBuffer.allocate(view.size(name));
        view.read(name, b);
        return new String(b.array(), 0, b.position(), java.nio.charset.StandardCharsets.UTF_8);
    }

    /**
     * A spare an earlier process wrote as a backing file: stages the blocks its commits name and
     * returns how many; -1 when it is no backing file.
     */
    private int recoverBacking(Path spare, SliceCheck check) throws IOException {
        String desc;
        try {
            desc = readXattr(spare, SLICES_XATTR);
        } catch (IOException | UnsupportedOperationException e) {
            desc = null;
        }
        if (desc == null) {
            return -1;
        }
        Backing b = new Backing(spare, false);
        backings.add(b);
        Long ino = null;
        try {
            String owner = readXattr(spare, OWNER_XATTR);
            ino = owner == null ? null : Long.valueOf(owner.trim());
        } catch (IOException | RuntimeException e) {
            // none: its blocks are uploaded unasked
        }
        b.use(0); // held while its blocks are queued: one uploaded meanwhile must not delete the file under the rest
        int queued = 0;
        boolean unreadable = false;
        int number = 0;
        for (String commit : desc.split("\n")) {
            if (commit.isBlank()) {
                continue;
            }
            // kept by close (this process may have the pid of the one that wrote it); one that
            // cannot be read keeps its hold, and so stays named
            b.addCommit(new Commit(++number, commit), false);
            try {
                queued += stageCommitted(b, commit, Long.MIN_VALUE, number, check, ino);
                b.queued(number);
            } catch (IOException | RuntimeException e) {
                unreadable = true;
                log.error("write-back backing file {}: cannot read its commit '{}' ({}); left in place, its blocks are "
                        + "not uploaded (partfs fsck lists the files that miss them)", spare, commit, e.toString());
            }
        }
        if (!unreadable) { // an unreadable one keeps the hold: it stays, also once the rest is uploaded
            b.unuse(0, null, null); // deletes it at once when nothing was to be uploaded
        }
        return queued;
    }

    /**
     * Opens a spare (or, with none ready, a new file with its name made durable) for the kernel to
     * write a new file into (FUSE passthrough); null when the filesystem takes no extended
     * attributes or the disk has less than {@link #BACKING_ROOM} above its free-space floor (the
     * file is then written the usual way, and a full disk turns blocks away as {@link #stage} does).
     */
    public Backing openBacking(long ino) {
        if (!sparesWork) {
            return null;
        }
        long missing = space.shortfall(BACKING_ROOM);
        if (missing > 0 && cache.evictBytes(missing) < missing) {
            return null;
        }
        Path spare = takeSpare();
        if (spare == null) { // none ready (the first file of a mount, or many at once): one of its own
            spare = dir.resolve(sparePrefix() + nextSpare.getAndIncrement());
            try {
                Files.newByteChannel(spare, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE).close();
                fsyncDir();
            } catch (IOException e) {
                log.warn("cannot create a write-back backing file in {}: {}", dir, e.toString());
                try {
                    Files.deleteIfExists(spare);
                } catch (IOException ignored) {
                    // a stray empty spare: the next start deletes it
                }
                return null;
            }
        }
        writeOwner(spare, String.valueOf(ino)); // durable with the first commit's fsync
        Backing b = new Backing(spare, true);
        openBackings.incrementAndGet();
        backings.add(b);
        if (watchingSpace.compareAndSet(false, true)) {
            spaceWatch.execute(this::watchSpace);
        }
        return b;
    }

    /**
     * The kernel writes backing files without asking, so nothing else sees a merge's output fill
     * the disk. While any is open this looks at the free space every {@value #SPACE_WATCH_MS} ms
     * and evicts from the block cache to keep {@link #BACKING_ROOM} above the free-space floor;
     * a writer then gets ENOSPC only once the cache has nothing left to give back. One thread of
     * its own, so that uploads waiting on a slow store never delay it; it stops while no backing
     * file is open.
     */
    private void watchSpace() {
        if (!anyBackingOpen()) {
            watchingSpace.set(false);
            // one opened since the look above either saw the flag still set (and left the watch
            // to this run) or set it again itself: exactly one of the two goes on
            if (!anyBackingOpen() || !watchingSpace.compareAndSet(false, true)) {
                return;
            }
        }
        keepBackingRoom();
        try {
            spaceWatch.schedule(this::watchSpace, SPACE_WATCH_MS, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.RejectedExecutionException closing) {
            watchingSpace.set(false);
        }
    }

    private boolean anyBackingOpen() {
        return openBackings.get() > 0;
    }

    private void keepBackingRoom() {
        long missing = space.shortfall(BACKING_ROOM);
        if (missing <= 0) {
            return;
        }
        long freed = cache.evictBytes(missing);
        evictedForBackings.addAndGet(freed);
        if (freed < missing) {
            long open = openBackings.get();
            spaceShort.warn(log, "write-back: {} MiB free on the disk of {} while the kernel writes {} new file(s) into it, and "
                    + "the block cache has nothing more to give back: a writer that fills the disk gets ENOSPC (No space left "
                    + "on device); give the cache directory a larger disk, or mount with --no-write-passthrough", Math.max(0,
                    space.usable()) >> 20, dir, open);
        }
    }

    /** Bytes the block cache gave back to keep room for files the kernel writes itself ({@link #watchSpace}). */
    public long evictedForBackings() {
        return evictedForBackings.get();
    }

    /** Whether the free space is being watched for open backing files (tests). */
    boolean watchingSpace() {
        return watchingSpace.get();
    }

    private volatile Boolean fineTimestamps;

    /**
     * Whether the staging filesystem gives a file written right after a stat a later mtime
     * (multigrain timestamps, Linux 6.13+ on ext4, XFS, btrfs, tmpfs): {@link BackedFile} tells
     * from it whether the kernel wrote a backing file since its last commit. Found out once, by
     * trying: on a filesystem whose times are only as fine as the clock tick, two writes a few
     * microseconds apart mostly get the same time, so five pairs in a row that all differ do not
     * come from one.
     */
    public boolean fineTimestamps() {
        Boolean known = fineTimestamps;
        if (known == null) {
            known = probeTimestamps();
            fineTimestamps = known;
            if (!known) {
                log.info("the filesystem of {} gives a write no finer time than the clock tick (multigrain timestamps: "
                        + "Linux 6.13+, ext4, XFS, btrfs): new files are written through this process, not passed through", dir);
            }
        }
        return known;
    }

    private boolean probeTimestamps() {
        Path probe = dir.resolve(PROBE_PREFIX + ProcessHandle.current().pid());
        try (FileChannel ch = FileChannel.open(probe, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.READ)) {
            for (int i = 0; i < 5; i++) {
                ch.write(ByteBuffer.wrap(new byte[] {1}), i);
                Object before = Files.getAttribute(probe, "lastModifiedTime");
                ch.write(ByteBuffer.wrap(new byte[] {2}), i);
                if (before.equals(Files.getAttribute(probe, "lastModifiedTime"))) {
                    return false;
                }
            }
            return true;
        } catch (IOException | UnsupportedOperationException e) {
            return false;
        } finally {
            try {
                Files.deleteIfExists(probe);
            } catch (IOException ignored) {
                // a stray probe file: the next recover() deletes it
            }
        }
    }

    /**
     * Commits what a backing file holds: {@code length} bytes as slices {@code firstId},
     * {@code firstId + 1}, ... of chunks 0, 1, ... of {@code volume}'s blocks of
     * {@code blockSize}. The file and the attribute naming them are durable when this returns;
     * the blocks are staged in place and queued for upload.
     */
    public void commitBacking(Backing b, String volume, int blockSize, long firstId, long length) throws IOException {
        commitBacking(b, b.nextCommit(), volume, blockSize, firstId, new long[] {0, length}, length);
    }

    /**
     * Commits runs {@code bounds} ({@code [bounds[2i], bounds[2i+1])}, in order) of a backing file
     * of {@code length} bytes as its commit {@code number} ({@link Backing#nextCommit}): as slices
     * {@code firstId}, {@code firstId + 1}, ... one per chunk each run spans
     * ({@link CommittedBlocks#spans}), of {@code volume}'s blocks of {@code blockSize}, counted
     * from the run's start in each chunk. The file and the attribute naming the commit (a line per
     * run) are durable when this returns; the blocks are staged in place and queued for upload. A
     * commit of the whole file makes the earlier ones needless: they are no longer named.
     */
    void commitBacking(Backing b, int number, String volume, int blockSize, long firstId, long[] bounds, long length)
            throws IOException {
        boolean whole = bounds.length == 2 && bounds[0] == 0 && bounds[1] == length;
        List<String> lines = new ArrayList<>();
        long id = firstId;
        for (int r = 0; r < bounds.length; r += 2) {
            // a whole file's entry is as before runs began: an earlier build reads it after a downgrade
            lines.add(volume + " " + blockSize + " " + id + " " + bounds[r + 1] + (whole ? "" : " " + bounds[r]));
            id += CommittedBlocks.spans(bounds[r], bounds[r + 1]).size();
        }
        String desc = b.addCommit(new Commit(number, String.join("\n", lines)), whole);
        java.nio.file.attribute.UserDefinedFileAttributeView view =
                Files.getFileAttributeView(b.file, java.nio.file.attribute.UserDefinedFileAttributeView.class);
        view.write(SLICES_XATTR, ByteBuffer.wrap(desc.getBytes(java.nio.charset.StandardCharsets.UTF_8)));
        try (FileChannel ch = FileChannel.open(b.file, StandardOpenOption.WRITE)) {
            ch.force(true); // the data and the attribute together; the spare's name was durable already
        }
        // what the file is before any block of this commit is read for upload (see linkIfUnchanged)
        Map<String, Object> st = Files.readAttributes(b.file, "unix:size,lastModifiedTime", java.nio.file.LinkOption.NOFOLLOW_LINKS);
        synchronized (b) {
            if (b.commit == number) {
                b.committedSize = (Long) st.get("size");
                b.committedMtime = (java.nio.file.attribute.FileTime) st.get("lastModifiedTime");
            }
        }
        long at = System.currentTimeMillis();
        for (String line : lines) {
            stageCommitted(b, line, at, number, null, null);
        }
        b.queued(number);
        long missing = space.shortfall(0);
        if (missing > 0) {
            cache.evictBytes(missing); // the kernel wrote without asking: give the floor back what the cache can
        }
    }

    /**
     * Stages the blocks one line of a backing file's attribute names, as its commit
     * {@code number} (named by the backing file already); returns how many. With {@code check}
     * and the file's inode (a recovery), they are held until it says whether they were committed.
     */
    private int stageCommitted(Backing b, String commit, long at, int number, SliceCheck check, Long ino) throws IOException {
        String[] f = commit.trim().split(" ");
        if (f.length != 4 && f.length != 5) {
            throw new IOException("malformed " + SLICES_XATTR + " attribute of " + b.file + ": '" + commit + "'");
        }
        String volume = f[0];
        int blockSize = Integer.parseInt(f[1]);
        long firstId = Long.parseLong(f[2]);
        long to = Long.parseLong(f[3]);
        long from = f.length == 5 ? Long.parseLong(f[4]) : 0;
        if (from < 0 || from > to) {
            throw new IOException("malformed " + SLICES_XATTR + " attribute of " + b.file + ": '" + commit + "'");
        }
        int staged = 0;
        List<CommittedBlocks.Span> spans = CommittedBlocks.spans(from, to);
        for (int s = 0; s < spans.size(); s++) {
            CommittedBlocks.Span span = spans.get(s);
            long sliceStart = span.chunk() * ChunkStore.CHUNK + span.pos();
            for (int i = 0; i < ChunkStore.blocks(blockSize, span.len()); i++) {
                int size = ChunkStore.blockLength(blockSize, span.len(), i);
                long offset = sliceStart + (long) i * blockSize;
                String key = ChunkStore.blockKey(volume, firstId + s, i, size);
                b.use(number);
                boolean wholeFile = f.length == 4 && offset == 0 && size == to;
                if (pending.putIfAbsent(key, new Staged(size, at, b, offset, wholeFile, number, null, null)) == null) {
                    Held hold = ino == null ? null : holdFor(check, key, new Owner(ino, span.chunk()));
                    if (hold != null) {
                        held.put(key, hold);
                    } else {
                        schedule(key, at == Long.MIN_VALUE ? 0 : uploadDelayMs, 0);
                    }
                    staged++;
                } else {
                    b.unuse(number, null, null);
                }
            }
        }
        return staged;
    }

    /**
     * The kernel closed the backing file (its last handle): nothing writes it any more. Blocks of
     * it uploaded from now on are linked into the block cache, and those uploaded while it was
     * open too if it did not change since their commit.
     */
    public void kernelClosed(Backing b) {
        b.kernelClosed();
    }

    /** The backing file is done with (closed, and committed or given up): deleted now, or once its staged blocks are uploaded. */
    public void closeBacking(Backing b) {
        b.kernelClosed();
        b.unuse(0, null, null);
    }

    /**
     * Writes a block to local disk and fsyncs it, then queues its upload. In a spare file the
     * block is durable when this returns; in a file created here its name is durable only after
     * {@link #syncDir}, which a flush calls once before it commits. False, with nothing staged,
     * when the disk has no room for it (the caller then uploads it itself).
     */
    public boolean stage(String key, byte[] data, Owner owner) throws IOException {
        // what other blocks are being written counts as used already: blocks staged side by side
        // (a file's blocks upload in parallel) must not pass the floor together
        long reserved = writing.addAndGet(data.length);
        try {
            long missing = space.shortfall(reserved);
            if (missing > 0 && cache.evictBytes(missing) < missing) {
                return turnAway(key, "it would leave less than " + (space.minFree() >> 20) + " MiB free (--free-space-ratio)");
            }
            return write(key, data, owner);
        } finally {
            writing.addAndGet(-data.length);
        }
    }

    /** Bytes {@link #stage} calls are writing now. */
    private final java.util.concurrent.atomic.AtomicLong writing = new java.util.concurrent.atomic.AtomicLong();

    private boolean write(String key, byte[] data, Owner owner) throws IOException {
        Path f = file(key);
        Path spare = sparesWork ? takeSpare() : null;
        byte[] sums = BlockSums.of(data);
        try {
            if (spare == null || !stageInSpare(spare, key, data, sums, owner, f)) {
                try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                        StandardOpenOption.TRUNCATE_EXISTING)) {
                    LocalFiles.writeAll(ch, data);
                    if (owner != null && sparesWork) { // no spare at hand, but the filesystem takes attributes
                        writeOwner(f, owner.text());
                    }
                    ch.force(true);
                } catch (IOException e) {
                    Files.deleteIfExists(f); // torn: nothing may find it, now or after a restart
                    throw e;
                }
                namesCreated.incrementAndGet();
            }
        } catch (IOException e) {
            if (!DiskSpace.full(e)) {
                throw e;
            }
            return turnAway(key, e.getMessage());
        }
        if (full.compareAndSet(true, false)) {
            log.info("write-back staging in {} has room again: blocks are staged, not uploaded before fsync returns", dir);
        }
        if (pending.put(key, new Staged(data.length, System.currentTimeMillis(), sums, owner)) == null) {
            schedule(key, uploadDelayMs, 0);
        }
        return true;
    }

    /** Counts (and the first time in a row, logs) a block not staged for want of space; false. */
    private boolean turnAway(String key, String why) {
        turnedAway.incrementAndGet();
        if (full.compareAndSet(false, true)) {
            log.warn("write-back staging in {} is full ({} MiB free): block {} and the next ones are uploaded before "
                    + "fsync returns, until staged blocks are uploaded or space is freed; {}", dir,
                    Math.max(0, space.usable()) >> 20, key, why);
        }
        return false;
    }

    /** Blocks not staged for want of local disk space (uploaded directly instead). */
    public long turnedAway() {
        return turnedAway.get();
    }

    /** A spare file, or null when none is ready; starts making more when few are left. */
    private Path takeSpare() {
        Path p = spares.poll();
        if (spares.size() < SPARE_BATCH / 4 && refilling.compareAndSet(false, true)) {
            try {
                uploaders.execute(this::refillSpares);
            } catch (java.util.concurrent.RejectedExecutionException e) {
                refilling.set(false); // closing
            }
        }
        return p;
    }

    /**
     * Writes the block, its key and its {@link BlockSums} into a spare, fsyncs it, and renames it
     * to {@code f}. False, with the spare deleted, when the filesystem refuses the extended
     * attribute (spares are then given up) or the spare is gone; the caller then writes a new file.
     */
    private boolean stageInSpare(Path spare, String key, byte[] data, byte[] sums, Owner owner, Path f) throws IOException {
        try (FileChannel ch = FileChannel.open(spare, StandardOpenOption.WRITE)) {
            LocalFiles.writeAll(ch, data);
            if (!writeKey(spare, key)) {
                ch.close();
                Files.deleteIfExists(spare);
                return false;
            }
            try {
                BlockSums.write(spare, BlockSums.XATTR, sums); // checked before the upload, also after a restart
            } catch (IOException | UnsupportedOperationException e) {
                log.debug("staged block {} keeps no checksums on disk: {}", key, e.toString());
            }
            if (owner != null) {
                writeOwner(spare, owner.text());
            }
            ch.force(true); // data, size, the key, the sums and the owner together
        } catch (NoSuchFileException e) {
            return false;
        } catch (IOException e) {
            Files.deleteIfExists(spare); // the caller fails the flush, which writes the block again
            throw e;
        }
        Files.move(spare, f, java.nio.file.StandardCopyOption.ATOMIC_MOVE, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        return true;
    }

    /** Sets a spare's key attribute; false, and spares given up, when the filesystem takes none. */
    private boolean writeKey(Path spare, String key) {
        try {
            java.nio.file.attribute.UserDefinedFileAttributeView view =
                    Files.getFileAttributeView(spare, java.nio.file.attribute.UserDefinedFileAttributeView.class);
            if (view == null) {
                throw new UnsupportedOperationException("no user-defined file attributes");
            }
            view.write(KEY_XATTR, ByteBuffer.wrap(key.getBytes(java.nio.charset.StandardCharsets.UTF_8)));
            return true;
        } catch (IOException | UnsupportedOperationException e) {
            if (sparesWork) {
                sparesWork = false;
                log.info("staging directory {} takes no user extended attributes ({}): each staged block gets a new file "
                        + "and a directory fsync", dir, e.toString());
            }
            return false;
        }
    }

    /**
     * Sets the {@value #OWNER_XATTR} attribute (made durable by the fsync that follows); without
     * it the block is uploaded after a crash whether or not it was committed, as before.
     */
    private void writeOwner(Path f, String owner) {
        try {
            Files.getFileAttributeView(f, java.nio.file.attribute.UserDefinedFileAttributeView.class)
                    .write(OWNER_XATTR, ByteBuffer.wrap(owner.getBytes(java.nio.charset.StandardCharsets.UTF_8)));
        } catch (IOException | RuntimeException e) {
            log.debug("{} keeps no owner: {}", f, e.toString());
        }
    }

    /** The names of this process's spares start with this (those of an earlier one are recovered at start). */
    private static String sparePrefix() {
        return SPARE_PREFIX + ProcessHandle.current().pid() + "-";
    }

    /** Creates {@value #SPARE_BATCH} empty files and makes their names durable with one directory fsync. */
    private void refillSpares() {
        try {
            List<Path> made = new ArrayList<>(SPARE_BATCH);
            for (int i = 0; i < SPARE_BATCH; i++) {
                Path p = dir.resolve(sparePrefix() + nextSpare.getAndIncrement());
                try {
                    Files.newByteChannel(p, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE).close();
                } catch (java.nio.file.FileAlreadyExistsException e) {
                    continue; // a backing file an earlier process of the same pid left (a container's pid 1)
                }
                made.add(p);
            }
            fsyncDir();
            spares.addAll(made);
        } catch (IOException e) {
            log.warn("cannot prepare spare staging files in {}: {}", dir, e.toString());
        } finally {
            refilling.set(false);
        }
    }

    /** Makes the names of the files {@link #stage} created so far durable (one fsync of the directory, when any). */
    public void syncDir() throws IOException {
        long created = namesCreated.get();
        if (namesSynced >= created) {
            return; // every block so far went into a spare, or a later fsync covered it
        }
        synchronized (dirSync) {
            long upTo = namesCreated.get();
            if (namesSynced >= created) {
                return;
            }
            fsyncDir();
            namesSynced = upTo;
        }
    }

    private void fsyncDir() throws IOException {
        try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
            d.force(true);
        }
    }

    /**
     * Reads bytes {@code [off, off+len)} of a staged block into {@code dst} at its position (which
     * moves past them); false, with nothing read, when it is not staged (any more). The pieces
     * read of a block staged through the sidecar are checked against its {@link BlockSums}; one
     * the local disk damaged is set aside, as its upload would, and the read fails: its bytes are
     * nowhere else.
     */
    public boolean read(String key, int off, int len, ByteBuffer dst) throws DamagedBlockException {
        Staged st = pending.get(key);
        if (st == null) {
            return false;
        }
        try {
            if (st.in() != null) {
                LocalFiles.readRange(st.in().file, st.offset() + off, len, dst, true);
                return true;
            }
            Path f = file(key);
            if (!BlockSums.readChecked(f, 0, st.size(), st.sums(), off, len, dst)) {
                setAsideDamaged(key, st, f);
                throw new DamagedBlockException(key);
            }
            return true;
        } catch (NoSuchFileException e) {
            return false; // uploaded and moved into the cache meanwhile: the caller reads it from there
        } catch (DamagedBlockException e) {
            throw e;
        } catch (IOException e) {
            log.error("cannot read staged block {}: {}", key, e.toString());
            return false;
        }
    }

    /** The local file of a staged block, or null; it moves into the block cache once uploaded. */
    public Path pathIfStaged(String key) {
        Staged st = pending.get(key);
        if (st == null || st.in() != null && !st.whole()) {
            return null;
        }
        return st.in() != null ? st.in().file : file(key);
    }

    public boolean contains(String key) {
        return pending.containsKey(key);
    }

    /**
     * Forgets a block whose slice was deleted; true when it was still staged, so it is not in
     * the object store (an upload under way when this is called deletes what it stored).
     */
    public boolean remove(String key) {
        held.remove(key);
        recheck.forget(key);
        Staged st = pending.remove(key);
        if (st == null) {
            return false;
        }
        if (st.in() != null) {
            st.in().unuse(st.commit(), null, null);
        } else {
            try {
                Files.deleteIfExists(file(key));
            } catch (IOException e) {
                log.warn("cannot delete staged block {}: {}", key, e.toString());
            }
        }
        signal();
        return true;
    }

    /**
     * {@link #remove}s a block this process staged after {@code sinceMillis} (a block an earlier
     * process staged stays): for a block freed into the trash that no metadata backup can list,
     * since none began after it was staged.
     */
    public boolean removeIfStagedAfter(String key, long sinceMillis) {
        Staged staged = pending.get(key);
        if (staged == null || staged.at() <= sinceMillis) {
            return false; // uploaded (or being uploaded and moved into the block cache), or in a backup
        }
        return remove(key);
    }

    public int pendingBlocks() {
        return pending.size();
    }

    public long pendingBytes() {
        long n = 0;
        for (Staged s : pending.values()) {
            n += s.size();
        }
        return n;
    }

    /**
     * When the longest-waiting staged block was staged (wall clock, ms): 0 when none waits,
     * {@link Long#MIN_VALUE} when an earlier process staged it.
     */
    public long oldestPendingMillis() {
        long oldest = Long.MAX_VALUE;
        for (Staged s : pending.values()) {
            oldest = Math.min(oldest, s.at());
        }
        return oldest == Long.MAX_VALUE ? 0 : oldest;
    }

    private void schedule(String key, long delayMs, int failures) {
        try {
            uploaders.schedule(() -> upload(key, failures), delayMs, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // closing: the block stays staged and is uploaded at the next start
        }
    }

    private void upload(String key, int failures) {
        Staged staged = pending.get(key);
        if (staged == null || held.containsKey(key) || !uploading.add(key)) {
            return; // gone, waiting for judge(), or being uploaded
        }
        Path f = file(key);
        boolean park = false;
        // taken before the read: a file closed by then holds after the upload what the upload read
        boolean closedAtRead = staged.in() != null && !staged.whole() && staged.in().closed();
        try {
            byte[] data;
            try {
                data = staged.in() != null
                        ? staged.in().readForUpload(staged)
                        : LocalFiles.readRange(f, 0, staged.size());
            } catch (NoSuchFileException e) {
                // removed meanwhile; or a write of the same block again failed for want of space and
                // its caller uploads it itself: nothing left to upload either way
                if (pending.remove(key, staged)) {
                    if (staged.in() != null) {
                        staged.in().unuse(staged.commit(), null, null);
                    }
                    signal();
                }
                return;
            }
            if (staged.sums() != null && !BlockSums.matches(staged.sums(), data.length, 0, ByteBuffer.wrap(data))) {
                setAsideDamaged(key, staged, f);
                return;
            }
            SliceCheck notes = check;
            if (staged.owner() != null && notes != null) {
                // uploaded before its commit (no upload delay, a file still being written): noted
                // like an upload without write-back, so a kill before the commit does not leak it
                recheck.unlessCommitted(key, () -> notes.uploadingUncommitted(ChunkStore.sliceIdOf(key), staged.owner()));
            }
            objects.put(key, data);
            Staged was = pending.remove(key);
            if (was == null) {
                // its slice was deleted while it was uploading: delete the object too
                try {
                    objects.delete(key);
                } catch (ObjectNotFoundException ignored) {
                    // gone already
                }
                return;
            }
            recheck.uploaded(key);
            if (was.in() == null) {
                cache.adopt(key, f, data.length, was.sums() != null ? was.sums() : BlockSums.of(data));
            } else {
                if (was.whole()) {
                    was.in().unuse(was.commit(), key, data); // a closed one-block file is renamed into the cache
                } else {
                    // a block of a closed file is linked into the cache: no second copy on disk
                    if (was != staged) {
                        cache.put(key, data);
                    } else if (!closedAtRead) {
                        was.in().uploadedWhileOpen(new Uploaded(key, was.offset(), data.length, was.commit(), BlockSums.of(data)));
                    } else if (!cache.link(key, was.in().file, was.offset(), data.length, BlockSums.of(data))) {
                        cache.put(key, data);
                    }
                    was.in().unuse(was.commit(), null, null);
                }
            }
            signal();
        } catch (IOException | RuntimeException e) {
            if (objects.unreachable()) {
                uploadFailures.warn(log, "upload of staged block {} failed (attempt {}), tried again once the store answers: {}",
                        key, failures + 1, e.getMessage());
                park = true;
            } else {
                long delay = Math.min(MAX_BACKOFF_MS, 500L << Math.min(failures, 10));
                uploadFailures.warn(log, "upload of staged block {} failed (attempt {}), trying again in {} ms: {}",
                        key, failures + 1, delay, e.getMessage());
                schedule(key, delay, failures + 1);
            }
        } finally {
            uploading.remove(key);
        }
        if (park) {
            park(key, failures + 1); // after the finally: a release at once must find the key free to upload
        }
    }

    /**
     * A staged block whose bytes no longer match the checksums taken when it was written: the
     * local disk returned other bytes. It is not uploaded (what it should hold is nowhere else,
     * and a read of it then fails rather than return those bytes); its file is kept aside, with
     * {@value #DAMAGED_PREFIX} before its name, for a look at the disk.
     */
    private void setAsideDamaged(String key, Staged staged, Path f) {
        if (!pending.remove(key, staged)) {
            return;
        }
        damaged.incrementAndGet();
        Path aside = dir.resolve(DAMAGED_PREFIX + f.getFileName());
        try {
            Files.move(f, aside, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            aside = f;
        }
        log.error("staged block {} reads back other bytes than were written (checksum mismatch): the local disk of {} damaged it;"
                + " not uploaded, so the file that holds it fails to read there (partfs fsck lists such files); kept as {};"
                + " check the disk (dmesg, smartctl)", key, dir, aside);
        signal();
    }

    /** A read met a staged block whose bytes the local disk damaged before its upload. */
    public static final class DamagedBlockException extends IOException {
        DamagedBlockException(String key) {
            super("staged block " + key + " was damaged on the local disk before its upload (checksum mismatch):"
                    + " its bytes are lost; set aside, not uploaded");
        }
    }

    /** Staged blocks found damaged (not uploaded) since this staging area was opened. */
    public long damagedBlocks() {
        return damaged.get();
    }

    private final java.util.concurrent.atomic.AtomicLong damaged = new java.util.concurrent.atomic.AtomicLong();

    private static byte[] readBacked(Staged st) throws IOException {
        byte[] data = new byte[st.size()];
        LocalFiles.readRange(st.in().file, st.offset(), st.size(), ByteBuffer.wrap(data), true);
        return data;
    }

    /**
     * Blocks whose upload found the object store unreachable, with their failed attempts. They
     * wait for {@link #watchOutage} instead of a backoff of their own: uploaded together as soon as
     * the store answers, not up to {@link #MAX_BACKOFF_MS} later, and not tried one by one meanwhile.
     */
    private final Map<String, Integer> parked = new ConcurrentHashMap<>();
    /** Whether a {@link #watchOutage} is scheduled or running. */
    private final java.util.concurrent.atomic.AtomicBoolean watching = new java.util.concurrent.atomic.AtomicBoolean();
    /** How often parked blocks ask whether the store answers again. */
    static final long WATCH_MS = 1_000;

    private void park(String key, int failures) {
        parked.put(key, failures);
        if (watching.compareAndSet(false, true)) {
            scheduleWatch();
        }
    }

    private void scheduleWatch() {
        try {
            uploaders.schedule(this::watchOutage, WATCH_MS, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // closing: parked blocks stay staged and are uploaded at the next start
        }
    }

    /**
     * Asks the store whether it answers (one probe for all parked blocks, see
     * {@link ObjectStore#answers}) and, once it does, queues every parked block's upload.
     */
    private void watchOutage() {
        boolean back;
        try {
            back = objects.answers();
        } catch (RuntimeException e) {
            back = false;
        }
        if (!back) {
            scheduleWatch();
            return;
        }
        watching.set(false); // a block parked from here on schedules a watch of its own
        int released = 0;
        for (String key : parked.keySet()) {
            Integer failures = parked.remove(key);
            if (failures != null) {
                schedule(key, 0, failures);
                released++;
            }
        }
        if (released > 0) {
            log.info("{} answers again: uploading {} staged block(s) that waited for it", objects.describe(), released);
        }
        if (!parked.isEmpty() && watching.compareAndSet(false, true)) {
            scheduleWatch();
        }
    }

    /** Blocks waiting for the object store to answer again; for tests and metrics. */
    public int parkedBlocks() {
        return parked.size();
    }

    private void signal() {
        synchronized (drained) {
            drained.notifyAll();
        }
    }

    /**
     * Waits until every staged block is uploaded, or until the drain stall given at
     * construction passes without one being uploaded; logs progress. Blocks held back until the
     * metadata says whether they were committed ({@link #recover}) are waited for until it was
     * asked, then only those it knows: the others stay for the next start. Then asks about the
     * last uploads whether another mount freed their slices meanwhile ({@link UploadRecheck}).
     * Returns the blocks still staged.
     */
    public int drain() throws InterruptedException {
        long stallMs = drainStallMs;
        if (uploadDelayMs > 0) {
            for (String key : pending.keySet()) {
                schedule(key, 0, 0); // do not wait out the upload delay
            }
        }
        int last = toUpload();
        long stalledSince = System.nanoTime();
        long nextLog = System.nanoTime();
        while (toUpload() > 0) {
            int now = toUpload();
            if (now < last) {
                last = now;
                stalledSince = System.nanoTime();
            } else if (System.nanoTime() - stalledSince > TimeUnit.MILLISECONDS.toNanos(stallMs)) {
                break;
            }
            if (System.nanoTime() >= nextLog) {
                log.info("write-back: {} staged block(s), {} MiB, left to upload", now, pendingBytes() >> 20);
                nextLog = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            }
            synchronized (drained) {
                if (toUpload() > 0) {
                    drained.wait(200);
                }
            }
        }
        // an upload leaves the pending blocks before it is done: the last ones are asked about once done
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(stallMs);
        while (!uploading.isEmpty() && System.nanoTime() < until) {
            synchronized (drained) {
                drained.wait(10);
            }
        }
        askAboutUploads(); // before the metadata engine closes
        return pending.size();
    }

    /** Asks now about the blocks uploaded and not asked about yet ({@link UploadRecheck}). */
    private void askAboutUploads() {
        try {
            recheck.askNow();
        } catch (IOException | RuntimeException e) {
            log.warn("cannot ask the metadata whether slices uploaded from write-back staging were freed meanwhile: {}",
                    e.toString());
        }
    }

    /**
     * The metadata confirmed the commit of {@code slices} to file {@code ino}, written in blocks
     * of {@code blockSize} of {@code volume}: a block of theirs uploaded from here is asked about
     * after its upload ({@link UploadRecheck}), or now when it was uploaded already.
     */
    public void committed(String volume, int blockSize, long ino, List<io.partfs.engine.meta.MetaEngine.ChunkSlice> slices) {
        for (io.partfs.engine.meta.MetaEngine.ChunkSlice cs : slices) {
            io.partfs.engine.meta.Slice s = cs.slice();
            recheck.committed(new io.partfs.engine.meta.MetaEngine.CommittedSlice(s.id(), s.size(), ino, cs.index()),
                    ChunkStore.blockKeys(volume, blockSize, s.id(), s.size()));
        }
    }

    /** Objects deleted again as uploaded after another mount had freed their slice ({@link UploadRecheck}). */
    public long uploadsOfFreedSlices() {
        return recheck.deleted();
    }

    /**
     * Staged blocks that are to be uploaded: not held back until their commit shows ({@link #held}
     * is a part of {@link #pending}), once the metadata was asked.
     */
    private int toUpload() {
        return unasked ? pending.size() : pending.size() - held.size();
    }

    /** Stops uploading; what is still staged stays on disk for the next start, unused spares do not. */
    @Override
    public void close() {
        spaceWatch.shutdownNow();
        uploaders.shutdownNow();
        try {
            uploaders.awaitTermination(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        askAboutUploads(); // an upload that ended after the drain: its question was scheduled on the uploaders
        journal.close(); // what was not asked about stays written down for the next start
        // every spare this process made and did not use (also of a batch cut short by the shutdown)
        spares.clear();
        try (Stream<Path> s = Files.list(dir)) {
            java.util.Set<Path> kept = new java.util.HashSet<>();
            for (Backing b : backings) {
                synchronized (b) {
                    if (!b.commits.isEmpty()) {
                        kept.add(b.file); // blocks of it are staged: uploaded at the next start
                    }
                }
            }
            for (Path p : s.filter(p -> p.getFileName().toString().startsWith(sparePrefix()) && !kept.contains(p)).toList()) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            log.debug("cannot delete spare staging files in {}: {}", dir, e.toString());
        }
        if (!pending.isEmpty()) {
            log.warn("{} block(s), {} MiB, written in write-back mode are not uploaded yet: they stay in {} and are "
                    + "uploaded when the volume is next mounted with this cache directory", pending.size(), pendingBytes() >> 20, dir);
        }
        try {
            lock.channel().close(); // and with it the lock
        } catch (IOException e) {
            log.debug("cannot close the lock of {}: {}", dir, e.toString());
        }
    }

    /** Spare files ready to take a block, for tests. */
    int sparesReady() {
        return spares.size();
    }

    /** Paths of the staged files, for tests. */
    List<String> stagedKeys() {
        return new ArrayList<>(pending.keySet());
    }
}
