package io.partfs.engine.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class BlockCacheTest {
    @TempDir
    Path dir;

    @Test
    void readsBackRangesAndCountsHits() throws Exception {
        BlockCache c = new BlockCache(dir, 1 << 20);
        c.put("v/chunks/0/0/1_0_10", new byte[] {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
        assertArrayEquals(new byte[] {3, 4, 5}, c.read("v/chunks/0/0/1_0_10", 3, 3));
        assertNull(c.read("v/chunks/0/0/2_0_10", 0, 1));
        assertEquals(1, c.stats().hits());
        assertEquals(1, c.stats().misses());
    }

    @Test
    void evictsLeastRecentlyUsedBeyondCapacity() throws Exception {
        BlockCache c = new BlockCache(dir, 3000);
        c.put("a", new byte[1000]);
        c.put("b", new byte[1000]);
        c.put("c", new byte[1000]);
        c.read("a", 0, 1); // a is now most recent
        c.put("d", new byte[1000]);
        assertTrue(c.contains("a"));
        assertTrue(!c.contains("b"), "b was least recently used");
        assertEquals(3000, c.stats().bytes());
    }

    /** Asking whether a block is cached, or verifying it, leaves the eviction order alone (warmup --check); touch is a use. */
    @Test
    void containsAndVerifyAreNotUsesButTouchIs() throws Exception {
        BlockCache c = new BlockCache(dir, 3000);
        c.awaitLoaded();
        c.put("a", new byte[1000]);
        c.put("b", new byte[1000]);
        c.put("c", new byte[1000]);
        assertTrue(c.contains("a"));
        assertEquals(BlockCache.Verdict.GOOD, c.verify("a"));
        c.put("d", new byte[1000]);
        assertTrue(!c.contains("a"), "a was still the least recently used");
        c.touch("b");
        c.put("e", new byte[1000]);
        assertTrue(c.contains("b") && !c.contains("c"), "b was used after c");
        assertEquals(0, c.stats().hits(), "none of these was a read");
    }

    @Test
    void adoptsAnUploadedStagedBlockAndNeverIndexesTheStagingDirectory() throws Exception {
        Path staging = Files.createDirectories(dir.resolve(BlockCache.STAGING));
        Path staged = Files.write(staging.resolve("v%chunks%0%0%7_0_4"), new byte[] {1, 2, 3, 4});
        Files.write(staging.resolve("v%chunks%0%0%8_0_4"), new byte[4]); // still waiting for its upload
        BlockCache c = new BlockCache(dir, 1 << 20);
        c.awaitLoaded();
        assertEquals(0, c.stats().blocks(), "staged blocks are not cached blocks: eviction must never delete them");
        c.adopt("v/chunks/0/0/7_0_4", staged, 4, BlockSums.of(new byte[] {1, 2, 3, 4}));
        assertTrue(Files.notExists(staged), "moved, not copied");
        assertArrayEquals(new byte[] {2, 3}, c.read("v/chunks/0/0/7_0_4", 1, 2));
        BlockCache again = new BlockCache(dir, 1 << 20);
        again.awaitLoaded();
        assertEquals(1, again.stats().blocks());
    }

    @Test
    void survivesRestartAndTrimsToNewCapacity() throws Exception {
        BlockCache c = new BlockCache(dir, 10_000);
        for (int i = 0; i < 5; i++) {
            c.put("k" + i, new byte[1000]);
        }
        BlockCache again = new BlockCache(dir, 10_000);
        again.awaitLoaded();
        assertEquals(5, again.stats().blocks());
        assertArrayEquals(new byte[10], again.read("k3", 0, 10));
        BlockCache smaller = new BlockCache(dir, 2000);
        smaller.awaitLoaded();
        assertEquals(2, smaller.stats().blocks());
    }

    @Test
    void aTruncatedFileIsAMissNotBadData() throws Exception {
        BlockCache c = new BlockCache(dir, 10_000);
        c.put("x", new byte[1000]);
        try (var files = Files.walk(dir)) {
            Path f = files.filter(p -> p.getFileName().toString().equals("x")).findFirst().orElseThrow();
            Files.write(f, new byte[10]);
        }
        assertNull(c.read("x", 500, 100));
        assertTrue(!c.contains("x"));
    }

    private Path cachedFile(String name) throws java.io.IOException {
        try (var files = Files.walk(dir)) {
            return files.filter(p -> p.getFileName().toString().equals(name)).findFirst().orElseThrow();
        }
    }

    /** Flips one bit of {@code f} at {@code at}, as bit rot would; its attributes stay. */
    private static void flipBit(Path f, long at) throws java.io.IOException {
        try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(f, java.nio.file.StandardOpenOption.READ,
                java.nio.file.StandardOpenOption.WRITE)) {
            java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(1);
            ch.read(b, at);
            b.put(0, (byte) (b.get(0) ^ 0x10)).position(0);
            ch.write(b, at);
        }
    }

    private static byte[] pattern(int n) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 31 + (i >> 9));
        }
        return b;
    }

    /**
     * A bit flipped on the cache disk: the pieces of the block a read does not touch are still
     * served, a read of the damaged piece is a miss (so the caller reads the object store), the
     * block is dropped and counted. After a restart too, when nothing is checked yet.
     */
    @Test
    void aBitFlippedOnTheCacheDiskIsAMissNotBadData() throws Exception {
        byte[] block = pattern(1 << 20); // 16 pieces of 64 KiB
        BlockCache c = new BlockCache(dir, 10 << 20);
        c.put("v/chunks/0/0/9_0_1048576", block);
        flipBit(cachedFile("v%chunks%0%0%9_0_1048576"), 300_000); // in piece 4

        BlockCache again = new BlockCache(dir, 10 << 20);
        again.awaitLoaded();
        assertArrayEquals(java.util.Arrays.copyOfRange(block, 0, 100), again.read("v/chunks/0/0/9_0_1048576", 0, 100));
        assertArrayEquals(java.util.Arrays.copyOfRange(block, 500_000, 600_000), again.read("v/chunks/0/0/9_0_1048576", 500_000, 100_000));
        assertEquals(0, again.corruptBlocks());
        assertNull(again.read("v/chunks/0/0/9_0_1048576", 290_000, 20_000), "the damaged piece");
        assertEquals(1, again.corruptBlocks());
        assertTrue(!again.contains("v/chunks/0/0/9_0_1048576"), "dropped");
        try (var files = Files.walk(dir)) {
            assertEquals(List.of(), files.filter(Files::isRegularFile).toList(), "and deleted");
        }

        again.put("v/chunks/0/0/9_0_1048576", block); // cached again, from the object store's bytes
        assertArrayEquals(java.util.Arrays.copyOfRange(block, 290_000, 310_000), again.read("v/chunks/0/0/9_0_1048576", 290_000, 20_000));
    }

    /** A read of whole pieces goes straight into the caller's buffer: a damaged one leaves its position where it was. */
    @Test
    void aReadOfWholePiecesIsCheckedInTheCallersBuffer() throws Exception {
        byte[] block = pattern(4 << 20); // 32 pieces of 128 KiB
        BlockCache c = new BlockCache(dir, 10 << 20);
        c.put("big", block);
        flipBit(cachedFile("big"), (2 << 20) + 5);
        BlockCache again = new BlockCache(dir, 10 << 20);
        again.awaitLoaded();
        java.nio.ByteBuffer dst = java.nio.ByteBuffer.allocateDirect(3 << 20).position(7);
        assertTrue(again.read("big", 1 << 20, 1 << 20, dst));
        assertEquals(7 + (1 << 20), dst.position());
        byte[] got = new byte[1 << 20];
        dst.get(7, got);
        assertArrayEquals(java.util.Arrays.copyOfRange(block, 1 << 20, 2 << 20), got);
        assertTrue(!again.read("big", 2 << 20, 1 << 20, dst), "the damaged megabyte");
        assertEquals(7 + (1 << 20), dst.position());
        assertEquals(1, again.corruptBlocks());
    }

    /** A read that starts and ends inside pieces checks those pieces whole: damage just outside the bytes asked for is found. */
    @Test
    void anUnalignedReadChecksTheWholePiecesItTouches() throws Exception {
        byte[] block = pattern(1 << 20); // 16 pieces of 64 KiB
        BlockCache c = new BlockCache(dir, 10 << 20);
        c.put("b", block);
        flipBit(cachedFile("b"), 3 * 65536 + 60_000); // in piece 3, past the read below
        BlockCache again = new BlockCache(dir, 10 << 20);
        again.awaitLoaded();
        java.nio.ByteBuffer dst = java.nio.ByteBuffer.allocateDirect(10_000);
        assertTrue(again.read("b", 65536 + 100, 1000, dst), "piece 1 alone");
        assertEquals(1000, dst.position());
        assertTrue(!again.read("b", 2 * 65536 + 65_000, 2000, dst), "pieces 2 and 3, the bytes asked for all sound");
        assertEquals(1000, dst.position());
        assertEquals(1, again.corruptBlocks());
        byte[] got = new byte[1000];
        dst.get(0, got);
        assertArrayEquals(java.util.Arrays.copyOfRange(block, 65536 + 100, 65536 + 1100), got);
    }

    @Test
    void sumsMatchHoweverTheBytesAreCutIntoParts() {
        byte[] block = pattern(300_000); // pieces of 64 KiB, the last 37,856 bytes
        byte[] sums = BlockSums.of(block);
        java.nio.ByteBuffer all = java.nio.ByteBuffer.wrap(block);
        assertTrue(BlockSums.matches(sums, block.length, 0, all));
        assertTrue(BlockSums.matches(sums, block.length, 0, all.duplicate().limit(1), all.duplicate().position(1).limit(200_000),
                all.duplicate().position(200_000)));
        assertTrue(BlockSums.matches(sums, block.length, 2, all.duplicate().position(2 * 65536).limit(3 * 65536)));
        assertTrue(!BlockSums.matches(sums, block.length, 1, all.duplicate().position(2 * 65536).limit(3 * 65536)), "another piece's sum");
        assertTrue(!BlockSums.matches(sums, block.length + 70_000, 0, all), "sums of another length");
    }

    /** A whole-block file handed to the kernel (passthrough) is checked whole first: a damaged one is not handed out. */
    @Test
    void aDamagedBlockIsNotHandedToTheKernel() throws Exception {
        BlockCache c = new BlockCache(dir, 10 << 20);
        c.put("ok", pattern(5000));
        c.put("bad", pattern(5000));
        flipBit(cachedFile("bad"), 4999);
        BlockCache again = new BlockCache(dir, 10 << 20);
        again.awaitLoaded();
        assertArrayEquals(pattern(5000), Files.readAllBytes(again.pathIfCached("ok")));
        assertNull(again.pathIfCached("bad"));
        assertEquals(1, again.corruptBlocks());
    }

    /** Blocks cached before checksums were kept (no attribute) are served as they are. */
    @Test
    void aBlockCachedWithoutChecksumsIsServedUnchecked() throws Exception {
        BlockCache c = new BlockCache(dir, 10 << 20);
        c.put("old", pattern(5000));
        Path f = cachedFile("old");
        Files.getFileAttributeView(f, java.nio.file.attribute.UserDefinedFileAttributeView.class).delete(BlockSums.XATTR);
        BlockCache again = new BlockCache(dir, 10 << 20);
        again.awaitLoaded();
        assertArrayEquals(java.util.Arrays.copyOfRange(pattern(5000), 10, 20), again.read("old", 10, 10));
        assertEquals(0, again.corruptBlocks());
    }

    /** A staged block adopted with the sums of what was uploaded, damaged on disk afterwards. */
    @Test
    void anAdoptedBlockIsCheckedAgainstWhatWasUploaded() throws Exception {
        Path staging = Files.createDirectories(dir.resolve(BlockCache.STAGING));
        byte[] data = pattern(200_000);
        Path staged = Files.write(staging.resolve("v%chunks%0%0%7_0_200000"), data);
        BlockCache c = new BlockCache(dir, 10 << 20);
        c.awaitLoaded();
        c.adopt("v/chunks/0/0/7_0_200000", staged, data.length, BlockSums.of(data));
        flipBit(cachedFile("v%chunks%0%0%7_0_200000"), 199_999);
        assertArrayEquals(java.util.Arrays.copyOfRange(data, 0, 10), c.read("v/chunks/0/0/7_0_200000", 0, 10));
        assertNull(c.read("v/chunks/0/0/7_0_200000", 199_990, 10));
        assertEquals(1, c.corruptBlocks());
    }

    /** Linked ranges keep their sums apiece on the shared file: damage in one range drops that block only. */
    @Test
    void aDamagedLinkedRangeDropsItsBlockOnly() throws Exception {
        Path src = sharedFile();
        byte[] all = Files.readAllBytes(src);
        BlockCache c = new BlockCache(dir, 1 << 20);
        c.awaitLoaded();
        for (int i = 0; i < 3; i++) {
            assertTrue(c.link(LINKED[i], src, i * 1000L, 1000, BlockSums.of(java.util.Arrays.copyOfRange(all, i * 1000, i * 1000 + 1000))));
        }
        long[] offsets = {0, 1000, 2000};
        assertTrue(c.linkedWholeFile(List.of(LINKED), offsets, 3000) != null, "whole and checked");
        flipBit(src, 1500);
        assertTrue(c.read(LINKED[1], 500, 1) != null);
        assertEquals(0, c.corruptBlocks(), "a piece is checked once a process: this one was, before the flip");

        BlockCache again = new BlockCache(dir, 1 << 20);
        again.awaitLoaded();
        assertNull(again.linkedWholeFile(List.of(LINKED), offsets, 3000), "not handed to the kernel");
        assertEquals(1, again.corruptBlocks());
        assertBlock(again, 0);
        assertNull(again.read(LINKED[1], 10, 5));
        assertBlock(again, 2);
    }

    /**
     * A verify reads a block whole however much reads checked it before: rot after the first
     * read (which reads no longer see) is found, the block dropped and counted; a block without
     * sums and one not cached are told apart; a linked range is checked against its own sums.
     */
    @Test
    void verifyFindsRotThatReadsCheckedBefore() throws Exception {
        BlockCache c = new BlockCache(dir, 10 << 20);
        c.awaitLoaded();
        c.put("good", pattern(300_000));
        c.put("rots", pattern(300_000));
        c.put("old", pattern(5000));
        Files.getFileAttributeView(cachedFile("old"), java.nio.file.attribute.UserDefinedFileAttributeView.class).delete(BlockSums.XATTR);
        assertArrayEquals(pattern(300_000), c.read("rots", 0, 300_000), "read whole: every piece checked");
        flipBit(cachedFile("rots"), 123_456);
        assertTrue(c.read("rots", 123_000, 1000) != null, "reads check a piece once a process: this one was");

        long hits = c.stats().hits();
        assertEquals(BlockCache.Verdict.GOOD, c.verify("good"));
        assertEquals(BlockCache.Verdict.DAMAGED, c.verify("rots"));
        assertEquals(BlockCache.Verdict.UNCHECKABLE, c.verify("old"));
        assertEquals(BlockCache.Verdict.ABSENT, c.verify("never"));
        assertEquals(hits, c.stats().hits(), "a verify is not a read");
        assertEquals(1, c.corruptBlocks());
        assertTrue(!c.contains("rots"), "dropped");
        try (var files = Files.walk(dir)) {
            assertTrue(files.noneMatch(f -> f.getFileName().toString().equals("rots")), "and deleted");
        }
        assertTrue(c.contains("good") && c.contains("old"));

        Path src = sharedFile();
        byte[] all = Files.readAllBytes(src);
        for (int i = 0; i < 3; i++) {
            assertTrue(c.link(LINKED[i], src, i * 1000L, 1000, BlockSums.of(java.util.Arrays.copyOfRange(all, i * 1000, i * 1000 + 1000))));
        }
        flipBit(src, 2500);
        assertEquals(BlockCache.Verdict.GOOD, c.verify(LINKED[1]));
        assertEquals(BlockCache.Verdict.DAMAGED, c.verify(LINKED[2]));
        assertEquals(2, c.corruptBlocks());
        assertBlock(c, 0);
    }

    @Test
    void piecesAreAtMostThirtyTwoAndAtLeast64KiB() {
        assertEquals(1, BlockSums.pieces(1));
        assertEquals(1, BlockSums.pieces(64 << 10));
        assertEquals(2, BlockSums.pieces((64 << 10) + 1));
        assertEquals(32, BlockSums.pieces(4 << 20));
        assertEquals(128 << 10, BlockSums.pieceSize(4 << 20));
        assertEquals(32, BlockSums.pieces(16 << 20));
        assertEquals(32, BlockSums.pieces((16 << 20) - 1));
        assertEquals(0xffff_ffffL, BlockSums.all(16 << 20));
        assertEquals(0b1100L, BlockSums.mask(2, 3));
        assertEquals(4 * 32, BlockSums.of(new byte[4 << 20]).length);
    }

    @Test
    void zeroCapacityDisables() throws Exception {
        BlockCache c = new BlockCache(dir.resolve("off"), 0);
        c.put("a", new byte[10]);
        assertNull(c.read("a", 0, 1));
        assertTrue(!Files.exists(dir.resolve("off")));
    }

    @Test
    void keepsCachingWhenItsDirectoryIsRemovedUnderIt() throws Exception {
        BlockCache c = new BlockCache(dir, 1 << 20);
        for (int i = 0; i < 2000; i++) {
            c.put("vol/chunks/" + i + "_0_1", new byte[] {1}); // every bucket directory is known to exist
        }
        try (var walk = java.nio.file.Files.walk(dir)) {
            for (java.nio.file.Path p : walk.sorted(java.util.Comparator.reverseOrder()).toList()) {
                java.nio.file.Files.delete(p); // an operator clearing the cache of a running mount
            }
        }
        c.put("vol/chunks/1_0_3x", new byte[] {4, 5});
        org.junit.jupiter.api.Assertions.assertArrayEquals(new byte[] {4, 5}, c.read("vol/chunks/1_0_3x", 0, 2));
    }

    @Test
    void boundsTheNumberOfBlocksWhateverTheirSize() throws Exception {
        BlockCache c = new BlockCache(dir, 1 << 30, 3);
        c.awaitLoaded();
        for (int i = 0; i < 5; i++) {
            c.put("k" + i, new byte[10]);
        }
        assertEquals(3, c.stats().blocks());
        assertTrue(!c.contains("k0") && !c.contains("k1") && c.contains("k4"), "the least recently used go first");
        try (var files = Files.walk(dir)) {
            assertEquals(3, files.filter(Files::isRegularFile).count(), "evicted blocks are deleted from disk");
        }
    }

    @Test
    void servesBlocksFromDiskBeforeTheRestartedIndexIsLoaded() throws Exception {
        BlockCache first = new BlockCache(dir, 10_000);
        first.awaitLoaded();
        for (int i = 0; i < 4; i++) {
            first.put("k" + i, new byte[] {(byte) i, 1, 2});
        }
        java.util.List<Runnable> held = new java.util.ArrayList<>();
        BlockCache c = new BlockCache(dir, 3 * 3, BlockCache.DEFAULT_MAX_BLOCKS, 0, held::add); // room for 3 of the 4
        assertEquals(1, held.size(), "the index is loaded off the constructing thread");
        assertArrayEquals(new byte[] {0, 1}, c.read("k0", 0, 2), "the oldest block, found on disk while loading");
        assertNull(c.read("nope", 0, 1));
        assertEquals(1, c.stats().hits());
        assertEquals(1, c.stats().misses());
        c.remove("k2"); // not indexed yet: its file must go all the same
        c.put("n", new byte[] {9, 9, 9});
        held.get(0).run();
        c.awaitLoaded();
        // on disk: k1, k3 (older than anything used since), then k0 (read) and n (put); room for 3
        assertTrue(!c.contains("k2"), "a block removed while loading stays removed");
        assertTrue(!c.contains("k1"), "the oldest block not used since the start is evicted first");
        assertTrue(c.contains("k0") && c.contains("k3") && c.contains("n"));
        assertEquals(9, c.stats().bytes());
        BlockCache again = new BlockCache(dir, 10_000);
        again.awaitLoaded();
        assertEquals(3, again.stats().blocks(), "evicted and removed blocks are gone from disk");
    }

    /**
     * On a disk that fills up (an 8 MiB tmpfs) the cache evicts to keep a quarter of it free,
     * whatever its own capacity, and gives way when asked (for a staged block).
     */
    @Test
    void theCacheKeepsItsDisksFreeSpaceFloorAndGivesWayWhenAsked() throws Exception {
        try (io.partfs.engine.testing.SmallDisk disk = new io.partfs.engine.testing.SmallDisk(8)) {
            BlockCache c = new BlockCache(disk.dir().resolve("cache"), 1L << 30, BlockCache.DEFAULT_MAX_BLOCKS, 0.25);
            c.awaitLoaded();
            byte[] block = new byte[1 << 20];
            for (int i = 0; i < 20; i++) {
                c.put("k" + i, block);
                assertTrue(disk.free() >= disk.total() / 4, "after block " + i + ": " + disk.free() + " bytes free");
            }
            assertTrue(c.contains("k19") && !c.contains("k0"), "the newest kept, the oldest evicted");
            long before = c.stats().bytes();
            assertTrue(before >= 3 << 20, before + " bytes cached: the disk above the floor is used");
            assertTrue(c.evictBytes(2 << 20) >= 2 << 20);
            assertEquals(before - (2 << 20), c.stats().bytes(), "two blocks evicted for what needs the room");
            assertTrue(c.contains("k19"));
        }
    }

    /** A 3,000-byte file holding three blocks of 1,000 bytes, each byte its offset's low bits, in the staging directory. */
    private Path sharedFile() throws Exception {
        byte[] data = new byte[3000];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) (i * 7);
        }
        return Files.write(Files.createDirectories(dir.resolve(BlockCache.STAGING)).resolve("backing"), data);
    }

    private static final String[] LINKED = {"v/chunks/0/0/5_0_1000", "v/chunks/0/0/5_1_1000", "v/chunks/0/0/5_2_1000"};

    private static void assertBlock(BlockCache c, int i) {
        byte[] got = c.read(LINKED[i], 10, 5);
        for (int j = 0; j < 5; j++) {
            assertEquals((byte) ((i * 1000 + 10 + j) * 7), got[j], "byte " + j + " of block " + i);
        }
    }

    /** A cache of {@code capacity} bytes holding the three blocks of {@link #sharedFile} as links to {@code src}. */
    private BlockCache linkingAllThree(Path src, long capacity) throws Exception {
        BlockCache c = new BlockCache(dir, capacity);
        c.awaitLoaded();
        for (int i = 0; i < 3; i++) {
            assertTrue(c.link(LINKED[i], src, i * 1000L, 1000, null));
        }
        return c;
    }

    @Test
    void linkedRangesOfAFileCountItOnceAndFreeItWithTheirLastLink() throws Exception {
        Path src = sharedFile();
        BlockCache c = linkingAllThree(src, 1 << 20);
        assertEquals(4, Files.getAttribute(src, "unix:nlink"), "linked three times, not copied");
        Files.delete(src); // as staging does once the blocks are uploaded
        for (int i = 0; i < 3; i++) {
            assertBlock(c, i);
        }
        assertNull(c.pathIfCached(LINKED[1]), "a range is not a whole-block file");
        assertEquals(3000, c.stats().bytes());
        assertEquals(3, c.stats().blocks());
        c.remove(LINKED[0]);
        assertEquals(3000, c.stats().bytes(), "the file stays on disk while two links hold it");
        assertBlock(c, 2);
        c.remove(LINKED[1]);
        c.remove(LINKED[2]);
        assertEquals(0, c.stats().bytes());
        try (java.util.stream.Stream<Path> s = Files.walk(dir)) {
            assertEquals(List.of(), s.filter(Files::isRegularFile).toList(), "nothing left on disk");
        }
    }

    @Test
    void linkedBlocksAreFoundAgainAfterARestart() throws Exception {
        Path src = sharedFile();
        BlockCache c = new BlockCache(dir, 1 << 20);
        c.awaitLoaded();
        c.link(LINKED[0], src, 0, 1000, null);
        c.link(LINKED[2], src, 2000, 1000, null);
        Files.delete(src);
        BlockCache again = new BlockCache(dir, 1 << 20);
        again.awaitLoaded();
        assertEquals(2, again.stats().blocks());
        assertEquals(3000, again.stats().bytes(), "the whole file, once");
        assertBlock(again, 0);
        assertBlock(again, 2);
        assertNull(again.read(LINKED[1], 0, 1), "never linked");
    }

    @Test
    void evictingLinkedBlocksFreesTheirFileWithTheLastOne() throws Exception {
        Path src = sharedFile();
        BlockCache c = linkingAllThree(src, 6000);
        Files.delete(src);
        c.put("x", new byte[1000]);
        c.put("y", new byte[1000]);
        c.put("z", new byte[1000]);
        assertEquals(6000, c.stats().bytes());
        c.put("w", new byte[1000]); // over capacity: the links are least recently used, and only all three free anything
        for (String k : LINKED) {
            assertTrue(!c.contains(k), k + " evicted");
        }
        assertTrue(c.contains("x") && c.contains("y") && c.contains("z") && c.contains("w"));
        assertEquals(4000, c.stats().bytes());
    }

    /**
     * While a file's upload is in progress its staging name holds it on disk, so evicting its
     * links for room frees nothing: the cache gives way with blocks that free their bytes instead,
     * and with the links once the staging name is gone.
     */
    @Test
    void evictingForRoomPassesOverLinksWhoseFileIsStillStaged() throws Exception {
        Path src = sharedFile();
        BlockCache c = linkingAllThree(src, 1 << 20);
        c.put("x", new byte[1000]);
        c.put("y", new byte[1000]);
        assertEquals(1000, c.evictBytes(1000), "one block that frees its bytes");
        for (String k : LINKED) {
            assertTrue(c.contains(k), k + " kept: its file is still staged");
        }
        assertTrue(!c.contains("x") && c.contains("y"), "the least recently used block that frees anything");
        assertEquals(4, Files.getAttribute(src, "unix:nlink"));
        Files.delete(src); // the upload is done
        assertEquals(3000, c.evictBytes(1000), "now the links free their file");
        for (String k : LINKED) {
            assertTrue(!c.contains(k), k + " evicted");
        }
        assertTrue(c.contains("y"));
        assertEquals(1000, c.stats().bytes());
    }

    @Test
    void aFileTooLargeForTheCacheIsNotLinked() throws Exception {
        Path src = sharedFile();
        BlockCache c = new BlockCache(dir, 5000);
        c.awaitLoaded();
        assertTrue(!c.link(LINKED[0], src, 0, 1000, null), "3,000 bytes counted whole would take more than half of 5,000: the caller copies");
        assertEquals(0, c.stats().blocks());
        assertEquals(1, Files.getAttribute(src, "unix:nlink"));
    }
}
