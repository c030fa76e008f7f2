package io.partfs.engine.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.PartFs;
import io.partfs.engine.PartFsConfig;
import io.partfs.engine.VolumeFormat;
import io.partfs.engine.data.VolumeCheck;
import io.partfs.engine.meta.KvStore;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.RedisKvStore;
import io.partfs.engine.meta.RocksKvStore;
import io.partfs.engine.object.LocalObjectStore;
import io.partfs.engine.object.ObjectStore;
import io.partfs.engine.object.S3ObjectStore;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One volume for a test on a chosen metadata engine and object store, which can be opened,
 * closed and opened again. The servers are the caller's: it starts and stops them.
 */
public final class TestVolume {
    /** Which metadata engine. */
    public enum Meta { ROCKSDB, REDIS }

    /** Which object store. */
    public enum Store { LOCAL, S3 }

    private static final AtomicInteger SEQ = new AtomicInteger();

    private final Meta meta;
    private final Store store;
    private final Path dir;
    private final RedisServer redis;
    private final S3Server s3;
    private final int db;
    private final String bucket;
    private final PartFsConfig config;

    public TestVolume(Meta meta, Store store, Path dir, RedisServer redis, S3Server s3, PartFsConfig config) {
        this.meta = meta;
        this.store = store;
        this.dir = dir;
        this.redis = redis;
        this.s3 = s3;
        int n = SEQ.incrementAndGet();
        this.db = n % 1000;
        this.bucket = "vol-" + n;
        this.config = config;
    }

    public static PartFsConfig defaultConfig(Path dir) {
        return PartFsConfig.builder().blockCache(dir.resolve("cache"), 64L << 20).ioThreads(8).build();
    }

    @Override
    public String toString() {
        return meta + "+" + store;
    }

    /** The Redis database number of a Redis volume. */
    public int db() {
        return db;
    }

    /** The bucket of an S3 volume. */
    public String bucket() {
        return bucket;
    }

    /** Where the metadata is, for a client in another process: a Redis URL, or a RocksDB directory. */
    public String metaLocation() {
        return meta == Meta.REDIS ? redisUrl() : rocksDir().toString();
    }

    private String redisUrl() {
        return redis.url(db);
    }

    private Path rocksDir() {
        return dir.resolve("meta");
    }

    /** The directory of a local object store, for a client in another process. */
    public Path objectsDir() {
        return dir.resolve("objects");
    }

    public KvStore newKvStore() throws IOException {
        return meta == Meta.ROCKSDB ? new RocksKvStore(rocksDir()) : new RedisKvStore(redisUrl());
    }

    public ObjectStore newObjectStore() throws IOException {
        if (store == Store.LOCAL) {
            return new LocalObjectStore(objectsDir());
        }
        S3ObjectStore s = new S3ObjectStore(s3.config(bucket).build());
        s.ensureBucket();
        return s;
    }

    /** Opens the volume, formatting it on first use. */
    public PartFs open() throws IOException {
        return open(o -> o);
    }

    /** Opens the volume as another client would, with its own configuration. */
    public PartFs openAs(PartFsConfig other) throws IOException {
        return openAs(other, o -> o);
    }

    public PartFs openAs(PartFsConfig other, java.util.function.UnaryOperator<ObjectStore> wrap) throws IOException {
        return openAs(other, wrap, kv -> kv);
    }

    /** Opens the volume as another client would, with its stores wrapped (to count requests, or to act between them). */
    public PartFs openAs(PartFsConfig other, java.util.function.UnaryOperator<ObjectStore> wrap,
                         java.util.function.UnaryOperator<KvStore> wrapKv) throws IOException {
        MetaEngine engine = new MetaEngine(wrapKv.apply(newKvStore()));
        ObjectStore objects = wrap.apply(newObjectStore());
        engine.load();
        return PartFs.open(engine, objects, other);
    }

    /** Opens the volume with its object store wrapped (to count or fail requests). */
    public PartFs open(java.util.function.UnaryOperator<ObjectStore> wrap) throws IOException {
        return open(wrap, kv -> kv);
    }

    /** Opens the volume with its object store and its metadata store wrapped (to count requests). */
    public PartFs open(java.util.function.UnaryOperator<ObjectStore> wrap, java.util.function.UnaryOperator<KvStore> wrapKv)
            throws IOException {
        return open(config, wrap, wrapKv);
    }

    /** Opens the volume, formatting it on first use, with another configuration and its object store wrapped. */
    public PartFs open(PartFsConfig with, java.util.function.UnaryOperator<ObjectStore> wrap) throws IOException {
        return open(with, wrap, kv -> kv);
    }

    /** Opens the volume, formatting it on first use, with another configuration and its stores wrapped. */
    public PartFs open(PartFsConfig with, java.util.function.UnaryOperator<ObjectStore> wrap,
                       java.util.function.UnaryOperator<KvStore> wrapKv) throws IOException {
        MetaEngine engine = new MetaEngine(wrapKv.apply(newKvStore()));
        ObjectStore objects = wrap.apply(newObjectStore());
        engine.format(VolumeFormat.create("testvol", 1 << 20, objects.describe()), 0, 0);
        return PartFs.open(engine, objects, with);
    }

    /**
     * fsck of the volume {@code fs} has open: every block a file names is in the store, every
     * entry names an inode, link counts and symlink targets are right, and every object in the
     * store is a file's, in the trash or awaiting deletion (none leaked); then the usage counters
     * ({@link #assertUsageCounted}). {@code where} ends each failure's message (a seed to
     * reproduce it).
     */
    public static void assertConsistent(TestVolume volume, PartFs fs, String where) throws IOException {
        assertConsistent(volume, fs, where, true);
    }

    /**
     * As {@link #assertConsistent(TestVolume, PartFs, String)}; with {@code failOnLeaks} false,
     * leaked objects do not fail it. Returns what the check found.
     */
    public static VolumeCheck.Report assertConsistent(TestVolume volume, PartFs fs, String where, boolean failOnLeaks)
            throws IOException {
        // a deletion the check races can make blocks look missing: fsck reads every chunk, then
        // every object, and the file's objects can go in between (partfs fsck reads again what
        // looks broken; this check wants none of it)
        awaitDeletions(fs.meta(), where);
        VolumeCheck.Report r;
        try (ObjectStore store = volume.newObjectStore()) {
            r = new VolumeCheck(fs.meta(), store, (phase, n) -> { }).run(new VolumeCheck.Options(true, false, 0));
        }
        String found = " (fsck: " + r.files + " files, " + r.blocks + " blocks, " + r.objects + " objects, "
                + r.pendingObjects + " awaiting deletion, " + r.trashObjects + " in the trash, " + r.pendingFiles
                + " files awaiting deletion)" + where;
        assertEquals(0, r.missingBlocks, "blocks missing, of files " + r.brokenFiles + found);
        assertEquals(List.of(), r.danglingEntries, "entries without an inode" + found);
        assertEquals(Set.of(), r.linkMismatches, "wrong link counts" + found);
        assertEquals(Set.of(), r.symlinksWithoutTarget, "symlinks without a target" + found);
        if (failOnLeaks) {
            assertEquals(0, r.leaked, "objects leaked, " + r.leakedBytes + " bytes, " + r.leakedKeys + found);
        }
        assertUsageCounted(fs, where);
        return r;
    }

    /** Waits until the deletions of unlinked files a mount left have been finished. */
    private static void awaitDeletions(MetaEngine meta, String where) {
        Poll.until(() -> {
            try {
                return meta.pendingDeletions().files() == 0;
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }, "unlinked files deleted" + where);
    }

    /**
     * The volume's usage counters (statfs: ClickHouse asks it for free space before each merge)
     * equal what the tree holds: its inodes, and each file's size rounded up to 4 KiB. Waits
     * first for the deletions of unlinked files to finish, which count until then.
     */
    public static void assertUsageCounted(PartFs fs, String where) throws IOException {
        MetaEngine meta = fs.meta();
        awaitDeletions(meta, where);
        java.util.Map<Long, Long> inodes = new java.util.HashMap<>(); // inode: bytes it counts
        java.util.ArrayDeque<Long> dirs = new java.util.ArrayDeque<>(List.of(MetaEngine.ROOT));
        inodes.put(MetaEngine.ROOT, 0L);
        while (!dirs.isEmpty()) {
            for (io.partfs.engine.DirEntry e : meta.readdir(dirs.pop())) {
                io.partfs.engine.Attr a = meta.getattrFromStore(e.ino());
                boolean first = inodes.put(e.ino(), a.type() == io.partfs.engine.FileType.FILE ? (a.size() + 4095) & ~4095L : 0L) == null;
                if (a.isDirectory()) {
                    assertTrue(first, "directory " + e.ino() + " (" + e.name() + ") reached twice: a cycle or a second name" + where);
                    dirs.push(e.ino());
                }
            }
        }
        long bytes = inodes.values().stream().mapToLong(Long::longValue).sum();
        // a value usage() keeps for a second is of after this process's last change: the same here
        assertEquals(new MetaEngine.Usage(bytes, inodes.size()), meta.usage(), "usage counters against the tree" + where);
    }
}
