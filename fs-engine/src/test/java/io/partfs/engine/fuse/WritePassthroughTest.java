package io.partfs.engine.fuse;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.partfs.engine.PartFs;
import io.partfs.engine.PartFsConfig;
import io.partfs.engine.testing.LiveTree;
import io.partfs.engine.testing.Poll;
import io.partfs.engine.testing.TempDirs;
import io.partfs.engine.testing.TestVolume;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * New files on a write-back mount, written by the kernel itself into local staging files (FUSE
 * passthrough; see {@link io.partfs.engine.data.BackedFile}), through a real mount of an
 * embedded volume: what is read back, what stat says while the file is written, and what the
 * volume holds once it is opened again without the mount's local disk. Skipped where the kernel
 * has no FUSE passthrough or the temp directory's filesystem no fine-grained times.
 */
class WritePassthroughTest {
    private static final int MIB = 1 << 20;
    private Path dir;
    private Path mnt;
    private TestVolume volume;
    private PartFs fs;
    private io.partfs.engine.testing.CountingKvStore kv;
    private KernelFuse fuse;

    @BeforeEach
    void mount() throws Exception {
        dir = Files.createTempDirectory("partfs-wpt-");
        mnt = Files.createDirectory(dir.resolve("mnt"));
        // uploads at once; no metadata cache, so that a stat's read of the metadata can be held (below)
        mountWith(TestVolume.defaultConfig(dir).toBuilder().writeBack(true).metaCacheTtl(Duration.ZERO).build());
    }

    /** Mounts a new volume in {@link #dir} on {@link #mnt} with {@code config}. */
    private void mountWith(PartFsConfig config) throws Exception {
        volume = new TestVolume(TestVolume.Meta.ROCKSDB, TestVolume.Store.LOCAL, dir, null, null, config);
        fs = volume.open(o -> o, k -> kv = new io.partfs.engine.testing.CountingKvStore(k));
        FuseOptions options = FuseOptions.builder().driver(FuseOptions.Driver.KERNEL).build();
        fuse = (KernelFuse) FuseMount.create(fs, null, options);
        fuse.mountAndWait(mnt, options);
        assumeTrue(fuse.passthroughAvailable(), "the kernel has no FUSE passthrough (Linux 6.9+)");
        assumeTrue(fs.chunks().staging().fineTimestamps(), "the temp directory's filesystem has no fine-grained mtimes");
    }

    @AfterEach
    void unmount() throws Exception {
        try {
            unmountOnly();
        } finally {
            TempDirs.deleteRecursively(dir);
        }
    }

    private void unmountOnly() throws IOException {
        try {
            if (fuse != null) {
                fuse.unmount();
                fuse = null;
            }
        } finally {
            if (fs != null) {
                fs.close();
                fs = null;
            }
        }
    }

    /** The volume's content of {@code name}, read by a new client with no local disk of this mount's (objects only). */
    private byte[] readFromObjects(String name) throws IOException {
        return readFromObjects(java.util.List.of(name)).get(name);
    }

    /** {@link #readFromObjects(String)} of several files, by name; unmounts first. */
    private java.util.Map<String, byte[]> readFromObjects(java.util.Collection<String> names) throws IOException {
        unmountOnly();
        PartFsConfig fresh = PartFsConfig.builder().blockCache(dir.resolve("other-cache"), 64L << 20).ioThreads(4).build();
        java.util.Map<String, byte[]> out = new java.util.HashMap<>();
        try (PartFs other = volume.openAs(fresh)) {
            for (String name : names) {
                var a = other.resolve("/" + name);
                long fh = other.open(a.ino(), PartFs.O_RDONLY);
                try {
                    byte[] got = new byte[(int) a.size()];
                    int done = 0;
                    while (done < got.length) {
                        int n = other.read(fh, done, got, done, got.length - done);
                        assertTrue(n > 0, "read " + done + " of " + got.length + " bytes of " + name);
                        done += n;
                    }
                    out.put(name, got);
                } finally {
                    other.release(fh);
                }
            }
        }
        return out;
    }

    /** Blocks in the volume's object store. */
    private long objects() {
        return LiveTree.files(dir.resolve("objects"), null).keySet().stream().filter(p -> p.toString().contains("/chunks/")).count();
    }

    /** Runs {@code r} and checks that the kernel wrote {@code files} new files itself meanwhile. */
    private void passedThrough(int files, IoRunnable r) throws IOException {
        long before = fuse.writePassthroughFiles();
        r.run();
        assertEquals(before + files, fuse.writePassthroughFiles(), "files the kernel wrote into backing files itself");
    }

    private interface IoRunnable {
        void run() throws IOException;
    }

    private static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    @Test
    void aNewFileIsWrittenByTheKernelAndCommittedByItsClose() throws Exception {
        byte[] data = random(10 * MIB + 123, 1);
        Path f = mnt.resolve("big.bin");
        passedThrough(1, () -> {
            try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                for (int off = 0; off < data.length; off += MIB) {
                    ch.write(ByteBuffer.wrap(data, off, Math.min(MIB, data.length - off)));
                    assertEquals(Math.min(off + MIB, data.length), Files.size(f), "stat while the kernel writes it");
                }
            }
        });
        assertEquals(data.length, fs.resolve("/big.bin").size());
        assertArrayEquals(data, Files.readAllBytes(f));
        Poll.until(() -> fs.chunks().staging().pendingBlocks() == 0, Duration.ofSeconds(30), "uploads");
        int blockSize = fs.format().blockSize();
        assertEquals((data.length + blockSize - 1) / blockSize, objects(), "committed once, by its close: one object a block");
        assertArrayEquals(data, readFromObjects("big.bin"), "uploaded, and committed with its whole length");
    }

    @Test
    void aWriteAfterAnFsyncIsCommittedByTheClose() throws Exception {
        byte[] first = random(MIB, 2);
        byte[] second = first.clone();
        System.arraycopy(random(4096, 3), 0, second, 0, 4096); // same size: only its mtime tells the file changed
        Path f = mnt.resolve("twice.bin");
        passedThrough(1, () -> {
            try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                ch.write(ByteBuffer.wrap(first));
                ch.force(true); // commits the first version; its blocks upload at once
                Poll.until(() -> fs.chunks().staging().pendingBlocks() == 0, Duration.ofSeconds(30), "the first version uploaded");
                ch.write(ByteBuffer.wrap(second, 0, 4096), 0);
            }
        });
        assertArrayEquals(second, readFromObjects("twice.bin"));
    }

    @Test
    void truncationsWhileTheKernelWritesCutItsFile() throws Exception {
        byte[] data = random(MIB, 4);
        Path f = mnt.resolve("cut.bin");
        passedThrough(1, () -> {
            try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                ch.write(ByteBuffer.wrap(data));
                ch.force(true);
                ch.truncate(1000);
                assertEquals(1000, Files.size(f));
                ch.write(ByteBuffer.wrap(data, 0, 10), 5000);
                assertEquals(5010, Files.size(f));
            }
        });
        byte[] expected = new byte[5010];
        System.arraycopy(data, 0, expected, 0, 1000);
        System.arraycopy(data, 0, expected, 5000, 10);
        assertArrayEquals(expected, Files.readAllBytes(f));
        assertArrayEquals(expected, readFromObjects("cut.bin"));
    }

    @Test
    void otherOpensOfTheFileShareWhatTheKernelWrites() throws Exception {
        Path f = mnt.resolve("shared.txt");
        passedThrough(1, () -> {
            try (FileChannel w1 = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                w1.write(ByteBuffer.wrap("hello".getBytes()));
                try (FileChannel w2 = FileChannel.open(f, StandardOpenOption.WRITE);
                     FileChannel r = FileChannel.open(f, StandardOpenOption.READ)) {
                    w2.write(ByteBuffer.wrap(" world".getBytes()), 5);
                    ByteBuffer got = ByteBuffer.allocate(64);
                    r.read(got, 0);
                    assertEquals("hello world", new String(got.array(), 0, got.position()));
                }
                w1.write(ByteBuffer.wrap("!".getBytes()), 11);
            }
        });
        assertEquals("hello world!", Files.readString(f));
        assertEquals("hello world!", new String(readFromObjects("shared.txt")));
    }

    @Test
    void aFileInATemporaryPartIsCommittedByThePartsRename() throws Exception {
        byte[] data = random(3 * MIB + 5, 5);
        Path part = writePart("tmp_insert_", "202001_1_1_0", "v.bin", data);
        assertArrayEquals(data, Files.readAllBytes(part));
        assertArrayEquals(data, readFromObjects("data/db/t/202001_1_1_0/v.bin"));
    }

    /**
     * A part's file of several blocks, written by the kernel itself: once the part is renamed
     * (its commit) and the blocks uploaded, the block cache holds them as links to that one
     * file, and a read-only open hands the kernel that file, so it reads the part back itself too.
     */
    @Test
    void aPartFileOfSeveralBlocksIsReadBackThroughTheFileTheKernelWrote() throws Exception {
        byte[] data = random(10 * MIB + 4321, 9);
        Path f = writePart("tmp_merge_", "202001_1_2_1", "c.bin", data);
        int blockSize = fs.chunks().blockSize();
        long blocks = (data.length + blockSize - 1) / blockSize;
        Poll.until(() -> linkedBlocks() == blocks, "the part file's " + blocks + " blocks uploaded and linked into the block cache");
        long before = fuse.passthroughOpens();
        assertArrayEquals(data, Files.readAllBytes(f));
        assertEquals(before + 1, fuse.passthroughOpens(), "read by the kernel from the file it wrote");
        assertArrayEquals(data, readFromObjects("data/db/t/202001_1_2_1/c.bin"));
    }

    /**
     * A file created with O_APPEND is written through this process, not by the kernel: each fsync
     * of a log that appends a record and fsyncs commits only the record. Passed through, every
     * fsync committed the whole file again (100 appends of 256 KiB: 1,263 MiB uploaded for 25 MiB).
     */
    @Test
    void aFileCreatedForAppendingCommitsOnlyWhatEachFsyncAppends() throws Exception {
        byte[] record = random(256 * 1024, 31);
        Path log = Files.createDirectories(mnt.resolve("data/db/t")).resolve("wal.bin");
        long before = objectBytes();
        passedThrough(0, () -> {
            try (FileChannel ch = FileChannel.open(log, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE, StandardOpenOption.APPEND)) {
                for (int i = 0; i < 20; i++) {
                    io.partfs.engine.testing.SmallDisk.writeFully(ch, record);
                    ch.force(true);
                }
            }
        });
        long appended = 20L * record.length;
        Poll.until(() -> fs.chunks().staging().pendingBlocks() == 0, "every record uploaded");
        long uploaded = objectBytes() - before;
        assertTrue(uploaded >= appended && uploaded <= 2 * appended,
                uploaded + " bytes uploaded for " + appended + " appended: each fsync commits what it appended");
        byte[] all = Files.readAllBytes(log);
        assertEquals(appended, all.length);
        for (int i = 0; i < 20; i++) {
            assertArrayEquals(record, java.util.Arrays.copyOfRange(all, i * record.length, (i + 1) * record.length), "record " + i);
        }
    }

    /**
     * A file the kernel writes itself, fsynced every 1.5 MiB (blocks are 1 MiB) as it grows to 48
     * MiB, with one overwrite of its start on the way: each commit takes what changed since the
     * last, from inside a block that only grew, so what is uploaded is the file and the block
     * overwritten, within 10% (it was the whole file at each fsync, 16.5 times it here; from the
     * start of each grown block, 1.33 times), and the volume holds the file as written.
     */
    @Test
    void aFileFsyncedAsItGrowsCommitsWhatChangedSinceTheLastFsync() throws Exception {
        int step = 3 * MIB / 2;
        int steps = 32;
        byte[] want = random(steps * step, 41);
        byte[] patch = random(1000, 42);
        Path f = mnt.resolve("grown.bin");
        long before = objectBytes();
        passedThrough(1, () -> {
            try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                for (int i = 0; i < steps; i++) {
                    ch.write(ByteBuffer.wrap(want, i * step, step), (long) i * step);
                    if (i == steps / 2) {
                        ch.write(ByteBuffer.wrap(patch), 12345);
                    }
                    ch.force(true);
                }
            }
        });
        System.arraycopy(patch, 0, want, 12345, patch.length);
        Poll.until(() -> fs.chunks().staging().pendingBlocks() == 0, "every commit uploaded");
        long uploaded = objectBytes() - before;
        assertTrue(uploaded >= want.length && uploaded <= want.length * 11L / 10,
                uploaded + " bytes uploaded for a file of " + want.length + ": each fsync commits what changed");
        assertArrayEquals(want, readFromObjects("grown.bin"));
    }

    /**
     * Commits waiting for their uploads (held back an hour here) are each named in the staging
     * file's attribute, a line per run. 50 fsyncs of a file changed in three places apart each
     * time would name 150 runs, past the ~4 KiB of attributes ext4 keeps a file (a write past it
     * fails, and the fsync with it): runs are merged, then the whole file committed again, so
     * every fsync succeeds, the attribute stays small, and the volume holds the file as written.
     */
    @Test
    void commitsWaitingForTheirUploadsKeepTheStagingAttributeWithinItsRoom() throws Exception {
        unmountOnly();
        mountWith(TestVolume.defaultConfig(dir).toBuilder().writeBack(true).metaCacheTtl(Duration.ZERO)
                .uploadDelay(Duration.ofHours(1)).build());
        byte[] want = random(8 * MIB, 51);
        Path f = mnt.resolve("spread.bin");
        Random rnd = new Random(52);
        int[] longest = {0};
        passedThrough(1, () -> {
            try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                io.partfs.engine.testing.SmallDisk.writeFully(ch, want);
                ch.force(true);
                for (int i = 0; i < 50; i++) {
                    for (int j = 0; j < 3; j++) { // in blocks 0, 3 and 6 (1 MiB blocks): three runs apart
                        int at = j * 3 * MIB + rnd.nextInt(MIB - 100);
                        byte[] b = random(100, 100 + 3 * i + j);
                        System.arraycopy(b, 0, want, at, b.length);
                        ch.write(ByteBuffer.wrap(b), at);
                    }
                    ch.force(true);
                    longest[0] = Math.max(longest[0], slicesAttributeLength());
                }
            }
        });
        assertTrue(longest[0] > 0 && longest[0] < 3000, "the staging attribute grew to " + longest[0] + " bytes");
        assertArrayEquals(want, readFromObjects("spread.bin"));
    }

    /** The longest {@code partfs.slices} attribute among the staging files under {@link #dir}. */
    private int slicesAttributeLength() throws IOException {
        int longest = 0;
        for (Path f : LiveTree.files(dir, mnt).keySet()) {
            if (f.getFileName().toString().startsWith(".spare-")) {
                var view = Files.getFileAttributeView(f, java.nio.file.attribute.UserDefinedFileAttributeView.class);
                if (view != null && view.list().contains("partfs.slices")) {
                    longest = Math.max(longest, view.size("partfs.slices"));
                }
            }
        }
        return longest;
    }

    /** Bytes of the blocks in the volume's object store. */
    private long objectBytes() {
        return LiveTree.files(dir.resolve("objects"), null).entrySet().stream().filter(e -> e.getKey().toString().contains("/chunks/"))
                .mapToLong(Map.Entry::getValue).sum();
    }

    /**
     * A merge's output, written by the kernel itself, on a disk that the block cache fills:
     * while the file grows the cache gives back room (Staging's space watch), so the file fits
     * where, with the cache left as it was, the writer would have got ENOSPC. A 1 GiB tmpfs holds
     * the cache and staging (floor: 10%); five 100 MiB part files are cached on it, then a
     * 600 MiB file is written while 524 MiB are free.
     */
    @Test
    void aFileTheKernelWritesIsGivenRoomByTheBlockCache() throws Exception {
        unmountOnly();
        try (io.partfs.engine.testing.SmallDisk disk = new io.partfs.engine.testing.SmallDisk(1024)) {
            try {
                mountWith(TestVolume.defaultConfig(dir).toBuilder().blockCache(disk.dir().resolve("cache"), 1L << 30)
                        .freeSpaceRatio(0.1).writeBack(true).build());
                var cache = fs.chunks().cache();
                var staging = fs.chunks().staging();
                byte[] part = random(100 * MIB, 21);
                for (int i = 0; i < 5; i++) {
                    writePart("tmp_insert_", "20200" + (i + 1) + "_1_1_0", "c.bin", part);
                }
                Poll.until(() -> staging.pendingBlocks() == 0 && cache.stats().bytes() == 500L * MIB,
                        "the five part files uploaded and linked into the block cache");
                long floor = disk.total() / 10;
                assertTrue(disk.free() < 600L * MIB, disk.free() + " bytes free: the file would not fit as things are");

                byte[] half = random(300 * MIB, 22);
                Path merged = Files.createDirectories(mnt.resolve("data/db/t/tmp_merge_202001_1_5_1")).resolve("c.bin");
                passedThrough(1, () -> {
                    try (FileChannel ch = FileChannel.open(merged, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                        io.partfs.engine.testing.SmallDisk.writeFully(ch, half);
                        Poll.until(() -> disk.free() >= floor + io.partfs.engine.data.Staging.BACKING_ROOM,
                                "room given back above the floor while the kernel writes the file");
                        io.partfs.engine.testing.SmallDisk.writeFully(ch, half);
                        ch.force(true);
                    }
                });
                assertTrue(staging.evictedForBackings() > 0);
                assertTrue(cache.stats().bytes() < 500L * MIB, "cached part files evicted: " + cache.stats());
                try (FileChannel ch = FileChannel.open(merged, StandardOpenOption.READ)) {
                    assertEquals(600L * MIB, ch.size());
                    ByteBuffer got = ByteBuffer.allocate(half.length);
                    for (long at = 0; at < ch.size(); at += half.length) {
                        got.clear();
                        while (got.hasRemaining() && ch.read(got, at + got.position()) > 0) {
                            // reads the rest
                        }
                        assertArrayEquals(half, got.array(), "bytes " + at + " on");
                    }
                }
            } finally {
                unmountOnly();
            }
        }
    }

    /**
     * Writes {@code data} as file {@code name} of part {@code part} of table data/db/t the way
     * ClickHouse does, into a temporary part (the kernel writing it itself) renamed after; returns the file.
     */
    private Path writePart(String tmpPrefix, String part, String name, byte[] data) throws IOException {
        Path tmp = Files.createDirectories(mnt.resolve("data/db/t/" + tmpPrefix + part));
        passedThrough(1, () -> Files.write(tmp.resolve(name), data));
        Files.move(tmp, tmp.resolveSibling(part));
        return mnt.resolve("data/db/t/" + part + "/" + name);
    }

    /** Blocks the block cache holds as links into a larger file (BlockCache.link); staging is not walked. */
    private long linkedBlocks() {
        Path cache = dir.resolve("cache");
        return LiveTree.files(cache, cache.resolve("staging")).keySet().stream()
                .filter(p -> p.getFileName().toString().contains("@")).count();
    }

    @Test
    void aCommitTheMetadataEngineFailedIsMadeByTheRetrierOnceItAnswers() throws Exception {
        byte[] data = random(2 * MIB + 1, 7);
        Path f = mnt.resolve("retried.bin");
        passedThrough(1, () -> {
            FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
            ch.write(ByteBuffer.wrap(data));
            kv.failUpdates(true);
            IOException closing = org.junit.jupiter.api.Assertions.assertThrows(IOException.class, ch::close);
            assertTrue(String.valueOf(closing.getMessage()).contains("Input/output error"), closing.getMessage());
        });
        assertEquals(data.length, fs.resolve("/retried.bin").size(), "not committed, and a stat shows what the kernel wrote");
        kv.failUpdates(false);
        // a round of the retrier (every 15 s in the background), once the kernel's RELEASE after the close arrived
        java.util.concurrent.atomic.AtomicInteger committed = new java.util.concurrent.atomic.AtomicInteger();
        Poll.until(() -> committed.addAndGet(fs.chunks().retryFailed()) > 0, Duration.ofSeconds(30), "the retrier's commit");
        assertEquals(1, committed.get());
        assertArrayEquals(data, readFromObjects("retried.bin"));
    }

    @Test
    void aStatThatReadTheMetadataBeforeTheRenamesCommitReadsItAgain() throws Exception {
        Path tmp = Files.createDirectories(mnt.resolve("data/db/t/tmp_insert_202001_1_1_0"));
        byte[] data = random(100, 6);
        passedThrough(1, () -> Files.write(tmp.resolve("c.mrk"), data)); // closed: its commit waits for the rename
        long ino = fs.resolve("/data/db/t/tmp_insert_202001_1_1_0/c.mrk").ino();
        // a stat on another thread reads the file's metadata (empty: nothing committed yet) and is held there
        java.util.concurrent.CountDownLatch read = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
        Thread[] statter = new Thread[1];
        kv.afterRead(() -> {
            if (Thread.currentThread() == statter[0]) {
                read.countDown();
                try {
                    go.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        });
        long[] size = {-1};
        statter[0] = new Thread(() -> {
            try {
                size[0] = fs.getattr(ino).size();
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
        statter[0].start();
        assertTrue(read.await(30, java.util.concurrent.TimeUnit.SECONDS));
        kv.afterRead(() -> { });
        Files.move(tmp, tmp.resolveSibling("202001_1_1_0")); // commits the file, and forgets its backing file
        go.countDown();
        statter[0].join();
        assertEquals(data.length, size[0], "the stat's metadata predated the commit: it must read it again");
    }

    /**
     * Random creates, writes, truncates, fsyncs, closes, reopens, renames and unlinks of a few
     * files, mirrored on a local directory: every read through the mount, and every file as a new
     * client reads it from the object store at the end, must match.
     */
    @Test
    void randomWritesMatchALocalDirectory() throws Exception {
        long seed = Long.getLong("partfs.seed", System.nanoTime());
        Random rnd = new Random(seed);
        Path local = Files.createDirectory(dir.resolve("local"));
        java.util.Map<String, FileChannel[]> open = new java.util.TreeMap<>(); // name -> {mount, local}
        java.util.List<String> names = new java.util.ArrayList<>();
        long before = fuse.writePassthroughFiles();
        int creates = 0;
        try {
            for (int op = 0; op < 1500; op++) {
                String what = "op " + op + " (seed " + seed + ")";
                int kind = rnd.nextInt(100);
                if (kind < 8 || names.isEmpty()) {
                    String name = "f" + op;
                    open.put(name, new FileChannel[] {
                            FileChannel.open(mnt.resolve(name), StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE),
                            FileChannel.open(local.resolve(name), StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE)});
                    names.add(name);
                    creates++;
                    continue;
                }
                String name = names.get(rnd.nextInt(names.size()));
                FileChannel[] ch = open.get(name);
                if (ch == null) { // closed: reopen it for writing, or read it whole
                    if (rnd.nextBoolean()) {
                        open.put(name, new FileChannel[] {
                                FileChannel.open(mnt.resolve(name), StandardOpenOption.READ, StandardOpenOption.WRITE),
                                FileChannel.open(local.resolve(name), StandardOpenOption.READ, StandardOpenOption.WRITE)});
                    } else {
                        assertArrayEquals(Files.readAllBytes(local.resolve(name)), Files.readAllBytes(mnt.resolve(name)), what);
                    }
                    continue;
                }
                if (kind < 55) {
                    byte[] b = new byte[1 + rnd.nextInt(256 << 10)];
                    rnd.nextBytes(b);
                    long at = rnd.nextInt(3 * MIB);
                    ch[0].write(ByteBuffer.wrap(b), at);
                    ch[1].write(ByteBuffer.wrap(b), at);
                } else if (kind < 62) {
                    long to = rnd.nextInt(3 * MIB);
                    ch[0].truncate(to);
                    ch[1].truncate(to);
                } else if (kind < 70) {
                    ch[0].force(true);
                } else if (kind < 82) {
                    assertEquals(ch[1].size(), ch[0].size(), what + ": size of " + name);
                    assertEquals(Files.size(local.resolve(name)), Files.size(mnt.resolve(name)), what + ": stat of " + name);
                    int len = rnd.nextInt(512 << 10);
                    long at = ch[1].size() == 0 ? 0 : rnd.nextLong(ch[1].size());
                    ByteBuffer want = ByteBuffer.allocate(len);
                    ByteBuffer got = ByteBuffer.allocate(len);
                    ch[1].read(want, at);
                    ch[0].read(got, at);
                    assertArrayEquals(want.array(), got.array(), what + ": read of " + name + " at " + at);
                } else if (kind < 95) {
                    open.remove(name);
                    ch[0].close();
                    ch[1].close();
                } else if (kind < 98) {
                    String to = name + "r";
                    Files.move(mnt.resolve(name), mnt.resolve(to));
                    Files.move(local.resolve(name), local.resolve(to));
                    names.set(names.indexOf(name), to);
                    open.put(to, open.remove(name));
                } else {
                    Files.delete(mnt.resolve(name));
                    Files.delete(local.resolve(name));
                    names.remove(name);
                    open.remove(name);
                    ch[0].close();
                    ch[1].close();
                }
            }
        } finally {
            for (FileChannel[] ch : open.values()) {
                ch[0].close();
                ch[1].close();
            }
        }
        assertEquals(before + creates, fuse.writePassthroughFiles(), "every new file was written by the kernel itself");
        for (String name : names) {
            assertArrayEquals(Files.readAllBytes(local.resolve(name)), Files.readAllBytes(mnt.resolve(name)), name + " (seed " + seed + ")");
        }
        java.util.Map<String, byte[]> stored = readFromObjects(names);
        for (String name : names) {
            assertArrayEquals(Files.readAllBytes(local.resolve(name)), stored.get(name), name + " from the object store (seed " + seed + ")");
        }
    }
}
