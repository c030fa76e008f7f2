package io.partfs.engine.fs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.PartFs;
import io.partfs.engine.PartFsConfig;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.object.ObjectStore;
import io.partfs.engine.testing.Backends;
import io.partfs.engine.testing.Poll;
import io.partfs.engine.testing.TestVolume;
import java.io.BufferedReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A write-back client killed (SIGKILL, its own process) while a file is half written: blocks of
 * the write it never committed are staged on its disk next to blocks of a file it fsynced. Its
 * restart uploads the committed ones and deletes the others, rather than uploading objects no
 * file names, which only {@code partfs gc} used to remove. On Redis the restart first waits, in
 * case a commit the dead process sent is still on its way ({@link PartFsConfig#commitSettle}):
 * blocks it holds back meanwhile are neither uploaded nor lost by an unmount.
 */
class WriteBackCrashTest {
    static final String READY = "@@ready";
    /** Blocks of the committed file (two whole and a short one) and of the one never committed (three whole). */
    static final int COMMITTED_BLOCKS = 3;
    static final int UNCOMMITTED_BLOCKS = 3;

    @TempDir
    Path tmp;

    @ParameterizedTest
    @EnumSource(TestVolume.Meta.class)
    void aRestartUploadsWhatTheDeadClientCommittedAndDeletesWhatItDidNot(TestVolume.Meta meta) throws Exception {
        try (Backends servers = Backends.start(meta, TestVolume.Store.LOCAL)) {
            Path cache = tmp.resolve("client");
            TestVolume volume = formatAndKill(ChildMain.class, meta, servers, tmp, cache);
            Path staging = TestVolume.defaultConfig(cache).stagingDir();
            assertEquals(COMMITTED_BLOCKS + UNCOMMITTED_BLOCKS, stagedFiles(staging).size(), "staged at the kill: " + stagedFiles(staging));
            assertEquals(List.of(), dataObjects(volume), "nothing uploaded before the kill");

            PartFsConfig restart = TestVolume.defaultConfig(cache).toBuilder().writeBack(true).build();
            if (meta == TestVolume.Meta.REDIS) {
                // a commit may still be on its way to Redis: the uncommitted blocks are held, not deleted yet;
                // an unmount at once waits for the metadata's answer and uploads what it knows
                volume.openAs(restart.toBuilder().commitSettle(Duration.ofHours(1)).build()).close();
                assertEquals(COMMITTED_BLOCKS, countObjects(volume), "the unmount uploaded the committed blocks: " + dataObjects(volume));
                assertEquals(UNCOMMITTED_BLOCKS, stagedFiles(staging).size(), "and left the held ones for the next start");
                restart = restart.toBuilder().commitSettle(Duration.ZERO).build();
            }
            try (PartFs fs = volume.openAs(restart)) {
                // an uploaded block leaves the count before its file moves into the block cache
                Poll.until(() -> fs.chunks().staging().pendingBlocks() == 0 && stagedFilesNow(staging).isEmpty(),
                        Duration.ofSeconds(60), "staging emptied");
                assertEquals(List.of(), stagedFiles(staging), "the uncommitted blocks are deleted, not uploaded");
                assertEquals(COMMITTED_BLOCKS, countObjects(volume), "only the committed blocks are in the store: " + dataObjects(volume));
                TestVolume.assertConsistent(volume, fs, "[" + meta + "]"); // no object leaked, none missing
                assertEquals(0, fs.meta().lookup(MetaEngine.ROOT, "uncommitted.bin").size(), "the unsynced write never happened");
            }
            try (PartFs fromStore = volume.openAs(PartFsConfig.builder().ioThreads(4).build())) { // no local cache
                assertArrayEquals(ChildMain.committed(), readAll(fromStore, "committed.bin"), "the fsynced file reads back from the store");
            }
        }
    }

    /**
     * Formats a volume under {@code tmp} on {@code servers}, runs {@code child} on it with cache
     * directory {@code cache} and kills it once ready ({@link #runChildUntilReadyAndKill}).
     */
    static TestVolume formatAndKill(Class<?> child, TestVolume.Meta meta, Backends servers, Path tmp, Path cache) throws Exception {
        TestVolume volume = new TestVolume(meta, TestVolume.Store.LOCAL, tmp.resolve("vol"), servers.redis, null,
                TestVolume.defaultConfig(cache));
        volume.open().close(); // formatted
        runChildUntilReadyAndKill(child, volume, cache);
        return volume;
    }

    /**
     * Runs {@code child} (a main taking the metadata location, the objects' directory and the
     * cache directory) on the volume with cache directory {@code cache}; kills it (SIGKILL) once
     * it prints {@value #READY}.
     */
    static void runChildUntilReadyAndKill(Class<?> child, TestVolume volume, Path cache) throws Exception {
        String javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Path log = cache.resolveSibling("child.log");
        Process p = new ProcessBuilder(javaBin, "-Xmx256m", "-cp", System.getProperty("java.class.path"), child.getName(),
                volume.metaLocation(), volume.objectsDir().toString(), cache.toString())
                .redirectError(log.toFile()).start();
        try (BufferedReader r = p.inputReader()) {
            String line;
            while ((line = r.readLine()) != null && !line.equals(READY)) {
                // its other output
            }
            assertTrue(line != null, "the child died before it was ready: " + Files.readString(log));
            p.destroyForcibly(); // SIGKILL: no flush, no unmount
        } finally {
            p.destroyForcibly();
            assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the child exits");
        }
    }

    static byte[] readAll(PartFs fs, String name) throws Exception {
        long ino = fs.meta().lookup(MetaEngine.ROOT, name).ino();
        long fh = fs.open(ino, PartFs.O_RDONLY);
        try {
            byte[] out = new byte[(int) fs.getattr(ino).size()];
            for (int done = 0, n; done < out.length; done += n) {
                n = fs.read(fh, done, out, done, out.length - done);
                assertTrue(n > 0, "read returned " + n + " at " + done);
            }
            return out;
        } finally {
            fs.release(fh);
        }
    }

    /** The block files in the staging directory (no spares, no lock). */
    private static List<String> stagedFiles(Path staging) throws Exception {
        try (var s = Files.list(staging)) {
            return s.map(f -> f.getFileName().toString()).filter(n -> !n.startsWith(".")).sorted().toList();
        }
    }

    private static List<String> stagedFilesNow(Path staging) {
        try {
            return stagedFiles(staging);
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    static List<String> dataObjects(TestVolume volume) throws Exception {
        try (ObjectStore s = volume.newObjectStore()) {
            return s.listAll("testvol/chunks/").stream().map(ObjectStore.ObjectInfo::key).sorted().toList();
        }
    }

    static int countObjects(TestVolume volume) {
        try {
            return dataObjects(volume).size();
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    /**
     * The killed client: opens the volume in write-back mode with uploads held back an hour,
     * writes and fsyncs {@code committed.bin}, then writes {@code uncommitted.bin} without a
     * flush, waits until all its blocks are staged, says so and waits to be killed.
     */
    static final class ChildMain {
        static byte[] committed() {
            byte[] b = new byte[2 * (1 << 20) + 100];
            new Random(1).nextBytes(b);
            return b;
        }

        public static void main(String[] args) throws Exception {
            boolean redis = args[0].startsWith("redis:");
            MetaEngine engine = new MetaEngine(redis ? new io.partfs.engine.meta.RedisKvStore(args[0])
                    : new io.partfs.engine.meta.RocksKvStore(Path.of(args[0])));
            engine.load();
            PartFsConfig config = TestVolume.defaultConfig(Path.of(args[2])).toBuilder().writeBack(true)
                    .uploadDelay(Duration.ofHours(1)).build();
            PartFs fs = PartFs.open(engine, new io.partfs.engine.object.LocalObjectStore(Path.of(args[1])), config);
            fs.startSession("write-back crash child, pid " + ProcessHandle.current().pid());
            byte[] data = committed();
            PartFs.Created c = fs.create(MetaEngine.ROOT, "committed.bin", 0644, PartFs.O_RDWR, 0, 0);
            fs.write(c.fh(), 0, data, 0, data.length);
            fs.fsync(c.fh());
            fs.release(c.fh());
            byte[] more = new byte[UNCOMMITTED_BLOCKS << 20];
            new Random(2).nextBytes(more);
            PartFs.Created u = fs.create(MetaEngine.ROOT, "uncommitted.bin", 0644, PartFs.O_RDWR, 0, 0);
            fs.write(u.fh(), 0, more, 0, more.length); // whole blocks: staged in the background, no commit
            Poll.until(() -> fs.chunks().staging().pendingBlocks() == COMMITTED_BLOCKS + UNCOMMITTED_BLOCKS,
                    Duration.ofSeconds(60), "every block staged");
            System.out.println(READY);
            System.out.flush();
            Thread.currentThread().join(); // until killed
        }
    }
}
