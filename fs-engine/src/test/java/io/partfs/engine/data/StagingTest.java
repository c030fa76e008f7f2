package io.partfs.engine.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.object.LocalObjectStore;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.UserDefinedFileAttributeView;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Write-back staging on a real local filesystem: blocks go into spare files created ahead
 * (whose names are already durable) with their key in an extended attribute, and a restart
 * finds a block under either name.
 */
class StagingTest {
    @TempDir
    Path tmp;
    Path dir;
    LocalObjectStore objects;

    @BeforeEach
    void setUp() throws IOException {
        dir = tmp.resolve("staging");
        objects = new LocalObjectStore(tmp.resolve("objects"));
    }

    private Staging open(Duration uploadDelay) throws IOException {
        return new Staging(dir, objects, BlockCache.disabled(), 2, uploadDelay, Duration.ofSeconds(30));
    }

    private List<String> names() throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString())
                    .filter(n -> !n.equals(Staging.LOCK) && !n.equals(Staging.VOLUME) && !n.equals(UploadJournal.FILE)) // not blocks
                    .sorted().toList();
        }
    }

    private static void setKey(Path f, String key) throws IOException {
        Files.getFileAttributeView(f, UserDefinedFileAttributeView.class)
                .write(Staging.KEY_XATTR, ByteBuffer.wrap(key.getBytes(StandardCharsets.UTF_8)));
    }

    /** Polls until {@code key} is in the object store; fails after 30 s. */
    private byte[] awaitObject(String key, int size) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (true) {
            try {
                return objects.get(key, 0, size);
            } catch (io.partfs.engine.object.ObjectNotFoundException e) {
                assertTrue(System.nanoTime() < deadline, key + " not uploaded within 30 s");
                java.util.concurrent.locks.LockSupport.parkNanos(10_000_000);
            }
        }
    }

    private static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new java.util.Random(seed).nextBytes(b);
        return b;
    }

    /** Polls until the backing file {@code file} is deleted; fails after 30 s. */
    private static void awaitDeleted(Path file) {
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (Files.exists(file)) {
            assertTrue(System.nanoTime() < deadline, "the backing file is still there 30 s after its last upload");
            java.util.concurrent.locks.LockSupport.parkNanos(5_000_000);
        }
    }

    @Test
    void blocksGoIntoSparesCarryingTheirKeyAndUnusedSparesGoAtClose() throws Exception {
        byte[] data = "block".repeat(100).getBytes(StandardCharsets.UTF_8);
        try (Staging staging = open(Duration.ofHours(1))) {
            staging.stage("vol/chunks/0/0/7_0_" + data.length, new byte[data.length], null); // first block: no spare yet
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (staging.sparesReady() < Staging.SPARE_BATCH) {
                assertTrue(System.nanoTime() < deadline, "no spare batch ready within 30 s");
                java.util.concurrent.locks.LockSupport.parkNanos(5_000_000);
            }
            String key = "vol/chunks/0/0/8_0_" + data.length;
            staging.stage(key, data, null);
            Path staged = staging.pathIfStaged(key);
            assertArrayEquals(data, Files.readAllBytes(staged));
            UserDefinedFileAttributeView view = Files.getFileAttributeView(staged, UserDefinedFileAttributeView.class);
            assertTrue(view.list().contains(Staging.KEY_XATTR), "the block came from a spare, so it carries its key");
            assertEquals(Staging.SPARE_BATCH - 1, names().stream().filter(n -> n.startsWith(Staging.SPARE_PREFIX)).count());
            staging.syncDir();
        }
        assertEquals(List.of("vol%chunks%0%0%7_0_500", "vol%chunks%0%0%8_0_500"), names(),
                "staged blocks stay for the next start, spares do not");
    }

    @Test
    void aBackingFileLeftByAnEarlierProcessIsUploadedFromItsOffsetsAndThenDeleted() throws Exception {
        int blockSize = 1 << 20;
        byte[] data = random(5 * blockSize + 7, 9);
        Path file;
        try (Staging staging = open(Duration.ofHours(1))) {
            Staging.Backing b = staging.openBacking(1);
            file = b.file();
            Files.write(file, data); // as the kernel writes it
            staging.commitBacking(b, "vol", blockSize, 100, data.length);
            staging.closeBacking(b);
            assertEquals(6, staging.pendingBlocks(), "five whole blocks and one of 7 bytes, staged in place");
            byte[] second = new byte[blockSize];
            assertTrue(staging.read(ChunkStore.blockKey("vol", 100, 1, blockSize), 0, blockSize, ByteBuffer.wrap(second)));
            assertArrayEquals(java.util.Arrays.copyOfRange(data, blockSize, 2 * blockSize), second);
        } // closed before any upload: as a killed process leaves it
        assertTrue(Files.exists(file), "the backing file stays for the next start");
        try (Staging staging = open(Duration.ZERO)) {
            assertEquals(6, staging.recover());
            for (int i = 0; i < 6; i++) {
                int size = ChunkStore.blockLength(blockSize, data.length, i);
                assertArrayEquals(java.util.Arrays.copyOfRange(data, i * blockSize, i * blockSize + size),
                        awaitObject(ChunkStore.blockKey("vol", 100, i, size), size), "block " + i);
            }
            awaitDeleted(file);
        }
    }

    /**
     * A restart asks the volume's metadata (RocksDB here) which staged slices the dead process
     * committed: those are uploaded, the others deleted. Here a backing file whose first commit
     * reached the metadata and whose second did not (the process died between its fsync and its
     * commit), a block written through the process and never committed, and two blocks not
     * asked about: one that names no file (staged by an earlier build) and one of another volume.
     */
    @Test
    void aRestartUploadsTheSlicesTheMetadataKnowsAndDeletesTheOthers() throws Exception {
        int bs = 1 << 20;
        byte[] data = random(2 * bs, 3);
        Path backing;
        try (io.partfs.engine.meta.MetaEngine meta = new io.partfs.engine.meta.MetaEngine(
                new io.partfs.engine.meta.RocksKvStore(tmp.resolve("meta")))) {
            meta.format(io.partfs.engine.VolumeFormat.create("vol", bs, "file:///objects"), 0, 0);
            long ino = meta.mknod(io.partfs.engine.meta.MetaEngine.ROOT, "f", io.partfs.engine.FileType.FILE, 0644, 0, 0, 0, null).ino();
            try (Staging staging = open(Duration.ofHours(1))) {
                Staging.Backing b = staging.openBacking(ino);
                backing = b.file();
                Files.write(backing, data); // as the kernel writes it
                staging.commitBacking(b, "vol", bs, 100, data.length);
                meta.commitWrite(ino, List.of(new io.partfs.engine.meta.MetaEngine.ChunkSlice(0,
                        new io.partfs.engine.meta.Slice(100, data.length, 0, data.length, 0))));
                staging.commitBacking(b, b.nextCommit(), "vol", bs, 200, new long[] {bs, 2L * bs}, data.length);
                staging.closeBacking(b);
                staging.stage("vol/chunks/0/0/300_0_10", new byte[10], new Staging.Owner(ino, 0));
                staging.stage("vol/chunks/0/0/400_0_10", new byte[10], null);
                staging.stage("other/chunks/0/0/500_0_10", new byte[10], new Staging.Owner(ino, 0));
                assertEquals(6, staging.pendingBlocks());
            } // closed before any upload: as a killed process leaves it
            try (Staging staging = open(Duration.ZERO)) {
                assertEquals(6, staging.recover(Staging.SliceCheck.asking(meta, meta.volumeFormat(), Duration.ZERO)));
                long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
                while (staging.pendingBlocks() > 0) {
                    assertTrue(System.nanoTime() < deadline, staging.pendingBlocks() + " blocks still staged after 30 s");
                    java.util.concurrent.locks.LockSupport.parkNanos(5_000_000);
                }
                assertEquals(List.of("other/chunks/0/0/500_0_10", "vol/chunks/0/0/100_0_1048576", "vol/chunks/0/0/100_1_1048576",
                        "vol/chunks/0/0/400_0_10"), objects.listAll("").stream().map(o -> o.key()).sorted().toList(),
                        "the committed slice's blocks and those not asked about");
                assertArrayEquals(java.util.Arrays.copyOfRange(data, bs, 2 * bs), objects.get("vol/chunks/0/0/100_1_1048576", 0, bs));
                assertEquals(List.of(), names(), "nothing left staged");
                awaitDeleted(backing);
            }
        }
    }

    /**
     * A block the metadata knows at a restart is uploaded; when another mount frees its slice and
     * deletes its objects (none yet) between that answer and the upload, the upload is deleted
     * again, asked about as other committed blocks are, with the size the metadata's answer gave.
     */
    @Test
    void aRecoveredBlockWhoseSliceIsFreedBeforeItsUploadIsDeletedAgain() throws Exception {
        try (io.partfs.engine.meta.MetaEngine meta = new io.partfs.engine.meta.MetaEngine(
                new io.partfs.engine.meta.RocksKvStore(tmp.resolve("meta")))) {
            meta.format(io.partfs.engine.VolumeFormat.create("vol", 1 << 20, "file:///objects"), 0, 0);
            long ino = meta.mknod(io.partfs.engine.meta.MetaEngine.ROOT, "f", io.partfs.engine.FileType.FILE, 0644, 0, 0, 0, null).ino();
            meta.commitWrite(ino, List.of(new io.partfs.engine.meta.MetaEngine.ChunkSlice(0,
                    new io.partfs.engine.meta.Slice(300, 10, 0, 10, 0))));
            try (Staging staging = open(Duration.ofHours(1))) {
                staging.stage("vol/chunks/0/0/300_0_10", new byte[10], new Staging.Owner(ino, 0));
            } // as a killed process leaves it
            Staging.SliceCheck asking = Staging.SliceCheck.asking(meta, meta.volumeFormat(), Duration.ZERO);
            List<Integer> sizesAsked = new java.util.concurrent.CopyOnWriteArrayList<>();
            Staging.SliceCheck freedRightAfter = new Staging.SliceCheck() {
                @Override
                public String volume() {
                    return asking.volume();
                }

                @Override
                public String volumeUuid() {
                    return asking.volumeUuid();
                }

                @Override
                public java.util.Map<Long, Integer> known(java.util.Map<Long, Staging.Owner> slices) throws IOException {
                    java.util.Map<Long, Integer> known = asking.known(slices);
                    meta.truncate(ino, 0); // another mount, with the trash off: to the deletion list
                    meta.slicesDeleted(meta.pendingSliceDeletions(10)); // and its objects deleted
                    return known;
                }

                @Override
                public java.util.Set<Long> released(List<io.partfs.engine.meta.MetaEngine.CommittedSlice> slices) throws IOException {
                    slices.forEach(sl -> sizesAsked.add(sl.size()));
                    return asking.released(slices);
                }

                @Override
                public Duration settle() {
                    return Duration.ZERO;
                }
            };
            try (Staging staging = open(Duration.ZERO)) {
                assertEquals(1, staging.recover(freedRightAfter));
                assertEquals(0, staging.drain());
                assertEquals(1, staging.uploadsOfFreedSlices());
                assertEquals(List.of(), objects.listAll(""), "uploaded, then deleted again");
                assertEquals(List.of(10), sizesAsked, "asked about with the size its chunk gave: the trash is looked up, not read whole");
            }
        }
    }

    /**
     * A process killed after an upload and before its question leaves the upload written down
     * in the staging directory: the next start asks about it, and deletes the object when
     * another mount freed the slice meanwhile; one still listed keeps its object. Either way the
     * journal is emptied.
     */
    @Test
    void anUploadAKilledProcessHadNotAskedAboutIsAskedAboutAtTheNextStart() throws Exception {
        try (io.partfs.engine.meta.MetaEngine meta = new io.partfs.engine.meta.MetaEngine(
                new io.partfs.engine.meta.RocksKvStore(tmp.resolve("meta")))) {
            meta.format(io.partfs.engine.VolumeFormat.create("vol", 1 << 20, "file:///objects"), 0, 0);
            long freed = meta.mknod(io.partfs.engine.meta.MetaEngine.ROOT, "freed", io.partfs.engine.FileType.FILE, 0644, 0, 0, 0,
                    null).ino();
            long kept = meta.mknod(io.partfs.engine.meta.MetaEngine.ROOT, "kept", io.partfs.engine.FileType.FILE, 0644, 0, 0, 0,
                    null).ino();
            meta.commitWrite(freed, List.of(new io.partfs.engine.meta.MetaEngine.ChunkSlice(0,
                    new io.partfs.engine.meta.Slice(300, 10, 0, 10, 0))));
            meta.commitWrite(kept, List.of(new io.partfs.engine.meta.MetaEngine.ChunkSlice(0,
                    new io.partfs.engine.meta.Slice(301, 10, 0, 10, 0))));
            Files.createDirectories(dir);
            try (UploadJournal journal = new UploadJournal(dir)) { // as the killed process left it
                journal.add("vol/chunks/0/0/300_0_10", new io.partfs.engine.meta.MetaEngine.CommittedSlice(300, 10, freed, 0));
                journal.add("vol/chunks/0/0/301_0_10", new io.partfs.engine.meta.MetaEngine.CommittedSlice(301, 10, kept, 0));
            }
            objects.put("vol/chunks/0/0/300_0_10", new byte[10]);
            objects.put("vol/chunks/0/0/301_0_10", new byte[10]);
            meta.truncate(freed, 0); // another mount, with the trash off: to the deletion list
            meta.slicesDeleted(meta.pendingSliceDeletions(10)); // and its objects deleted (none there yet)

            try (Staging staging = open(Duration.ZERO)) {
                assertEquals(0, staging.recover(Staging.SliceCheck.asking(meta, meta.volumeFormat(), Duration.ZERO)));
                assertEquals(0, staging.drain());
                assertEquals(1, staging.uploadsOfFreedSlices());
                assertEquals(List.of("vol/chunks/0/0/301_0_10"), objects.listAll("").stream().map(o -> o.key()).toList(),
                        "the freed slice's upload deleted, the listed one's kept");
            }
            assertFalse(Files.exists(dir.resolve(UploadJournal.FILE)), "nothing left to ask about");
        }
    }

    /**
     * An unmount right after a restart waits for the metadata's answer about the blocks held
     * back, so those it knows are uploaded before the unmount returns, as they were before
     * the question was asked; only the ones it does not know stay for the next start.
     */
    @Test
    void aDrainWaitsForTheMetadatasAnswerAboutHeldBlocks() throws Exception {
        try (Staging staging = open(Duration.ofHours(1))) {
            staging.stage("vol/chunks/0/0/7_0_10", new byte[10], new Staging.Owner(2, 0));
            staging.stage("vol/chunks/0/0/8_0_10", new byte[10], new Staging.Owner(2, 0));
        } // as a killed process leaves it
        java.util.concurrent.CountDownLatch asked = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch answer = new java.util.concurrent.CountDownLatch(1);
        Staging.SliceCheck slow = new Staging.SliceCheck() {
            @Override
            public String volume() {
                return "vol";
            }

            @Override
            public String volumeUuid() {
                return "uuid";
            }

            @Override
            public java.util.Map<Long, Integer> known(java.util.Map<Long, Staging.Owner> slices) throws IOException {
                asked.countDown();
                try {
                    assertTrue(answer.await(30, java.util.concurrent.TimeUnit.SECONDS));
                } catch (InterruptedException e) {
                    throw new java.io.InterruptedIOException();
                }
                return java.util.Map.of(7L, 10); // 8 was never committed
            }

            @Override
            public Duration settle() {
                return Duration.ofHours(1);
            }
        };
        java.util.concurrent.ExecutorService unmount = java.util.concurrent.Executors.newSingleThreadExecutor();
        try (Staging staging = open(Duration.ZERO)) {
            assertEquals(2, staging.recover(slow));
            assertTrue(asked.await(30, java.util.concurrent.TimeUnit.SECONDS));
            java.util.concurrent.Future<Integer> drain = unmount.submit(staging::drain);
            assertThrows(java.util.concurrent.TimeoutException.class, () -> drain.get(300, java.util.concurrent.TimeUnit.MILLISECONDS),
                    "the drain waits while the metadata has not answered");
            answer.countDown();
            assertEquals(1, drain.get(30, java.util.concurrent.TimeUnit.SECONDS), "the unknown block stays staged");
            assertEquals(List.of("vol/chunks/0/0/7_0_10"), objects.listAll("").stream().map(o -> o.key()).toList(),
                    "the known one is uploaded before the drain returns");
        } finally {
            unmount.shutdownNow();
        }
    }

    /**
     * Blocks staged for a volume that was formatted again since under the same name (another
     * uuid) are not this volume's: a restart refuses them, touching nothing, rather than upload
     * them over its objects of the same keys; the volume they belong to still takes them.
     */
    @Test
    void blocksOfAnotherVolumeOfTheSameNameAreRefused() throws Exception {
        try (io.partfs.engine.meta.MetaEngine old = new io.partfs.engine.meta.MetaEngine(
                     new io.partfs.engine.meta.RocksKvStore(tmp.resolve("old")));
             io.partfs.engine.meta.MetaEngine again = new io.partfs.engine.meta.MetaEngine(
                     new io.partfs.engine.meta.RocksKvStore(tmp.resolve("again")))) {
            io.partfs.engine.VolumeFormat oldFormat = old.format(io.partfs.engine.VolumeFormat.create("vol", 1 << 20, "file:///o"), 0, 0);
            io.partfs.engine.VolumeFormat againFormat = again.format(io.partfs.engine.VolumeFormat.create("vol", 1 << 20, "file:///o"), 0, 0);
            try (Staging staging = open(Duration.ofHours(1))) {
                staging.recover(Staging.SliceCheck.asking(old, oldFormat, Duration.ZERO)); // claims the directory
                staging.stage("vol/chunks/0/0/1_0_10", new byte[10], null);
            }
            try (Staging staging = open(Duration.ZERO)) {
                IOException e = assertThrows(IOException.class, () -> staging.recover(Staging.SliceCheck.asking(again, againFormat, Duration.ZERO)));
                assertTrue(e.getMessage().contains("another volume (uuid " + oldFormat.uuid() + ")"), e.getMessage());
                assertEquals(0, staging.pendingBlocks());
            }
            assertEquals(List.of("vol%chunks%0%0%1_0_10"), names(), "left as it was");
            assertTrue(objects.listAll("").isEmpty(), "nothing uploaded");
            try (Staging staging = open(Duration.ZERO)) {
                assertEquals(1, staging.recover(Staging.SliceCheck.asking(old, oldFormat, Duration.ZERO)), "its own volume takes it");
                awaitObject("vol/chunks/0/0/1_0_10", 10);
            }
        }
    }

    /** A staging directory is one staging area's at a time: a second one on it is refused until the first is closed. */
    @Test
    void aSecondStagingAreaOnTheSameDirectoryIsRefused() throws Exception {
        try (Staging first = open(Duration.ZERO)) {
            Staging.InUseException e = assertThrows(Staging.InUseException.class, () -> open(Duration.ZERO));
            assertTrue(e.getMessage().contains("--cache-dir"), e.getMessage());
        }
        open(Duration.ZERO).close();
    }

    /**
     * A staged block that the local disk damaged before its upload (a bit flipped) is not
     * uploaded: its checksums, kept in memory and in its file's attribute, say so, in this
     * process and after a restart. The file is set aside, and the restart leaves it there.
     */
    @Test
    void aStagedBlockTheDiskDamagedIsSetAsideNotUploaded() throws Exception {
        byte[] good = random(200_000, 21);
        byte[] bad = random(200_000, 22);
        String goodKey = "vol/chunks/0/0/31_0_200000";
        String badKey = "vol/chunks/0/0/32_0_200000";
        String laterKey = "vol/chunks/0/0/33_0_200000";
        try (Staging staging = withSpares(open(Duration.ofHours(1)))) {
            staging.stage(goodKey, good, null);
            staging.stage(badKey, bad, null);
            flip(staging.pathIfStaged(badKey), 150_000);
            staging.drain(); // uploads at once
            assertEquals(1, staging.damagedBlocks());
            assertFalse(objects.head(badKey).isPresent(), "a damaged block is not uploaded");
            assertTrue(names().contains(Staging.DAMAGED_PREFIX + "vol%chunks%0%0%32_0_200000"), names().toString());
            assertArrayEquals(good, objects.get(goodKey, 0, good.length));

            staging.stage(laterKey, bad, null);
        } // closed before its upload: as a killed process leaves it
        flip(dir.resolve("vol%chunks%0%0%33_0_200000"), 7); // damaged while no sidecar ran
        try (Staging staging = open(Duration.ZERO)) {
            assertEquals(1, staging.recover(), "the later block; the one set aside is left alone");
            staging.drain();
            assertEquals(1, staging.damagedBlocks(), "its checksums came from its file's attribute");
            assertFalse(objects.head(laterKey).isPresent(), "a block damaged while the sidecar was down is not uploaded either");
        }
    }

    /** {@code staging} once a first block is staged and its first batch of spares is ready. */
    private static Staging withSpares(Staging staging) throws IOException {
        staging.stage("vol/chunks/0/0/30_0_5", new byte[5], null);
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (staging.sparesReady() < Staging.SPARE_BATCH) {
            assertTrue(System.nanoTime() < deadline, "no spare batch ready within 30 s");
            java.util.concurrent.locks.LockSupport.parkNanos(5_000_000);
        }
        return staging;
    }

    /**
     * A read of a staged block checks the pieces it touches (64 KiB each for a 200,000-byte
     * block): a read of an untouched piece answers; one that touches the flipped byte, even by
     * the rest of its piece, fails, and the block is set aside rather than uploaded.
     */
    @Test
    void aReadOfAStagedBlockTheDiskDamagedFailsAndSetsItAside() throws Exception {
        byte[] data = random(200_000, 23);
        String key = "vol/chunks/0/0/34_0_200000";
        try (Staging staging = open(Duration.ofHours(1))) {
            staging.stage(key, data, null);
            flip(staging.pathIfStaged(key), 140_000); // in the third piece, [131072, 196608)
            ByteBuffer first = ByteBuffer.allocate(1000);
            assertTrue(staging.read(key, 5_000, 1000, first));
            assertArrayEquals(java.util.Arrays.copyOfRange(data, 5_000, 6_000), first.array(), "an untouched piece reads");

            ByteBuffer dst = ByteBuffer.allocate(100);
            Staging.DamagedBlockException e = assertThrows(Staging.DamagedBlockException.class,
                    () -> staging.read(key, 135_000, 100, dst), "100 bytes before the flipped one, in its piece");
            assertTrue(e.getMessage().contains(key), e.getMessage());
            assertEquals(0, dst.position(), "nothing read counts");
            assertEquals(1, staging.damagedBlocks());
            assertFalse(staging.contains(key), "no longer staged: not uploaded");
            assertTrue(names().contains(Staging.DAMAGED_PREFIX + "vol%chunks%0%0%34_0_200000"), names().toString());
            staging.drain();
            assertFalse(objects.head(key).isPresent());
        }
    }

    private static void flip(Path f, long at) throws IOException {
        try (var ch = java.nio.channels.FileChannel.open(f, java.nio.file.StandardOpenOption.READ, java.nio.file.StandardOpenOption.WRITE)) {
            ByteBuffer b = ByteBuffer.allocate(1);
            ch.read(b, at);
            b.put(0, (byte) ~b.get(0));
            ch.write(b.rewind(), at);
        }
    }

    private static String slicesAttribute(Path f) throws IOException {
        UserDefinedFileAttributeView view = Files.getFileAttributeView(f, UserDefinedFileAttributeView.class);
        ByteBuffer b = ByteBuffer.allocate(view.size(Staging.SLICES_XATTR));
        view.read(Staging.SLICES_XATTR, b);
        return new String(b.array(), 0, b.position(), StandardCharsets.UTF_8);
    }

    /**
     * A commit of part of a backing file (the blocks that changed, {@link CommittedBlocks}) is
     * named in its attribute with its run, so a restart uploads those blocks from their offsets;
     * a commit whose blocks are all uploaded is no longer named.
     */
    @Test
    void aRunOfABackingFileIsNamedWithItsOffsetsUntilItsBlocksAreUploaded() throws Exception {
        int bs = 1 << 20;
        byte[] data = random(2 * bs + 7, 11);
        Path file;
        try (Staging staging = open(Duration.ZERO)) { // uploaded at once
            Staging.Backing b = staging.openBacking(1);
            Files.write(b.file(), data);
            staging.commitBacking(b, "vol", bs, 100, data.length);
            awaitObject(ChunkStore.blockKey("vol", 100, 2, 7), 7);
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (staging.pendingBlocks() > 0) {
                assertTrue(System.nanoTime() < deadline, "commit 1 not uploaded within 30 s");
                java.util.concurrent.locks.LockSupport.parkNanos(5_000_000);
            }
            staging.commitBacking(b, b.nextCommit(), "vol", bs, 200, new long[] {bs, 2L * bs}, data.length);
            assertEquals("vol " + bs + " 200 " + 2 * bs + " " + bs, slicesAttribute(b.file()),
                    "commit 1 is uploaded: only commit 2 is named, with its run");
            assertArrayEquals(java.util.Arrays.copyOfRange(data, bs, 2 * bs), awaitObject(ChunkStore.blockKey("vol", 200, 0, bs), bs));
            staging.closeBacking(b);
        }
        try (Staging staging = open(Duration.ofHours(1))) {
            Staging.Backing b = staging.openBacking(1);
            file = b.file();
            Files.write(file, data);
            staging.commitBacking(b, "vol", bs, 300, data.length);
            data[bs + 5] ^= 1;
            data[2 * bs + 1] ^= 1;
            Files.write(file, data);
            staging.commitBacking(b, b.nextCommit(), "vol", bs, 400, new long[] {bs + 5, bs + 6, 2L * bs, data.length}, data.length);
            assertEquals("vol " + bs + " 300 " + data.length + "\nvol " + bs + " 400 " + (bs + 6) + " " + (bs + 5)
                    + "\nvol " + bs + " 401 " + data.length + " " + 2 * bs, slicesAttribute(file), "a line for each run");
            staging.closeBacking(b);
        } // closed before any upload: as a killed process leaves it
        try (Staging staging = open(Duration.ZERO)) {
            assertEquals(5, staging.recover(), "three blocks of commit 1, one of each of commit 2's runs");
            assertArrayEquals(java.util.Arrays.copyOfRange(data, bs + 5, bs + 6), awaitObject(ChunkStore.blockKey("vol", 400, 0, 1), 1));
            assertArrayEquals(java.util.Arrays.copyOfRange(data, 2 * bs, 2 * bs + 7), awaitObject(ChunkStore.blockKey("vol", 401, 0, 7), 7));
            assertArrayEquals(java.util.Arrays.copyOfRange(data, 0, bs), awaitObject(ChunkStore.blockKey("vol", 300, 0, bs), bs));
            awaitDeleted(file);
        }
    }

    /**
     * Blocks of a backing file uploaded once it is closed go into the block cache as hard links
     * to it, not as copies: the disk holds the file's bytes once. Blocks uploaded while the kernel
     * still has it open wait for its close, and are linked then if it did not change since their
     * commit; else they are not cached.
     */
    @Test
    void blocksOfABackingFileAreLinkedIntoTheCacheOnceTheKernelClosedIt() throws Exception {
        int blockSize = 1 << 20;
        byte[] data = new byte[3 * blockSize + 7];
        new java.util.Random(11).nextBytes(data);
        Path cacheDir = tmp.resolve("cache");
        Path stagingDir = cacheDir.resolve(BlockCache.STAGING);
        Path closedFile;
        try (Staging staging = new Staging(stagingDir, objects, BlockCache.disabled(), 2, Duration.ofHours(1), Duration.ofSeconds(30))) {
            Staging.Backing b = staging.openBacking(1);
            closedFile = b.file();
            Files.write(closedFile, data);
            staging.commitBacking(b, "vol", blockSize, 300, data.length);
            staging.closeBacking(b);
        } // closed and committed, not uploaded: the next start uploads it
        BlockCache cache = new BlockCache(cacheDir, 1L << 30);
        cache.awaitLoaded();
        try (Staging staging = new Staging(stagingDir, objects, cache, 2, Duration.ZERO, Duration.ofSeconds(30))) {
            assertEquals(4, staging.recover());
            io.partfs.engine.testing.Poll.until(() -> staging.pendingBlocks() == 0 && Files.notExists(closedFile),
                    "the closed file's blocks uploaded and its staging name gone");
            for (int i = 0; i < 4; i++) {
                int size = ChunkStore.blockLength(blockSize, data.length, i);
                String key = ChunkStore.blockKey("vol", 300, i, size);
                assertArrayEquals(java.util.Arrays.copyOfRange(data, i * blockSize, i * blockSize + size), cache.read(key, 0, size),
                        "block " + i + " read from the cache");
            }
            assertEquals(new BlockCache.Stats(data.length, 4, 4, 0), cache.stats(), "the file's bytes, counted once");
            List<Path> cached = cachedFiles(cacheDir);
            assertEquals(4, cached.size(), cached.toString());
            for (Path f : cached) {
                assertEquals(4, Files.getAttribute(f, "unix:nlink"), "a link to the one file, not a copy: " + f);
            }

            // a file the kernel still has open: its commit uploads at once, and the cache waits for its close
            Staging.Backing open = staging.openBacking(1);
            Files.write(open.file(), data);
            staging.commitBacking(open, "vol", blockSize, 400, data.length);
            io.partfs.engine.testing.Poll.until(() -> staging.pendingBlocks() == 0, "the open file's blocks uploaded");
            assertEquals(4, cachedFiles(cacheDir).size(), "nothing cached while the kernel may still write the file");
            staging.kernelClosed(open); // unchanged since its commit: what was uploaded is what it holds
            for (int i = 0; i < 4; i++) {
                int size = ChunkStore.blockLength(blockSize, data.length, i);
                assertArrayEquals(java.util.Arrays.copyOfRange(data, i * blockSize, i * blockSize + size),
                        cache.read(ChunkStore.blockKey("vol", 400, i, size), 0, size), "block " + i + " of the file closed after its upload");
            }
            assertEquals(2L * data.length, cache.stats().bytes());
            assertEquals(8, cachedFiles(cacheDir).size());
            assertEquals(0, cachedFiles(cacheDir).stream().filter(f -> nlink(f) == 1).count(), "links, no copies");
            staging.closeBacking(open);
            assertTrue(Files.notExists(open.file()), "closed with every block uploaded: its staging name deleted");

            // written again after its commit, before its close: what was uploaded is not what it holds
            Staging.Backing changed = staging.openBacking(1);
            Files.write(changed.file(), data);
            staging.commitBacking(changed, "vol", blockSize, 500, data.length);
            io.partfs.engine.testing.Poll.until(() -> staging.pendingBlocks() == 0, "the changed file's blocks uploaded");
            try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(changed.file(), java.nio.file.StandardOpenOption.WRITE)) {
                ch.write(ByteBuffer.wrap(new byte[] {1, 2, 3}), 10);
            }
            staging.kernelClosed(changed);
            assertEquals(8, cachedFiles(cacheDir).size(), "none of its blocks cached");
            assertEquals(2L * data.length, cache.stats().bytes());
            staging.closeBacking(changed);
        }
    }

    /** The regular files in the cache directory, outside staging. */
    private static List<Path> cachedFiles(Path cacheDir) throws IOException {
        try (Stream<Path> s = Files.walk(cacheDir)) {
            return s.filter(Files::isRegularFile).filter(f -> !f.startsWith(cacheDir.resolve(BlockCache.STAGING))).toList();
        }
    }

    private static int nlink(Path f) {
        try {
            return (Integer) Files.getAttribute(f, "unix:nlink");
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Test
    void aBackingFileWhoseAttributeCannotBeReadDoesNotStopTheStart() throws Exception {
        Files.createDirectories(dir);
        Path bad = dir.resolve(Staging.SPARE_PREFIX + "1-0");
        Files.write(bad, new byte[100]);
        Files.getFileAttributeView(bad, UserDefinedFileAttributeView.class)
                .write(Staging.SLICES_XATTR, ByteBuffer.wrap("vol 1048576 x 100".getBytes(StandardCharsets.UTF_8)));
        try (Staging staging = open(Duration.ZERO)) {
            assertEquals(0, staging.recover(), "nothing to upload from it");
        }
        assertTrue(Files.exists(bad), "left in place for whoever looks into it");
    }

    @Test
    void blocksThatFoundTheStoreUnreachableWaitForItAndGoTogetherWhenItAnswers() throws Exception {
        var store = new io.partfs.engine.testing.CountingObjectStore(objects);
        store.failPuts(true);
        store.unreachable(true);
        byte[] data = "parked".repeat(50).getBytes(StandardCharsets.UTF_8);
        List<String> keys = List.of("vol/chunks/0/0/11_0_300", "vol/chunks/0/0/12_0_300", "vol/chunks/0/0/13_0_300");
        try (Staging staging = new Staging(dir, store, BlockCache.disabled(), 2, Duration.ZERO, Duration.ofSeconds(30))) {
            for (String key : keys) {
                staging.stage(key, data, null);
            }
            io.partfs.engine.testing.Poll.until(() -> staging.parkedBlocks() == 3, "every block waits for the store");
            int probes = store.probes();
            io.partfs.engine.testing.Poll.until(() -> store.probes() >= probes + 3, "the store is asked every second whether it answers");
            assertEquals(3, store.puts(), "one attempt a block: while the store is down they wait, not retry one by one");

            store.failPuts(false);
            store.unreachable(false);
            long back = System.nanoTime();
            for (String key : keys) {
                assertArrayEquals(data, awaitObject(key, data.length));
            }
            long ms = (System.nanoTime() - back) / 1_000_000;
            assertTrue(ms < 5_000, "uploaded " + ms + " ms after the store answered; the watch asks each second");
            assertEquals(6, store.puts(), "each block uploaded once after the outage");
            assertEquals(0, staging.parkedBlocks());
        }
    }

    /** What partfs status and the oldest-staged gauge report: when the longest-waiting block was staged. */
    @Test
    void theOldestPendingBlockIsKnownAndOneAnEarlierProcessLeftIsMarked() throws Exception {
        byte[] data = "staged".getBytes(StandardCharsets.UTF_8);
        try (Staging staging = open(Duration.ofHours(1))) {
            assertEquals(0, staging.oldestPendingMillis(), "nothing waits");
            long before = System.currentTimeMillis();
            assertTrue(staging.stage("vol/chunks/0/0/1_0_" + data.length, data, null));
            long after = System.currentTimeMillis();
            assertTrue(staging.stage("vol/chunks/0/0/2_0_" + data.length, data, null));
            long oldest = staging.oldestPendingMillis();
            assertTrue(oldest >= before && oldest <= after, "the first block's time, not the second's: " + oldest);
        }
        // recovered blocks go up at once: the store refuses them, so they are still waiting when asked
        var store = new io.partfs.engine.testing.CountingObjectStore(objects);
        store.failPuts(true);
        try (Staging staging = new Staging(dir, store, BlockCache.disabled(), 2, Duration.ofHours(1), Duration.ofSeconds(30))) {
            assertEquals(2, staging.recover());
            assertEquals(Long.MIN_VALUE, staging.oldestPendingMillis(), "staged by an earlier process");
        }
    }

    @Test
    void aRestartUploadsASpareHoldingAKeyAndDeletesOneWithout() throws Exception {
        Files.createDirectories(dir);
        byte[] data = "durable but not yet renamed".getBytes(StandardCharsets.UTF_8);
        String key = "vol/chunks/0/0/9_0_" + data.length;
        Path used = dir.resolve(Staging.SPARE_PREFIX + "1-0");
        Files.write(used, data);
        setKey(used, key);
        Path unused = dir.resolve(Staging.SPARE_PREFIX + "1-1");
        Files.createFile(unused);
        try (Staging staging = open(Duration.ZERO)) {
            assertEquals(1, staging.recover());
            assertArrayEquals(data, awaitObject(key, data.length));
        }
        assertFalse(Files.exists(used));
        assertFalse(Files.exists(unused), "an empty spare is not a block");
        assertEquals(List.of(), names());
    }

    @Test
    void aSpareTornBeforeItsFsyncIsDeletedNotUploaded() throws Exception {
        Files.createDirectories(dir);
        String key = "vol/chunks/0/0/10_0_100";
        Path torn = dir.resolve(Staging.SPARE_PREFIX + "1-0");
        Files.write(torn, new byte[40]); // the key says 100 bytes
        setKey(torn, key);
        try (Staging staging = open(Duration.ZERO)) {
            assertEquals(0, staging.recover());
        }
        assertEquals(List.of(), names());
        assertEquals(0, objects.listAll("vol/").size());
    }

    /**
     * On a disk that fills up (an 8 MiB tmpfs): blocks that would go under the floor are turned
     * away, and without a floor the write that fails for want of space is, leaving no torn file
     * behind; {@link Staging#stage} never throws for it.
     */
    @Test
    void aBlockTheDiskHasNoRoomForIsTurnedAwayAndLeavesNothingTorn() throws Exception {
        byte[] block = new byte[1 << 20];
        new java.util.Random(5).nextBytes(block);
        for (double ratio : new double[] {0.25, 0}) {
            try (io.partfs.engine.testing.SmallDisk disk = new io.partfs.engine.testing.SmallDisk(8)) {
                Path d = disk.dir().resolve("staging");
                int staged = 0;
                try (Staging staging = new Staging(d, objects, BlockCache.disabled(), 2, Duration.ofHours(1), Duration.ofMillis(1), ratio)) {
                    for (int i = 0; i < 10; i++) {
                        if (staging.stage("vol/chunks/0/0/" + (100 + i) + "_0_" + block.length, block, null)) {
                            assertEquals(i, staged, "blocks fit until one does not, then none");
                            staged++;
                        }
                    }
                    assertEquals(staged, staging.pendingBlocks());
                    assertEquals(10 - staged, staging.turnedAway());
                    if (ratio > 0) {
                        assertTrue(staged >= 4 && staged <= 6, staged + " of 1 MiB above a floor of 2 MiB on 8 MiB");
                        assertTrue(disk.free() >= disk.total() / 4, disk.free() + " bytes left free");
                    } else {
                        assertTrue(staged >= 6, staged + " staged until the disk was full");
                    }
                    try (Stream<Path> files = Files.list(d)) {
                        List<Path> blocks = files.filter(p -> !p.getFileName().toString().startsWith(Staging.SPARE_PREFIX)
                                && !p.getFileName().toString().equals(Staging.LOCK)).toList();
                        assertEquals(staged, blocks.size(), "no file of a block turned away: " + blocks);
                        for (Path p : blocks) {
                            assertEquals(block.length, Files.size(p), p + " whole");
                        }
                    }
                }
            }
        }
    }

    /**
     * A file the kernel writes itself takes the disk towards its free-space floor without the
     * sidecar seeing a byte: while it is open the block cache gives back room, so that the next
     * write fits where it would have failed with ENOSPC. On a 1 GiB tmpfs with a floor of 10%:
     * ~500 MiB of cached blocks, then 300 MiB written into a backing file leave 224 MiB free, less
     * than the next 300 MiB need.
     */
    @Test
    void theBlockCacheGivesBackRoomWhileTheKernelWritesABackingFile() throws Exception {
        try (io.partfs.engine.testing.SmallDisk disk = new io.partfs.engine.testing.SmallDisk(1024)) {
            Path cacheDir = disk.dir().resolve("cache");
            BlockCache cache = new BlockCache(cacheDir, 1L << 30, Long.MAX_VALUE, 0.1);
            cache.awaitLoaded();
            byte[] block = new byte[4 << 20];
            new java.util.Random(3).nextBytes(block);
            for (int i = 0; i < 125; i++) {
                cache.put(ChunkStore.blockKey("vol", 1000 + i, 0, block.length), block);
            }
            long cached = cache.stats().bytes();
            assertEquals(500L << 20, cached);
            long floor = disk.total() / 10;
            try (Staging staging = new Staging(cacheDir.resolve(BlockCache.STAGING), objects, cache, 2, Duration.ofHours(1),
                    Duration.ofSeconds(30), 0.1)) {
                Staging.Backing b = staging.openBacking(1);
                assertTrue(b != null, "room for a backing file at the start");
                byte[] part = new byte[300 << 20];
                new java.util.Random(4).nextBytes(part);
                try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(b.file(), java.nio.file.StandardOpenOption.WRITE)) {
                    io.partfs.engine.testing.SmallDisk.writeFully(ch, part); // as the kernel writes it: the sidecar sees nothing
                    io.partfs.engine.testing.Poll.until(() -> disk.free() >= floor + Staging.BACKING_ROOM,
                            "the block cache gives back room above the floor");
                    assertTrue(staging.evictedForBackings() > 0);
                    assertEquals(cached - staging.evictedForBackings(), cache.stats().bytes(), "what was given back is what the cache lost");
                    io.partfs.engine.testing.SmallDisk.writeFully(ch, part); // 600 MiB in all: more than was free at the start
                    ch.force(true);
                }
                assertEquals(600L << 20, Files.size(b.file()));
                staging.closeBacking(b);
                io.partfs.engine.testing.Poll.until(() -> !staging.watchingSpace(), "the watch stops with no backing file open");
            }
        }
    }
}
