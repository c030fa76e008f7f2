package io.partfs.engine.meta;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.partfs.engine.FileType;
import io.partfs.engine.FsException;
import io.partfs.engine.VolumeFormat;
import io.partfs.engine.testing.Concurrently;
import io.partfs.engine.testing.RedisServer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Transactions on a real redis-server that answer reads with the caller's beliefs and check
 * them at commit ({@link KvStore.Writer#believe}): a right belief saves the read, a wrong one
 * costs a second run of the body on real values and never a wrong commit.
 */
class RedisBeliefTest {
    private static RedisServer redis;
    private static RedisClient admin;
    private static StatefulRedisConnection<String, String> adminConn;
    private static int nextDb;

    private RedisKvStore kv;
    private int db;

    @BeforeAll
    static void startRedis() throws IOException {
        redis = RedisServer.start("--databases", "100");
        admin = RedisClient.create("redis://127.0.0.1:" + redis.port() + "/0");
        adminConn = admin.connect();
    }

    @AfterAll
    static void stopRedis() throws IOException {
        adminConn.close();
        admin.shutdown();
        redis.close();
    }

    @BeforeEach
    void open() throws IOException {
        db = ++nextDb;
        kv = new RedisKvStore(redis.url(db));
    }

    @AfterEach
    void close() throws IOException {
        kv.close();
    }

    private static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** How many times the server ran {@code command} so far (INFO commandstats). */
    private static long calls(String command) {
        Matcher m = Pattern.compile("cmdstat_" + command + ":calls=(\\d+)").matcher(adminConn.sync().info("commandstats"));
        return m.find() ? Long.parseLong(m.group(1)) : 0;
    }

    /**
     * Reads a transaction made itself: each WATCHes its key first, and batches (MGET, HGETALL)
     * are never sent by the script. (Commandstats counts the script's own GETs and HGETs too.)
     */
    private static long realReads() {
        return calls("watch") + calls("mget") + calls("hgetall");
    }

    @Test
    void rightBeliefsCommitWithoutAReadInOneScript() throws Exception {
        byte[] binary = {0, (byte) 0xff, 'x', 0, (byte) 0x80}; // compared byte for byte by the script
        kv.update(tx -> {
            tx.put("k", binary);
            tx.hset("h", "f", b("F"));
            return null;
        });
        long reads = realReads();
        long evals = calls("eval");
        AtomicInteger runs = new AtomicInteger();
        kv.update(tx -> {
            runs.incrementAndGet();
            tx.believe("k", binary);
            tx.believe("missing", null);
            tx.believeField("h", "f", b("F"));
            tx.believeField("h", "g", null);
            byte[][] read = tx.getAndHget("k", "h", "f");
            assertNull(tx.getAll(List.of("missing")).get(0));
            assertNull(tx.hget("h", "g"));
            tx.put("out", read[1]);
            tx.add("n", 5);
            return null;
        });
        assertEquals(1, runs.get());
        assertEquals(reads, realReads(), "nothing read outside the script");
        assertEquals(evals + 1, calls("eval"));
        assertArrayEquals(b("F"), kv.read(r -> r.get("out")));
        assertEquals(5L, (long) kv.read(r -> r.counter("n")));
    }

    @Test
    void aWrongBeliefRunsTheBodyAgainOnRealValuesAndWritesOnlyThen() throws Exception {
        kv.update(tx -> {
            tx.put("k", b("real"));
            tx.hset("h", "f", b("present"));
            return null;
        });
        AtomicInteger runs = new AtomicInteger();
        String seen = kv.update(tx -> {
            runs.incrementAndGet();
            tx.believe("k", b("stale"));
            tx.believeField("h", "f", null);
            byte[][] read = tx.getAndHget("k", "h", "f");
            String v = new String(read[0], StandardCharsets.UTF_8) + "/" + (read[1] == null ? "none" : "present");
            tx.put("out", b(v));
            tx.add("n", 1);
            return v;
        });
        assertEquals(2, runs.get());
        assertEquals("real/present", seen);
        assertArrayEquals(b("real/present"), kv.read(r -> r.get("out")));
        assertEquals(1L, (long) kv.read(r -> r.counter("n")), "the first run's writes were not applied");
    }

    @Test
    void aBodyThatFailedOnABeliefRunsAgainOnRealValues() throws Exception {
        kv.update(tx -> {
            tx.put("k", b("exists"));
            return null;
        });
        AtomicInteger runs = new AtomicInteger();
        kv.update(tx -> {
            runs.incrementAndGet();
            tx.believe("k", null);
            if (tx.get("k") == null) {
                throw new IOException("what a stale cache would make the caller report");
            }
            return null;
        });
        assertEquals(2, runs.get());
    }

    @Test
    void aReadOnlyTransactionChecksItsBeliefsToo() throws Exception {
        kv.update(tx -> {
            tx.put("k", b("real"));
            return null;
        });
        byte[] got = kv.update(tx -> {
            tx.believe("k", b("stale"));
            return tx.get("k");
        });
        assertArrayEquals(b("real"), got);
    }

    /**
     * Two clients add to one value by read-modify-write, each believing the last value it saw:
     * beliefs go stale all the time, and no increment may be lost.
     */
    @Test
    void staleBeliefsOfConcurrentClientsLoseNoUpdate() throws Exception {
        try (RedisKvStore other = new RedisKvStore(redis.url(db))) {
            RedisKvStore[] clients = {kv, other};
            int threads = 4;
            int each = 150;
            Concurrently.run(threads, t -> {
                RedisKvStore client = clients[t % 2];
                byte[] last = null;
                for (int i = 0; i < each; i++) {
                    byte[] believed = last;
                    last = client.update(tx -> {
                        tx.believe("v", believed);
                        byte[] now = tx.get("v");
                        long n = now == null ? 0 : Long.parseLong(new String(now, StandardCharsets.US_ASCII));
                        byte[] next = Long.toString(n + 1).getBytes(StandardCharsets.US_ASCII);
                        tx.put("v", next);
                        return next;
                    });
                }
            });
            assertArrayEquals(Long.toString((long) threads * each).getBytes(StandardCharsets.US_ASCII), kv.read(r -> r.get("v")));
        }
    }

    /**
     * A volume on this test's database through a metadata engine that caches (and so believes):
     * a directory "part" holding a file "warm", with the slice id batches already taken (their
     * INCRBYs are not what the tests count).
     */
    private MetaEngine cachingVolume() throws IOException {
        MetaEngine meta = new MetaEngine(new RedisKvStore(redis.url(db)), System::nanoTime);
        meta.enableCache(java.time.Duration.ofSeconds(60));
        meta.format(VolumeFormat.create("test", VolumeFormat.DEFAULT_BLOCK_SIZE, "file:///objects"), 0, 0);
        long dir = meta.mknod(MetaEngine.ROOT, "part", FileType.DIRECTORY, 0755, 0, 0, 0, null).ino();
        meta.nextSliceId();
        meta.mknod(dir, "warm", FileType.FILE, 0644, 0, 0, 0, null);
        return meta;
    }

    @Test
    void creatingAFileAndCommittingItsWriteCostOneRoundTripEach() throws Exception {
        try (MetaEngine meta = cachingVolume()) {
            long dir = meta.lookup(MetaEngine.ROOT, "part").ino();
            long reads = realReads();
            long evals = calls("eval");
            long execs = calls("exec");
            int files = 10;
            for (int i = 0; i < files; i++) {
                long ino = meta.mknod(dir, "f" + i, FileType.FILE, 0644, 0, 0, 0, null).ino();
                long id = meta.nextSliceId();
                meta.commitWrite(ino, List.of(new MetaEngine.ChunkSlice(0, new io.partfs.engine.meta.Slice(id, 100, 0, 100, 0))));
            }
            assertEquals(reads, realReads(),
                    "a new directory is known empty and each file's inode and chunk are known: nothing read");
            assertEquals(evals + 2L * files, calls("eval"), "one script per create and per commit");
            assertEquals(execs, calls("exec"), "each alone: it WATCHed nothing, so no MULTI/EXEC around it");
            assertEquals(100, meta.lookup(dir, "f7").size());

            // what ClickHouse does next: rename the part into place (in a table directory it has
            // listed), later remove its files as rm -r does, listing the directory first (their
            // data is deleted in the background: not here)
            meta.setOrphanListener(ino -> { });
            meta.readdir(MetaEngine.ROOT);
            reads = realReads();
            long evalsBefore = calls("eval");
            long execsBefore = calls("exec");
            meta.rename(MetaEngine.ROOT, "part", MetaEngine.ROOT, "all_1_1_0", 0);
            assertEquals(reads, realReads(), "a rename of listed names reads nothing");
            meta.readdir(dir);
            reads = realReads();
            for (int i = 0; i < files; i++) {
                meta.unlink(dir, "f" + i);
            }
            assertEquals(reads, realReads(), "unlinks of listed names read nothing either");
            assertEquals(evalsBefore + 1 + files, calls("eval"), "one script per rename and per unlink");
            assertEquals(execsBefore, calls("exec"));
            assertEquals(List.of("warm"), meta.readdir(dir).stream().map(io.partfs.engine.DirEntry::name).toList());
        }
    }

    /**
     * The background deletion of files this client unlinked (ClickHouse removing a part): it
     * holds each file's inode (with its length) and slice list, so each is one script, with no
     * read of the deletion entry before it. A file unlinked while open is deleted once closed.
     */
    @Test
    void deletingFilesThisClientUnlinkedCostsOneScriptEach() throws Exception {
        io.partfs.engine.testing.CountingKvStore counting = new io.partfs.engine.testing.CountingKvStore(new RedisKvStore(redis.url(db)));
        try (MetaEngine meta = new MetaEngine(counting, System::nanoTime)) {
            meta.enableCache(java.time.Duration.ofSeconds(60));
            meta.format(VolumeFormat.create("test", VolumeFormat.DEFAULT_BLOCK_SIZE, "file:///objects"), 0, 0);
            meta.setOrphanListener(ino -> { });
            long dir = meta.mknod(MetaEngine.ROOT, "part", FileType.DIRECTORY, 0755, 0, 0, 0, null).ino();
            int files = 10;
            for (int i = 0; i < files; i++) {
                long ino = meta.mknod(dir, "f" + i, FileType.FILE, 0644, 0, 0, 0, null).ino();
                meta.commitWrite(ino, List.of(new MetaEngine.ChunkSlice(0, new io.partfs.engine.meta.Slice(meta.nextSliceId(), 100, 0, 100, 0))));
                meta.unlink(dir, "f" + i);
            }
            List<Long> unlinked = meta.pendingFileDeletions();
            assertEquals(files, unlinked.size());
            counting.reset();
            long reads = realReads();
            long evals = calls("eval");
            long execs = calls("exec");
            for (long ino : unlinked) {
                assertEquals(List.of(), meta.deleteFileData(ino), "no trash: nothing returned");
            }
            assertEquals(0, counting.reads(), "no read before the transactions: " + counting.readsByKind());
            assertEquals(reads, realReads(), "and none in them");
            assertEquals(evals + files, calls("eval"), "one script per deleted file");
            assertEquals(execs, calls("exec"));
            assertEquals(List.of(), meta.pendingFileDeletions());
            assertEquals(files, meta.pendingSliceDeletions(100).size(), "every slice awaits its object's deletion");

            long open = meta.mknod(dir, "open", FileType.FILE, 0644, 0, 0, 0, null).ino();
            meta.opened(open);
            meta.unlink(dir, "open");
            assertEquals(List.of(), meta.deleteFileData(open));
            assertEquals(List.of(open), meta.pendingFileDeletions(), "kept while open here");
            meta.released(open);
            meta.deleteFileData(open);
            assertEquals(List.of(), meta.pendingFileDeletions(), "deleted once closed, the holder in its entry notwithstanding");
            assertThrows(FsException.NoSuchEntry.class, () -> meta.getattr(open));
        }
    }

    /**
     * Two clients of one volume, each with its own cache (60 s, so never refreshed here): every
     * create and write commit by one makes the other's beliefs about the directory stale.
     */
    @Test
    void twoCachingClientsCreatingInOneDirectoryStayCorrect() throws Exception {
        try (MetaEngine a = new MetaEngine(new RedisKvStore(redis.url(db)), System::nanoTime);
             MetaEngine b = new MetaEngine(new RedisKvStore(redis.url(db)), System::nanoTime)) {
            a.enableCache(java.time.Duration.ofSeconds(60));
            b.enableCache(java.time.Duration.ofSeconds(60));
            a.format(VolumeFormat.create("test", VolumeFormat.DEFAULT_BLOCK_SIZE, "file:///objects"), 0, 0);
            b.load();
            long dir = a.mknod(MetaEngine.ROOT, "part", FileType.DIRECTORY, 0755, 0, 0, 0, null).ino();
            assertEquals(0, b.readdir(dir).size()); // b caches the empty listing
            MetaEngine[] clients = {a, b};
            for (int i = 0; i < 20; i++) {
                MetaEngine m = clients[i % 2];
                long ino = m.mknod(dir, "f" + i, FileType.FILE, 0644, 0, 0, 0, null).ino();
                m.commitWrite(ino, List.of(new MetaEngine.ChunkSlice(0, new Slice(m.nextSliceId(), 10 + i, 0, 10 + i, 0))));
            }
            // b's cached listing lacks a's names: creating one of them must still fail
            org.junit.jupiter.api.Assertions.assertThrows(io.partfs.engine.FsException.Exists.class,
                    () -> b.mknod(dir, "f0", FileType.FILE, 0644, 0, 0, 0, null));
            try (MetaEngine fresh = new MetaEngine(new RedisKvStore(redis.url(db)), System::nanoTime)) {
                fresh.load();
                assertEquals(20, fresh.readdir(dir).size());
                for (int i = 0; i < 20; i++) {
                    assertEquals(10 + i, fresh.lookup(dir, "f" + i).size());
                }
                assertEquals(20, fresh.usage().inodes() - 2, "root, the directory and 20 files");
            }
        }
    }

    /** A Redis user without @scripting (managed services may set that up): beliefs are given up, writes still commit. */
    @Test
    void aServerThatRefusesScriptsStillCommitsOnRealReads() throws Exception {
        adminConn.sync().aclSetuser("noscript", io.lettuce.core.AclSetuserArgs.Builder.on().addPassword("pw").allKeys()
                .allChannels().allCommands().removeCategory(io.lettuce.core.AclCategory.SCRIPTING));
        try (RedisKvStore limited = new RedisKvStore("redis://noscript:pw@127.0.0.1:" + redis.port() + "/" + db)) {
            limited.update(tx -> {
                tx.put("k", b("v1"));
                return null;
            });
            for (int round = 1; round <= 2; round++) {
                AtomicInteger runs = new AtomicInteger();
                byte[] next = b("v" + (round + 1));
                byte[] believed = b("v" + round);
                limited.update(tx -> {
                    runs.incrementAndGet();
                    tx.believe("k", believed);
                    assertArrayEquals(believed, tx.get("k"));
                    tx.put("k", next);
                    return null;
                });
                assertEquals(round == 1 ? 2 : 1, runs.get(), "refused once, then no script is tried");
                assertArrayEquals(next, kv.read(r -> r.get("k")));
            }
        }
    }

    /**
     * Redis at its maxmemory (noeviction) refuses writes: a create fails with ENOSPC whether it
     * goes as a script or as MULTI/EXEC, writes nothing, and the client keeps its scripts (it
     * took the refusal for "no scripts here" before); with memory again all goes on as before.
     */
    @Test
    void aServerOutOfMemoryFailsWritesWithNoSpaceAndTheClientKeepsItsScripts() throws Exception {
        try (MetaEngine meta = cachingVolume()) {
            long dir = meta.lookup(MetaEngine.ROOT, "part").ino();
            adminConn.sync().configSet("maxmemory", "1"); // far below what it uses
            try {
                long evals = calls("eval");
                assertThrows(FsException.NoSpace.class, () -> meta.mknod(dir, "f", FileType.FILE, 0644, 0, 0, 0, null));
                assertEquals(evals + 1, calls("eval"), "tried as one script, which wrote nothing");
                assertThrows(FsException.NoSpace.class, () -> kv.update(tx -> {
                    tx.get("plain"); // WATCHed: MULTI/EXEC
                    tx.put("plain", b("v"));
                    return null;
                }));
            } finally {
                adminConn.sync().configSet("maxmemory", "0");
            }
            meta.mknod(dir, "f", FileType.FILE, 0644, 0, 0, 0, null); // on real reads: the failure dropped what it knew
            long evals = calls("eval");
            meta.mknod(dir, "g", FileType.FILE, 0644, 0, 0, 0, null);
            assertEquals(evals + 1, calls("eval"), "still one script per create");
            assertEquals(List.of("f", "g", "warm"), meta.readdir(dir).stream().map(io.partfs.engine.DirEntry::name).sorted().toList());
            assertNull(kv.read(r -> r.get("plain")));
        }
    }

    /**
     * A Redis without an append-only file loses the metadata changes since its last snapshot at a
     * restart, or the whole volume without snapshots: named at connect (mounts log it, status
     * shows it), with what to set.
     */
    @Test
    void aServerWithoutAnAppendOnlyFileIsNamedADurabilityProblem() throws Exception {
        try (RedisKvStore kv = new RedisKvStore(redis.url(db))) { // the test server: --appendonly no
            String problem = kv.durabilityProblem();
            org.junit.jupiter.api.Assertions.assertTrue(problem != null && problem.contains("appendonly yes"), problem);
        }
        adminConn.sync().configSet("appendonly", "yes");
        try (RedisKvStore kv = new RedisKvStore(redis.url(db))) {
            org.junit.jupiter.api.Assertions.assertNull(kv.durabilityProblem());
        } finally {
            adminConn.sync().configSet("appendonly", "no");
        }
    }

    /** A Redis that may evict any key at its maxmemory would lose files: refused at connect, with what to set. */
    @Test
    void aServerThatEvictsAnyKeyIsRefusedAtConnect() throws Exception {
        adminConn.sync().configSet("maxmemory-policy", "allkeys-lru");
        adminConn.sync().configSet("maxmemory", "1gb");
        try {
            IOException e = assertThrows(IOException.class, () -> new RedisKvStore(redis.url(db)).close());
            org.junit.jupiter.api.Assertions.assertTrue(e.getMessage().contains("maxmemory-policy noeviction"), e.getMessage());
            adminConn.sync().configSet("maxmemory-policy", "volatile-lru");
            new RedisKvStore(redis.url(db)).close(); // only its commit logs expire: a warning
        } finally {
            adminConn.sync().configSet("maxmemory", "0");
            adminConn.sync().configSet("maxmemory-policy", "noeviction");
        }
    }
}
