package io.partfs.engine.fs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.Attr;
import io.partfs.engine.FsException;
import io.partfs.engine.PartFs;
import io.partfs.engine.PartFsConfig;
import io.partfs.engine.data.FileLayout;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.object.ObjectStore;
import io.partfs.engine.testing.Concurrently;
import io.partfs.engine.testing.Poll;
import io.partfs.engine.testing.TestVolume;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The filesystem API over the whole data path, on one metadata engine and object store chosen
 * by the subclass. Volumes use 1 MiB blocks so multi-block files stay small.
 */
abstract class PartFsContract extends OnBackends {
    static final long ROOT = MetaEngine.ROOT;
    static final int RW = PartFs.O_RDWR;

    @TempDir
    Path dir;
    TestVolume volume;
    PartFs fs;

    @BeforeEach
    void openVolume() throws IOException {
        volume = new TestVolume(meta(), store(), dir, backends.redis, backends.s3, TestVolume.defaultConfig(dir));
        fs = volume.open();
    }

    @AfterEach
    void closeVolume() throws IOException {
        fs.close();
    }

    void reopen() throws IOException {
        fs.close();
        fs = volume.open();
    }

    static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    long create(String name) throws IOException {
        return fs.create(ROOT, name, 0644, RW, 0, 0).fh();
    }

    byte[] readAll(long ino) throws IOException {
        long fh = fs.open(ino, PartFs.O_RDONLY);
        try {
            int size = (int) fs.getattr(ino).size();
            byte[] out = new byte[size];
            int done = 0;
            while (done < size) {
                int n = fs.read(fh, done, out, done, Math.min(size - done, 128 << 10));
                assertTrue(n > 0, "read returned " + n + " before the end");
                done += n;
            }
            assertEquals(0, fs.read(fh, size, new byte[10], 0, 10), "reading at EOF returns nothing");
            return out;
        } finally {
            fs.release(fh);
        }
    }

    long ino(String name) throws IOException {
        return fs.lookup(ROOT, name).ino();
    }

    List<ObjectStore.ObjectInfo> dataObjects() throws IOException {
        try (ObjectStore s = volume.newObjectStore()) {
            return s.listAll("testvol/chunks/");
        }
    }

    long write(long parent, String name, byte[] data) throws IOException {
        PartFs.Created c = fs.create(parent, name, 0644, RW, 0, 0);
        fs.write(c.fh(), 0, data, 0, data.length);
        fs.release(c.fh());
        return c.attr().ino();
    }

    /**
     * fsck and gc on every backend: a whole volume counts right (a hard-linked file once), an
     * unreferenced object counts as leaked only once it is older than the minimum age and is the
     * only thing gc deletes (not the blocks of a file unlinked while open, nor a non-block key),
     * and a block deleted behind PartFS's back makes its file broken, by path.
     */
    @Test
    void volumeCheckFindsMissingBlocksAndDeletesOnlyLeakedObjects() throws IOException {
        long d = fs.mkdir(ROOT, "d", 0755, 0, 0).ino();
        byte[] a = random((5 << 19) + 7, 21); // 2.5 MiB: 3 blocks of 1 MiB
        long aIno = write(d, "a", a);
        long b = write(ROOT, "b", random(1000, 22));
        fs.link(b, ROOT, "c");
        fs.symlink(ROOT, "s", "d/a", 0, 0);
        PartFs.Created open = fs.create(ROOT, "u", 0644, RW, 0, 0);
        byte[] u = random(2000, 23);
        fs.write(open.fh(), 0, u, 0, u.length);
        fs.flush(open.fh());
        fs.unlink(ROOT, "u"); // still open: its block stays referenced
        try (ObjectStore store = volume.newObjectStore()) {
            String leakedKey = io.partfs.engine.data.ChunkStore.blockKey("testvol", 987_654_321L, 0, 5);
            store.put(leakedKey, new byte[5]);
            store.put("testvol/chunks/notes.txt", new byte[3]);
            List<String> phases = new ArrayList<>();
            var check = new io.partfs.engine.data.VolumeCheck(fs.meta(), store, (phase, n) -> phases.add(phase));

            var r = check.run(new io.partfs.engine.data.VolumeCheck.Options(true, false, 3_600_000));
            assertEquals(2, r.directories);
            assertEquals(2, r.files, "a, and b with its second link c once");
            assertEquals(1, r.symlinks);
            assertEquals(1, r.pendingFiles, "u, unlinked while open");
            assertEquals(3 + 1 + 1, r.blocks, "a's three blocks, b's and u's");
            assertEquals(0, r.missingBlocks);
            assertEquals(1, r.foreign);
            assertEquals(0, r.leaked, "a new unreferenced object may be a write in progress");
            assertEquals(1, r.young);

            r = check.run(new io.partfs.engine.data.VolumeCheck.Options(true, false, 0));
            assertEquals(1, r.leaked);
            assertEquals(5, r.leakedBytes);
            assertEquals(0, r.deleted);
            assertTrue(store.head(leakedKey).isPresent(), "counting deletes nothing");

            r = check.run(new io.partfs.engine.data.VolumeCheck.Options(false, true, 0));
            assertEquals(1, r.deleted);
            assertEquals(0, r.directories, "gc finds slices by key, without walking the tree");
            assertTrue(store.head(leakedKey).isEmpty());
            assertTrue(store.head("testvol/chunks/notes.txt").isPresent(), "keys that are not blocks are left alone");
            assertArrayEquals(a, readAll(aIno));
            byte[] back = new byte[u.length];
            assertEquals(u.length, fs.read(open.fh(), 0, back, 0, u.length));
            assertArrayEquals(u, back, "the open unlinked file kept its block");

            List<ObjectStore.ObjectInfo> blocks = store.listAll("testvol/chunks/");
            String aBlock = blocks.stream().map(ObjectStore.ObjectInfo::key).filter(k -> k.endsWith("_1_1048576")).findFirst().orElseThrow();
            store.delete(aBlock);
            r = check.run(new io.partfs.engine.data.VolumeCheck.Options(true, false, 0));
            assertEquals(1, r.missingBlocks);
            assertEquals(java.util.Set.of(aIno), r.brokenFiles);
            assertEquals(List.of(aIno), check.stillBroken(fs.meta(), r.brokenFiles));
            assertEquals(java.util.Map.of(aIno, "/d/a"), check.paths(r.brokenFiles));
        } finally {
            fs.release(open.fh());
        }
    }

    /**
     * gc --delete with no client mounted finishes the deletions a mount left: here a file
     * unlinked through the bare metadata (no mount, so nobody deletes its data) and a slice
     * freed the same way; afterwards nothing awaits deletion, their objects are gone, and the
     * file kept is whole.
     */
    @Test
    void finishDeletionsDeletesWhatNoMountWillDelete() throws Exception {
        long kept = write(ROOT, "kept", random(3000, 51));
        write(ROOT, "doomed", random((1 << 20) + 10, 52)); // two blocks
        fs.close();
        try (io.partfs.engine.meta.MetaEngine meta = new io.partfs.engine.meta.MetaEngine(volume.newKvStore());
             ObjectStore store = volume.newObjectStore()) {
            meta.load();
            meta.unlink(ROOT, "doomed");
            assertEquals(new io.partfs.engine.meta.MetaEngine.PendingDeletions(1, 0), meta.pendingDeletions());
            assertEquals(3, store.listAll("testvol/chunks/").size());
            var finished = new io.partfs.engine.data.VolumeCheck(meta, store, (phase, n) -> { }).finishDeletions();
            assertEquals(new io.partfs.engine.data.VolumeCheck.Finished(1, 1, 2), finished);
            assertEquals(new io.partfs.engine.meta.MetaEngine.PendingDeletions(0, 0), meta.pendingDeletions());
            assertEquals(1, store.listAll("testvol/chunks/").size(), "only the kept file's block");
        }
        fs = volume.open();
        assertArrayEquals(random(3000, 51), readAll(kept));
    }

    /**
     * fsck's link counts and symlink targets on every backend: a volume after links, unlinks
     * and a directory renamed between parents has every count right; then a file's nlink set
     * below its names and a symlink's target deleted behind PartFS's back are found, and found
     * again (with a path) against the metadata as it is then.
     */
    @Test
    void volumeCheckFindsWrongLinkCountsAndSymlinksWithoutTargets() throws IOException {
        long d = fs.mkdir(ROOT, "d", 0755, 0, 0).ino();
        fs.mkdir(d, "e", 0755, 0, 0);
        long f = write(ROOT, "f", random(100, 41));
        fs.link(fs.getattr(f).ino(), d, "g");
        long h = write(d, "h", random(10, 42));
        fs.link(h, ROOT, "h2");
        fs.unlink(d, "h");
        fs.rename(d, "e", ROOT, "e", 0);
        long s = fs.symlink(ROOT, "s", "f", 0, 0).ino();
        try (ObjectStore store = volume.newObjectStore()) {
            var r = new io.partfs.engine.data.VolumeCheck(fs.meta(), store, (phase, n) -> { }).run(
                    new io.partfs.engine.data.VolumeCheck.Options(true, false, 3_600_000));
            assertEquals(java.util.Set.of(), r.linkMismatches, "links, unlinks and a directory rename keep every count right");
            assertEquals(java.util.Set.of(), r.symlinksWithoutTarget);
        }
        fs.close();
        try (io.partfs.engine.meta.KvStore kv = volume.newKvStore()) {
            kv.update(tx -> {
                tx.put("i" + f, Attr.decode(f, tx.get("i" + f)).withNlink(1).encode()); // two names, one link
                tx.delete("s" + s);
                return null;
            });
        }
        fs = volume.open();
        try (ObjectStore store = volume.newObjectStore()) {
            var check = new io.partfs.engine.data.VolumeCheck(fs.meta(), store, (phase, n) -> { });
            var r = check.run(new io.partfs.engine.data.VolumeCheck.Options(true, false, 3_600_000));
            assertEquals(java.util.Set.of(f), r.linkMismatches);
            assertEquals(java.util.Set.of(s), r.symlinksWithoutTarget);
            var still = io.partfs.engine.data.VolumeCheck.stillMismatched(fs.meta(), r.linkMismatches);
            assertEquals(1, still.size());
            assertEquals(1, still.get(0).nlink());
            assertEquals(2, still.get(0).names());
            assertTrue(still.get(0).path().equals("/f") || still.get(0).path().equals("/d/g"), still.get(0).path());
            assertEquals(List.of("/s"), check.stillWithoutTarget(fs.meta(), r.symlinksWithoutTarget));
        }
    }

    /**
     * Adds {@code sub/b} (1000 bytes, also linked as {@code c}), {@code h} (a hole of three
     * blocks, then 10 bytes: one block) and symlink {@code s} to directory {@code w}; returns b's inode.
     */
    private long linkHoleAndSymlink(long w, long sub, long seed) throws IOException {
        long b = write(sub, "b", random(1000, seed));
        fs.link(b, w, "c");
        PartFs.Created h = fs.create(w, "h", 0644, RW, 0, 0);
        fs.write(h.fh(), 3L * fs.format().blockSize(), new byte[10], 0, 10);
        fs.release(h.fh());
        fs.symlink(w, "s", "/etc", 0, 0);
        return b;
    }

    /** Closes the volume, deletes its block cache and opens it again. */
    private void reopenWithEmptyCache() throws IOException {
        fs.close();
        io.partfs.engine.testing.TempDirs.deleteRecursively(dir.resolve("cache"));
        fs = volume.open();
    }

    /**
     * Warmup on every backend: each block of every file under a directory is fetched once into
     * an empty block cache (a hard-linked file once, a hole not at all, a symlink not followed),
     * the files then read without a GET, a second warmup finds everything local, and a block
     * deleted behind PartFS's back is counted as failed. On a local object directory every
     * block is local already.
     */
    @Test
    void warmupFetchesEveryBlockOnceAndSkipsWhatIsLocal() throws Exception {
        long w = fs.mkdir(ROOT, "w", 0755, 0, 0).ino();
        long sub = fs.mkdir(w, "sub", 0755, 0, 0).ino();
        byte[] a = random((5 << 19) + 7, 31); // 3 blocks
        long aIno = write(w, "a", a);
        long b = linkHoleAndSymlink(w, sub, 32);
        reopenWithEmptyCache();
        boolean s3 = store() == TestVolume.Store.S3;

        var warmup = new io.partfs.engine.data.Warmup(fs.meta(), fs.chunks(), 4);
        var p = warmup.run(fs.resolve("/w"));
        assertEquals(3, p.files(), "a, b (with its second name c) and h");
        assertEquals(a.length + 1000 + (3 << 20) + 10, p.fileBytes());
        assertEquals(5, p.blocks());
        assertEquals(s3 ? 5 : 0, p.fetchedBlocks());
        assertEquals(s3 ? a.length + 1000 + 10 : 0, p.fetchedBytes());
        assertEquals(s3 ? 0 : 5, p.localBlocks());
        assertEquals(0, p.failedBlocks());

        long gets = fs.chunks().objectGets();
        assertArrayEquals(a, readAll(aIno));
        assertEquals(1000, readAll(b).length);
        if (s3) { // (a local object directory's blocks are read from it, which counts as a GET)
            assertEquals(gets, fs.chunks().objectGets(), "warmed files read without a GET");
        }
        p = new io.partfs.engine.data.Warmup(fs.meta(), fs.chunks(), 4).run(fs.resolve("/w"));
        assertEquals(5, p.localBlocks());
        assertEquals(0, p.fetchedBlocks());
        assertEquals(1, new io.partfs.engine.data.Warmup(fs.meta(), fs.chunks(), 1).run(fs.resolve("/w/a")).files());

        if (s3) {
            reopenWithEmptyCache();
            try (ObjectStore store = volume.newObjectStore()) {
                String aBlock = store.listAll("testvol/chunks/").stream().map(ObjectStore.ObjectInfo::key)
                        .filter(k -> k.endsWith("_1_1048576")).findFirst().orElseThrow();
                store.delete(aBlock);
            }
            p = new io.partfs.engine.data.Warmup(fs.meta(), fs.chunks(), 4).run(fs.resolve("/w"));
            assertEquals(1, p.failedBlocks());
            assertEquals(4, p.fetchedBlocks());
            assertTrue(p.firstError().startsWith("inode " + aIno + ": "), p.firstError());
        }
    }

    /**
     * {@code partfs info}'s layout on every backend: a file's extents in file order (an overwrite
     * splits its first slice in three runs, a block both outer runs share is asked of the store
     * once), a hole with no blocks, where each block is (object store until read, then the block
     * cache; a local object directory's objects), and with a check, a block deleted behind
     * PartFS's back is missing and one replaced by a shorter object has the wrong size. A tree
     * counts a hard-linked file once and does not follow symlinks; a write-back mount's block
     * is staged until uploaded.
     */
    @Test
    void layoutShowsExtentsHolesAndWhereEachBlockIs() throws Exception {
        int bs = fs.format().blockSize();
        long w = fs.mkdir(ROOT, "w", 0755, 0, 0).ino();
        long sub = fs.mkdir(w, "sub", 0755, 0, 0).ino();
        long aIno = write(w, "a", random(2 * bs + 7, 41)); // one slice, 3 blocks
        long fh = fs.open(aIno, RW);
        fs.write(fh, 100, new byte[10], 0, 10); // a second slice over bytes 100-109
        fs.release(fh);
        linkHoleAndSymlink(w, sub, 42);
        reopenWithEmptyCache();
        boolean s3 = store() == TestVolume.Store.S3;
        var remote = s3 ? FileLayout.Where.OBJECT_STORE : FileLayout.Where.LOCAL_OBJECT;

        var a = FileLayout.of(fs.chunks(), fs.getattr(aIno), false);
        assertEquals(List.of(0L, 100L, 110L), a.stream().map(FileLayout.Extent::offset).toList());
        assertEquals(List.of(100, 10, 2 * bs + 7 - 110), a.stream().map(FileLayout.Extent::length).toList());
        assertEquals(a.get(0).slice(), a.get(2).slice(), "the overwritten slice holds both outer runs");
        assertNotEquals(a.get(0).slice(), a.get(1).slice());
        assertEquals(110, a.get(2).sliceOffset());
        assertEquals(List.of(1, 1, 3), a.stream().map(e -> e.blocks().size()).toList());
        assertEquals(a.get(0).blocks().get(0), a.get(2).blocks().get(0), "the same block, found once");
        assertEquals(List.of(bs, bs, 7), a.get(2).blocks().stream().map(FileLayout.Block::size).toList());
        assertEquals(List.of(110L, (long) bs, 2L * bs), a.get(2).pieces().stream().map(FileLayout.Piece::offset).toList());
        assertEquals(List.of(bs - 110, bs, 7), a.get(2).pieces().stream().map(FileLayout.Piece::length).toList());
        assertEquals(new FileLayout.Piece(100, 10, a.get(1).blocks().get(0)), a.get(1).pieces().get(0));
        assertTrue(a.stream().flatMap(e -> e.blocks().stream()).allMatch(x -> x.where() == remote), a.toString());

        var hole = FileLayout.of(fs.chunks(), fs.resolve("/w/h"), false);
        assertEquals(2, hole.size());
        assertTrue(hole.get(0).hole() && hole.get(0).blocks().isEmpty() && hole.get(0).length() == 3 * bs);
        assertEquals(new FileLayout.Piece(3L * bs, 10, hole.get(1).blocks().get(0)), hole.get(1).pieces().get(0));
        assertEquals(10, hole.get(1).blocks().get(0).size());

        var checked = FileLayout.of(fs.chunks(), fs.getattr(aIno), true);
        assertTrue(checked.stream().flatMap(e -> e.blocks().stream()).allMatch(x -> x.where() == (s3
                ? FileLayout.Where.CHECKED : FileLayout.Where.LOCAL_OBJECT)
                && x.storedSize() == x.size()), checked.toString());
        if (s3) {
            readAll(aIno);
            var cached = FileLayout.of(fs.chunks(), fs.getattr(aIno), true);
            assertTrue(cached.stream().flatMap(e -> e.blocks().stream()).allMatch(x -> x.where() == FileLayout.Where.BLOCK_CACHE));
            reopenWithEmptyCache();
        }
        String gone = a.get(2).blocks().get(1).key();
        String cut = a.get(2).blocks().get(2).key();
        try (ObjectStore store = volume.newObjectStore()) {
            store.delete(gone);
            store.put(cut, new byte[3]);
        }
        var broken = FileLayout.of(fs.chunks(), fs.getattr(aIno), true).get(2).blocks();
        assertEquals(FileLayout.Where.MISSING, broken.get(1).where());
        assertEquals(FileLayout.Where.WRONG_SIZE, broken.get(2).where());
        assertEquals(3, broken.get(2).storedSize());
        assertEquals(remote, FileLayout.of(fs.chunks(), fs.getattr(aIno), false).get(2).blocks().get(1).where(),
                "without a check the store is not asked");
        assertThrows(IllegalArgumentException.class, () -> FileLayout.of(fs.chunks(), fs.getattr(w), false));

        var tree = FileLayout.tree(fs.meta(), fs.getattr(w));
        assertEquals(new FileLayout.Tree(1, 3, 2L * bs + 7 + 1000 + 3L * bs + 10, 1, 0), tree,
                "sub; a, b (also c) and h; s");

        var uploads = reopenCounted(TestVolume.defaultConfig(dir).toBuilder().writeBack(true)
                .uploadDelay(java.time.Duration.ofHours(1)).build());
        long st = fs.create(w, "staged", 0644, RW, 0, 0).fh();
        fs.write(st, 0, new byte[500], 0, 500);
        fs.fsync(st);
        fs.release(st);
        int heads = uploads.heads();
        var staged = FileLayout.of(fs.chunks(), fs.resolve("/w/staged"), true);
        assertEquals(FileLayout.Where.STAGED, staged.get(0).blocks().get(0).where());
        assertEquals(heads, uploads.heads(), "a staged block is not asked of the store");
    }

    /**
     * Compaction on every backend: a file appended to one write at a time past {@value
     * MetaEngine#COMPACT_AT} slices in its chunk is compacted in the background into one slice
     * once its commits pause; it reads the same, before and after a reopen, and the objects of
     * the slices merged are deleted (no trash here).
     */
    @Test
    void aFileAppendedAWriteAtATimeIsCompactedAndReadsTheSame() throws Exception {
        reopenCounted(TestVolume.defaultConfig(dir).toBuilder().compactQuiet(java.time.Duration.ofSeconds(1)).build());
        fs.meta().setTrashHours(0);
        long ino = fs.create(ROOT, "log.bin", 0644, RW, 0, 0).attr().ino();
        byte[] expected = appendRows(ino, MetaEngine.COMPACT_AT + 8, 50);
        // once the commits paused (all 40, unless a commit took longer than the quiet time), in one compaction
        Poll.until(() -> fs.compactor().compacted() == 1, java.time.Duration.ofSeconds(30), "the chunk compacted");
        List<io.partfs.engine.meta.Slice> list = fs.meta().readChunk(ino, 0);
        assertTrue(list.size() <= 9, list.toString());
        int merged = (MetaEngine.COMPACT_AT + 9 - list.size()) * 100;
        assertEquals(new io.partfs.engine.meta.Slice(list.get(0).id(), merged, 0, merged, 0), list.get(0));
        assertArrayEquals(expected, readAll(ino));
        fs.awaitReclaim();
        assertEquals(list.size(), dataObjects().size(), "the merged slices' objects are deleted");
        reopen();
        assertArrayEquals(expected, readAll(ino));
        assertEquals(expected.length, fs.getattr(ino).size());
    }

    /**
     * A compaction whose transaction fails with an unknown outcome leaves its merged slice to a
     * check once no transaction sent then can still apply (here after 100 ms): one that did not
     * apply goes to deletion instead of staying in the store with nothing naming it; one that
     * applied (its reply lost) stays. The file reads the same either way.
     */
    @Test
    void aCompactionWhoseTransactionFailsLeaksNothingAndLosesNothing() throws Exception {
        fs.close();
        io.partfs.engine.testing.CountingKvStore[] kv = new io.partfs.engine.testing.CountingKvStore[1];
        fs = volume.open(TestVolume.defaultConfig(dir).toBuilder().compactQuiet(java.time.Duration.ofHours(1))
                .commitSettle(java.time.Duration.ofMillis(100)).build(), o -> o, k -> kv[0] = new io.partfs.engine.testing.CountingKvStore(k));
        fs.meta().setTrashHours(0);
        long ino = fs.create(ROOT, "log.bin", 0644, RW, 0, 0).attr().ino();
        byte[] expected = appendRows(ino, 4, 70);
        assertEquals(4, dataObjects().size());

        kv[0].failUpdates(true); // the replacement never reaches the engine
        assertThrows(IOException.class, () -> fs.compactor().compact(ino, 0));
        kv[0].failUpdates(false);
        assertEquals(5, dataObjects().size(), "the merged slice was stored before its transaction");
        Poll.until(() -> countDataObjects() == 4, java.time.Duration.ofSeconds(30), "the merged slice's object deleted");
        fs.awaitReclaim(); // and the deletion list updated after it: the hook below is for the compaction's transaction
        assertEquals(4, fs.meta().readChunk(ino, 0).size(), "the chunk as it was");
        assertArrayEquals(expected, readAll(ino));

        kv[0].afterCommit(() -> {
            kv[0].afterCommit(() -> { });
            throw new java.io.UncheckedIOException(new IOException("the reply was lost"));
        });
        assertThrows(java.io.UncheckedIOException.class, () -> fs.compactor().compact(ino, 0));
        List<io.partfs.engine.meta.Slice> list = fs.meta().readChunk(ino, 0);
        assertEquals(1, list.size(), "the replacement applied: " + list);
        Poll.until(() -> fs.compactor().outcomesChecked() == 2, java.time.Duration.ofSeconds(30), "the second outcome checked");
        Poll.until(() -> {
            try {
                return fs.meta().pendingSliceDeletions(10).isEmpty();
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }, java.time.Duration.ofSeconds(30), "the deletion list emptied");
        assertEquals(1, countDataObjects(), "the four replaced slices' objects are deleted, the merged one's is not");
        reopen();
        assertArrayEquals(expected, readAll(ino));
    }

    /** Appends {@code rows} rows of 100 random bytes to file {@code ino}, a commit (a slice) each; returns what it holds. */
    byte[] appendRows(long ino, int rows, long seed) throws IOException {
        java.io.ByteArrayOutputStream all = new java.io.ByteArrayOutputStream();
        for (int i = 0; i < rows; i++) {
            byte[] row = random(100, seed + i);
            long fh = fs.open(ino, RW);
            fs.write(fh, all.size(), row, 0, row.length);
            fs.release(fh);
            all.write(row);
        }
        return all.toByteArray();
    }

    private int countDataObjects() {
        try {
            return dataObjects().size();
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /**
     * An unmount during a compaction waits for the object store request under way and stops the
     * compaction before its next block: the chunk stays as it was, and the block it stored is put
     * on the deletion list, not left in the store with nothing naming it. The compactor used to
     * be interrupted in the middle of the request. On every backend, with the merged slice's
     * first PUT held until the unmount has begun.
     */
    @Test
    void anUnmountDuringACompactionLeaksNoObject() throws Exception {
        io.partfs.engine.testing.CountingObjectStore store = reopenCounted(TestVolume.defaultConfig(dir).toBuilder()
                .compactAt(3).compactQuiet(java.time.Duration.ofMillis(200)).build());
        fs.meta().setTrashHours(0);
        long ino = fs.create(ROOT, "rewritten.bin", 0644, RW, 0, 0).attr().ino();
        byte[] last = null;
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch arrived = null;
        for (int i = 0; i < 3; i++) {
            last = random((1 << 20) + (1 << 19), 300 + i); // written over whole: a merged slice of two blocks
            long fh = fs.open(ino, RW);
            fs.write(fh, 0, last, 0, last.length);
            if (i == 2) {
                fs.flush(fh); // the third slice committed: the compaction starts once commits pause 200 ms
                arrived = store.holdNextPut(release);
            }
            fs.release(fh);
        }
        assertTrue(arrived.await(30, java.util.concurrent.TimeUnit.SECONDS), "the compaction's first PUT");
        PartFs closing = fs;
        Future<?> unmount = Executors.newSingleThreadExecutor().submit(() -> {
            closing.close();
            return null;
        });
        // the unmount waits for the compaction (not interrupting it), which then stops before its second block
        assertThrows(java.util.concurrent.TimeoutException.class, () -> unmount.get(300, java.util.concurrent.TimeUnit.MILLISECONDS));
        release.countDown();
        unmount.get(60, java.util.concurrent.TimeUnit.SECONDS);
        fs = volume.open();
        assertEquals(3, fs.meta().readChunk(ino, 0).size(), "the chunk as it was");
        assertArrayEquals(last, readAll(ino));
        TestVolume.assertConsistent(volume, fs, " (an unmount during a compaction)");
    }

    /**
     * A compaction asked for ({@code partfs compact}) merges the chunks the background compactor
     * leaves alone (fewer than 32 slices), under a directory, a file with two links once, and
     * deletes the merged slices' objects.
     */
    @Test
    void aCompactionAskedForMergesChunksUnderADirectory() throws Exception {
        fs.meta().setTrashHours(0);
        long sub = fs.mkdir(ROOT, "sub", 0755, 0, 0).ino();
        long[] inos = {fs.create(ROOT, "a", 0644, RW, 0, 0).attr().ino(), fs.create(sub, "b", 0644, RW, 0, 0).attr().ino()};
        java.io.ByteArrayOutputStream[] expected = {new java.io.ByteArrayOutputStream(), new java.io.ByteArrayOutputStream()};
        for (int f = 0; f < 2; f++) {
            for (int i = 0; i < (f == 0 ? 10 : 5); i++) {
                byte[] row = random(100, 70 + 10 * f + i);
                long fh = fs.open(inos[f], RW);
                fs.write(fh, expected[f].size(), row, 0, row.length);
                fs.release(fh); // a commit each: a slice each
                expected[f].write(row);
            }
        }
        fs.link(inos[0], sub, "a-again");
        long once = write(sub, "once", random(1000, 90));
        int objectsBefore = dataObjects().size();

        io.partfs.engine.data.CompactPass pass = new io.partfs.engine.data.CompactPass(fs.meta(), fs.chunks(), fs.compactor());
        io.partfs.engine.data.CompactPass.Progress p = pass.run(fs.getattr(ROOT));
        assertEquals(List.of(3L, 3L, 2L, 2L, 15L, 2L, 1500L, 0L, 0L), List.of(p.files(), p.chunks(), p.fragmented(),
                p.compactedChunks(), p.slicesBefore(), p.slicesAfter(), p.bytesWritten(), p.skipped(), p.failed()), p.toString());
        for (int f = 0; f < 2; f++) {
            assertEquals(1, fs.meta().readChunk(inos[f], 0).size());
            assertArrayEquals(expected[f].toByteArray(), readAll(inos[f]));
        }
        assertEquals(1, fs.meta().readChunk(once, 0).size());
        fs.awaitReclaim();
        assertEquals(objectsBefore - 15 + 2, dataObjects().size(), "the merged slices' objects are deleted");
        assertEquals(0, new io.partfs.engine.data.CompactPass(fs.meta(), fs.chunks(), fs.compactor()).run(fs.getattr(ROOT)).compactions(),
                "nothing left to compact");
        reopen();
        assertArrayEquals(expected[0].toByteArray(), readAll(inos[0]));
    }

    /**
     * On a shared volume with the trash off, a mount reading a file as of attributes it cached
     * (here for an hour) meets objects that another mount's compaction, then truncation, freed
     * and deleted: it reads again from the file's new layout instead of failing, and a compaction
     * whose layout another mount compacted and deleted between its reading the layout and the
     * blocks gives up quietly. An object missing from the layout the store names now still fails
     * the read.
     */
    @Test
    void aReaderWhoseCachedLayoutAnotherMountFreedReadsTheNewOne() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(meta() == TestVolume.Meta.REDIS, "one client at a time on RocksDB");
        fs.meta().setTrashHours(0);
        long ino = fs.create(ROOT, "appended", 0644, RW, 0, 0).attr().ino();
        byte[] want = appendRows(ino, 6, 200);
        PartFsConfig reader = PartFsConfig.builder().ioThreads(2).metaCacheTtl(java.time.Duration.ofHours(1)).build(); // no block cache
        io.partfs.engine.testing.CountingKvStore[] thirdKv = new io.partfs.engine.testing.CountingKvStore[1];
        try (PartFs other = volume.openAs(reader);
             PartFs third = volume.openAs(reader, o -> o, k -> thirdKv[0] = new io.partfs.engine.testing.CountingKvStore(k))) {
            long fh = other.open(ino, PartFs.O_RDONLY);
            try {
                byte[] got = new byte[want.length];
                assertEquals(want.length, other.read(fh, 0, got, 0, got.length));
                assertArrayEquals(want, got, "read as first laid out: six slices");
                assertEquals(6, third.meta().readChunk(ino, 0, third.getattr(ino).dataVersion()).size(), "a third mount caches them too");

                Thread compacting = Thread.currentThread();
                thirdKv[0].afterRead(() -> { // the third mount's compaction has read the layout: the first mount compacts it now
                    if (Thread.currentThread() == compacting) {
                        thirdKv[0].afterRead(() -> { });
                        try {
                            new io.partfs.engine.data.CompactPass(fs.meta(), fs.chunks(), fs.compactor()).run(fs.getattr(ROOT));
                            fs.awaitReclaim();
                        } catch (IOException e) {
                            throw new java.io.UncheckedIOException(e);
                        }
                    }
                });
                assertEquals(0, third.compactor().compact(ino, 0), "the six slices it read are gone: nothing merged, no failure");
                assertEquals(1, third.compactor().changedMeanwhile());
                assertEquals(1, fs.meta().readChunk(ino, 0).size(), "the first mount's compaction stands");
                third.awaitReclaim();
                assertEquals(1, dataObjects().size(), "what it merged so far is deleted again");
                got = new byte[want.length];
                assertEquals(want.length, other.read(fh, 0, got, 0, got.length));
                assertArrayEquals(want, got, "read again from the compacted layout");
                assertEquals(1, other.staleLayoutReads());

                fs.truncate(ino, 250);
                long wfh = fs.open(ino, RW);
                fs.write(wfh, 250, new byte[] {7}, 0, 1); // a new slice; the merged one is freed by the next compaction
                fs.release(wfh);
                new io.partfs.engine.data.CompactPass(fs.meta(), fs.chunks(), fs.compactor()).run(fs.getattr(ROOT));
                fs.awaitReclaim();
                got = new byte[want.length];
                int n = other.read(fh, 0, got, 0, got.length);
                assertEquals(251, n, "the size the file has now");
                assertArrayEquals(java.util.Arrays.copyOf(want, 250), java.util.Arrays.copyOf(got, 250));
                assertEquals(7, got[250]);
                assertEquals(2, other.staleLayoutReads());

                try (ObjectStore s = volume.newObjectStore()) {
                    for (ObjectStore.ObjectInfo o : dataObjects()) {
                        s.delete(o.key()); // behind PartFS's back: the current layout names it
                    }
                }
                assertThrows(io.partfs.engine.object.ObjectNotFoundException.class, () -> other.read(fh, 0, new byte[10], 0, 10),
                        "a block the current layout names is lost, not read around");
                assertEquals(2, other.staleLayoutReads());
            } finally {
                other.release(fh);
            }
        }
    }

    /**
     * A compaction decides from the file's size which slices lie past its end, so it reads the
     * size and the slices together. It took the size from the mount's cached attributes and the
     * slices from the store: a mount whose attributes were older than an append (another mount's
     * here; the same mount's when the compaction ran while the append committed, as
     * MountedDifferentialTest once caught) merged the chunk up to the old size and dropped the
     * appended slice, and the file read zeros where the append was.
     */
    @Test
    void aCompactionOnAttributesOlderThanAnAppendKeepsTheAppend() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(meta() == TestVolume.Meta.REDIS, "one client at a time on RocksDB");
        byte[] want = random(1000, 91);
        long ino = write(ROOT, "appended", want);
        fs.truncate(ino, 600); // a hole on top, past the new end
        PartFsConfig cached = PartFsConfig.builder().ioThreads(2).metaCacheTtl(java.time.Duration.ofHours(1)).build();
        try (PartFs other = volume.openAs(cached)) {
            assertEquals(600, other.getattr(ino).size(), "the other mount caches the size before the append");
            long fh = fs.open(ino, RW);
            fs.write(fh, 600, want, 600, 400);
            fs.release(fh);
            assertEquals(600, other.getattr(ino).size(), "its cached attributes are older than the append");

            assertEquals(1000, other.compactor().compact(ino, 0), "the three slices merged into one of the whole file");
            assertEquals(1, fs.meta().readChunk(ino, 0).size());
            assertArrayEquals(want, readAll(ino), "the appended bytes are still there");
        }
        reopen();
        assertArrayEquals(want, readAll(ino));
    }

    /**
     * A compaction keeps the slices committed while it read the chunk, on top of the slice it
     * wrote; one whose chunk a truncation freed meanwhile changes nothing, and the slice it wrote
     * is handed to deletion.
     */
    @Test
    void aCompactionKeepsCommitsMadeMeanwhileAndGivesUpOnAChunkFreedMeanwhile() throws Exception {
        long ino = write(ROOT, "f", random(1000, 60));
        long fh = fs.open(ino, RW);
        fs.write(fh, 10, new byte[10], 0, 10);
        fs.release(fh);
        List<io.partfs.engine.meta.Slice> read = fs.meta().readChunk(ino, 0);
        byte[] shown = readAll(ino); // what the compaction read, and stores as one slice
        io.partfs.engine.meta.Slice merged = new io.partfs.engine.meta.Slice(fs.meta().nextSliceId(), 1000, 0, 1000, 0);
        try (ObjectStore store = volume.newObjectStore()) {
            store.put(io.partfs.engine.data.ChunkStore.blockKey("testvol", merged.id(), 0, 1000), shown);
        }
        fh = fs.open(ino, RW);
        fs.write(fh, 20, new byte[] {7}, 0, 1); // committed meanwhile
        fs.release(fh);
        byte[] before = readAll(ino);
        io.partfs.engine.meta.Slice later = fs.meta().readChunk(ino, 0).get(2);
        long version = fs.getattr(ino).dataVersion();

        List<long[]> freed = new ArrayList<>();
        Attr done = fs.meta().compactChunk(ino, 0, read, List.of(merged), merged, freed);
        assertEquals(version + 1, done.dataVersion(), "the layout changed: cached lists are not used again");
        assertEquals(before.length, done.size());
        assertEquals(List.of(merged, later), fs.meta().readChunk(ino, 0), "the later write stays on top");
        assertArrayEquals(before, readAll(ino));
        reopen();
        assertArrayEquals(before, readAll(ino));

        fs.truncate(ino, 0); // frees the chunk
        io.partfs.engine.meta.Slice late = new io.partfs.engine.meta.Slice(fs.meta().nextSliceId(), 10, 0, 10, 0);
        assertNull(fs.meta().compactChunk(ino, 0, List.of(merged, later), List.of(late), late, freed));
        assertEquals(List.of(), fs.meta().readChunk(ino, 0));
    }

    /**
     * A create without O_EXCL of a name another mount has made a symlink (the kernel sends it when
     * it had not looked the name up) fails with EEXIST, and an open of a symlink's inode with
     * ELOOP. Both once opened the symlink as a file: its writes went into chunks that its unlink
     * never freed, and the volume's used space kept them for ever (found by SharedVolumeFuzzTest).
     */
    @Test
    void aCreateOrOpenOfASymlinkFailsAndWritesNothingIntoIt() throws IOException {
        long link = fs.symlink(ROOT, "current", "all_1_1_0", 0, 0).ino();
        MetaEngine.Usage before = fs.meta().usage();
        FsException e = assertThrows(FsException.class, () -> fs.create(ROOT, "current", 0644, RW | PartFs.O_CREAT, 0, 0));
        assertEquals(io.partfs.engine.Errno.EEXIST, e.errno());
        e = assertThrows(FsException.class, () -> fs.open(link, RW));
        assertEquals(io.partfs.engine.Errno.ELOOP, e.errno());
        e = assertThrows(FsException.class, () -> fs.open(link, PartFs.O_RDONLY));
        assertEquals(io.partfs.engine.Errno.ELOOP, e.errno());
        assertEquals("all_1_1_0", fs.readlink(link));
        assertEquals(List.of(), fs.meta().readChunk(link, 0), "nothing written into it");
        assertEquals(before, fs.meta().usage());
    }

    @Test
    void smallFileRoundTrips() throws IOException {
        long fh = create("checksums.txt");
        byte[] data = "checksums format version: 4\n".getBytes();
        assertEquals(data.length, fs.write(fh, 0, data, 0, data.length));
        fs.release(fh);
        assertArrayEquals(data, readAll(ino("checksums.txt")));
        assertEquals(data.length, fs.getattr(ino("checksums.txt")).size());
    }

    @Test
    void largeFileAcrossBlocksAndChunksRoundTripsAndSurvivesReopen() throws IOException {
        int size = (66 << 20) + 12345;
        byte[] data = random(size, 1);
        long fh = create("big.bin");
        for (int off = 0; off < size; off += 128 << 10) {
            fs.write(fh, off, data, off, Math.min(128 << 10, size - off));
        }
        fs.release(fh);
        assertArrayEquals(data, readAll(ino("big.bin")));
        reopen();
        assertArrayEquals(data, readAll(ino("big.bin")));
        assertEquals(size, fs.getattr(ino("big.bin")).size());
        assertTrue(dataObjects().size() >= 67, "1 MiB blocks: at least 67 objects");
    }

    @Test
    void writeBuffersAreReusedAcrossFilesWithoutMixingTheirBytes() throws IOException {
        int block = 1 << 20;
        byte[][] data = new byte[4][];
        for (int i = 0; i < data.length; i++) {
            // a whole number of blocks and a partial one, shorter each time: a reused buffer
            // holds the longer file's bytes past the end of this one's
            data[i] = random(3 * block - 100_000 * i - 7, 100 + i);
            long fh = create("f" + i);
            for (int off = 0; off < data[i].length; off += 128 << 10) {
                fs.write(fh, off, data[i], off, Math.min(128 << 10, data[i].length - off));
            }
            fs.release(fh);
            assertTrue(fs.chunks().keptWriteBuffers() > 0, "the committed blocks' buffers are kept for the next write");
        }
        reopen();
        for (int i = 0; i < data.length; i++) {
            assertArrayEquals(data[i], readAll(ino("f" + i)), "file " + i);
        }
    }

    @Test
    void randomOverwritesMatchAModel() throws IOException {
        Random rnd = new Random(7);
        byte[] model = new byte[0];
        long fh = create("f");
        for (int i = 0; i < 300; i++) {
            int off = rnd.nextInt(3 << 20);
            int len = 1 + rnd.nextInt(rnd.nextBoolean() ? 100 : 300_000);
            byte[] chunk = random(len, i);
            fs.write(fh, off, chunk, 0, len);
            if (off + len > model.length) {
                model = Arrays.copyOf(model, off + len);
            }
            System.arraycopy(chunk, 0, model, off, len);
            if (i % 37 == 0) {
                fs.flush(fh);
            }
            if (i % 50 == 0) {
                assertArrayEquals(model, readAll(ino("f")), "after write " + i);
            }
        }
        fs.release(fh);
        assertArrayEquals(model, readAll(ino("f")));
    }

    @Test
    void readsIntoADirectBufferMatchTheContentAcrossBlocksHolesAndOverwrites() throws IOException {
        int block = fs.format().blockSize();
        byte[] model = new byte[2 * block + 5000];
        byte[] a = random(block + 300, 31);
        byte[] b = random(1000, 32);
        System.arraycopy(a, 0, model, 0, a.length);
        System.arraycopy(b, 0, model, block - 500, b.length); // over the end of block 0 and into block 1
        model[model.length - 1] = 9; // a hole before it
        long fh = create("direct.bin");
        fs.write(fh, 0, a, 0, a.length);
        fs.flush(fh);
        fs.write(fh, block - 500, b, 0, b.length);
        fs.write(fh, model.length - 1, new byte[] {9}, 0, 1);
        fs.release(fh);
        reopen(); // read from the store and cache, not from write buffers
        long r = fs.open(ino("direct.bin"), PartFs.O_RDONLY);
        try {
            java.nio.ByteBuffer dst = java.nio.ByteBuffer.allocateDirect(model.length + 64);
            for (int chunk : new int[] {4096, 128 << 10, 1 << 20, model.length}) {
                byte[] got = new byte[model.length];
                for (int off = 0; off < model.length; ) {
                    dst.clear().position(16); // where a reply's header ends
                    int n = fs.read(r, off, dst, chunk);
                    assertEquals(Math.min(chunk, model.length - off), n);
                    assertEquals(16 + n, dst.position(), "the position moves past what was read");
                    dst.flip().position(16);
                    dst.get(got, off, n);
                    off += n;
                }
                assertArrayEquals(model, got, "read " + chunk + " bytes at a time");
            }
            dst.clear();
            assertEquals(0, fs.read(r, model.length, dst, 10), "nothing at the end");
            assertEquals(0, dst.position());
        } finally {
            fs.release(r);
        }
    }

    @Test
    void sparseFilesReadZerosInHoles() throws IOException {
        long fh = create("sparse");
        fs.write(fh, 10 << 20, new byte[] {1, 2, 3}, 0, 3);
        fs.release(fh);
        byte[] all = readAll(ino("sparse"));
        assertEquals((10 << 20) + 3, all.length);
        for (int i = 0; i < 10 << 20; i++) {
            if (all[i] != 0) {
                throw new AssertionError("byte " + i + " of a hole is " + all[i]);
            }
        }
        assertEquals(3, all[all.length - 1]);
    }

    @Test
    void truncateShrinksThenGrowsWithZeros() throws IOException {
        long fh = create("t");
        byte[] data = random(3 << 20, 2);
        fs.write(fh, 0, data, 0, data.length);
        fs.truncate(ino("t"), 1000);
        fs.truncate(ino("t"), 2 << 20);
        byte[] all = readAll(ino("t"));
        assertEquals(2 << 20, all.length);
        assertArrayEquals(Arrays.copyOf(data, 1000), Arrays.copyOf(all, 1000));
        for (int i = 1000; i < all.length; i++) {
            if (all[i] != 0) {
                throw new AssertionError("byte " + i + " after truncate is " + all[i]);
            }
        }
        fs.release(fh);
    }

    @Test
    void appendModeWritesAtTheEnd() throws IOException {
        long fh = create("log");
        fs.write(fh, 0, new byte[] {1, 2}, 0, 2);
        fs.release(fh);
        long ah = fs.open(ino("log"), PartFs.O_WRONLY | PartFs.O_APPEND);
        fs.write(ah, 0, new byte[] {3}, 0, 1);
        fs.write(ah, 0, new byte[] {4}, 0, 1);
        fs.release(ah);
        assertArrayEquals(new byte[] {1, 2, 3, 4}, readAll(ino("log")));
    }

    @Test
    void readsLeaveAtimeAloneUnlessRelatimeIsAskedFor() throws IOException {
        long fh = create("checksums.txt");
        fs.write(fh, 0, new byte[] {1, 2, 3}, 0, 3);
        fs.release(fh);
        long ino = ino("checksums.txt");
        long written = fs.getattr(ino).atimeNs();
        readAll(ino);
        assertEquals(written, fs.getattr(ino).atimeNs(), "noatime, the default: a read writes no metadata");

        fs.close();
        fs = volume.openAs(TestVolume.defaultConfig(dir).toBuilder().atimeMode(io.partfs.engine.PartFsConfig.AtimeMode.RELATIME).build());
        readAll(ino);
        long read = fs.getattr(ino).atimeNs();
        assertTrue(read > written, "relatime: the first read after a write moves atime");
        readAll(ino);
        assertEquals(read, fs.getattr(ino).atimeNs(), "relatime: later reads leave it until the next change");
    }

    @Test
    void writesThatCannotBeUploadedStayBufferedAndFailEveryFileOnce() throws IOException {
        fs.close();
        io.partfs.engine.testing.CountingObjectStore[] store = new io.partfs.engine.testing.CountingObjectStore[1];
        fs = volume.open(o -> store[0] = new io.partfs.engine.testing.CountingObjectStore(o));
        int block = fs.format().blockSize();
        byte[] a = random(3 * block + 100, 7);
        byte[] b = random(1000, 8);
        long fa = create("a.bin");
        long fb = create("b.bin");
        store[0].failPuts(true);
        fs.write(fa, 0, a, 0, a.length);
        fs.write(fb, 0, b, 0, b.length);
        IOException e = assertThrows(IOException.class, fs::syncAll);
        assertTrue(e.getMessage().contains("of 2 file(s) not uploaded"), e.getMessage());
        assertEquals(3 * 5, store[0].puts(), "each of the 5 blocks tried 3 times, no more");
        assertEquals(0, fs.meta().getattr(ino("a.bin")).size(), "nothing is committed that is not stored");
        assertEquals(a.length, fs.getattr(ino("a.bin")).size(), "the writer still sees what it wrote");
        store[0].reset();
        assertThrows(IOException.class, () -> fs.flush(fa));
        assertEquals(3 * 4, store[0].puts(), "a later flush tries each of its 4 blocks 3 times again");

        store[0].failPuts(false);
        assertEquals(2, fs.chunks().retryFailed(), "the background retry uploads both files' writes once the store is back");
        assertEquals(a.length, fs.meta().getattr(ino("a.bin")).size());
        assertEquals(b.length, fs.meta().getattr(ino("b.bin")).size());
        assertEquals(0, fs.chunks().bufferedBytes());
        fs.release(fa);
        fs.release(fb);
        assertArrayEquals(a, readAll(ino("a.bin")));
        assertArrayEquals(b, readAll(ino("b.bin")));
    }

    @Test
    void aFlushStoresItsOwnBlockInsteadOfQueueingBehindOtherFilesUploads() throws Exception {
        var store = reopenCounted(TestVolume.defaultConfig(dir).toBuilder().ioThreads(1).build());
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch arrived = store.holdNextPut(release);
        byte[] block = random(fs.format().blockSize(), 11);
        byte[] small = random(1000, 12);
        long big = create("big.bin");
        long fh = create("small.bin");
        try {
            // a whole block starts uploading at once, on the only io thread, and is held in the store
            fs.write(big, 0, block, 0, block.length);
            assertTrue(arrived.await(30, java.util.concurrent.TimeUnit.SECONDS), "the big file's block reached the store");
            fs.write(fh, 0, small, 0, small.length);
            assertTimeoutPreemptively(java.time.Duration.ofSeconds(30), () -> fs.fsync(fh),
                    "the fsync stored its block itself rather than wait for the io thread");
            assertEquals(small.length, fs.meta().getattr(ino("small.bin")).size(), "committed");
        } finally {
            release.countDown();
        }
        fs.fsync(big);
        fs.release(big);
        fs.release(fh);
        assertArrayEquals(block, readAll(ino("big.bin")));
        assertArrayEquals(small, readAll(ino("small.bin")));
    }

    /** Creates {@code name} in {@code dir}, writes {@code data} and closes it (flush, as close(2) does); returns its handle, still to release. */
    long writeAndClose(long dir, String name, byte[] data) throws IOException {
        long fh = fs.create(dir, name, 0644, RW, 0, 0).fh();
        fs.write(fh, 0, data, 0, data.length);
        fs.flush(fh);
        return fh;
    }

    @Test
    void closesInATemporaryPartDirectoryReturnBeforeTheirUploadAndTheRenameWaitsForThem() throws Exception {
        var store = reopenCounted(TestVolume.defaultConfig(dir));
        long tmp = fs.mkdir(ROOT, "tmp_insert_all_1_1_0", 0755, 0, 0).ino();
        byte[] a = random(1000, 21);
        byte[] b = random(3000, 22);
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch arrived = store.holdNextPut(release);
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            long fa = assertTimeoutPreemptively(java.time.Duration.ofSeconds(30), () -> writeAndClose(tmp, "a.bin", a),
                    "the close returned while its upload is held");
            assertTrue(arrived.await(30, java.util.concurrent.TimeUnit.SECONDS), "a.bin's upload started");
            long fb = writeAndClose(tmp, "b.bin", b);
            long ia = fs.inodeOf(fa);
            // attributes asked while the flush waits for the store come at once, with the size written (its writer's end)
            Future<Attr> stat = pool.submit(() -> fs.getattr(ia));
            assertEquals(a.length, stat.get(10, java.util.concurrent.TimeUnit.SECONDS).size(),
                    "a stat does not wait for the upload of the file's flush");
            Future<?> rename = pool.submit(() -> {
                fs.rename(ROOT, "tmp_insert_all_1_1_0", ROOT, "all_1_1_0", 0);
                return null;
            });
            assertThrows(java.util.concurrent.TimeoutException.class, () -> rename.get(300, java.util.concurrent.TimeUnit.MILLISECONDS),
                    "the rename waits for a.bin's upload");
            assertEquals(0, fs.meta().getattr(ia).size(), "not committed while its upload is held");
            release.countDown();
            rename.get(30, java.util.concurrent.TimeUnit.SECONDS);
            assertEquals(a.length, fs.getattr(ia).size());
            long part = fs.lookup(ROOT, "all_1_1_0").ino();
            assertEquals(a.length, fs.meta().getattr(fs.lookup(part, "a.bin").ino()).size(), "committed when the rename returned");
            assertEquals(b.length, fs.meta().getattr(fs.lookup(part, "b.bin").ino()).size());
            fs.release(fa);
            fs.release(fb);
            assertArrayEquals(a, readAll(fs.lookup(part, "a.bin").ino()));
            assertArrayEquals(b, readAll(fs.lookup(part, "b.bin").ino()));
            // a part now: a close in it waits for its own upload again
            java.util.concurrent.CountDownLatch release2 = new java.util.concurrent.CountDownLatch(1);
            store.holdNextPut(release2);
            Future<Long> close = pool.submit(() -> writeAndClose(part, "c.bin", a));
            assertThrows(java.util.concurrent.TimeoutException.class, () -> close.get(300, java.util.concurrent.TimeUnit.MILLISECONDS),
                    "a close outside a temporary part directory waits for its upload");
            release2.countDown();
            fs.release(close.get(30, java.util.concurrent.TimeUnit.SECONDS));
        } finally {
            release.countDown();
            pool.shutdownNow();
        }
    }

    @Test
    void aFailedDeferredCloseFailsTheRenameOfItsPartUntilTheStoreTakesTheData() throws Exception {
        var store = reopenCounted(TestVolume.defaultConfig(dir));
        long tmp = fs.mkdir(ROOT, "tmp_merge_all_1_2_1", 0755, 0, 0).ino();
        byte[] a = random(1000, 23);
        store.failPuts(true);
        long fa = writeAndClose(tmp, "a.bin", a); // returns: its flush fails on the pool
        IOException e = assertThrows(IOException.class, () -> fs.rename(ROOT, "tmp_merge_all_1_2_1", ROOT, "all_1_2_1", 0));
        assertTrue(e.getMessage().contains("down"), e.getMessage());
        assertEquals(tmp, fs.lookup(ROOT, "tmp_merge_all_1_2_1").ino(), "the part was not renamed");
        assertThrows(IOException.class, () -> fs.rename(ROOT, "tmp_merge_all_1_2_1", ROOT, "all_1_2_1", 0),
                "nor is it at the next try while the data is not stored");
        store.failPuts(false);
        fs.rename(ROOT, "tmp_merge_all_1_2_1", ROOT, "all_1_2_1", 0);
        long ia = fs.lookup(fs.lookup(ROOT, "all_1_2_1").ino(), "a.bin").ino();
        assertEquals(a.length, fs.meta().getattr(ia).size(), "committed by the rename that succeeded");
        fs.release(fa);
        assertArrayEquals(a, readAll(ia));
    }

    /**
     * With the store down, the rename of a part waits for its files' deferred flushes, which
     * each make every attempt a close would, and then fails: it does not try each file once
     * more, one after another (with the client's retries against S3, ~16 s a round, that made an
     * INSERT of a 12-file part hang for ten minutes instead of failing in under one).
     */
    @Test
    void aStoreThatIsDownCostsTheRenameOfAPartOneFlushOfEachFileNotTwo() throws Exception {
        var store = reopenCounted(TestVolume.defaultConfig(dir));
        store.failPuts(true);
        long outside = writeAndCloseExpectingFailure(ROOT, "outside.bin", random(1000, 40));
        int perFlush = store.puts();
        assertTrue(perFlush >= 1, "a failed close tried the store");
        long tmp = fs.mkdir(ROOT, "tmp_insert_all_5_5_0", 0755, 0, 0).ino();
        List<Long> handles = new ArrayList<>();
        store.reset();
        for (int i = 0; i < 8; i++) {
            handles.add(writeAndClose(tmp, "f" + i, random(1000, 41 + i)));
        }
        assertThrows(IOException.class, () -> fs.rename(ROOT, "tmp_insert_all_5_5_0", ROOT, "all_5_5_0", 0));
        assertEquals(8 * perFlush, store.puts(), "one failed flush per file, as its close would have made");
        store.failPuts(false);
        fs.rename(ROOT, "tmp_insert_all_5_5_0", ROOT, "all_5_5_0", 0); // tried again: the files are flushed anew
        long part = fs.lookup(ROOT, "all_5_5_0").ino();
        for (int i = 0; i < 8; i++) {
            assertEquals(1000, fs.meta().getattr(fs.lookup(part, "f" + i).ino()).size(), "f" + i + " committed");
            fs.release(handles.get(i));
        }
        fs.flush(outside);
        fs.release(outside);
    }

    /**
     * Once the store counts as unreachable its requests are tried once, and so is a flush: one
     * round of uploads, not three. The background retry of failed files stops at its first
     * failure instead of taking each file's lock for a flush of its own, which a part's rename
     * would wait for (an INSERT while S3 hung took 27 s with it).
     */
    @Test
    void whileTheStoreIsUnreachableAFlushAndTheRetryOfFailedFilesTryOnce() throws Exception {
        var store = reopenCounted(TestVolume.defaultConfig(dir));
        store.failPuts(true);
        List<Long> handles = new ArrayList<>();
        handles.add(writeAndCloseExpectingFailure(ROOT, "a.bin", random(1000, 50)));
        int reachable = store.puts();
        assertTrue(reachable > 1, "a flush tries a failed upload again while the store is not known to be down: " + reachable);
        store.unreachable(true);
        store.reset();
        handles.add(writeAndCloseExpectingFailure(ROOT, "b.bin", random(1000, 51)));
        handles.add(writeAndCloseExpectingFailure(ROOT, "c.bin", random(1000, 52)));
        assertEquals(2, store.puts(), "one PUT a file");
        store.reset();
        assertEquals(0, fs.chunks().retryFailed());
        assertEquals(1, store.puts(), "the retry stops at its first failure");

        store.failPuts(false);
        store.unreachable(false);
        assertEquals(3, fs.chunks().retryFailed(), "the store is back: every file is committed");
        for (long fh : handles) {
            fs.release(fh);
        }
        assertEquals(1000, fs.meta().getattr(fs.lookup(ROOT, "c.bin").ino()).size());
    }

    @Test
    void aWriteOfNothingPastTheEndLeavesTheSizeAlone() throws Exception {
        long fh = create("empty.bin");
        fs.write(fh, 3000, new byte[0], 0, 0); // pwrite(2) of 0 bytes: no change, as on a local disk
        assertEquals(0, fs.getattr(ino("empty.bin")).size(), "before the close");
        fs.flush(fh);
        fs.release(fh);
        assertEquals(0, fs.getattr(ino("empty.bin")).size(), "after it");
    }

    @Test
    void aFlushThatFailedInAnOutageIsCommittedOnceTheStoreAnswers() throws Exception {
        var store = reopenCounted(TestVolume.defaultConfig(dir));
        store.failPuts(true);
        store.unreachable(true);
        long fh = writeAndCloseExpectingFailure(ROOT, "a.bin", random(1000, 60));
        long ino = fs.lookup(ROOT, "a.bin").ino();
        Poll.until(() -> store.probes() >= 2, "the retrier asks the store every second whether it answers");
        assertEquals(0, sizeOf(ino), "nothing committed while the store is down");

        store.failPuts(false);
        store.unreachable(false);
        Poll.until(() -> sizeOf(ino) == 1000, java.time.Duration.ofSeconds(5),
                "committed once the store answers, not at the next round of retries 15 s apart");
        fs.release(fh);
    }

    /** The size committed for {@code ino}. */
    long sizeOf(long ino) {
        try {
            return fs.meta().getattr(ino).size();
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /** Creates {@code name}, writes {@code data} and closes it with the store down: the close fails; returns the handle. */
    long writeAndCloseExpectingFailure(long dir, String name, byte[] data) throws IOException {
        long fh = fs.create(dir, name, 0644, RW, 0, 0).fh();
        fs.write(fh, 0, data, 0, data.length);
        assertThrows(IOException.class, () -> fs.flush(fh));
        return fh;
    }

    @Test
    void removingATemporaryPartWaitsForItsClosesAndLeavesNothingBuffered() throws Exception {
        reopenCounted(TestVolume.defaultConfig(dir));
        long tmp = fs.mkdir(ROOT, "tmp_insert_all_3_3_0", 0755, 0, 0).ino();
        List<Long> handles = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            handles.add(writeAndClose(tmp, "f" + i, random(2000, 30 + i)));
        }
        for (long fh : handles) {
            fs.release(fh);
        }
        for (int i = 0; i < 20; i++) {
            fs.unlink(tmp, "f" + i);
        }
        fs.rmdir(ROOT, "tmp_insert_all_3_3_0");
        assertEquals(0, fs.chunks().bufferedBytes(), "every deferred close ended before the files went");
        fs.awaitReclaim();
    }

    /** Polls until the write-back staging area is empty; fails after 60 s. */
    void awaitStagingEmpty() {
        Poll.until(() -> fs.chunks().staging().pendingBlocks() == 0, java.time.Duration.ofSeconds(60), "staged blocks uploaded");
    }

    /** Reopens the volume with {@code config}; returns its object store, which counts requests. */
    io.partfs.engine.testing.CountingObjectStore reopenCounted(PartFsConfig config) throws IOException {
        fs.close();
        io.partfs.engine.testing.CountingObjectStore[] store = new io.partfs.engine.testing.CountingObjectStore[1];
        fs = volume.open(config, o -> store[0] = new io.partfs.engine.testing.CountingObjectStore(o));
        return store[0];
    }

    /** Creates {@code name}, writes {@code data} into it, fsyncs and closes it. */
    void writeFsynced(String name, byte[] data) throws IOException {
        long fh = create(name);
        fs.write(fh, 0, data, 0, data.length);
        fs.fsync(fh);
        fs.release(fh);
    }

    /** Closes this client and reads a file as another one without a local cache would: only from the object store. */
    byte[] readFromObjectStoreOnly(String name) throws IOException {
        fs.close();
        fs = volume.openAs(PartFsConfig.builder().ioThreads(4).build());
        return readAll(ino(name));
    }

    @Test
    void writeBackFsyncReturnsWhileTheStoreIsDownAndUploadsOnceItIsBack() throws IOException {
        var store = reopenCounted(TestVolume.defaultConfig(dir).toBuilder().writeBack(true).build());
        store.failPuts(true);
        byte[] a = random(3 * fs.format().blockSize() + 100, 11);
        writeFsynced("wb.bin", a);
        assertEquals(a.length, fs.meta().getattr(ino("wb.bin")).size(), "fsync committed the staged blocks");
        assertEquals(4, fs.chunks().staging().pendingBlocks());
        assertTrue(dataObjects().isEmpty(), "nothing reached the object store");
        assertArrayEquals(a, readAll(ino("wb.bin")), "read back from the staged blocks");

        store.failPuts(false);
        awaitStagingEmpty();
        assertEquals(4, dataObjects().size());
        assertArrayEquals(a, readFromObjectStoreOnly("wb.bin"));
    }

    /**
     * A local disk without room for the free-space floor (--free-space-ratio): write-back uploads
     * each block before fsync returns instead of staging it, and fails nothing.
     */
    @Test
    void writeBackWithoutRoomOnTheLocalDiskUploadsBeforeFsyncReturns() throws IOException {
        // a floor of all but a ten-thousandth of the disk: no test machine's disk is that empty
        var store = reopenCounted(TestVolume.defaultConfig(dir).toBuilder().writeBack(true)
                .uploadDelay(java.time.Duration.ofHours(1)).freeSpaceRatio(0.9999).build());
        byte[] a = random(2 * fs.format().blockSize() + 7, 21);
        writeFsynced("full.bin", a);
        assertEquals(0, fs.chunks().staging().pendingBlocks(), "nothing staged");
        assertEquals(3, fs.chunks().staging().turnedAway());
        assertEquals(3, store.puts(), "every block uploaded before fsync returned, the upload delay notwithstanding");
        assertArrayEquals(a, readFromObjectStoreOnly("full.bin"));
    }

    /**
     * The same on a disk that really fills up (an 8 MiB tmpfs as the cache directory, so root):
     * 40 MiB written back with the default floor, every write succeeds, what fitted is staged,
     * the rest uploaded, and all of it reads back from the object store.
     */
    @Test
    void writeBackOntoASmallDiskStagesWhatFitsAndUploadsTheRest() throws Exception {
        try (io.partfs.engine.testing.SmallDisk disk = new io.partfs.engine.testing.SmallDisk(8)) {
            var store = reopenCounted(TestVolume.defaultConfig(dir).toBuilder().blockCache(disk.dir(), 1L << 30)
                    .writeBack(true).uploadDelay(java.time.Duration.ofHours(1)).build());
            byte[][] files = new byte[10][];
            for (int i = 0; i < files.length; i++) {
                files[i] = random(4 << 20, 30 + i);
                writeFsynced("small-disk-" + i, files[i]);
            }
            long floor = disk.total() / 10;
            assertTrue(disk.free() >= floor, "the disk keeps its floor: " + disk.free() + " bytes free of " + disk.total());
            int staged = fs.chunks().staging().pendingBlocks();
            long turnedAway = fs.chunks().staging().turnedAway();
            assertTrue(staged > 0 && turnedAway > 0, staged + " staged, " + turnedAway + " uploaded directly");
            assertEquals(turnedAway, store.puts(), "only the blocks that did not fit went to the store before the delay");
            fs.close(); // uploads what is staged
            fs = volume.openAs(PartFsConfig.builder().ioThreads(4).build());
            for (int i = 0; i < files.length; i++) {
                assertArrayEquals(files[i], readAll(ino("small-disk-" + i)), "file " + i + " from the object store");
            }
        }
    }

    @Test
    void writeBackBlocksLeftAtCloseAreUploadedAtTheNextOpenAndTornOnesDropped() throws IOException {
        PartFsConfig wb = TestVolume.defaultConfig(dir).toBuilder().writeBack(true).writeBackUploadWait(java.time.Duration.ZERO).build();
        reopenCounted(wb).failPuts(true);
        byte[] b = random(2 * fs.format().blockSize() + 5, 12);
        writeFsynced("left.bin", b);
        fs.close(); // as a crash would: the store is down and close does not wait for it
        java.nio.file.Path staging = wb.stagingDir();
        try (var files = java.nio.file.Files.list(staging)) {
            assertEquals(3, files.filter(f -> !f.getFileName().toString().startsWith(".")).count(), "the blocks stay staged on local disk");
        }
        assertTrue(dataObjects().isEmpty());
        // A block the process was writing when it died: shorter than its key says, never committed.
        java.nio.file.Path torn = staging.resolve("testvol%chunks%0%0%999_0_100");
        java.nio.file.Files.write(torn, new byte[5]);

        fs = volume.open(wb, o -> o);
        awaitStagingEmpty();
        assertFalse(java.nio.file.Files.exists(torn), "a torn staged block is deleted, not uploaded");
        assertEquals(3, dataObjects().size());
        assertArrayEquals(b, readFromObjectStoreOnly("left.bin"));
    }

    @Test
    void writeBackUploadDelaySkipsDeletedFilesAndCloseDoesNotWaitItOut() throws IOException {
        var store = reopenCounted(TestVolume.defaultConfig(dir).toBuilder().writeBack(true).uploadDelay(java.time.Duration.ofHours(1)).build());
        byte[] keep = random(fs.format().blockSize() + 1, 13);
        writeFsynced("keep.bin", keep);
        writeFsynced("tmp.bin", random(1000, 14));
        fs.unlink(ROOT, "tmp.bin");
        fs.awaitReclaim();
        assertEquals(2, fs.chunks().staging().pendingBlocks(), "the deleted file's staged block is gone with it");
        assertEquals(0, store.puts(), "nothing is uploaded before the delay");
        assertEquals(0, store.deletes(), "a block never uploaded is not deleted from the store either");

        fs.close(); // waits for the uploads, not for the delay
        assertEquals(2, store.puts());
        assertEquals(2, dataObjects().size());
        assertArrayEquals(keep, readFromObjectStoreOnly("keep.bin"));
    }

    /**
     * With a trash, a write-back mount still drops the staged blocks of a deleted or truncated file staged
     * after the last metadata backup was completed (no restore can list them), and uploads, to
     * keep in the trash, those staged before it, and all of them while a backup is under way.
     * A slice whose blocks were all dropped leaves the trash.
     */
    @Test
    void withATrashWriteBackDropsOnlyStagedBlocksNoBackupCanList() throws IOException {
        PartFsConfig wb = TestVolume.defaultConfig(dir).toBuilder().writeBack(true).uploadDelay(java.time.Duration.ofHours(1)).build();
        var store = reopenCounted(wb);
        fs.meta().setTrashHours(24);
        writeFsynced("tmp.bin", random(1000, 15));
        fs.unlink(ROOT, "tmp.bin");
        fs.awaitReclaim();
        assertEquals(0, fs.chunks().staging().pendingBlocks(), "no backup yet: dropped, as without a trash");
        writeFsynced("cut.bin", random(fs.format().blockSize() + 1, 19));
        fs.truncate(ino("cut.bin"), 0);
        fs.awaitReclaim();
        assertEquals(0, fs.chunks().staging().pendingBlocks(), "a truncation's freed blocks too");
        assertEquals(0, fs.meta().trash().slices(), "no object of theirs to keep: out of the trash too");

        String clock = io.partfs.engine.data.MetaBackup.thisClock();
        org.junit.jupiter.api.Assumptions.assumeTrue(clock != null, "no boot id to name this machine's clock");
        writeFsynced("old.bin", random(fs.format().blockSize() + 1, 16)); // two blocks
        long began = System.currentTimeMillis() + 1; // a backup began after old.bin was staged, and runs
        // the staged files' times say nothing: on a network filesystem they are the server's clock,
        // here an hour ahead, which would make old.bin look staged after the backup
        try (var files = java.nio.file.Files.list(wb.stagingDir())) {
            for (java.nio.file.Path f : files.toList()) {
                java.nio.file.Files.setLastModifiedTime(f, java.nio.file.attribute.FileTime.fromMillis(began + 3_600_000));
            }
        }
        backupTimes(began, null, clock);
        // new.bin is staged after the backup's completion (at its start, below) and the same clock's 1 s margin
        io.partfs.engine.testing.Poll.until(() -> System.currentTimeMillis() > began + 1_000, "the clock passes the margin");
        writeFsynced("new.bin", random(1000, 17));
        writeFsynced("during.bin", random(1000, 18));
        fs.unlink(ROOT, "during.bin");
        fs.awaitReclaim();
        assertEquals(4, fs.chunks().staging().pendingBlocks(), "a backup under way may list anything: nothing dropped");

        backupTimes(began, began, clock); // it completed; new.bin was staged after that
        fs.unlink(ROOT, "old.bin");
        fs.unlink(ROOT, "new.bin");
        fs.awaitReclaim();
        assertEquals(3, fs.chunks().staging().pendingBlocks(), "old.bin's blocks and during.bin's stay, to be uploaded; new.bin's went");
        assertEquals(2, fs.meta().trash().slices(), "old.bin's and during.bin's slices, whose objects are kept");
        fs.close(); // waits for the uploads
        assertEquals(3, store.puts(), "the blocks a backup may list");
        fs = volume.open();
    }

    /**
     * On a shared volume a write-back mount's blocks wait staged while another mount deletes their
     * file; with the trash off that mount deletes the objects before they exist, and the upload
     * that follows would leave objects no file names. The writer asks after its uploads and
     * deletes those again. A file freed into the trash keeps its uploads (a restored backup reads
     * them), and so does a file still there.
     */
    @Test
    void aWriteBackUploadOfASliceAnotherMountFreedMeanwhileIsDeletedAgain() throws IOException {
        org.junit.jupiter.api.Assumptions.assumeTrue(meta() == TestVolume.Meta.REDIS, "one client at a time on RocksDB");
        var store = reopenCounted(TestVolume.defaultConfig(dir).toBuilder().writeBack(true)
                .uploadDelay(java.time.Duration.ofHours(1)).build());
        int block = fs.format().blockSize();
        byte[] kept = random(block + 1, 31);
        writeFsynced("kept.bin", kept);
        writeFsynced("trashed.bin", random(block + 1, 32));
        writeFsynced("freed.bin", random(block + 1, 33));
        try (PartFs other = volume.openAs(PartFsConfig.builder().ioThreads(2).build())) {
            other.meta().setTrashHours(0);
            other.unlink(ROOT, "freed.bin");
            other.awaitReclaim();
            assertEquals(0, other.meta().pendingSliceDeletions(10).size(), "freed.bin's slice is deleted, as far as the other mount knows");
            other.meta().setTrashHours(24); // (turning it off would have emptied it)
            other.unlink(ROOT, "trashed.bin");
            other.awaitReclaim();
            assertEquals(1, other.meta().trash().slices());
        }
        var staging = fs.chunks().staging();
        assertEquals(6, staging.pendingBlocks(), "nothing uploaded before the delay");
        fs.close(); // uploads all six, then asks
        assertEquals(6, store.puts());
        assertEquals(2, staging.uploadsOfFreedSlices(), "freed.bin's two blocks");
        assertEquals(4, dataObjects().size(), "kept.bin's and trashed.bin's blocks");
        fs = volume.open();
        try (ObjectStore objects = volume.newObjectStore()) {
            var r = new io.partfs.engine.data.VolumeCheck(fs.meta(), objects, (phase, n) -> { })
                    .run(new io.partfs.engine.data.VolumeCheck.Options(true, false, 0));
            assertEquals(0, r.leaked, "no object named by nothing");
            assertEquals(0, r.missingBlocks);
        }
        assertArrayEquals(kept, readAll(ino("kept.bin")));
    }

    /**
     * A backup this machine completed seconds ago: what is staged after it is dropped when
     * deleted (one clock: a second's margin). After one another machine completed, blocks staged
     * within the minute allowed for two clocks' difference are kept, and uploaded.
     */
    @Test
    void rightAfterItsOwnBackupWriteBackDropsWhatIsStagedAfterIt() throws IOException {
        String clock = io.partfs.engine.data.MetaBackup.thisClock();
        org.junit.jupiter.api.Assumptions.assumeTrue(clock != null, "no boot id to name this machine's clock");
        PartFsConfig wb = TestVolume.defaultConfig(dir).toBuilder().writeBack(true).uploadDelay(java.time.Duration.ofHours(1)).build();
        var store = reopenCounted(wb);
        fs.meta().setTrashHours(24);
        long now = System.currentTimeMillis();
        backupTimes(now - 20_000, now - 10_000, clock);
        writeFsynced("mine.bin", random(1000, 23));
        fs.unlink(ROOT, "mine.bin");
        fs.awaitReclaim();
        assertEquals(0, fs.chunks().staging().pendingBlocks(), "staged after this machine's backup: in none, dropped");
        assertEquals(0, fs.meta().trash().slices());

        backupTimes(now - 20_000, now - 10_000, "another machine's boot id");
        writeFsynced("theirs.bin", random(1000, 24));
        fs.unlink(ROOT, "theirs.bin");
        fs.awaitReclaim();
        assertEquals(1, fs.chunks().staging().pendingBlocks(), "within a minute of another clock's backup: kept");
        assertEquals(1, fs.meta().trash().slices());
        fs.close(); // waits for the upload
        assertEquals(1, store.puts(), "the block another machine's backup may list");
        fs = volume.open();
    }

    private void backupTimes(long startedMillis, Long doneMillis) throws IOException {
        backupTimes(startedMillis, doneMillis, null);
    }

    /** Sets when the last backup began and was completed, and on which clock ({@code null}: not said, as before it was). */
    private void backupTimes(long startedMillis, Long doneMillis, String clock) throws IOException {
        fs.meta().store().update(tx -> {
            tx.put("lastBackup", String.valueOf(startedMillis).getBytes(java.nio.charset.StandardCharsets.UTF_8));
            if (doneMillis == null) {
                tx.delete("lastBackupDone");
            } else {
                tx.put("lastBackupDone", String.valueOf(doneMillis).getBytes(java.nio.charset.StandardCharsets.UTF_8));
            }
            if (clock == null) {
                tx.delete("lastBackupClock");
            } else {
                tx.put("lastBackupClock", clock.getBytes(java.nio.charset.StandardCharsets.UTF_8));
            }
            return null;
        });
    }

    /**
     * A bit flipped in the block cache's copy of a block while no mount ran: the next mount reads
     * the file right, fetching that block from the object store again, and counts it. (A local
     * object directory's blocks are read from it, not cached: S3 only.)
     */
    @Test
    void aBlockDamagedOnTheCacheDiskIsReadAgainFromTheObjectStore() throws IOException {
        byte[] data = cachedThreeBlockFile("rot.bin", 23);
        fs.close();
        damageSecondCachedBlock(data, 1234);
        fs = volume.open();
        long gets = fs.chunks().objectGets();
        assertArrayEquals(data, readAll(ino("rot.bin")));
        assertEquals(1, fs.chunks().cache().corruptBlocks());
        assertTrue(fs.chunks().objectGets() > gets, "the damaged block, fetched again");
        long misses = fs.chunks().cache().stats().misses(); // (GETs: readahead may still be fetching the dropped block)
        assertArrayEquals(data, readAll(ino("rot.bin")));
        assertEquals(misses, fs.chunks().cache().stats().misses(), "and cached again: every block read from the cache");
        assertEquals(1, fs.chunks().cache().corruptBlocks());
    }

    /** Writes file {@code name} of two blocks and a bit, returning its bytes; skips the test unless blocks are cached (S3). */
    private byte[] cachedThreeBlockFile(String name, int seed) throws IOException {
        org.junit.jupiter.api.Assumptions.assumeTrue(store() == TestVolume.Store.S3, "blocks of a local object directory are not cached");
        byte[] data = random(2 * fs.format().blockSize() + 5000, seed);
        writeFsynced(name, data);
        return data;
    }

    /** Inverts byte {@code at} of the block cache's copy of the second block of a file holding {@code data}, as bit rot would. */
    private void damageSecondCachedBlock(byte[] data, int at) throws IOException {
        int blockSize = fs.format().blockSize();
        java.nio.file.Path block = io.partfs.engine.testing.LiveTree.files(dir.resolve("cache"), null).keySet().stream()
                .filter(f -> f.toString().endsWith("_1_" + blockSize))
                .findFirst().orElseThrow(() -> new AssertionError("the file's second block is not in the block cache"));
        try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(block, java.nio.file.StandardOpenOption.WRITE)) {
            ch.write(java.nio.ByteBuffer.wrap(new byte[] {(byte) ~data[blockSize + at]}), at);
        }
    }

    /**
     * A bit flipped in a cached block during a mount, after reads checked it (so they no longer
     * see it): a verifying warmup finds it, drops the block and fetches it again; a verifying
     * check after that finds every block sound. (S3 only, as above.)
     */
    @Test
    void aVerifyingWarmupFindsRotThatReadsNoLongerCheck() throws Exception {
        byte[] data = cachedThreeBlockFile("scrub.bin", 24);
        int blockSize = fs.format().blockSize();
        long ino = ino("scrub.bin");
        assertArrayEquals(data, readAll(ino));
        damageSecondCachedBlock(data, 99);

        var p = new io.partfs.engine.data.Warmup(fs.meta(), fs.chunks(), 2, false, true).run(fs.resolve("/scrub.bin"));
        assertEquals(3, p.blocks());
        assertEquals(1, p.damagedBlocks());
        assertEquals(2, p.verifiedBlocks());
        assertEquals(2, p.localBlocks());
        assertEquals(1, p.fetchedBlocks());
        assertEquals(blockSize, p.fetchedBytes());
        assertEquals(1, fs.chunks().cache().corruptBlocks());
        long misses = fs.chunks().cache().stats().misses();
        assertArrayEquals(data, readAll(ino));
        assertEquals(misses, fs.chunks().cache().stats().misses(), "every block read from the cache, the mended one too");

        p = new io.partfs.engine.data.Warmup(fs.meta(), fs.chunks(), 2, true, true).run(fs.resolve("/"));
        assertEquals(3, p.verifiedBlocks());
        assertEquals(0, p.damagedBlocks());
        assertEquals(0, p.fetchedBlocks());
    }

    @Test
    void aFileInOneBlockIsFoundWholeOnLocalDiskForTheKernelToRead() throws IOException {
        byte[] small = random(5000, 21);
        writeFsynced("one.bin", small);
        java.nio.file.Path cached = fs.chunks().localWholeFile(fs.getattr(ino("one.bin")));
        assertArrayEquals(small, java.nio.file.Files.readAllBytes(cached), "the block cache's copy");

        fs.close();
        fs = volume.openAs(PartFsConfig.builder().ioThreads(4).build()); // no block cache
        java.nio.file.Path local = fs.chunks().localWholeFile(fs.getattr(ino("one.bin")));
        if (store() == TestVolume.Store.LOCAL) {
            assertArrayEquals(small, java.nio.file.Files.readAllBytes(local), "the object file of a local object directory");
        } else {
            assertEquals(null, local, "an S3 object is not on local disk");
        }
        writeFsynced("two.bin", random(fs.format().blockSize() + 1, 22));
        assertEquals(null, fs.chunks().localWholeFile(fs.getattr(ino("two.bin"))), "two blocks are not one file");
    }

    @Test
    void buffersOfAllFilesTogetherStayWithinTheTotalBudget() throws IOException {
        fs.close();
        fs = volume.openAs(TestVolume.defaultConfig(dir).toBuilder().writeBufferPerFile(1 << 20).writeBufferTotal(2 << 20).build());
        long[] handles = new long[6];
        byte[][] data = new byte[handles.length][];
        for (int i = 0; i < handles.length; i++) {
            handles[i] = create("f" + i);
            data[i] = random(900 << 10, i); // under the per-file limit: only the total budget flushes
            fs.write(handles[i], 0, data[i], 0, data[i].length);
            assertTrue(fs.chunks().bufferedBytes() <= (2 << 20) + data[i].length,
                    "buffered " + fs.chunks().bufferedBytes() + " after file " + i);
        }
        assertTrue(fs.chunks().bufferedBytes() < handles.length * (900L << 10), "some files were flushed early");
        for (int i = 0; i < handles.length; i++) {
            fs.release(handles[i]);
        }
        assertEquals(0, fs.chunks().bufferedBytes(), "nothing buffered after every file was closed");
        for (int i = 0; i < handles.length; i++) {
            assertArrayEquals(data[i], readAll(ino("f" + i)));
        }
    }

    @Test
    void sizeIncludesBufferedWritesAndOtherHandlesSeeThem() throws IOException {
        long w = create("f");
        fs.write(w, 0, new byte[5000], 0, 5000);
        assertEquals(5000, fs.getattr(ino("f")).size(), "stat sees a write before it is flushed");
        long r = fs.open(ino("f"), PartFs.O_RDONLY);
        byte[] buf = new byte[10000];
        assertEquals(5000, fs.read(r, 0, buf, 0, buf.length));
        fs.release(r);
        fs.release(w);
    }

    /**
     * A new file costs its one transaction and nothing else: no truncate, and on a shared volume
     * no read of the inode the transaction just made (an open for writing of an existing file
     * asks the store whether another client deleted it; a create's own file needs no asking).
     */
    @Test
    void creatingAFileWithOTruncIsOneMetadataTransaction() throws IOException {
        io.partfs.engine.testing.CountingKvStore kv = reopenCounting();
        PartFs.Created c = fs.create(ROOT, "new.txt", 0644, RW | PartFs.O_TRUNC, 0, 0);
        assertEquals(1, kv.transactionsOnThisThread(), "the create, and no truncate of the file it made");
        assertEquals(java.util.Map.of(), fileKeyReads(kv), "no inode, directory, chunk or xattr read besides the create's transaction");
        assertTrue(c.isNew());
        assertEquals(0, c.attr().size());
        assertEquals(0644, c.attr().mode() & 07777);
        fs.release(c.fh());
    }

    /**
     * The metadata a small file costs, as ClickHouse writes each file of a part: create, write,
     * fsync, close is two transactions (the create, the commit of its data) and no read of the
     * file's keys. A guard for the write path's round trips, which on a shared volume are
     * Redis's: one read more per file went unnoticed for a day (round 52 in RESULTS.md).
     */
    @Test
    void aSmallFileCreatedWrittenAndFsyncedCostsTwoTransactionsAndNoReads() throws IOException {
        byte[] data = random(128 << 10, 52);
        io.partfs.engine.testing.CountingKvStore kv = reopenCounting();
        long fh = fs.create(ROOT, "count.txt", 0644, RW | PartFs.O_TRUNC, 0, 0).fh();
        fs.write(fh, 0, data, 0, data.length);
        fs.fsync(fh);
        fs.flush(fh);
        fs.release(fh);
        assertEquals(java.util.Map.of(), fileKeyReads(kv), "no inode, directory, chunk or xattr read");
        assertEquals(2, kv.transactionsOnThisThread(), "the create and the commit of its data");
        assertArrayEquals(data, readAll(ino("count.txt")));
    }

    /**
     * Opens the volume again on a store that counts its requests, with a batch of inode numbers
     * and of slice ids taken (one increment each, not counted), and the counts reset.
     */
    private io.partfs.engine.testing.CountingKvStore reopenCounting() throws IOException {
        fs.close();
        io.partfs.engine.testing.CountingKvStore[] kv = new io.partfs.engine.testing.CountingKvStore[1];
        fs = volume.open(o -> o, k -> kv[0] = new io.partfs.engine.testing.CountingKvStore(k));
        fs.release(create("first.txt"));
        fs.meta().nextSliceId();
        kv[0].reset();
        return kv[0];
    }

    /** The reads of files' own keys (inode, directory, chunk, symlink, xattr): not the background's deletions. */
    private static java.util.Map<String, Long> fileKeyReads(io.partfs.engine.testing.CountingKvStore kv) {
        java.util.Map<String, Long> reads = new java.util.TreeMap<>(kv.readsByKind());
        reads.keySet().removeIf(kind -> !kind.matches("[a-zA-Z]+:[idcsx]"));
        return reads;
    }

    @Test
    void openTruncAndHandleModes() throws IOException {
        long fh = create("f");
        fs.write(fh, 0, new byte[100], 0, 100);
        fs.release(fh);
        long t = fs.open(ino("f"), PartFs.O_WRONLY | PartFs.O_TRUNC);
        assertEquals(0, fs.getattr(ino("f")).size());
        assertThrows(FsException.BadHandle.class, () -> fs.read(t, 0, new byte[1], 0, 1));
        fs.release(t);
        long r = fs.open(ino("f"), PartFs.O_RDONLY);
        assertThrows(FsException.BadHandle.class, () -> fs.write(r, 0, new byte[1], 0, 1));
        fs.release(r);
        assertThrows(FsException.BadHandle.class, () -> fs.release(r));
        assertThrows(FsException.Exists.class, () -> fs.create(ROOT, "f", 0644, RW | PartFs.O_EXCL, 0, 0));
    }

    @Test
    void unlinkReclaimsTheObjects() throws IOException {
        long fh = create("gone");
        fs.write(fh, 0, random(3 << 20, 3), 0, 3 << 20);
        fs.release(fh);
        assertEquals(3, dataObjects().size());
        fs.unlink(ROOT, "gone");
        fs.awaitReclaim();
        assertEquals(List.of(), dataObjects());
        assertEquals(0, fs.meta().usage().usedBytes());
    }

    /**
     * Removing a part's files queues a deletion each; the objects they free are deleted
     * together, once no deletion has come for the reclaim delay: one DeleteObjects request,
     * not one a file.
     */
    @Test
    void aBurstOfDeletionsDeletesItsObjectsInOneRequestAfterTheDelay() throws IOException {
        var store = reopenCounted(TestVolume.defaultConfig(dir).toBuilder().reclaimDelay(java.time.Duration.ofMinutes(10)).build());
        for (int i = 0; i < 20; i++) {
            write(ROOT, "col" + i + ".bin", random(1000 + i, 70 + i));
        }
        assertEquals(20, dataObjects().size());
        store.reset();
        for (int i = 0; i < 20; i++) {
            // each file's deletion done before the next unlink, as when deletions keep pace: the queue empties every time
            fs.unlink(ROOT, "col" + i + ".bin");
            long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(60);
            while (fs.meta().pendingDeletions().files() > 0) {
                assertTrue(System.nanoTime() < deadline, "file deletion not done within 60 s: " + fs.meta().pendingDeletions());
                java.util.concurrent.locks.LockSupport.parkNanos(2_000_000);
            }
        }
        // the worker runs in order: a drain after any of the first 19 files would have run before the 20th was deleted
        assertEquals(0, store.deleteRequests(), "no object is deleted while the delay runs");
        assertEquals(20, dataObjects().size());
        fs.awaitReclaim(); // runs the waiting drain now
        assertEquals(1, store.deleteRequests(), "one request for the burst's 20 objects");
        assertEquals(20, store.deletes());
        assertEquals(List.of(), dataObjects());
        assertEquals(new MetaEngine.PendingDeletions(0, 0), fs.meta().pendingDeletions());
    }

    /** Unmounting right after a burst of unlinks deletes their objects before it returns, not at the next mount. */
    @Test
    void closingRightAfterUnlinksDeletesTheirObjects() throws IOException {
        for (int i = 0; i < 20; i++) {
            write(ROOT, "f" + i, random(100 + i, 90 + i));
        }
        assertEquals(20, dataObjects().size());
        for (int i = 0; i < 20; i++) {
            fs.unlink(ROOT, "f" + i);
        }
        fs.close();
        assertEquals(List.of(), dataObjects());
        fs = volume.open();
        assertEquals(new MetaEngine.PendingDeletions(0, 0), fs.meta().pendingDeletions());
    }

    /**
     * With a trash, the objects of a file deleted, one truncated and one replaced by a rename stay
     * (fsck counts them in the trash, not as leaked, and gc deletes none of them) until the trash
     * time is over; turning the trash off lets the mount's next pass delete them.
     */
    @Test
    void withATrashFreedObjectsStayUntilTheTrashIsEmptied() throws IOException {
        fs.meta().setTrashHours(24);
        long kept = write(ROOT, "kept", random(3000, 61));
        write(ROOT, "doomed", random((1 << 20) + 10, 62)); // two blocks
        long cut = write(ROOT, "cut", random(5000, 63));
        write(ROOT, "old", random(100, 64));
        write(ROOT, "new", random(200, 65));
        fs.unlink(ROOT, "doomed");
        fs.truncate(cut, 0);
        fs.rename(ROOT, "new", ROOT, "old", 0);
        fs.awaitReclaim();
        fs.expireTrash(); // not yet due: nothing goes
        fs.awaitReclaim();
        assertEquals(6, dataObjects().size(), "every object is still there");
        assertEquals(new MetaEngine.PendingDeletions(0, 0), fs.meta().pendingDeletions());
        MetaEngine.Trash trash = fs.meta().trash();
        assertEquals(3, trash.slices(), "doomed's (two blocks), cut's and old's");
        try (ObjectStore store = volume.newObjectStore()) {
            var check = new io.partfs.engine.data.VolumeCheck(fs.meta(), store, (phase, n) -> { });
            var r = check.run(new io.partfs.engine.data.VolumeCheck.Options(false, true, 0));
            assertEquals(4, r.trashObjects);
            assertEquals((1 << 20) + 10 + 5000 + 100, r.trashBytes);
            assertEquals(0, r.leaked, "the trash is not leaked");
            assertEquals(0, r.deleted);
            assertEquals(new io.partfs.engine.data.VolumeCheck.Finished(0, 0, 0), check.finishDeletions(), "not due yet");
        }
        assertEquals(6, dataObjects().size());

        fs.meta().setTrashHours(0);
        fs.expireTrash();
        fs.awaitReclaim();
        assertEquals(2, dataObjects().size(), "kept's and the renamed file's");
        assertEquals(0, fs.meta().trash().slices());
        assertArrayEquals(random(3000, 61), readAll(kept));
        assertArrayEquals(random(200, 65), readAll(ino("old")));
    }

    @Test
    void renameOverAFileReclaimsTheReplacedData() throws IOException {
        long a = create("a");
        fs.write(a, 0, random(100, 4), 0, 100);
        fs.release(a);
        long b = create("checksums.txt");
        fs.write(b, 0, random(200, 5), 0, 200);
        fs.release(b);
        fs.rename(ROOT, "a", ROOT, "checksums.txt", 0);
        fs.awaitReclaim();
        assertEquals(1, dataObjects().size());
        assertArrayEquals(random(100, 4), readAll(ino("checksums.txt")));
    }

    /** Creates {@code name} with {@code data}, flushed, and unlinks it while open: its handle and inode. */
    private long[] unlinkedWhileOpen(String name, byte[] data) throws IOException {
        long fh = create(name);
        fs.write(fh, 0, data, 0, data.length);
        fs.flush(fh);
        long inode = ino(name);
        fs.unlink(ROOT, name);
        return new long[] {fh, inode};
    }

    /** The open unlinked file reads back whole, and its release deletes the inode and its objects. */
    private void readsWholeThenGoesAtRelease(long[] open, byte[] data) throws IOException {
        byte[] back = new byte[data.length];
        assertEquals(data.length, fs.read(open[0], 0, back, 0, back.length));
        assertArrayEquals(data, back);
        fs.release(open[0]);
        fs.awaitReclaim();
        assertThrows(FsException.NoSuchEntry.class, () -> fs.getattr(open[1]));
        assertEquals(List.of(), dataObjects());
    }

    @Test
    void openUnlinkedFileStaysReadableUntilReleased() throws IOException {
        byte[] data = random(2000, 6);
        long[] open = unlinkedWhileOpen("tmp", data);
        fs.awaitReclaim();
        readsWholeThenGoesAtRelease(open, data);
    }

    /**
     * Another mount starting on a shared volume resumes the deletions recorded there, but not of
     * a file a live mount unlinked while holding it open: the holder reads it whole, and its
     * release deletes it. (Before sessions held such files, the second mount deleted its data.)
     */
    @Test
    void anotherMountsStartLeavesAFileALiveMountHoldsOpenAfterItsUnlink() throws IOException {
        org.junit.jupiter.api.Assumptions.assumeTrue(meta() == TestVolume.Meta.REDIS, "one client at a time on RocksDB");
        fs.startSession("mount A");
        byte[] data = random(3000, 61);
        long[] open = unlinkedWhileOpen("held", data);
        try (PartFs other = volume.openAs(TestVolume.defaultConfig(dir.resolve("other")))) {
            other.awaitReclaim(); // its start resumed the volume's pending deletions
            assertEquals(new MetaEngine.PendingDeletions(1, 0), other.meta().pendingDeletions());
        }
        readsWholeThenGoesAtRelease(open, data);
        fs.endSession();
        assertEquals(java.util.Map.of(), fs.meta().sessions());
    }

    @Test
    void deletionInterruptedByCloseResumesAtNextOpen() throws IOException {
        long fh = create("f");
        fs.write(fh, 0, random(1000, 7), 0, 1000);
        fs.flush(fh);
        fs.unlink(ROOT, "f");
        fs.close(); // the handle was never released: its data must still be freed, later
        fs = volume.open();
        fs.awaitReclaim();
        assertEquals(List.of(), dataObjects());
    }

    @Test
    void hardLinkSeesTheSameData() throws IOException {
        long fh = create("data.bin");
        fs.write(fh, 0, new byte[] {9, 9}, 0, 2);
        fs.release(fh);
        Attr d = fs.mkdir(ROOT, "shadow", 0755, 0, 0);
        Attr linked = fs.link(ino("data.bin"), d.ino(), "data.bin");
        assertEquals(2, linked.nlink());
        fs.unlink(ROOT, "data.bin");
        fs.awaitReclaim();
        assertArrayEquals(new byte[] {9, 9}, readAll(linked.ino()));
    }

    @Test
    void concurrentWritersOnDifferentFiles() throws Exception {
        Concurrently.run(4, thread -> {
            for (int i = 0; i < 10; i++) {
                long fh = create("t" + thread + "_" + i);
                byte[] data = random(50_000 + i, thread * 100L + i);
                fs.write(fh, 0, data, 0, data.length);
                fs.release(fh);
            }
        });
        for (int t = 0; t < 4; t++) {
            for (int i = 0; i < 10; i++) {
                assertArrayEquals(random(50_000 + i, t * 100L + i), readAll(ino("t" + t + "_" + i)));
            }
        }
    }

    /** Reads flush the file's writer; a write racing with that flush must not be lost. */
    @Test
    void writesRacingWithFlushesOfTheSameFileAreKept() throws Exception {
        long fh = create("raced");
        long ino = ino("raced");
        int pieces = 400;
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try {
            Future<?> reader = pool.submit(() -> {
                byte[] buf = new byte[16];
                long rh = fs.open(ino, PartFs.O_RDONLY);
                try {
                    for (int i = 0; i < pieces; i++) {
                        fs.read(rh, 0, buf, 0, buf.length); // flushes the writer
                    }
                } finally {
                    fs.release(rh);
                }
                return null;
            });
            for (int i = 0; i < pieces; i++) {
                fs.write(fh, i * 100L, random(100, i), 0, 100);
            }
            reader.get();
        } finally {
            pool.shutdownNow();
        }
        fs.release(fh);
        byte[] all = readAll(ino);
        assertEquals(pieces * 100, all.length);
        for (int i = 0; i < pieces; i++) {
            assertArrayEquals(random(100, i), Arrays.copyOfRange(all, i * 100, i * 100 + 100), "piece " + i);
        }
    }

    @Test
    void resolveWalksPaths() throws IOException {
        Attr a = fs.mkdir(ROOT, "a", 0755, 0, 0);
        Attr b = fs.mkdir(a.ino(), "b", 0755, 0, 0);
        assertEquals(b.ino(), fs.resolve("/a/b").ino());
        assertEquals(a.ino(), fs.resolve("/a/b/..").ino());
        assertEquals(ROOT, fs.resolve("/").ino());
        assertThrows(FsException.NoSuchEntry.class, () -> fs.resolve("/a/x"));
    }

    @Test
    void statfsReportsUsage() throws IOException {
        if (store() == TestVolume.Store.LOCAL) { // objects on this machine's disk: that disk's numbers
            assertEquals(java.nio.file.Files.getFileStore(dir).getTotalSpace() / 4096, fs.statfs().totalBlocks());
            return;
        }
        long before = fs.statfs().freeBlocks();
        long fh = create("f");
        fs.write(fh, 0, new byte[1 << 20], 0, 1 << 20);
        fs.release(fh);
        assertEquals(256, before - fs.statfs().freeBlocks());
    }

}
