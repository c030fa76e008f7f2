package io.partfs.engine.meta;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.Attr;
import io.partfs.engine.DirEntry;
import io.partfs.engine.FileType;
import io.partfs.engine.FsException;
import io.partfs.engine.VolumeFormat;
import io.partfs.engine.testing.Concurrently;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What the metadata engine promises on every {@link KvStore}. Subclasses supply a fresh, empty
 * store; the same tests then run on RocksDB and on Redis.
 */
abstract class MetaEngineContract {
    static final long ROOT = MetaEngine.ROOT;
    /** A fake clock: every reading is one microsecond later than the last. */
    final AtomicLong clock = new AtomicLong(1_700_000_000_000_000_000L);
    MetaEngine meta;
    final List<Long> orphans = new java.util.concurrent.CopyOnWriteArrayList<>();

    /** A new, empty store. */
    abstract KvStore newStore() throws Exception;

    MetaEngine newEngine() throws Exception {
        return new MetaEngine(newStore(), () -> clock.addAndGet(1000));
    }

    @BeforeEach
    void format() throws Exception {
        meta = newEngine();
        meta.format(VolumeFormat.create("test", VolumeFormat.DEFAULT_BLOCK_SIZE, "file:///objects"), 0, 0);
        meta.setOrphanListener(orphans::add);
    }

    @AfterEach
    void close() throws IOException {
        meta.close();
    }

    Attr file(long parent, String name) throws IOException {
        return meta.mknod(parent, name, FileType.FILE, 0644, 1000, 1000, 0, null);
    }

    Attr dir(long parent, String name) throws IOException {
        return meta.mknod(parent, name, FileType.DIRECTORY, 0755, 1000, 1000, 0, null);
    }

    /** Another client of the volume, on {@code store}, with its metadata cache on (exclusive TTL). */
    MetaEngine cachingClient(KvStore store) throws IOException {
        MetaEngine c = new MetaEngine(store, () -> clock.addAndGet(1000));
        c.load();
        c.enableCache(null);
        return c;
    }

    List<String> names(long dir) throws IOException {
        return meta.readdir(dir).stream().map(DirEntry::name).toList();
    }

    // ---- format ----

    @Test
    void formatRefusesAStoreThatHoldsAnotherProgramsDataAndLeavesItAsItWas() throws Exception {
        byte[] theirs = "42".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        try (MetaEngine other = new MetaEngine(newStore(), () -> clock.addAndGet(1000))) {
            other.store().update(tx -> {
                tx.put("their-key", theirs);
                return null;
            });
            IOException e = assertThrows(IOException.class, () -> other.format(
                    VolumeFormat.create("test", VolumeFormat.DEFAULT_BLOCK_SIZE, "file:///objects"), 0, 0));
            assertTrue(e.getMessage().contains("holds data but no PartFS volume") && e.getMessage().contains("empty"),
                    e.getMessage());
            assertNull(other.loadIfFormatted(), "no volume written into it");
            assertArrayEquals(theirs, other.store().read(r -> r.get("their-key")));
            assertNull(other.store().read(r -> r.get(MetaEngine.inodeKey(ROOT))), "no root directory either");
        }
        assertEquals("test", meta.format(VolumeFormat.create("test", VolumeFormat.DEFAULT_BLOCK_SIZE, "file:///objects"), 0, 0)
                .name(), "formatting an existing volume again is still fine");
    }

    @Test
    void aSettingKeyThatIsNotAVolumeFormatIsNamedAsAnotherProgramsData() throws Exception {
        try (MetaEngine other = new MetaEngine(newStore(), () -> clock.addAndGet(1000))) {
            other.store().update(tx -> {
                tx.put(MetaEngine.SETTING, "dark-mode=on".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                return null;
            });
            IOException e = assertThrows(IOException.class, other::load);
            assertTrue(e.getMessage().contains("not a PartFS volume's format") && e.getMessage().contains("empty one"),
                    e.getMessage());
        }
    }

    // ---- scanning (fsck and gc) ----

    @Test
    void scanHashHandsEveryFieldOfOneHashWithItsValueInPages() throws Exception {
        KvStore kv = meta.store();
        kv.update(tx -> {
            for (int i = 0; i < 2500; i++) {
                tx.hset("big", "f" + i, String.valueOf(i).getBytes(java.nio.charset.StandardCharsets.UTF_8));
            }
            tx.hset("bigger", "other", new byte[] {1}); // a hash whose name starts with the first's
            return null;
        });
        java.util.Map<String, String> fields = new java.util.HashMap<>();
        List<Integer> pages = new ArrayList<>();
        kv.read(r -> {
            r.scanHash("big", page -> {
                pages.add(page.size());
                page.forEach((f, v) -> fields.put(f, new String(v, java.nio.charset.StandardCharsets.UTF_8)));
            });
            return null;
        });
        assertEquals(2500, fields.size());
        assertTrue(fields.entrySet().stream().allMatch(e -> e.getKey().equals("f" + e.getValue())), "only the hash's own fields, with their values");
        assertTrue(pages.size() >= 2, "in pages, not whole: " + pages);
        List<String> none = new ArrayList<>();
        kv.read(r -> {
            r.scanHash("missing", page -> none.addAll(page.keySet()));
            return null;
        });
        assertEquals(List.of(), none);
    }

    @Test
    void scanHashesHandsEveryFieldOfEveryHashInPagesOfOneHashEach() throws Exception {
        KvStore kv = meta.store();
        java.util.Map<String, Integer> sizes = new java.util.LinkedHashMap<>();
        sizes.put("one", 1);
        sizes.put("missing", 0);
        sizes.put("large", 2500); // read in pages, not whole
        sizes.put("almost", 1000);
        for (int i = 0; i < 25; i++) {
            sizes.put("dir" + i, 500); // 12,500 fields: read whole, in more than one group
        }
        kv.update(tx -> {
            sizes.forEach((h, n) -> {
                for (int f = 0; f < n; f++) {
                    tx.hset(h, h + "/" + f, (h + f).getBytes(java.nio.charset.StandardCharsets.UTF_8));
                }
            });
            return null;
        });
        java.util.Map<String, Integer> seen = new java.util.HashMap<>();
        List<Integer> pages = new ArrayList<>();
        int[] largePages = {0};
        kv.read(r -> {
            r.scanHashes(List.copyOf(sizes.keySet()), (hash, page) -> {
                pages.add(page.size());
                largePages[0] += hash.equals("large") ? 1 : 0;
                page.forEach((f, v) -> {
                    assertTrue(f.startsWith(hash + "/"), f + " handed over as a field of " + hash);
                    assertEquals(hash + f.substring(hash.length() + 1), new String(v, java.nio.charset.StandardCharsets.UTF_8));
                    seen.merge(hash, 1, Integer::sum);
                });
            });
            return null;
        });
        java.util.Map<String, Integer> expected = new java.util.HashMap<>(sizes);
        expected.remove("missing");
        assertEquals(expected, seen, "every field once (Redis may hand one over twice only while it changes)");
        // HSCAN's COUNT is a hint (a page of 1,001 was seen), so "about a thousand"
        assertTrue(pages.stream().allMatch(n -> n <= 2000), "no page much larger than a thousand fields: " + pages);
        assertTrue(largePages[0] >= 2, "the large hash in pages, not whole: " + pages);
    }

    @Test
    void scanKeysFindsEveryKeyWithThePrefixAcrossPagesAndTakesGlobCharactersLiterally() throws Exception {
        KvStore kv = meta.store();
        kv.update(tx -> {
            for (int i = 0; i < 2500; i++) {
                tx.put("n" + i, new byte[] {1});
            }
            tx.put("p*1", new byte[] {1});
            tx.put("p*[2]", new byte[] {1});
            tx.put("pa", new byte[] {1});
            tx.hset("nhash", "f", new byte[] {1});
            return null;
        });
        java.util.Set<String> n = new java.util.HashSet<>();
        List<String> p = new ArrayList<>();
        kv.read(r -> {
            r.scanKeys("n", n::addAll);
            r.scanKeys("p*", p::addAll);
            return null;
        });
        // Redis keeps hashes and counters among the keys: callers tell their keys by format
        assertEquals(2500, n.stream().filter(k -> k.matches("n\\d+")).count());
        assertEquals(List.of("p*1", "p*[2]"), p.stream().sorted().toList());
    }

    @Test
    void forEachChunkVisitsTheSlicesOfEveryFileWhereverItIs() throws Exception {
        Attr d = dir(MetaEngine.ROOT, "d");
        Attr a = file(d.ino(), "a");
        Attr b = file(MetaEngine.ROOT, "b");
        meta.commitWrite(a.ino(), List.of(new MetaEngine.ChunkSlice(0, new Slice(11, 100, 0, 100, 0)),
                new MetaEngine.ChunkSlice(2, new Slice(12, 50, 0, 50, 0))));
        meta.commitWrite(b.ino(), List.of(new MetaEngine.ChunkSlice(0, new Slice(13, 10, 0, 10, 0))));
        meta.unlink(MetaEngine.ROOT, "b");
        List<String> seen = new ArrayList<>();
        meta.forEachChunk((ino, slices) -> slices.forEach(s -> seen.add(ino + ":" + s.id())));
        assertEquals(List.of(a.ino() + ":11", a.ino() + ":12", b.ino() + ":13"), seen.stream().sorted().toList(),
                "b is unlinked but its data not yet deleted: its slice is still in use");
        meta.deleteFileData(b.ino());
        seen.clear();
        meta.forEachChunk((ino, slices) -> slices.forEach(s -> seen.add(ino + ":" + s.id())));
        assertEquals(List.of(a.ino() + ":11", a.ino() + ":12"), seen.stream().sorted().toList(), "then it went to deletion");
    }

    // ---- readahead ----

    @Test
    void prefetchedListingsAnswerLookupsAndListingsWithoutReads() throws Exception {
        List<Long> dirs = new java.util.ArrayList<>();
        for (int d = 0; d < 20; d++) {
            long ino = dir(ROOT, "p" + d).ino();
            dirs.add(ino);
            for (int f = 0; f < 5; f++) {
                file(ino, "f" + f);
            }
        }
        io.partfs.engine.testing.CountingKvStore counting = new io.partfs.engine.testing.CountingKvStore(meta.store());
        MetaEngine cached = cachingClient(counting);
        cached.readdir(ROOT); // the parts' own attributes, as a table's listing brings them
        counting.reset();
        cached.prefetchListings(dirs);
        assertEquals(2, counting.reads(), "all listings in one request, all attributes in another: " + counting.readsByKind());
        counting.reset();
        for (int d = 0; d < 20; d++) {
            assertEquals(List.of("f0", "f1", "f2", "f3", "f4"), cached.readdir(dirs.get(d)).stream().map(DirEntry::name).toList());
            assertEquals(FileType.FILE, cached.lookup(dirs.get(d), "f3").type());
        }
        assertEquals(0, counting.reads(), "prefetched listings were read again: " + counting.readsByKind());
        file(dirs.get(0), "late"); // through the other engine: a cache keeps what it read, as for another client
        meta.unlink(dirs.get(1), "f0");
        cached.enableCache(null);
        cached.readdir(ROOT);
        cached.prefetchListings(dirs);
        assertTrue(cached.readdir(dirs.get(0)).stream().anyMatch(e -> e.name().equals("late")));
        assertFalse(cached.readdir(dirs.get(1)).stream().anyMatch(e -> e.name().equals("f0")));
    }

    /** Directory table holding count.txt, and a caching client that knows the table's attributes. */
    record TableWithCount(long table, long count, io.partfs.engine.testing.CountingKvStore counting, MetaEngine cached) {
    }

    TableWithCount tableWithCount() throws IOException {
        long table = dir(ROOT, "table").ino();
        long count = file(table, "count.txt").ino();
        io.partfs.engine.testing.CountingKvStore counting = new io.partfs.engine.testing.CountingKvStore(meta.store());
        MetaEngine cached = cachingClient(counting);
        assertEquals(table, cached.lookup(ROOT, "table").ino());
        return new TableWithCount(table, count, counting, cached);
    }

    /**
     * Has the other client (the test's engine) replace {@code dir}/count.txt by a rename, and
     * remove the replaced file at once as a mount does, before each of the next {@code times}
     * requests {@code op} that reads through {@code counting} make. Returns the replacements'
     * inodes, in order, as they are made.
     */
    List<Long> replaceCountBefore(io.partfs.engine.testing.CountingKvStore counting, String op, int times, long dir) {
        List<Long> made = new java.util.concurrent.CopyOnWriteArrayList<>();
        counting.beforeRequest(o -> {
            if (o.equals(op) && made.size() < times) {
                try {
                    long old = meta.lookup(dir, "count.txt").ino();
                    made.add(file(dir, "count.txt.tmp").ino());
                    meta.rename(dir, "count.txt.tmp", dir, "count.txt", 0);
                    meta.deleteFileData(old);
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }
        });
        return made;
    }

    /**
     * A listing is read in two requests (the names, then their inodes). When another client
     * replaces a file by a rename between the two, the listing is read again: it names the file
     * now there, not the inode gone, which would read as "no such entry" (and be left out of a
     * listing with attributes) for as long as the listing is kept. (A store whose reads each see
     * one moment, RocksDB's, cannot be caught between two requests.)
     */
    @Test
    void aListingReadWhileAnotherClientReplacesAFileNamesTheFileNowThere() throws Exception {
        TableWithCount t = tableWithCount();
        List<Long> replacements = replaceCountBefore(t.counting(), "getAll", 1, t.table());
        t.counting().reset();
        List<DirEntry> listed = t.cached().readdir(t.table());
        t.counting().beforeRequest(op -> { });
        assertEquals(1, replacements.size(), "the other client's rename ran between the reads");
        assertEquals(List.of("count.txt"), listed.stream().map(DirEntry::name).toList());
        if (meta.store().exclusive()) {
            assertEquals(t.count(), listed.get(0).ino(), "the file the name led to when the listing was read");
            return;
        }
        assertEquals(replacements.get(0), listed.get(0).ino(), "the file the name leads to now");
        assertEquals(2, t.counting().readsByKind().get("hgetAll:d"), "the listing, read again: " + t.counting().readsByKind());
        t.counting().reset();
        assertEquals(replacements.get(0), t.cached().getattrs(new long[] {listed.get(0).ino()})[0].ino());
        assertEquals(replacements.get(0), t.cached().lookup(t.table(), "count.txt").ino());
        assertEquals(0, t.counting().reads(), "both kept with the listing: " + t.counting().readsByKind());
    }

    /**
     * A lookup through a kept listing whose entry names an inode gone since reads the name
     * itself: here a listing given up after the other client replaced the file at each of its
     * three readings; and without a cache, a file replaced between reading the name and its inode.
     */
    @Test
    void aLookupOfANameWhoseInodeWentMeanwhileFindsTheFileNowThere() throws Exception {
        TableWithCount t = tableWithCount();
        List<Long> replacements = replaceCountBefore(t.counting(), "getAll", 3, t.table());
        Attr found = t.cached().lookup(t.table(), "count.txt");
        t.counting().beforeRequest(op -> { });
        if (meta.store().exclusive()) {
            assertEquals(t.count(), found.ino(), "the file the name led to when the listing was read");
            return;
        }
        assertEquals(3, replacements.size(), "the other client replaced the file at each reading");
        assertEquals(replacements.get(2), found.ino(), "the file the name leads to now");
        assertEquals(replacements.get(2), t.cached().lookup(t.table(), "count.txt").ino(), "and again");
        assertThrows(FsException.NoSuchEntry.class, () -> t.cached().lookup(t.table(), "count.txt.tmp"));

        io.partfs.engine.testing.CountingKvStore plain = new io.partfs.engine.testing.CountingKvStore(meta.store());
        MetaEngine uncached = new MetaEngine(plain, () -> clock.addAndGet(1000));
        uncached.load();
        List<Long> more = replaceCountBefore(plain, "get", 1, t.table()); // the inode's read, after the name's
        long foundUncached = uncached.lookup(t.table(), "count.txt").ino();
        assertEquals(List.of(foundUncached), more, "without a cache too, the file now there");
        plain.beforeRequest(op -> { });
    }

    /**
     * On a shared volume a listing expires after a second; a lookup in a large directory then
     * reads its one name, not the whole listing again, until such lookups have cost about what
     * the listing would: then it is read again.
     */
    @Test
    void aLookupInALargeDirectoryWhoseListingExpiredReadsOneName() throws Exception {
        long big = dir(ROOT, "table").ino();
        int entries = MetaCache.LARGE_LISTING + 24;
        for (int i = 0; i < entries; i++) {
            file(big, "part" + i);
        }
        long small = dir(ROOT, "part").ino();
        file(small, "columns.txt");
        io.partfs.engine.testing.CountingKvStore counting = new io.partfs.engine.testing.CountingKvStore(meta.store());
        MetaEngine cached = new MetaEngine(counting, () -> clock.addAndGet(1000));
        cached.load();
        cached.enableCache(java.time.Duration.ofNanos(1)); // every listing expired when next used
        assertEquals(entries, cached.readdir(big).size());
        int oneName = entries / MetaCache.ENTRIES_PER_NAME_LOOKUP;
        for (int i = 0; i < oneName; i++) {
            counting.reset();
            assertEquals(FileType.FILE, cached.lookup(big, "part" + (i * 97 % entries)).type());
            assertFalse(counting.readsByKind().keySet().stream().anyMatch(k -> k.startsWith("hgetAll")),
                    "lookup " + i + " read the listing again: " + counting.readsByKind());
            assertTrue(counting.reads() <= 2, "the name, then its inode: " + counting.readsByKind());
        }
        counting.reset();
        assertThrows(FsException.NoSuchEntry.class, () -> cached.lookup(big, "tmp_insert_1"));
        assertTrue(counting.readsByKind().keySet().stream().anyMatch(k -> k.startsWith("hgetAll")),
                "after " + oneName + " lookups of one name, the listing is read again: " + counting.readsByKind());
        counting.reset();
        assertThrows(FsException.NoSuchEntry.class, () -> cached.lookup(big, "tmp_insert_2"));
        assertEquals(1, counting.reads(), "and then one name again: " + counting.readsByKind());
        meta.unlink(big, "part0"); // through the other engine
        assertThrows(FsException.NoSuchEntry.class, () -> cached.lookup(big, "part0"));
        counting.reset();
        assertEquals(FileType.FILE, cached.lookup(small, "columns.txt").type());
        assertTrue(counting.readsByKind().keySet().stream().anyMatch(k -> k.startsWith("hgetAll")),
                "a small directory is read whole, as before: " + counting.readsByKind());
    }

    @Test
    void getattrsReadsWhatTheCacheLacksInOneRequestAndAnswersNullForGoneInodes() throws Exception {
        long[] inos = new long[100];
        for (int i = 0; i < inos.length; i++) {
            inos[i] = file(ROOT, "f" + i).ino();
        }
        inos[7] = 987_654_321; // no such inode
        io.partfs.engine.testing.CountingKvStore counting = new io.partfs.engine.testing.CountingKvStore(meta.store());
        MetaEngine cached = cachingClient(counting);
        cached.getattr(inos[3]);
        counting.reset();
        Attr[] got = cached.getattrs(inos);
        assertEquals(1, counting.reads(), "the 99 the cache lacked, in one request: " + counting.readsByKind());
        for (int i = 0; i < inos.length; i++) {
            if (i == 7) {
                assertEquals(null, got[i], "no such inode");
            } else {
                assertEquals(inos[i], got[i].ino());
                assertEquals(FileType.FILE, got[i].type());
            }
        }
        counting.reset();
        assertEquals(inos[50], cached.getattrs(new long[] {inos[50]})[0].ino());
        assertEquals(0, counting.reads(), "kept by the cache");
        assertEquals(null, meta.getattrs(new long[] {inos[7]})[0], "without a cache too");
        assertEquals(inos[8], meta.getattrs(new long[] {inos[8]})[0].ino());
    }

    // ---- format ----

    @Test
    void formatCreatesRootAndIsIdempotent() throws Exception {
        Attr root = meta.getattr(ROOT);
        assertTrue(root.isDirectory());
        assertEquals(2, root.nlink());
        String uuid = meta.volumeFormat().uuid();
        VolumeFormat again = meta.format(VolumeFormat.create("test", VolumeFormat.DEFAULT_BLOCK_SIZE, "file:///objects"), 0, 0);
        assertEquals(uuid, again.uuid(), "formatting again keeps the volume");
        assertEquals(uuid, meta.load().uuid());
    }

    @Test
    void formatWithOtherSettingsIsRefused() {
        IOException e = assertThrows(IOException.class,
                () -> meta.format(VolumeFormat.create("test", 1 << 20, "file:///objects"), 0, 0));
        assertTrue(e.getMessage().contains("already holds volume 'test'"), e.getMessage());
        e = assertThrows(IOException.class,
                () -> meta.format(VolumeFormat.create("other", VolumeFormat.DEFAULT_BLOCK_SIZE, "file:///objects"), 0, 0));
        assertTrue(e.getMessage().contains("already holds"), e.getMessage());
    }

    // ---- create, lookup, readdir ----

    @Test
    void createAndLookup() throws Exception {
        Attr d = dir(ROOT, "d");
        Attr f = file(d.ino(), "f");
        assertEquals(f, meta.lookup(d.ino(), "f"));
        assertEquals(FileType.FILE, f.type());
        assertEquals(0644, f.mode());
        assertEquals(1000, f.uid());
        assertEquals(1, f.nlink());
        assertEquals(3, meta.getattr(ROOT).nlink(), "a subdirectory adds a link to its parent");
        assertEquals(List.of("f"), names(d.ino()));
        assertNotEquals(d.ino(), f.ino());
    }

    @Test
    void createErrors() throws Exception {
        Attr f = file(ROOT, "f");
        assertThrows(FsException.Exists.class, () -> file(ROOT, "f"));
        assertThrows(FsException.Exists.class, () -> dir(ROOT, "f"));
        assertThrows(FsException.NotDirectory.class, () -> file(f.ino(), "x"));
        assertThrows(FsException.NoSuchEntry.class, () -> file(987654, "x"));
        assertThrows(FsException.NameTooLong.class, () -> file(ROOT, "n".repeat(256)));
        file(ROOT, "n".repeat(255));
        assertThrows(FsException.NoSuchEntry.class, () -> meta.lookup(ROOT, "missing"));
        assertThrows(FsException.NotDirectory.class, () -> meta.lookup(f.ino(), "x"));
    }

    @Test
    void setgidDirectoryPassesItsGroupOn() throws Exception {
        Attr d = meta.mknod(ROOT, "g", FileType.DIRECTORY, 02775, 1000, 50, 0, null);
        Attr f = meta.mknod(d.ino(), "f", FileType.FILE, 0644, 1001, 1001, 0, null);
        Attr sub = meta.mknod(d.ino(), "s", FileType.DIRECTORY, 0755, 1001, 1001, 0, null);
        assertEquals(50, f.gid());
        assertEquals(50, sub.gid());
        assertEquals(02755, sub.mode(), "subdirectories inherit setgid");
    }

    @Test
    void symlinksKeepTheirTarget() throws Exception {
        Attr l = meta.mknod(ROOT, "l", FileType.SYMLINK, 0777, 0, 0, 0, "store/abc/def");
        assertEquals("store/abc/def", meta.readlink(l.ino()));
        assertEquals("store/abc/def".length(), l.size());
        Attr f = file(ROOT, "f");
        assertThrows(FsException.InvalidArgument.class, () -> meta.readlink(f.ino()));
    }

    @Test
    void specialFilesKeepTypeAndDevice() throws Exception {
        Attr fifo = meta.mknod(ROOT, "p", FileType.FIFO, 0600, 0, 0, 0, null);
        Attr dev = meta.mknod(ROOT, "c", FileType.CHAR_DEVICE, 0600, 0, 0, 0x0103, null);
        assertEquals(FileType.FIFO, meta.getattr(fifo.ino()).type());
        assertEquals(0x0103, meta.getattr(dev.ino()).rdev());
    }

    @Test
    void readdirIsSortedAndComplete() throws Exception {
        List<String> expected = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
            String n = "part_" + i;
            expected.add(n);
            file(ROOT, n);
        }
        expected.sort(null);
        assertEquals(expected, names(ROOT));
    }

    // ---- links ----

    @Test
    void hardLinksShareTheInode() throws Exception {
        Attr f = file(ROOT, "a");
        Attr d = dir(ROOT, "d");
        Attr linked = meta.link(f.ino(), d.ino(), "b");
        assertEquals(2, linked.nlink());
        assertEquals(f.ino(), meta.lookup(d.ino(), "b").ino());
        Attr afterUnlink = meta.unlink(ROOT, "a");
        assertEquals(1, afterUnlink.nlink());
        assertEquals(1, meta.getattr(f.ino()).nlink());
        assertTrue(orphans.isEmpty());
        meta.unlink(d.ino(), "b");
        assertEquals(List.of(f.ino()), orphans, "the last unlink hands the data to deletion");
    }

    @Test
    void linkErrors() throws Exception {
        Attr f = file(ROOT, "f");
        Attr d = dir(ROOT, "d");
        assertThrows(FsException.NotPermitted.class, () -> meta.link(d.ino(), ROOT, "d2"));
        assertThrows(FsException.Exists.class, () -> meta.link(d.ino(), ROOT, "f"), "EEXIST comes before EPERM, as on Linux");
        assertThrows(FsException.Exists.class, () -> meta.link(f.ino(), ROOT, "d"));
        assertThrows(FsException.NotDirectory.class, () -> meta.link(f.ino(), f.ino(), "x"));
    }

    /** More unlinked files than a page of the list's scan (a crash during a DROP DATABASE): every one is listed. */
    @Test
    void aLongListOfPendingFileDeletionsIsReadWhole() throws Exception {
        java.util.Set<Long> unlinked = new java.util.HashSet<>();
        for (int i = 0; i < 1200; i++) {
            Attr f = file(ROOT, "f" + i);
            meta.unlink(ROOT, "f" + i);
            unlinked.add(f.ino());
        }
        List<Long> pending = meta.pendingFileDeletions();
        assertEquals(unlinked, java.util.Set.copyOf(pending));
        assertEquals(1200, pending.size());
    }

    @Test
    void unlinkOfOpenFileDefersDeletionToLastRelease() throws Exception {
        Attr f = file(ROOT, "f");
        meta.opened(f.ino());
        meta.opened(f.ino());
        meta.unlink(ROOT, "f");
        assertTrue(orphans.isEmpty());
        assertEquals(0, meta.getattr(f.ino()).nlink(), "an open unlinked file still has attributes");
        meta.released(f.ino());
        assertTrue(orphans.isEmpty());
        meta.released(f.ino());
        assertEquals(List.of(f.ino()), orphans);
        assertEquals(List.of(f.ino()), meta.pendingFileDeletions());
        assertEquals(new MetaEngine.PendingDeletions(1, 0), meta.pendingDeletions());
        meta.deleteFileData(f.ino());
        assertThrows(FsException.NoSuchEntry.class, () -> meta.getattr(f.ino()));
        assertTrue(meta.pendingFileDeletions().isEmpty());
        assertEquals(new MetaEngine.PendingDeletions(0, 0), meta.pendingDeletions());
    }

    /**
     * An unlinked file a live session holds open is not another client's to delete; once the
     * session misses heartbeats for {@link MetaEngine#SESSION_TIMEOUT} it is, and the session is
     * removed, which the session notices at its next heartbeat (and registers again).
     */
    @Test
    void sessionsHoldTheirUnlinkedOpenFilesUntilTheyStopBeating() throws Exception {
        long sid = meta.registerSession("host-a pid 1 at /mnt");
        Attr held = file(ROOT, "held");
        Attr loose = file(ROOT, "loose");
        meta.opened(held.ino());
        meta.unlink(ROOT, "held");
        meta.unlink(ROOT, "loose"); // not open: deletable by anyone
        MetaEngine other = new MetaEngine(new io.partfs.engine.testing.CountingKvStore(meta.store()), () -> clock.addAndGet(1000));
        other.load();
        assertEquals(List.of(sid), List.copyOf(other.liveSessions().keySet()));
        assertEquals(List.of(loose.ino()), other.pendingFileDeletions(), "the held file is the live session's");
        assertEquals(java.util.Set.of(held.ino(), loose.ino()), java.util.Set.copyOf(meta.pendingFileDeletions()),
                "its own session's files are listed for it (it skips those still open)");
        assertTrue(meta.heartbeat());
        assertEquals(List.of(), other.removeStaleSessions(), "a live session stays");

        clock.addAndGet(MetaEngine.SESSION_TIMEOUT.toNanos() + 1);
        assertEquals(java.util.Map.of(), other.liveSessions());
        assertEquals(java.util.Set.of(held.ino(), loose.ino()), java.util.Set.copyOf(other.pendingFileDeletions()));
        List<MetaEngine.Session> removed = other.removeStaleSessions();
        assertEquals(List.of(sid), removed.stream().map(MetaEngine.Session::id).toList());
        assertEquals("host-a pid 1 at /mnt", removed.get(0).info());
        assertEquals(java.util.Map.of(), other.sessions());

        assertFalse(meta.heartbeat(), "the session learns it was taken for crashed");
        assertEquals(List.of(sid), List.copyOf(other.liveSessions().keySet()), "and is registered again");
        meta.unregisterSession(sid);
        assertEquals(java.util.Map.of(), other.sessions());
        assertEquals(0, meta.session());
    }

    /**
     * A file another client deleted stays in the store without links until its data goes; a
     * client whose listing still names it learns that from a read of the store (PartFs's open
     * for writing on a shared volume makes one), and from then on the name leads nowhere,
     * whatever the listing's remaining time: the kernel, looking the name up again after the
     * open's ESTALE, creates the file anew instead of meeting the deleted one again.
     */
    @Test
    void aFileAnotherClientDeletedIsNotFoundOnceAReadOfTheStoreSawItHasNoLinks() throws Exception {
        MetaEngine a = cachingClient(meta.store());
        Attr status = file(ROOT, "status");
        assertEquals(status.ino(), a.lookup(ROOT, "status").ino());
        meta.unlink(ROOT, "status"); // by the other client
        assertEquals(status.ino(), a.lookup(ROOT, "status").ino(), "a's cache still names it");
        assertEquals(1, a.getattr(status.ino()).nlink(), "and has its attributes from before");
        assertEquals(0, a.getattrFromStore(status.ino()).nlink(), "the store: deleted, its data not yet");
        assertThrows(FsException.NoSuchEntry.class, () -> a.lookup(ROOT, "status"));
    }

    /**
     * A symlink another client replaced by a rename is gone from the store at once. A readlink
     * of it fails, and the mount answers ESTALE and forgets the inode's cached attributes: the
     * kernel's second lookup must then lead to the new symlink, not to the old inode again
     * through the listing this client keeps.
     */
    @Test
    void aNameWhoseInodeARequestFoundGoneLeadsToWhatTheStoreHasOnceTheInodeIsForgotten() throws Exception {
        MetaEngine a = cachingClient(meta.store());
        Attr old = meta.mknod(ROOT, "s", FileType.SYMLINK, 0777, 0, 0, 0, "target-1");
        assertEquals("target-1", a.readlink(a.lookup(ROOT, "s").ino()));
        meta.mknod(ROOT, "s.tmp", FileType.SYMLINK, 0777, 0, 0, 0, "target-2");
        meta.rename(ROOT, "s.tmp", ROOT, "s", 0); // by the other client
        assertEquals(old.ino(), a.lookup(ROOT, "s").ino(), "a's cache still leads to the old symlink");
        assertThrows(FsException.NoSuchEntry.class, () -> a.readlink(old.ino()));
        a.forgetCached(old.ino());
        assertEquals("target-2", a.readlink(a.lookup(ROOT, "s").ino()));
    }

    /**
     * An open with O_CREAT of a name another client made while this one kept a listing without
     * it: the create finds the name in the store, and the lookup that follows must find it too.
     */
    @Test
    void aNameAnotherClientJustMadeIsFoundByTheLookupAfterACreateFoundIt() throws Exception {
        MetaEngine a = cachingClient(meta.store());
        assertFalse(a.readdir(ROOT).stream().anyMatch(e -> e.name().equals("status")), "a keeps a listing without it");
        Attr made = file(ROOT, "status"); // by another client
        assertThrows(FsException.Exists.class, () -> a.mknod(ROOT, "status", FileType.FILE, 0644, 0, 0, 0, null));
        assertEquals(made.ino(), a.lookup(ROOT, "status").ino());
        Attr linked = file(ROOT, "target");
        file(ROOT, "taken");
        a.readdir(ROOT);
        meta.unlink(ROOT, "taken");
        Attr again = file(ROOT, "taken");
        assertThrows(FsException.Exists.class, () -> a.link(linked.ino(), ROOT, "taken"));
        assertEquals(again.ino(), a.lookup(ROOT, "taken").ino(), "the same after a link found the name taken");
    }

    // ---- flock(2) locks ----

    @Test
    void flockLocksConflictAcrossClientsAsOnOneMachine() throws Exception {
        meta.registerSession("host-a");
        Attr f = file(ROOT, "status");
        MetaEngine b = new MetaEngine(meta.store(), () -> clock.addAndGet(1000)); // shares meta's store: not closed
        {
            b.load();
            b.registerSession("host-b");
            MetaEngine.Flock sh = MetaEngine.Flock.SHARED, ex = MetaEngine.Flock.EXCLUSIVE, un = MetaEngine.Flock.UNLOCK;
            assertTrue(meta.flock(f.ino(), 1, ex));
            assertTrue(meta.flock(f.ino(), 1, ex), "taking one's own lock again");
            assertFalse(b.flock(f.ino(), 1, ex), "the same owner number on another client is another owner");
            assertFalse(b.flock(f.ino(), 2, sh), "shared against exclusive");
            assertFalse(meta.flock(f.ino(), 3, sh), "another open file of the same client conflicts too");
            assertTrue(meta.flock(f.ino(), 1, sh), "converting one's own lock down");
            assertTrue(b.flock(f.ino(), 2, sh), "shared with shared");
            assertFalse(meta.flock(f.ino(), 1, ex), "converting up while another shares it");
            assertTrue(b.flock(f.ino(), 2, un));
            assertTrue(b.flock(f.ino(), 2, un), "unlocking what one does not hold is harmless");
            assertTrue(meta.flock(f.ino(), 1, ex), "converting up once alone");
            assertTrue(meta.flock(f.ino(), 1, un));
            assertTrue(b.flock(f.ino(), 2, ex), "free again");
            assertTrue(b.flock(f.ino(), 2, un));
        }
    }

    @Test
    void ofClientsRacingForOneExclusiveLockExactlyOneGetsIt() throws Exception {
        Attr f = file(ROOT, "status");
        MetaEngine b = new MetaEngine(meta.store(), () -> clock.addAndGet(1000)); // shares meta's store: not closed
        b.load();
        for (int round = 0; round < 20; round++) {
            java.util.concurrent.atomic.AtomicInteger won = new java.util.concurrent.atomic.AtomicInteger(-1);
            java.util.concurrent.atomic.AtomicInteger winners = new java.util.concurrent.atomic.AtomicInteger();
            Concurrently.run(8, t -> {
                if ((t % 2 == 0 ? meta : b).flock(f.ino(), t, MetaEngine.Flock.EXCLUSIVE)) {
                    winners.incrementAndGet();
                    won.set(t);
                }
            });
            assertEquals(1, winners.get(), "round " + round);
            int t = won.get();
            assertTrue((t % 2 == 0 ? meta : b).flock(f.ino(), t, MetaEngine.Flock.UNLOCK));
        }
    }

    @Test
    void aSessionsFlockLocksEndWithItWhetherItEndsCrashesOrIsRemoved() throws Exception {
        Attr f = file(ROOT, "status");
        Attr g = file(ROOT, "other");
        MetaEngine b = new MetaEngine(meta.store(), () -> clock.addAndGet(1000)); // sharing meta's store: not closed
        MetaEngine c = new MetaEngine(meta.store(), () -> clock.addAndGet(1000));
        {
            b.load();
            c.load();
            long sa = meta.registerSession("a");
            long sb = b.registerSession("b");
            c.registerSession("c");
            MetaEngine.Flock ex = MetaEngine.Flock.EXCLUSIVE;

            assertTrue(meta.flock(f.ino(), 1, ex));
            assertTrue(meta.flock(g.ino(), 2, ex));
            meta.unregisterSession(sa); // a clean unmount
            assertTrue(c.flock(f.ino(), 9, ex) && c.flock(g.ino(), 9, ex), "the ended session's locks went with it");
            assertTrue(c.flock(f.ino(), 9, MetaEngine.Flock.UNLOCK) && c.flock(g.ino(), 9, MetaEngine.Flock.UNLOCK));

            assertTrue(b.flock(f.ino(), 1, ex));
            assertTrue(c.removeSession(sb), "a mount known dead (the next mount at its mount point)");
            assertFalse(c.removeSession(sb), "gone already");
            assertTrue(c.flock(f.ino(), 9, ex), "its lock went with it");
            assertTrue(c.flock(f.ino(), 9, MetaEngine.Flock.UNLOCK));

            long sd = meta.registerSession("d"); // a mount that crashes
            assertTrue(meta.flock(f.ino(), 1, ex));
            assertTrue(c.heartbeat());
            clock.addAndGet(MetaEngine.SESSION_TIMEOUT.toNanos() + 1);
            assertTrue(c.heartbeat());
            assertFalse(c.flock(f.ino(), 9, ex), "held until the session is taken for crashed");
            assertEquals(List.of(sd), c.removeStaleSessions().stream().map(MetaEngine.Session::id).toList());
            assertTrue(c.flock(f.ino(), 9, ex), "and released with it");
            assertThrows(IllegalArgumentException.class, () -> c.removeSession(c.session()), "not one's own");
        }
    }

    /**
     * A mount cut off from the metadata engine longer than {@link MetaEngine#SESSION_TIMEOUT}
     * comes back to find its session removed: it takes its flock(2) locks again where no other
     * mount took them, and refuses changes (EROFS) once one did, rather than write on as a
     * holder of a lock another mount holds too (two ClickHouse servers on one data path).
     */
    @Test
    void aMountWhoseSessionWasRemovedTakesItsLocksAgainOrRefusesChanges() throws Exception {
        Attr status = file(ROOT, "status");
        Attr other = file(ROOT, "other");
        MetaEngine b = new MetaEngine(meta.store(), () -> clock.addAndGet(1000)); // sharing meta's store: not closed
        b.load();
        MetaEngine.Flock ex = MetaEngine.Flock.EXCLUSIVE;
        long sa = meta.registerSession("a");
        b.registerSession("b");
        assertTrue(meta.flock(status.ino(), 1, ex));
        assertTrue(meta.flock(other.ino(), 2, MetaEngine.Flock.SHARED));

        // a is cut off: b takes it for crashed, and its locks go with it
        removedAsCrashed(b, sa);
        assertFalse(meta.heartbeat(), "a learns its session was removed");
        assertNull(meta.fenced(), "no one took its locks meanwhile");
        assertFalse(b.flock(status.ino(), 9, ex), "a holds its exclusive lock again");
        assertTrue(b.flock(other.ino(), 9, MetaEngine.Flock.SHARED), "and its shared one");
        assertTrue(b.flock(other.ino(), 9, MetaEngine.Flock.UNLOCK));
        file(ROOT, "a-writes-on"); // a change by a: taken

        // cut off again; this time b takes the lock before a is back
        removedAsCrashed(b, sa);
        assertTrue(b.flock(status.ino(), 9, ex), "b starts as the only writer");
        // a's first change after its return renews the lapsed session before it is made
        FsException refused = assertThrows(FsException.class,
                () -> meta.mknod(ROOT, "a-writes-again", FileType.FILE, 0644, 0, 0, 0, null));
        assertEquals(io.partfs.engine.Errno.EROFS, refused.errno(), refused.getMessage());
        assertTrue(refused.getMessage().contains("inode " + status.ino()), refused.getMessage());
        assertTrue(refused.getMessage().contains("unmount it and mount again"), refused.getMessage());
        assertTrue(meta.fenced() != null);
        assertThrows(FsException.NoSuchEntry.class, () -> b.lookup(ROOT, "a-writes-again"), "nothing was made");
        assertThrows(FsException.ReadOnly.class, () -> meta.setattr(other.ino(), new MetaEngine.SetAttr(0600, null, null, null, null)));
        assertThrows(FsException.ReadOnly.class, () -> meta.flock(other.ino(), 3, ex), "a fenced mount takes no new lock");
        assertTrue(meta.flock(status.ino(), 1, MetaEngine.Flock.UNLOCK), "but lets go of what it has");
        assertEquals(0644, b.getattr(other.ino()).mode() & 07777, "other mounts go on as before");
        b.mknod(ROOT, "b-writes", FileType.FILE, 0644, 0, 0, 0, null);
    }

    /** Lets {@code sid} miss its heartbeats until {@code by} takes it for crashed and removes it. */
    private void removedAsCrashed(MetaEngine by, long sid) throws IOException {
        clock.addAndGet(MetaEngine.SESSION_TIMEOUT.toNanos() + 1);
        assertTrue(by.heartbeat());
        assertEquals(List.of(sid), by.removeStaleSessions().stream().map(MetaEngine.Session::id).toList());
    }

    /** How many notes of uploads session {@code sid} has in the metadata. */
    private static long recorded(MetaEngine engine, long sid) {
        try {
            return engine.uploadsRecorded(sid).size();
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /**
     * A mount notes the slices it uploads before committing them. Once its session has ended
     * (here: removed as crashed) and the settle has passed since another mount first saw it
     * ended, that mount claims the notes and learns which slices nothing knows: their objects
     * are its to delete. A slice committed before the crash (its note not dropped yet) is
     * known and kept. If the crashed mount was only cut off, it learns at its next heartbeat that
     * its uncommitted uploads are gone, and refuses changes.
     */
    @Test
    void uploadsACrashedMountNeverCommittedAreClaimedOnceTheSettlePassed() throws Exception {
        Attr f = file(ROOT, "f");
        MetaEngine b = new MetaEngine(meta.store(), () -> clock.addAndGet(1000)); // sharing meta's store: not closed
        b.load();
        long sa = meta.registerSession("a");
        b.registerSession("b");
        long committed = meta.nextSliceId();
        long lost = meta.nextSliceId();
        meta.uploading(committed, f.ino(), 0);
        meta.uploading(lost, f.ino(), 1);
        meta.uploading(lost, f.ino(), 1); // its second block: one note
        io.partfs.engine.testing.Poll.until(() -> recorded(meta, sa) == 2, "a's notes written down in the background");
        meta.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, new Slice(committed, 10, 0, 10, 0))));
        assertEquals(java.util.Map.of(), b.claimUncommittedUploads(java.time.Duration.ZERO), "a live session's notes are its own");

        removedAsCrashed(b, sa); // a stops beating, as if it crashed
        java.time.Duration settle = java.time.Duration.ofMinutes(20);
        assertEquals(java.util.Map.of(), b.claimUncommittedUploads(settle), "the settle starts when the end is first seen");
        clock.addAndGet(settle.toNanos() - 1_000_000);
        assertEquals(java.util.Map.of(), b.claimUncommittedUploads(settle), "nor before it passed");
        clock.addAndGet(2_000_000);
        assertEquals(java.util.Map.of(sa, List.of(lost)), b.claimUncommittedUploads(settle), "the slice no chunk lists");
        assertEquals(java.util.Map.of(), b.claimUncommittedUploads(java.time.Duration.ZERO), "claimed once");
        assertEquals(0, recorded(b, sa));

        assertFalse(meta.heartbeat(), "a was only cut off: its session had been removed");
        assertTrue(meta.fenced() != null && meta.fenced().contains("uploaded but not committed"), meta.fenced());
        assertThrows(FsException.ReadOnly.class, () -> file(ROOT, "a-writes-on"), "its writes cannot be committed any more");
    }

    /**
     * A mount that claimed a crashed mount's uploads keeps their notes as its own until it has
     * deleted their objects: should it die first, the next mount claims them from its notes, and
     * the objects are not left behind. Once deleted they are dropped.
     */
    @Test
    void uploadsClaimedByAMountThatDiesBeforeDeletingThemAreClaimedAgain() throws Exception {
        Attr f = file(ROOT, "f");
        MetaEngine b = new MetaEngine(meta.store(), () -> clock.addAndGet(1000)); // sharing meta's store: not closed
        b.load();
        MetaEngine c = new MetaEngine(meta.store(), () -> clock.addAndGet(1000));
        c.load();
        long sa = meta.registerSession("a");
        long sb = b.registerSession("b");
        long sc = c.registerSession("c");
        long lost = meta.nextSliceId();
        meta.uploading(lost, f.ino(), 0);
        io.partfs.engine.testing.Poll.until(() -> recorded(meta, sa) == 1, "a's note written down");

        clock.addAndGet(MetaEngine.SESSION_TIMEOUT.toNanos() + 1); // a stops beating
        assertTrue(b.heartbeat() && c.heartbeat());
        assertEquals(List.of(sa), b.removeStaleSessions().stream().map(MetaEngine.Session::id).toList());
        assertEquals(java.util.Map.of(sa, List.of(lost)), b.claimUncommittedUploads(java.time.Duration.ZERO));
        assertEquals(java.util.Set.of(lost), c.uploadsRecorded(sb), "b holds the note until it has deleted the objects");

        clock.addAndGet(MetaEngine.SESSION_TIMEOUT.toNanos() + 1); // b dies before deleting them
        assertTrue(c.heartbeat());
        assertEquals(List.of(sb), c.removeStaleSessions().stream().map(MetaEngine.Session::id).toList());
        assertEquals(java.util.Map.of(sb, List.of(lost)), c.claimUncommittedUploads(java.time.Duration.ZERO),
                "claimed again, from b's notes");
        assertEquals(java.util.Set.of(lost), c.uploadsRecorded(sc));

        c.uploadsSettled(List.of(lost)); // c deleted the objects
        c.unregisterSession(sc); // writes the drop at once
        assertEquals(0, recorded(c, sc));
        MetaEngine tool = new MetaEngine(meta.store(), () -> clock.addAndGet(1000)); // no session: takes any ended one's
        tool.load();
        assertEquals(java.util.Map.of(), tool.claimUncommittedUploads(java.time.Duration.ZERO), "nothing left to claim");
    }

    /**
     * A mount back before the settle ran out keeps its notes, as does a live one; those its
     * commits settle are dropped, and a clean unmount with none left leaves nothing behind. A
     * write whose flush never succeeded before the unmount is claimed once the session ended.
     */
    @Test
    void aMountBackInTimeKeepsItsUploadsAndAnUnmountLeavesOnlyThoseNeverCommitted() throws Exception {
        Attr f = file(ROOT, "f");
        MetaEngine b = new MetaEngine(meta.store(), () -> clock.addAndGet(1000)); // sharing meta's store: not closed
        b.load();
        long sa = meta.registerSession("a");
        b.registerSession("b");
        long id = meta.nextSliceId();
        meta.uploading(id, f.ino(), 0);
        io.partfs.engine.testing.Poll.until(() -> recorded(meta, sa) == 1, "a's note written down");

        removedAsCrashed(b, sa);
        java.time.Duration settle = java.time.Duration.ofMinutes(20);
        assertEquals(java.util.Map.of(), b.claimUncommittedUploads(settle), "seen ended: the settle starts");
        assertFalse(meta.heartbeat(), "a comes back within it");
        assertNull(meta.fenced());
        clock.addAndGet(settle.toNanos() * 2);
        assertTrue(meta.heartbeat() && b.heartbeat());
        assertEquals(java.util.Map.of(), b.claimUncommittedUploads(java.time.Duration.ZERO), "a's notes are its own again");
        assertEquals(1, recorded(meta, sa));

        meta.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, new Slice(id, 10, 0, 10, 0))));
        meta.uploadsSettled(List.of(id));
        io.partfs.engine.testing.Poll.until(() -> recorded(meta, sa) == 0, "the committed slice's note dropped");
        assertEquals(0, meta.uploadsNotSettled());
        long failed = meta.nextSliceId();
        meta.uploading(failed, f.ino(), 1); // a flush whose commit never succeeds
        meta.unregisterSession(sa); // unmount: waits for the note to be written down
        assertEquals(1, recorded(b, sa));
        assertEquals(java.util.Map.of(sa, List.of(failed)), b.claimUncommittedUploads(java.time.Duration.ZERO));

        long sc = meta.registerSession("c"); // the next mount: nothing in flight at its unmount
        long done = meta.nextSliceId();
        meta.uploading(done, f.ino(), 2);
        io.partfs.engine.testing.Poll.until(() -> recorded(meta, sc) == 1, "c's note written down");
        meta.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(2, new Slice(done, 10, 0, 10, 0))));
        meta.uploadsSettled(List.of(done));
        meta.unregisterSession(sc);
        assertEquals(0, recorded(b, sc));
        assertEquals(java.util.Map.of(), b.claimUncommittedUploads(java.time.Duration.ZERO), "nothing left behind");
    }

    /**
     * A shared store's clock (Redis's TIME) is compared with this machine's, as file times and
     * write-back's margin for backups need clocks that agree: here both run on one machine.
     * An embedded store has no clock of its own. A minute off or more is named a problem.
     */
    @Test
    void thisMachinesClockIsComparedWithASharedStores() throws Exception {
        java.util.OptionalLong skew = meta.clockSkewMillis();
        if (meta.store().exclusive()) {
            assertTrue(skew.isEmpty(), "RocksDB has no clock of its own");
        } else {
            assertTrue(skew.isPresent() && Math.abs(skew.getAsLong()) < 5_000, "Redis on this machine: " + skew);
        }
        assertNull(meta.clockSkewProblem(59_000));
        String behind = meta.clockSkewProblem(125_000);
        assertTrue(behind.contains("125.0 s behind the clock of") && behind.contains("NTP"), behind);
        assertTrue(meta.clockSkewProblem(-61_000).contains("61.0 s ahead of"), meta.clockSkewProblem(-61_000));
    }

    /**
     * The metadata loses the volume under a mount: a Redis restarted with nothing to load, a
     * FLUSHALL, or a URL that now leads to another volume. The mount's next heartbeat finds it,
     * says so once with the restore command, and from then on refuses changes and writes
     * nothing into that metadata: no session, beat or lock (before, it registered its session
     * again in the empty database, saying another client had removed it).
     */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {"flushed", "another volume"})
    void aMountWhoseVolumeIsGoneFromTheMetadataRefusesChangesAndWritesNothing(String how) throws Exception {
        Attr f = file(ROOT, "f");
        meta.registerSession("a");
        assertTrue(meta.heartbeat());
        byte[] other = io.partfs.engine.VolumeFormat.create("other", 1 << 20, "file:///elsewhere").encode();
        meta.store().update(tx -> {
            if (how.equals("flushed")) {
                tx.delete("setting");
            } else {
                tx.put("setting", other);
            }
            return null;
        });
        byte[] beatBefore = meta.store().read(r -> r.hget("sessionBeats", String.valueOf(meta.session())));
        clock.addAndGet(MetaEngine.HEARTBEAT.toNanos());
        assertTrue(meta.heartbeat());
        String why = meta.fenced();
        assertTrue(why != null && why.contains("the metadata of volume 'test'") && why.contains("is gone from")
                && why.contains("--from-backup latest"), why);
        assertTrue(why.contains(how.equals("flushed") ? "holds no volume" : "another volume's"), why);
        assertArrayEquals(beatBefore, meta.store().read(r -> r.hget("sessionBeats", String.valueOf(meta.session()))),
                "no beat written into metadata that is not the volume's");
        FsException refused = assertThrows(FsException.class, () -> meta.mknod(ROOT, "g", FileType.FILE, 0644, 0, 0, 0, null));
        assertEquals(io.partfs.engine.Errno.EROFS, refused.errno(), refused.getMessage());
        assertThrows(FsException.ReadOnly.class, () -> meta.flock(f.ino(), 1, MetaEngine.Flock.EXCLUSIVE));
    }

    /**
     * The metadata restarts empty under a mount, and before its next heartbeat finds that, work
     * under way writes: the note of an upload, the commit of a write to a file that is now
     * missing, a backup's claim. None may put anything into the empty metadata, or a restore of
     * the volume's backup there is refused as foreign data (a CI run met it: the backup's record
     * of completion written just after the restart).
     */
    @Test
    void workUnderWayWritesNothingIntoMetadataThatRestartedEmptyBeforeTheHeartbeatSeesIt() throws Exception {
        Attr f = file(ROOT, "f");
        long sid = meta.registerSession("a");
        long noted = meta.nextSliceId();
        meta.uploading(noted, f.ino(), 0);
        io.partfs.engine.testing.Poll.until(() -> recorded(meta, sid) == 1, "the note written down");
        List<String> hashes = List.of("sessions", "sessionBeats", SliceIntents.SESSIONS_WITH_NOTES, SliceIntents.key(sid),
                MetaEngine.DELSLICES);
        meta.store().update(tx -> { // what a Redis restarted without anything to load holds of what this test looks at
            tx.delete(MetaEngine.SETTING);
            tx.delete(MetaEngine.inodeKey(f.ino()));
            hashes.forEach(tx::hdelAll);
            return null;
        });

        meta.uploadsSettled(List.of(noted));
        meta.uploading(meta.nextSliceId(), f.ino(), 0);
        IOException commit = assertThrows(IOException.class, () -> meta.commitWrite(f.ino(),
                List.of(new MetaEngine.ChunkSlice(0, new Slice(meta.nextSliceId(), 4096, 0, 4096, 0)))));
        assertTrue(commit.getMessage().contains("is gone from"), commit.getMessage());
        io.partfs.engine.testing.Poll.until(() -> meta.fenced() != null, "the notes' writer finds the volume gone");
        assertTrue(meta.fenced().contains("is gone from"), meta.fenced());
        assertFalse(new io.partfs.engine.data.MetaBackup(meta.store(), null, "test").claim(java.time.Duration.ofHours(1),
                java.time.Instant.now()), "no backup of metadata holding no volume");
        meta.unregisterSession(sid);
        for (String h : hashes) {
            assertEquals(java.util.Map.of(), meta.store().read(r -> r.hgetAll(h)), h + ": nothing written into the empty metadata");
        }
        assertNull(meta.store().read(r -> r.get("lastBackup")));
        assertNull(meta.store().read(r -> r.get(MetaEngine.inodeKey(f.ino()))));
    }

    /**
     * A mount whose lease lapsed while the engine did not answer renews before each change;
     * when that renewal fails, the changes queued behind it fail at once rather than each wait
     * out a timeout of its own (eight FUSE threads would wait eight timeouts one after the other).
     */
    @Test
    void changesAfterAFailedRenewalFailAtOnceForASecond() throws Exception {
        io.partfs.engine.testing.CountingKvStore store = new io.partfs.engine.testing.CountingKvStore(meta.store());
        MetaEngine a = new MetaEngine(store, () -> clock.addAndGet(1000)); // a mount (not closed: the store is meta's)
        a.load();
        a.registerSession("a");
        clock.addAndGet(MetaEngine.SESSION_TIMEOUT.toNanos());
        store.failUpdates(true);
        assertThrows(IOException.class, () -> a.mknod(ROOT, "x", FileType.FILE, 0644, 0, 0, 0, null));
        assertEquals(1, store.refusedUpdates(), "the renewal was tried, and the change not");
        assertThrows(IOException.class, () -> a.mknod(ROOT, "x", FileType.FILE, 0644, 0, 0, 0, null));
        assertEquals(1, store.refusedUpdates(), "a change right after fails without asking again");
        clock.addAndGet(2_000_000_000L);
        assertThrows(IOException.class, () -> a.mknod(ROOT, "x", FileType.FILE, 0644, 0, 0, 0, null));
        assertEquals(2, store.refusedUpdates(), "a second later it asks again");
        store.failUpdates(false); // the engine answers again
        clock.addAndGet(2_000_000_000L);
        a.mknod(ROOT, "x", FileType.FILE, 0644, 0, 0, 0, null);
        assertTrue(a.fenced() == null);
        assertEquals(2, store.refusedUpdates());
    }

    /** A session a build without heartbeats registered (no beat recorded) counts as stale. */
    @Test
    void aSessionWithoutHeartbeatsIsStale() throws Exception {
        meta.store().update(tx -> {
            tx.hset("sessions", "7", "old build".getBytes(java.nio.charset.StandardCharsets.UTF_8));
            return null;
        });
        assertEquals(-1, meta.sessions().get(7L).lastBeatMillis());
        assertEquals(java.util.Map.of(), meta.liveSessions());
        assertEquals(List.of(7L), meta.removeStaleSessions().stream().map(MetaEngine.Session::id).toList());
        assertEquals(java.util.Map.of(), meta.sessions());
    }

    @Test
    void unlinkAndRmdirErrors() throws Exception {
        Attr d = dir(ROOT, "d");
        file(d.ino(), "f");
        assertThrows(FsException.IsDirectory.class, () -> meta.unlink(ROOT, "d"));
        assertThrows(FsException.NoSuchEntry.class, () -> meta.unlink(ROOT, "nope"));
        assertThrows(FsException.NotEmpty.class, () -> meta.rmdir(ROOT, "d"));
        assertThrows(FsException.NotDirectory.class, () -> meta.rmdir(d.ino(), "f"));
        meta.unlink(d.ino(), "f");
        meta.rmdir(ROOT, "d");
        assertEquals(2, meta.getattr(ROOT).nlink());
        assertThrows(FsException.NoSuchEntry.class, () -> meta.getattr(d.ino()));
        assertThrows(FsException.NoSuchEntry.class, () -> file(d.ino(), "late"));
    }

    // ---- rename ----

    @Test
    void renameFileWithinAndAcrossDirectories() throws Exception {
        Attr f = file(ROOT, "a");
        meta.rename(ROOT, "a", ROOT, "b", 0);
        assertEquals(List.of("b"), names(ROOT));
        Attr d = dir(ROOT, "d");
        meta.rename(ROOT, "b", d.ino(), "c", 0);
        assertEquals(f.ino(), meta.lookup(d.ino(), "c").ino());
        assertEquals(List.of("d"), names(ROOT));
    }

    @Test
    void renameReplacesAFileAndReleasesIt() throws Exception {
        Attr a = file(ROOT, "a");
        Attr b = file(ROOT, "b");
        Attr replaced = meta.rename(ROOT, "a", ROOT, "b", 0);
        assertEquals(b.ino(), replaced.ino());
        assertEquals(0, replaced.nlink());
        assertEquals(a.ino(), meta.lookup(ROOT, "b").ino());
        assertEquals(List.of(b.ino()), orphans);
    }

    @Test
    void renameNonEmptyDirectoryMovesTheSubtree() throws Exception {
        Attr tmp = dir(ROOT, "tmp_insert_1");
        file(tmp.ino(), "data.bin");
        Attr t = dir(ROOT, "table");
        meta.rename(ROOT, "tmp_insert_1", t.ino(), "all_1_1_0", 0);
        Attr part = meta.lookup(t.ino(), "all_1_1_0");
        assertEquals(tmp.ino(), part.ino());
        assertEquals(t.ino(), part.parent());
        assertEquals(List.of("data.bin"), names(part.ino()));
        assertEquals(3, meta.getattr(ROOT).nlink(), "root lost tmp and kept table");
        assertEquals(3, meta.getattr(t.ino()).nlink());
    }

    @Test
    void renameDirectoryOverEmptyDirectory() throws Exception {
        Attr a = dir(ROOT, "a");
        dir(ROOT, "b");
        meta.rename(ROOT, "a", ROOT, "b", 0);
        assertEquals(List.of("b"), names(ROOT));
        assertEquals(a.ino(), meta.lookup(ROOT, "b").ino());
        assertEquals(3, meta.getattr(ROOT).nlink());
    }

    @Test
    void renameTypeAndEmptinessErrors() throws Exception {
        Attr a = dir(ROOT, "a");
        Attr b = dir(ROOT, "b");
        file(b.ino(), "x");
        file(ROOT, "f");
        assertThrows(FsException.NotEmpty.class, () -> meta.rename(ROOT, "a", ROOT, "b", 0));
        assertThrows(FsException.NotDirectory.class, () -> meta.rename(ROOT, "a", ROOT, "f", 0));
        assertThrows(FsException.IsDirectory.class, () -> meta.rename(ROOT, "f", ROOT, "a", 0));
        assertThrows(FsException.NoSuchEntry.class, () -> meta.rename(ROOT, "zz", ROOT, "y", 0));
        assertThrows(FsException.NotDirectory.class, () -> meta.rename(ROOT, "f", meta.lookup(ROOT, "f").ino(), "y", 0));
        assertEquals(a.ino(), meta.lookup(ROOT, "a").ino());
    }

    @Test
    void renameIntoOwnSubtreeIsInvalid() throws Exception {
        Attr a = dir(ROOT, "a");
        Attr b = dir(a.ino(), "b");
        Attr c = dir(b.ino(), "c");
        assertThrows(FsException.InvalidArgument.class, () -> meta.rename(ROOT, "a", c.ino(), "a", 0));
        assertThrows(FsException.InvalidArgument.class, () -> meta.rename(ROOT, "a", a.ino(), "self", 0));
        meta.rename(b.ino(), "c", ROOT, "c", 0);
        assertEquals(ROOT, meta.getattr(c.ino()).parent());
    }

    @Test
    void renameBetweenLinksOfOneInodeDoesNothing() throws Exception {
        Attr f = file(ROOT, "a");
        meta.link(f.ino(), ROOT, "b");
        assertNull(meta.rename(ROOT, "a", ROOT, "b", 0));
        assertEquals(List.of("a", "b"), names(ROOT));
        assertEquals(2, meta.getattr(f.ino()).nlink());
    }

    @Test
    void renameNoReplace() throws Exception {
        file(ROOT, "a");
        file(ROOT, "b");
        assertThrows(FsException.Exists.class, () -> meta.rename(ROOT, "a", ROOT, "b", MetaEngine.RENAME_NOREPLACE));
        meta.rename(ROOT, "a", ROOT, "c", MetaEngine.RENAME_NOREPLACE);
        assertEquals(List.of("b", "c"), names(ROOT));
    }

    @Test
    void renameExchangeSwapsFileAndDirectoryAcrossParents() throws Exception {
        Attr p1 = dir(ROOT, "p1");
        Attr p2 = dir(ROOT, "p2");
        Attr f = file(p1.ino(), "x");
        Attr d = dir(p2.ino(), "y");
        meta.rename(p1.ino(), "x", p2.ino(), "y", MetaEngine.RENAME_EXCHANGE);
        assertEquals(d.ino(), meta.lookup(p1.ino(), "x").ino());
        assertEquals(f.ino(), meta.lookup(p2.ino(), "y").ino());
        assertEquals(3, meta.getattr(p1.ino()).nlink(), "p1 now holds the directory");
        assertEquals(2, meta.getattr(p2.ino()).nlink());
        assertEquals(p1.ino(), meta.getattr(d.ino()).parent());
        assertThrows(FsException.NoSuchEntry.class,
                () -> meta.rename(p1.ino(), "x", p2.ino(), "none", MetaEngine.RENAME_EXCHANGE));
        assertThrows(FsException.InvalidArgument.class,
                () -> meta.rename(p1.ino(), "x", p2.ino(), "y", MetaEngine.RENAME_EXCHANGE | MetaEngine.RENAME_NOREPLACE));
    }

    @Test
    void renameUpdatesTimes() throws Exception {
        Attr d = dir(ROOT, "d");
        Attr f = file(ROOT, "f");
        long before = meta.getattr(ROOT).mtimeNs();
        meta.rename(ROOT, "f", d.ino(), "g", 0);
        assertTrue(meta.getattr(ROOT).mtimeNs() > before);
        assertTrue(meta.getattr(d.ino()).mtimeNs() > d.mtimeNs());
        assertTrue(meta.getattr(f.ino()).ctimeNs() > f.ctimeNs());
    }

    // ---- attributes, truncate, data ----

    @Test
    void setattrChangesWhatItIsAskedToAndCtime() throws Exception {
        Attr f = file(ROOT, "f");
        Attr m = meta.setattr(f.ino(), MetaEngine.SetAttr.mode(04711));
        assertEquals(04711, m.mode());
        assertTrue(m.ctimeNs() > f.ctimeNs());
        Attr o = meta.setattr(f.ino(), MetaEngine.SetAttr.owner(7, null));
        assertEquals(7, o.uid());
        assertEquals(1000, o.gid());
        Attr t = meta.setattr(f.ino(), MetaEngine.SetAttr.times(5L, MetaEngine.SetAttr.NOW));
        assertEquals(5L, t.atimeNs());
        assertTrue(t.mtimeNs() > f.mtimeNs());
        assertEquals(t, meta.getattr(f.ino()));
    }

    @Test
    void readAccessMovesAtimeLikeRelatimeWithoutTouchingCtime() throws Exception {
        Attr f = file(ROOT, "f");
        assertTrue(meta.atimeStale(f), "a new file's atime is not newer than its mtime");
        meta.touchAtime(f.ino());
        Attr read = meta.getattr(f.ino());
        assertTrue(read.atimeNs() > f.atimeNs());
        assertEquals(f.ctimeNs(), read.ctimeNs(), "reading does not change ctime");
        assertEquals(f.mtimeNs(), read.mtimeNs());
        assertTrue(!meta.atimeStale(read), "until the next change, reads leave atime alone");
        meta.touchAtime(f.ino());
        assertEquals(read.atimeNs(), meta.getattr(f.ino()).atimeNs());
    }

    @Test
    void commitWriteAppendsSlicesAndGrowsTheFile() throws Exception {
        Attr f = file(ROOT, "f");
        Slice s1 = new Slice(meta.nextSliceId(), 100, 0, 100, 0);
        Slice s2 = new Slice(meta.nextSliceId(), 10, 0, 10, 50);
        meta.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, s1), new MetaEngine.ChunkSlice(0, s2)));
        assertEquals(List.of(s1, s2), meta.readChunk(f.ino(), 0));
        assertEquals(100, meta.getattr(f.ino()).size());
        Slice s3 = new Slice(meta.nextSliceId(), 5, 0, 5, 7);
        meta.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(2, s3)));
        assertEquals(2L * VolumeFormat.CHUNK_SIZE + 12, meta.getattr(f.ino()).size());
        assertTrue(s2.id() > s1.id() && s3.id() > s2.id());
    }

    /** Work of another thread, run whole after the next commit on {@code store} and before the committing thread goes on. */
    interface IoWork {
        void run() throws IOException;
    }

    static void afterNextCommit(io.partfs.engine.testing.CountingKvStore store, IoWork work) {
        java.util.concurrent.atomic.AtomicBoolean first = new java.util.concurrent.atomic.AtomicBoolean(true);
        store.afterCommit(() -> {
            if (!first.compareAndSet(true, false)) {
                return;
            }
            java.util.concurrent.atomic.AtomicReference<IOException> failed = new java.util.concurrent.atomic.AtomicReference<>();
            Thread other = new Thread(() -> {
                try {
                    work.run();
                } catch (IOException e) {
                    failed.set(e);
                }
            });
            other.start();
            try {
                other.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (failed.get() != null) {
                throw new java.io.UncheckedIOException(failed.get());
            }
        });
    }

    @Test
    void attributesATransactionWroteAreServedFromMemoryAndNeverOlderThanTheStore() throws Exception {
        io.partfs.engine.testing.CountingKvStore counting = new io.partfs.engine.testing.CountingKvStore(meta.store());
        MetaEngine cached = cachingClient(counting);
        Attr f = cached.mknod(ROOT, "new", FileType.FILE, 0644, 1000, 1000, 0, null);
        Slice s = new Slice(cached.nextSliceId(), 100, 0, 100, 0);
        Attr written = cached.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, s)));
        counting.reset();
        assertEquals(written, cached.getattr(f.ino()));
        assertEquals(0, counting.reads(), "what this client just wrote is not read back: " + counting.readsByKind());

        // A transaction that overlapped another of this client must not put back its older result.
        // Between the first commit and its caching, a second one runs whole.
        afterNextCommit(counting, () -> cached.truncate(f.ino(), 20));
        cached.truncate(f.ino(), 10);
        assertEquals(20, meta.getattr(f.ino()).size());
        assertEquals(20, cached.getattr(f.ino()).size(), "the later commit's size, as the store has it");
    }

    /**
     * ClickHouse removing a part: each unlink queues the file's deletion, which runs in the
     * background while the next unlinks run. A deletion that began and ended while an unlink
     * ran changed nothing the unlink wrote: the unlink still keeps it, and the directory's
     * attributes, listing and the other files are served from memory afterwards.
     */
    @Test
    void aDeletionInTheBackgroundLeavesTheUnlinkItOverlappedCached() throws Exception {
        io.partfs.engine.testing.CountingKvStore store = new io.partfs.engine.testing.CountingKvStore(meta.store());
        MetaEngine cached = cachingClient(store);
        long d = cached.mknod(ROOT, "part", FileType.DIRECTORY, 0755, 0, 0, 0, null).ino();
        long f0 = cached.mknod(d, "f0", FileType.FILE, 0644, 0, 0, 0, null).ino();
        cached.mknod(d, "f1", FileType.FILE, 0644, 0, 0, 0, null);
        cached.mknod(d, "f2", FileType.FILE, 0644, 0, 0, 0, null);
        cached.commitWrite(f0, List.of(new MetaEngine.ChunkSlice(0, new Slice(cached.nextSliceId(), 100, 0, 100, 0))));
        cached.unlink(d, "f0");
        afterNextCommit(store, () -> cached.deleteFileData(f0)); // between the unlink's commit and its end
        cached.unlink(d, "f1");
        assertThrows(FsException.NoSuchEntry.class, () -> meta.getattr(f0), "the deletion ran");
        store.reset();
        assertEquals(meta.getattr(d), cached.getattr(d));
        assertEquals(meta.readdir(d), cached.readdir(d));
        assertEquals(meta.getattr(cached.lookup(d, "f2").ino()), cached.lookup(d, "f2"));
        assertEquals(0, store.reads(), "served from memory: " + store.readsByKind());
        assertThrows(FsException.NoSuchEntry.class, () -> cached.getattr(f0));
    }

    /**
     * ClickHouse closes a new part's files side by side, so their write commits overlap: each
     * keeps what it wrote, and the stat after each close costs no read.
     */
    @Test
    void writeCommitsSideBySideLeaveEveryFileCached() throws Exception {
        io.partfs.engine.testing.CountingKvStore store = new io.partfs.engine.testing.CountingKvStore(meta.store());
        MetaEngine cached = cachingClient(store);
        long d = cached.mknod(ROOT, "tmp_insert_1", FileType.DIRECTORY, 0755, 0, 0, 0, null).ino();
        long a = cached.mknod(d, "a.bin", FileType.FILE, 0644, 0, 0, 0, null).ino();
        long b = cached.mknod(d, "b.bin", FileType.FILE, 0644, 0, 0, 0, null).ino();
        long c = cached.mknod(d, "c.bin", FileType.FILE, 0644, 0, 0, 0, null).ino();
        cached.getattr(c);
        afterNextCommit(store, () -> cached.commitWrite(b, List.of(new MetaEngine.ChunkSlice(0, new Slice(cached.nextSliceId(), 200, 0, 200, 0)))));
        cached.commitWrite(a, List.of(new MetaEngine.ChunkSlice(0, new Slice(cached.nextSliceId(), 100, 0, 100, 0))));
        store.reset();
        assertEquals(100, cached.getattr(a).size());
        assertEquals(200, cached.getattr(b).size());
        assertEquals(meta.getattr(c), cached.getattr(c));
        assertEquals(meta.readdir(d), cached.readdir(d));
        assertEquals(0, store.reads(), "served from memory: " + store.readsByKind());
        assertEquals(meta.getattr(a), cached.getattr(a));
        assertEquals(meta.getattr(b), cached.getattr(b));
    }

    /**
     * Threads of one caching client create, write, rename, link, unlink and list in two
     * directories with few names (so they often collide on one), as ClickHouse's inserts,
     * merges and part removals do in a table's directory, with unlinked files deleted in the
     * background; afterwards every listing and attribute the cache gives equals the store's.
     */
    @Test
    void concurrentChangesLeaveTheCacheEqualToTheStore() throws Exception {
        io.partfs.engine.testing.CountingKvStore store = new io.partfs.engine.testing.CountingKvStore(meta.store());
        // Between a commit and its caching other threads get time to commit and cache theirs:
        // the orders in which the cache could go wrong, made common.
        store.afterCommit(() -> java.util.concurrent.locks.LockSupport.parkNanos(
                java.util.concurrent.ThreadLocalRandom.current().nextLong(200_000)));
        MetaEngine cached = cachingClient(store);
        java.util.concurrent.ExecutorService background = java.util.concurrent.Executors.newSingleThreadExecutor();
        java.util.concurrent.atomic.AtomicReference<Throwable> deletionFailed = new java.util.concurrent.atomic.AtomicReference<>();
        cached.setOrphanListener(ino -> background.execute(() -> {
            try {
                cached.deleteFileData(ino);
            } catch (IOException | RuntimeException e) { // an executor would only print it
                deletionFailed.compareAndSet(null, e);
            }
        }));
        long[] dirs = {cached.mknod(ROOT, "t1", FileType.DIRECTORY, 0755, 0, 0, 0, null).ino(),
                cached.mknod(ROOT, "t2", FileType.DIRECTORY, 0755, 0, 0, 0, null).ino()};
        int threads = 4;
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(threads);
        try {
            for (int round = 0; round < 40; round++) { // bursts of changes, each checked once all threads are done
                List<java.util.concurrent.Future<?>> done = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    long seed = round * 100L + t;
                    done.add(pool.submit(() -> {
                        changeAtRandom(cached, dirs, new java.util.Random(seed), 25);
                        return null;
                    }));
                }
                for (java.util.concurrent.Future<?> f : done) {
                    f.get(120, java.util.concurrent.TimeUnit.SECONDS);
                }
                background.submit(() -> { }).get(60, java.util.concurrent.TimeUnit.SECONDS); // the deletions queued so far ran
                if (deletionFailed.get() != null) {
                    throw new AssertionError("round " + round + ": a background deletion failed", deletionFailed.get());
                }
                for (long d : dirs) {
                    assertEquals(meta.readdir(d), cached.readdir(d), "round " + round + ": listing of " + d);
                    assertEquals(meta.getattr(d), cached.getattr(d), "round " + round + ": attributes of directory " + d);
                    for (DirEntry e : meta.readdir(d)) {
                        assertEquals(meta.getattr(e.ino()), cached.getattr(e.ino()), "round " + round + ": attributes of " + e);
                    }
                }
            }
        } finally {
            pool.shutdownNow();
            background.shutdownNow();
        }
    }

    private static void changeAtRandom(MetaEngine fs, long[] dirs, java.util.Random rnd, int ops) throws IOException {
        for (int i = 0; i < ops; i++) {
            long d = dirs[rnd.nextInt(2)];
            String name = "p" + rnd.nextInt(6);
            try {
                switch (rnd.nextInt(10)) {
                    case 0 -> fs.mknod(d, name, FileType.FILE, 0644, 0, 0, 0, null);
                    case 1 -> fs.unlink(d, name);
                    case 2 -> fs.rename(d, name, dirs[rnd.nextInt(2)], "p" + rnd.nextInt(6), 0);
                    case 3 -> fs.link(fs.lookup(d, name).ino(), dirs[rnd.nextInt(2)], "p" + rnd.nextInt(6));
                    case 4 -> fs.truncate(fs.lookup(d, name).ino(), rnd.nextInt(100_000));
                    case 5 -> {
                        long ino = fs.lookup(d, name).ino();
                        Slice s = new Slice(fs.nextSliceId(), 100, 0, 100, 0);
                        fs.commitWrite(ino, List.of(new MetaEngine.ChunkSlice(0, s)));
                    }
                    case 6 -> fs.mknod(d, name, FileType.DIRECTORY, 0755, 0, 0, 0, null);
                    case 7 -> fs.rmdir(d, name);
                    default -> {
                        for (DirEntry e : fs.readdir(d)) {
                            fs.getattr(e.ino());
                        }
                    }
                }
            } catch (FsException.NoSuchEntry | FsException.Exists | FsException.IsDirectory | FsException.NotDirectory
                     | FsException.NotEmpty | FsException.NotPermitted | FsException.InvalidArgument e) {
                // another thread was first: as on any filesystem
            }
        }
    }

    @Test
    void extendedAttributesAreServedFromMemoryAndFollowThisClientsChanges() throws Exception {
        io.partfs.engine.testing.CountingKvStore counting = new io.partfs.engine.testing.CountingKvStore(meta.store());
        MetaEngine cached = cachingClient(counting);
        Attr f = cached.mknod(ROOT, "x", FileType.FILE, 0644, 1000, 1000, 0, null);
        counting.reset();
        assertThrows(FsException.NoAttribute.class, () -> cached.getxattr(f.ino(), "security.capability"));
        assertEquals(0, counting.reads(), "a file this client just created has none: the kernel's check before each write costs no read");

        cached.setxattr(f.ino(), "user.a", new byte[] {1}, 0);
        assertArrayEquals(new byte[] {1}, cached.getxattr(f.ino(), "user.a"));
        counting.reset();
        assertArrayEquals(new byte[] {1}, cached.getxattr(f.ino(), "user.a"));
        assertThrows(FsException.NoAttribute.class, () -> cached.getxattr(f.ino(), "user.b"));
        assertEquals(0, counting.reads(), counting.readsByKind().toString());
        cached.setxattr(f.ino(), "user.a", new byte[] {2}, MetaEngine.XATTR_REPLACE);
        assertArrayEquals(new byte[] {2}, cached.getxattr(f.ino(), "user.a"));
        cached.removexattr(f.ino(), "user.a");
        assertThrows(FsException.NoAttribute.class, () -> cached.getxattr(f.ino(), "user.a"));
        assertThrows(FsException.NoSuchEntry.class, () -> cached.getxattr(999_999, "user.a"), "an inode that does not exist");
    }

    @Test
    void chunkListsReadAtADataVersionComeFromMemoryUntilTheFileChanges() throws Exception {
        Attr f = file(ROOT, "f");
        Slice s1 = new Slice(meta.nextSliceId(), 100, 0, 100, 0);
        Attr v1 = meta.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, s1)));
        io.partfs.engine.testing.CountingKvStore counting = new io.partfs.engine.testing.CountingKvStore(meta.store());
        MetaEngine reader = new MetaEngine(counting, () -> clock.addAndGet(1000)); // another client of the volume
        reader.load();
        assertEquals(List.of(s1), reader.readChunk(f.ino(), 0, v1.dataVersion()));
        counting.reset();
        assertEquals(List.of(s1), reader.readChunk(f.ino(), 0, v1.dataVersion()));
        assertEquals(0, counting.reads(), "read again at the same version: " + counting.readsByKind());

        Slice s2 = new Slice(meta.nextSliceId(), 10, 0, 10, 50);
        Attr v2 = meta.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, s2)));
        assertNotEquals(v1.dataVersion(), v2.dataVersion());
        assertEquals(List.of(s1), reader.readChunk(f.ino(), 0, v1.dataVersion()),
                "a reader still holding the old attributes reads the content they describe");
        assertEquals(List.of(s1, s2), reader.readChunk(f.ino(), 0, v2.dataVersion()), "the new version is read from the store");
        Attr v3 = meta.truncate(f.ino(), 20);
        List<Slice> truncated = reader.readChunk(f.ino(), 0, v3.dataVersion());
        assertEquals(meta.readChunk(f.ino(), 0), truncated);
        assertNotEquals(List.of(s1, s2), truncated);
    }

    @Test
    void creatingANameAndCommittingAWriteReadTheStoreInOneRequestEach() throws Exception {
        io.partfs.engine.testing.CountingKvStore counting = new io.partfs.engine.testing.CountingKvStore(meta.store());
        MetaEngine client = cachingClient(counting);
        counting.reset();
        Attr f = client.mknod(ROOT, "f", FileType.FILE, 0644, 1000, 1000, 0, null);
        assertEquals(java.util.Map.of("getAndHget", 1L), counting.transactionReads(), "the directory and the name together");
        assertThrows(FsException.Exists.class, () -> client.mknod(ROOT, "f", FileType.FILE, 0644, 1000, 1000, 0, null));
        counting.reset();
        Slice a = new Slice(client.nextSliceId(), 100, 0, 100, 0);
        Slice b = new Slice(client.nextSliceId(), 100, 0, 100, 0);
        Slice c = new Slice(client.nextSliceId(), 10, 0, 10, 5);
        client.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, a), new MetaEngine.ChunkSlice(2, b), new MetaEngine.ChunkSlice(0, c)));
        assertEquals(java.util.Map.of("getAll", 1L), counting.transactionReads(), "the inode and both chunks together");
        counting.reset();
        client.link(f.ino(), ROOT, "g");
        client.unlink(ROOT, "f");
        assertEquals(java.util.Map.of("get", 2L, "getAndHget", 2L), counting.transactionReads(),
                "link: the inode, then the directory and the new name; unlink: the directory and the name, then the inode");
        Attr d1 = client.mknod(ROOT, "d1", FileType.DIRECTORY, 0755, 1000, 1000, 0, null);
        client.mknod(ROOT, "old", FileType.FILE, 0644, 1000, 1000, 0, null);
        counting.reset();
        client.rename(ROOT, "g", d1.ino(), "g", 0);
        assertEquals(java.util.Map.of("getAndHget", 2L, "getAll", 1L), counting.transactionReads(),
                "rename across directories: each directory with its entry, then the inode");
        counting.reset();
        client.rename(ROOT, "old", ROOT, "old2", 0);
        client.rename(d1.ino(), "g", ROOT, "old2", 0); // replaces a file
        assertEquals(java.util.Map.of("getAndHget", 3L, "hget", 1L, "getAll", 2L), counting.transactionReads(),
                "within one directory the second name is one HGET; a replaced inode comes with the moved one");
        f = client.lookup(ROOT, "old2");
        assertThrows(FsException.NoSuchEntry.class, () -> client.lookup(ROOT, "old"));
        assertEquals(List.of(a, c), meta.readChunk(f.ino(), 0));
        assertEquals(List.of(b), meta.readChunk(f.ino(), 2));
        assertEquals(2 * VolumeFormat.CHUNK_SIZE + 100, meta.getattr(f.ino()).size());
    }

    @Test
    void aCommittedWriteIsReadBackWithoutARoundTrip() throws Exception {
        Attr f = file(ROOT, "f");
        io.partfs.engine.testing.CountingKvStore counting = new io.partfs.engine.testing.CountingKvStore(meta.store());
        MetaEngine writer = cachingClient(counting);
        Slice s1 = new Slice(writer.nextSliceId(), 100, 0, 100, 0);
        Slice s2 = new Slice(writer.nextSliceId(), 10, 0, 10, 50);
        writer.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, s1)));
        Attr v2 = writer.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, s2), new MetaEngine.ChunkSlice(1, s1)));
        counting.reset();
        assertEquals(List.of(s1, s2), writer.readChunk(f.ino(), 0, v2.dataVersion()));
        assertEquals(List.of(s1), writer.readChunk(f.ino(), 1, v2.dataVersion()));
        assertEquals(0, counting.reads(), "the slice lists it committed: " + counting.readsByKind());

        Slice s3 = new Slice(meta.nextSliceId(), 5, 0, 5, 0);
        Attr v3 = meta.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, s3))); // another client
        assertEquals(List.of(s1, s2, s3), writer.readChunk(f.ino(), 0, v3.dataVersion()), "another client's write is read");
    }

    @Test
    void truncateFreesChunksAndLeavesAHole() throws Exception {
        Attr f = file(ROOT, "f");
        Slice a = new Slice(meta.nextSliceId(), 1000, 0, 1000, 0);
        Slice b = new Slice(meta.nextSliceId(), 1000, 0, 1000, 0);
        meta.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, a), new MetaEngine.ChunkSlice(1, b)));
        Attr t = meta.truncate(f.ino(), 500);
        assertEquals(500, t.size());
        assertTrue(meta.readChunk(f.ino(), 1).isEmpty());
        List<Slice> c0 = meta.readChunk(f.ino(), 0);
        assertEquals(2, c0.size());
        assertTrue(c0.get(1).isHole());
        assertEquals(500, c0.get(1).pos());
        List<long[]> pending = meta.pendingSliceDeletions(10);
        assertEquals(1, pending.size());
        assertEquals(b.id(), pending.get(0)[0]);
        assertEquals(new MetaEngine.PendingDeletions(0, 1), meta.pendingDeletions());
        meta.sliceDeleted(b.id(), 1000);
        assertTrue(meta.pendingSliceDeletions(10).isEmpty());
        assertEquals(10_000, meta.truncate(f.ino(), 10_000).size());
        Attr d = dir(ROOT, "d");
        assertThrows(FsException.IsDirectory.class, () -> meta.truncate(d.ino(), 0));
        assertThrows(FsException.InvalidArgument.class, () -> meta.truncate(f.ino(), -1));
    }

    @Test
    void deleteFileDataFreesEverySlice() throws Exception {
        Attr f = file(ROOT, "f");
        List<MetaEngine.ChunkSlice> slices = new ArrayList<>();
        for (int c = 0; c < 3; c++) {
            slices.add(new MetaEngine.ChunkSlice(c, new Slice(meta.nextSliceId(), 4096, 0, 4096, 0)));
        }
        meta.commitWrite(f.ino(), slices);
        long used = meta.usage().usedBytes();
        assertTrue(used > 0);
        meta.unlink(ROOT, "f");
        meta.deleteFileData(f.ino());
        assertEquals(3, meta.pendingSliceDeletions(10).size());
        assertEquals(0, meta.usage().usedBytes());
        assertEquals(1, meta.usage().inodes(), "only the root is left");
    }

    /**
     * A sparse file as large as a file may be (stress-ng's fsize writes at the limit) holds two
     * of its 2^31 possible chunks. Truncating it, and deleting it, went through every chunk
     * index: the truncate's one transaction ran the mount out of heap (GC overhead limit), and
     * the deletion would have taken 2^27 transactions.
     */
    @Test
    void truncatingAndDeletingAHugeSparseFileGoesByTheChunksItHas() throws Exception {
        long lastChunk = Integer.MAX_VALUE - 1L;
        Attr f = file(ROOT, "sparse");
        Attr g = file(ROOT, "sparse2");
        Attr h = file(ROOT, "sparse3");
        long[] ids = new long[5];
        for (int i = 0; i < 5; i++) {
            ids[i] = meta.nextSliceId();
        }
        meta.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, new Slice(ids[0], 4096, 0, 4096, 0)),
                new MetaEngine.ChunkSlice(lastChunk, new Slice(ids[1], 4096, 0, 4096, 0))));
        meta.commitWrite(g.ino(), List.of(new MetaEngine.ChunkSlice(1, new Slice(ids[2], 4096, 0, 4096, 0)),
                new MetaEngine.ChunkSlice(lastChunk, new Slice(ids[3], 4096, 0, 4096, 0))));
        meta.commitWrite(h.ino(), List.of(new MetaEngine.ChunkSlice(0, new Slice(ids[4], 4096, 0, 4096, 0))));
        assertEquals(lastChunk * (64L << 20) + 4096, meta.getattr(f.ino()).size());
        org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(java.time.Duration.ofSeconds(60), () -> {
            assertEquals(100, meta.truncate(f.ino(), 100).size());
            assertEquals(1, meta.pendingSliceDeletions(10).size(), "the far slice is freed, the first kept");
            assertEquals(ids[1], meta.pendingSliceDeletions(10).get(0)[0]);
            assertEquals(1, meta.readChunk(f.ino(), 0).stream().filter(sl -> !sl.isHole()).count());
            assertEquals(ids[3], meta.fileSlices(List.of(g.ino())).get(0).slices().get(1).id(), "fsck's read of it too");
            meta.unlink(ROOT, "sparse2");
            meta.deleteFileData(g.ino());
            // unlinked while small and open, then extended by ftruncate: the deletion entry's
            // length is the small one, the inode's the huge one
            meta.opened(h.ino());
            meta.unlink(ROOT, "sparse3");
            meta.truncate(h.ino(), lastChunk * (64L << 20));
            meta.released(h.ino());
            meta.deleteFileData(h.ino());
        });
        assertEquals(java.util.Set.of(ids[1], ids[2], ids[3], ids[4]),
                meta.pendingSliceDeletions(10).stream().map(e -> e[0]).collect(java.util.stream.Collectors.toSet()));
        assertThrows(FsException.NoSuchEntry.class, () -> meta.getattr(g.ino()));
        assertThrows(FsException.NoSuchEntry.class, () -> meta.getattr(h.ino()));
    }

    /** More chunks than one deletion transaction frees: the slices of all of them are listed, and the data of every pass. */
    @Test
    void deleteFileDataFreesEverySliceOfAFileWithManyChunks() throws Exception {
        Attr f = file(ROOT, "big");
        List<MetaEngine.ChunkSlice> slices = new ArrayList<>();
        for (int c = 0; c < 40; c += 3) { // 14 chunks with data up to chunk 39, holes between
            slices.add(new MetaEngine.ChunkSlice(c, new Slice(meta.nextSliceId(), 4096, 0, 4096, 0)));
        }
        meta.commitWrite(f.ino(), slices);
        Attr kept = file(ROOT, "kept");
        meta.commitWrite(kept.ino(), List.of(new MetaEngine.ChunkSlice(0, new Slice(meta.nextSliceId(), 10, 0, 10, 0))));
        meta.unlink(ROOT, "big");
        meta.deleteFileData(f.ino());
        assertEquals(slices.size(), meta.pendingSliceDeletions(100).size());
        assertEquals(4096, meta.usage().usedBytes(), "only the kept file's 4 KiB");
        assertEquals(2, meta.usage().inodes(), "the root and the kept file");
        assertThrows(FsException.NoSuchEntry.class, () -> meta.getattr(f.ino()));
        java.util.Set<Long> taken = new java.util.HashSet<>();
        for (List<long[]> batch; !(batch = meta.pendingSliceDeletions(4)).isEmpty(); ) { // as the reclaimer takes them
            assertTrue(batch.size() <= 4, "a batch holds at most what was asked: " + batch.size());
            for (long[] s : batch) {
                assertTrue(taken.add(s[0]), "each slice in one batch only");
            }
            meta.slicesDeleted(batch);
        }
        assertEquals(slices.stream().map(cs -> cs.slice().id()).collect(java.util.stream.Collectors.toSet()), taken);
        assertEquals(0, meta.pendingSliceDeletions(100).size());
    }

    /**
     * With a trash, slices freed by a deletion and a truncation wait in the bucket of their hour
     * until that hour ended the trash time ago, then move to the deletion list together; the
     * trash time is read again at each pass.
     */
    @Test
    void trashedSlicesWaitUntilTheirHourEndedTheTrashTimeAgo() throws Exception {
        assertEquals(0, meta.trashHours(), "a volume formatted without one has no trash");
        meta.setTrashHours(2);
        Attr f = file(ROOT, "f");
        Attr g = file(ROOT, "g");
        Slice a = new Slice(meta.nextSliceId(), 4096, 0, 4096, 0);
        Slice b = new Slice(meta.nextSliceId(), 100, 0, 100, 0);
        Slice c = new Slice(meta.nextSliceId(), 7, 0, 7, 0);
        meta.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, a), new MetaEngine.ChunkSlice(1, b)));
        meta.commitWrite(g.ino(), List.of(new MetaEngine.ChunkSlice(0, c)));
        meta.unlink(ROOT, "f");
        meta.deleteFileData(f.ino());
        meta.truncate(g.ino(), 0);
        assertEquals(new MetaEngine.PendingDeletions(0, 0), meta.pendingDeletions());
        assertTrue(meta.pendingSliceDeletions(10).isEmpty());
        long hourMillis = 3_600_000;
        long freedHourStart = clock.get() / 1_000_000 / hourMillis * hourMillis;
        assertEquals(new MetaEngine.Trash(3, freedHourStart), meta.trash());
        java.util.Set<Long> trashed = new java.util.HashSet<>();
        meta.forEachTrashSlice((id, size) -> trashed.add(id));
        assertEquals(java.util.Set.of(a.id(), b.id(), c.id()), trashed);

        long due = (freedHourStart + 3 * hourMillis) * 1_000_000; // the hour's end, plus two hours
        clock.set(due - 1_000_000_000L);
        assertEquals(0, meta.expireTrash(), "a second early");
        assertEquals(3, meta.trash().slices());
        clock.set(due);
        assertEquals(3, meta.expireTrash());
        assertEquals(new MetaEngine.Trash(0, 0), meta.trash());
        assertEquals(java.util.Set.of(a.id(), b.id(), c.id()),
                meta.pendingSliceDeletions(10).stream().map(s -> s[0]).collect(java.util.stream.Collectors.toSet()));
        assertEquals(0, meta.expireTrash(), "the bucket is gone");

        meta.setTrashHours(24 * 366);
        assertEquals(24 * 366, meta.trashHours());
        assertThrows(IllegalArgumentException.class, () -> meta.setTrashHours(24 * 366 + 1));
        assertThrows(IllegalArgumentException.class, () -> meta.setTrashHours(-1));
        assertEquals(24 * 366, meta.trashHours(), "a refused change changes nothing");
    }

    /**
     * A slice a process that died had written is known while its chunk lists it, and after it
     * was freed into the trash or moved on to the deletion list; one never committed, or whose
     * objects were deleted, is not. Asked of the chunk it was written for: a slice id listed by
     * another chunk does not count. Of slices whose commit was confirmed, those released are the
     * ones past the trash: on the deletion list or gone from it.
     */
    @Test
    void knownSlicesAreThoseAChunkTheTrashOrTheDeletionListHoldsAndReleasedOnesThosePastTheTrash() throws Exception {
        meta.setTrashHours(1);
        Attr f = file(ROOT, "f");
        Attr g = file(ROOT, "g");
        Slice live = new Slice(meta.nextSliceId(), 10, 0, 10, 0);
        Slice trashed = new Slice(meta.nextSliceId(), 20, 0, 20, 0);
        Slice deleting = new Slice(meta.nextSliceId(), 30, 0, 30, 0);
        long neverCommitted = meta.nextSliceId();
        meta.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, live), new MetaEngine.ChunkSlice(1, trashed)));
        meta.commitWrite(g.ino(), List.of(new MetaEngine.ChunkSlice(2, deleting)));
        meta.truncate(f.ino(), VolumeFormat.CHUNK_SIZE); // chunk 1 goes to the trash
        meta.setTrashHours(0);
        meta.truncate(g.ino(), 0); // straight to the deletion list
        List<MetaEngine.WrittenSlice> asked = List.of(new MetaEngine.WrittenSlice(live.id(), f.ino(), 0),
                new MetaEngine.WrittenSlice(trashed.id(), f.ino(), 1), new MetaEngine.WrittenSlice(deleting.id(), g.ino(), 2),
                new MetaEngine.WrittenSlice(neverCommitted, f.ino(), 0));
        assertEquals(java.util.Set.of(live.id(), trashed.id(), deleting.id()), meta.knownSlices(asked));
        assertEquals(java.util.Map.of(live.id(), 10, trashed.id(), 20, deleting.id(), 30), meta.knownSliceSizes(asked),
                "with the sizes the chunk, the trash and the deletion list give");
        List<MetaEngine.CommittedSlice> committed = List.of(new MetaEngine.CommittedSlice(live.id(), live.size(), f.ino(), 0),
                new MetaEngine.CommittedSlice(trashed.id(), trashed.size(), f.ino(), 1),
                new MetaEngine.CommittedSlice(deleting.id(), deleting.size(), g.ino(), 2));
        assertEquals(java.util.Set.of(deleting.id()), meta.releasedSlices(committed), "its objects may be deleted already");
        assertEquals(java.util.Set.of(), meta.releasedSlices(List.of(new MetaEngine.CommittedSlice(trashed.id(), -1, f.ino(), 1))),
                "of a size not known: found in the trash all the same");
        assertEquals(java.util.Set.of(), meta.knownSlices(List.of(new MetaEngine.WrittenSlice(live.id(), g.ino(), 0))),
                "another file's chunk does not list it");

        meta.slicesDeleted(List.of(new long[] {deleting.id(), deleting.size()}));
        assertEquals(java.util.Set.of(live.id(), trashed.id()), meta.knownSlices(asked), "its objects are deleted: unknown");
        assertEquals(java.util.Set.of(deleting.id()), meta.releasedSlices(committed));
    }

    /** Slices taken out of the trash (their objects never made) are neither kept nor deleted later. */
    @Test
    void untrashedSlicesLeaveTheTrashAndAreNeverDeleted() throws Exception {
        meta.setTrashHours(24);
        Attr f = file(ROOT, "f");
        meta.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, new Slice(meta.nextSliceId(), 10, 0, 10, 0)),
                new MetaEngine.ChunkSlice(1, new Slice(meta.nextSliceId(), 10, 0, 10, 0))));
        meta.unlink(ROOT, "f");
        List<long[]> trashed = meta.deleteFileData(f.ino());
        assertEquals(2, trashed.size());
        assertEquals(2, meta.trash().slices());
        meta.untrash(trashed.subList(0, 1));
        assertEquals(1, meta.trash().slices());
        meta.setTrashHours(0);
        assertEquals(1, meta.expireTrash());
        assertEquals(List.of(trashed.get(1)[0]), meta.pendingSliceDeletions(10).stream().map(s -> s[0]).toList());
    }

    /**
     * partfs destroy: a volume marked for destruction is refused by another engine's load and by
     * a format until the mark is taken away; deleting its metadata, more than a page of keys,
     * leaves a shared store empty (DestroyCommandIT formats it again).
     */
    @Test
    void aVolumeBeingDestroyedIsRefusedAndItsMetadataDeletedWhole() throws Exception {
        for (int i = 0; i < 1200; i++) {
            file(ROOT, "f" + i);
        }
        VolumeFormat f = meta.volumeFormat();
        assertThrows(IOException.class, () -> meta.beginDestroy("00000000-0000-0000-0000-000000000000"));
        meta.beginDestroy(f.uuid());
        MetaEngine other = new MetaEngine(meta.store(), () -> clock.addAndGet(1000)); // not closed: the store is meta's
        IOException refused = assertThrows(IOException.class, other::load);
        assertTrue(refused.getMessage().contains("is being destroyed: 'partfs destroy' began at 2023-11-14T22:13:20")
                && refused.getMessage().endsWith("and did not finish; run it again to finish"), refused.getMessage());
        assertThrows(IOException.class, () -> MetaEngine.checkFormattable(meta.store(), f));
        assertEquals(f, other.loadForDestroy());
        meta.cancelDestroy();
        assertEquals(f, other.load());

        meta.beginDestroy(f.uuid());
        meta.beginDestroy(f.uuid()); // a destroy run again
        if (meta.store().exclusive()) {
            assertThrows(IllegalStateException.class, () -> meta.deleteAllMetadata(n -> { }), "its directory is deleted instead");
            return;
        }
        List<Long> told = new ArrayList<>();
        long deleted = meta.deleteAllMetadata(told::add);
        assertTrue(deleted > 1200, "an inode a file, a directory hash and more: " + deleted);
        assertEquals(deleted - 2, told.get(told.size() - 1), "progress told of every key but the format and the mark");
        List<String> left = new ArrayList<>();
        meta.store().read(r -> {
            r.scanKeys("", left::addAll);
            return null;
        });
        assertEquals(List.of(), left.stream().filter(k -> !k.startsWith("commitlog:")).toList(),
                "nothing left but the open client's commit log, which goes when it closes");
        assertNull(other.loadIfFormatted());
    }

    /** More than a transaction's worth in the trash, turned off: every slice moves, once, and the trash is empty. */
    @Test
    void turningTheTrashOffEmptiesItAtTheNextPass() throws Exception {
        meta.setTrashHours(24);
        Attr f = file(ROOT, "f");
        List<MetaEngine.ChunkSlice> slices = new ArrayList<>();
        for (int c = 0; c < 2500; c++) {
            slices.add(new MetaEngine.ChunkSlice(c, new Slice(meta.nextSliceId(), 10, 0, 10, 0)));
        }
        meta.commitWrite(f.ino(), slices);
        meta.truncate(f.ino(), 0);
        assertEquals(2500, meta.trash().slices());
        java.util.Set<Long> trashed = new java.util.HashSet<>();
        meta.forEachTrashSlice((id, size) -> trashed.add(id));
        assertEquals(2500, trashed.size());
        assertEquals(0, meta.expireTrash(), "not due for a day");
        MetaEngine other = new MetaEngine(meta.store(), () -> clock.addAndGet(1000)); // another mount (not closed: the store is meta's)
        other.load();
        meta.setTrashHours(0);
        assertEquals(2500, other.expireTrash(), "it reads the trash time from the volume at each pass");
        assertEquals(0, meta.trash().slices());
        assertEquals(new MetaEngine.PendingDeletions(0, 2500), meta.pendingDeletions());
        java.util.Set<Long> pending = new java.util.HashSet<>();
        meta.forEachPendingSlice((id, size) -> pending.add(id));
        assertEquals(trashed, pending);
    }

    /** A backlog larger than a batch (and than Redis keeps as a compact hash): batches of the size asked, each slice once. */
    @Test
    void aLargeDeletionBacklogIsTakenABatchAtATime() throws Exception {
        Attr f = file(ROOT, "f");
        meta.unlink(ROOT, "f");
        meta.deleteFileData(f.ino());
        List<MetaEngine.ChunkSlice> freed = new ArrayList<>();
        for (int c = 0; c < 2500; c++) {
            freed.add(new MetaEngine.ChunkSlice(c, new Slice(meta.nextSliceId(), 10, 0, 10, 0)));
        }
        meta.commitWrite(f.ino(), freed); // to a deleted inode: every slice goes to the deletion list
        assertEquals(new MetaEngine.PendingDeletions(0, 2500), meta.pendingDeletions());
        java.util.Set<Long> taken = new java.util.HashSet<>();
        List<Integer> sizes = new ArrayList<>();
        for (List<long[]> batch; !(batch = meta.pendingSliceDeletions(1000)).isEmpty(); ) {
            sizes.add(batch.size());
            for (long[] s : batch) {
                assertTrue(taken.add(s[0]), "each slice in one batch only");
            }
            meta.slicesDeleted(batch);
        }
        assertEquals(List.of(1000, 1000, 500), sizes);
        assertEquals(2500, taken.size());
    }

    @Test
    void commitToADeletedInodeFreesTheSlices() throws Exception {
        Attr f = file(ROOT, "f");
        meta.unlink(ROOT, "f");
        meta.deleteFileData(f.ino());
        Slice s = new Slice(meta.nextSliceId(), 10, 0, 10, 0);
        meta.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, s)));
        assertEquals(s.id(), meta.pendingSliceDeletions(10).get(0)[0]);
    }

    // ---- xattrs ----

    @Test
    void xattrsHonourCreateAndReplace() throws Exception {
        Attr f = file(ROOT, "f");
        meta.setxattr(f.ino(), "user.a", new byte[] {1, 2}, 0);
        assertArrayEquals(new byte[] {1, 2}, meta.getxattr(f.ino(), "user.a"));
        assertThrows(FsException.Exists.class, () -> meta.setxattr(f.ino(), "user.a", new byte[0], MetaEngine.XATTR_CREATE));
        assertThrows(FsException.NoAttribute.class, () -> meta.setxattr(f.ino(), "user.b", new byte[0], MetaEngine.XATTR_REPLACE));
        meta.setxattr(f.ino(), "user.a", new byte[] {3}, MetaEngine.XATTR_REPLACE);
        meta.setxattr(f.ino(), "user.b", new byte[0], MetaEngine.XATTR_CREATE);
        assertEquals(List.of("user.a", "user.b"), meta.listxattr(f.ino()));
        meta.removexattr(f.ino(), "user.a");
        assertThrows(FsException.NoAttribute.class, () -> meta.getxattr(f.ino(), "user.a"));
        assertThrows(FsException.NoAttribute.class, () -> meta.removexattr(f.ino(), "user.a"));
        assertThrows(FsException.OutOfRange.class,
                () -> meta.setxattr(f.ino(), "user.big", new byte[MetaEngine.MAX_XATTR_VALUE + 1], 0));
    }

    @Test
    void aFilesAttributeNamesStayWithinWhatListxattrCanReturn() throws Exception {
        Attr f = file(ROOT, "f");
        int fit = MetaEngine.MAX_XATTR_LIST / 256; // names of 255 bytes, each with its NUL
        for (int i = 0; i < fit; i++) {
            meta.setxattr(f.ino(), name255(i), new byte[] {1}, 0);
        }
        FsException.NoSpace full = assertThrows(FsException.NoSpace.class, () -> meta.setxattr(f.ino(), name255(fit), new byte[0], 0));
        assertTrue(full.getMessage().contains("at most 65536 bytes"), full.getMessage());
        assertThrows(FsException.NoSpace.class, () -> meta.setxattr(f.ino(), "user.x", new byte[0], 0), "even a short one");
        meta.setxattr(f.ino(), name255(0), new byte[] {2}, MetaEngine.XATTR_REPLACE); // a new value for a name it has: no new room
        assertEquals(fit, meta.listxattr(f.ino()).size());
        meta.removexattr(f.ino(), name255(1));
        meta.setxattr(f.ino(), "user.x", new byte[0], 0);
        assertEquals(fit, meta.listxattr(f.ino()).size());
    }

    private static String name255(int i) {
        String n = "user." + i + ".";
        return n + "x".repeat(255 - n.length());
    }

    // ---- concurrency ----

    @Test
    void concurrentCreatesAndMkdirsInOneDirectoryAreAllKept() throws Exception {
        Attr d = dir(ROOT, "d");
        Concurrently.run(4, thread -> {
            for (int i = 0; i < 50; i++) {
                file(d.ino(), "f" + thread + "_" + i);
                dir(d.ino(), "d" + thread + "_" + i);
            }
        });
        assertEquals(400, meta.readdir(d.ino()).size());
        assertEquals(2 + 200, meta.getattr(d.ino()).nlink());
    }

    @Test
    void concurrentRenamesOfOneFileLeaveExactlyOneName() throws Exception {
        Attr f = file(ROOT, "x0");
        Concurrently.run(4, thread -> {
            for (int i = 0; i < 50; i++) {
                for (String n : names(ROOT)) {
                    try {
                        meta.rename(ROOT, n, ROOT, "x" + thread + "_" + i, 0);
                    } catch (FsException.NoSuchEntry e) {
                        // another thread moved it first
                    }
                }
            }
        });
        List<DirEntry> left = meta.readdir(ROOT);
        assertEquals(1, left.size(), left.toString());
        assertEquals(f.ino(), left.get(0).ino());
        assertEquals(1, meta.getattr(f.ino()).nlink());
    }

    /** A dump as {@link MetaDump#load} reads it. */
    private static MetaDump.Source source(String dump) {
        return () -> new java.io.BufferedReader(new java.io.StringReader(dump));
    }

    private static String dump(KvStore kv) throws IOException {
        java.io.StringWriter w = new java.io.StringWriter();
        MetaDump.dump(kv, w, n -> { });
        return w.toString();
    }

    @Test
    void dumpLoadedIntoAnEmptyStoreHoldsEveryRecordAndAServableVolume() throws Exception {
        Attr d = dir(ROOT, "d");
        Attr f = file(d.ino(), "name with\ttab");
        meta.link(f.ino(), ROOT, "second name");
        meta.mknod(ROOT, "l", FileType.SYMLINK, 0777, 0, 0, 0, "d/name with\ttab");
        meta.setxattr(f.ino(), "user.k", new byte[] {0, 1, 2}, 0);
        meta.setTrashHours(5);
        Attr t = file(ROOT, "truncated");
        List<MetaEngine.ChunkSlice> written = new ArrayList<>();
        for (int c = 0; c < 2500; c++) {
            written.add(new MetaEngine.ChunkSlice(c, new Slice(meta.nextSliceId(), 9, 0, 9, 0)));
        }
        meta.commitWrite(t.ino(), written);
        meta.truncate(t.ino(), 0); // slices in the trash, more than a page of the dump's scan
        String dump = dump(meta.store());
        MetaDump.Counts checked = MetaDump.check(source(dump));
        assertEquals(5, checked.inodes(), dump); // root, d, the file (two names), l and truncated
        KvStore target = newStore();
        try (MetaEngine loaded = new MetaEngine(target, () -> clock.addAndGet(1000))) { // closes target
            MetaDump.load(source(dump), checked, target, 0, n -> { });
            assertEquals(sorted(dump), sorted(dump(target)), "the same records, whichever engine they went through");
            assertEquals("test", loaded.load().name());
            Attr g = loaded.lookup(ROOT, "second name");
            assertEquals(f.ino(), g.ino());
            assertEquals(2, g.nlink());
            assertArrayEquals(new byte[] {0, 1, 2}, loaded.getxattr(f.ino(), "user.k"));
            assertEquals(5, loaded.trashHours());
            assertEquals(meta.trash(), loaded.trash(), "the trash and its time come along");
            assertEquals(2500, loaded.trash().slices());
            assertTrue(loaded.mknod(ROOT, "new", FileType.FILE, 0644, 0, 0, 0, null).ino() > f.ino(),
                    "new inode numbers continue after the loaded ones");
        }
    }

    @Test
    void namesOfAnyBytesAreKeptApartListedAndDumpedAsThemselves() throws Exception {
        // what the kernel driver makes of names that are not UTF-8: each its own entry
        String[] names = {bytesName(0xff, 0xfe), bytesName(0xfe, 0xff), bytesName('a', 0x80, 'b'), "\uFFFD", "?"};
        java.util.Map<String, Long> inodes = new java.util.HashMap<>();
        for (String n : names) {
            inodes.put(n, file(ROOT, n).ino());
        }
        meta.mknod(ROOT, "l", FileType.SYMLINK, 0777, 0, 0, 0, names[0]);
        meta.setxattr(inodes.get(names[1]), "user." + names[2], new byte[] {7}, 0);
        assertEquals(new java.util.TreeSet<>(inodes.keySet()),
                new java.util.TreeSet<>(names(ROOT).stream().filter(n -> !n.equals("l")).toList()));
        String dump = dump(meta.store());
        KvStore target = newStore();
        try (MetaEngine loaded = new MetaEngine(target, () -> clock.addAndGet(1000))) {
            MetaDump.load(source(dump), MetaDump.check(source(dump)), target, 0, n -> { });
            loaded.load();
            for (String n : names) {
                assertEquals(inodes.get(n), loaded.lookup(ROOT, n).ino(), n);
            }
            assertEquals(names[0], loaded.readlink(loaded.lookup(ROOT, "l").ino()));
            assertEquals(List.of("user." + names[2]), loaded.listxattr(inodes.get(names[1])));
        }
    }

    private static String bytesName(int... b) {
        byte[] out = new byte[b.length];
        for (int i = 0; i < b.length; i++) {
            out[i] = (byte) b[i];
        }
        return io.partfs.engine.NameCodec.decode(out);
    }

    @Test
    void damagedDumpsAreRefusedAndALoadIntoAVolumeToo() throws Exception {
        file(ROOT, "f");
        String dump = dump(meta.store());
        String[] lines = dump.split("\n");
        String cut = String.join("\n", java.util.Arrays.copyOf(lines, lines.length - 1)) + "\n";
        String badRecord = dump.replace("\nP\ti1\t", "\nP\ti1\t***");
        String otherVersion = dump.replaceFirst("^partfs-metadata-dump\t1", "partfs-metadata-dump\t9");
        String longer = dump.replaceFirst("\nend\t", "\nC\tnextInode\t5\nend\t");
        for (String[] c : new String[][] {{cut, "cut short"}, {badRecord, "damaged at record"},
                {otherVersion, "format 9"}, {longer, "says"}, {"hello\n", "not a PartFS metadata dump"}}) {
            IOException e = assertThrows(IOException.class, () -> MetaDump.check(source(c[0])));
            assertTrue(e.getMessage().contains(c[1]), e.getMessage());
        }
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> MetaDump.load(source(dump), MetaDump.check(source(dump)), meta.store(), 0, n -> { }));
        assertTrue(e.getMessage().contains("not empty"), e.getMessage());
    }

    private static List<String> sorted(String dump) {
        return dump.lines().sorted().toList();
    }
}
