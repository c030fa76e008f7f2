package io.partfs.engine.fs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.partfs.engine.PartFs;
import io.partfs.engine.PartFsConfig;
import io.partfs.engine.data.VolumeCheck;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.Slice;
import io.partfs.engine.object.LocalObjectStore;
import io.partfs.engine.object.ObjectStore;
import io.partfs.engine.testing.Backends;
import io.partfs.engine.testing.Poll;
import io.partfs.engine.testing.TestVolume;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A client is killed (SIGKILL, its own process) between the uploads of a file's blocks and their
 * commit: the objects are in the store, named by no file. Its session's notes of those uploads
 * let a later mount delete them once the session has ended and the settle passed ({@link
 * MetaEngine#claimUncommittedUploads}), where they used to stay until {@code partfs gc --delete}.
 * A file it committed before keeps every object. Without write-back, and with it: a block staged
 * is uploaded at once (no upload delay), before the commit of a file still being written, and
 * its staged file is gone into the block cache, so the restart's look at the staging directory
 * does not find it (it leaked before it was noted too).
 */
class UncommittedUploadsCrashTest {
    static final int COMMITTED_BLOCKS = 3;
    static final int UNCOMMITTED_BLOCKS = 3;

    @TempDir
    Path tmp;

    static java.util.stream.Stream<org.junit.jupiter.params.provider.Arguments> volumes() {
        return java.util.Arrays.stream(TestVolume.Meta.values()).flatMap(m -> java.util.stream.Stream.of(
                org.junit.jupiter.params.provider.Arguments.of(m, false), org.junit.jupiter.params.provider.Arguments.of(m, true)));
    }

    @ParameterizedTest(name = "{0}, write-back {1}")
    @MethodSource("volumes")
    void uploadsTheDeadClientNeverCommittedAreDeletedOnceItsSessionEnded(TestVolume.Meta meta, boolean writeBack) throws Exception {
        try (Backends servers = Backends.start(meta, TestVolume.Store.LOCAL)) {
            TestVolume volume = WriteBackCrashTest.formatAndKill(writeBack ? WriteBackChildMain.class : ChildMain.class, meta,
                    servers, tmp, tmp.resolve("client"));
            assertEquals(COMMITTED_BLOCKS + UNCOMMITTED_BLOCKS, WriteBackCrashTest.countObjects(volume),
                    "uploaded at the kill: " + WriteBackCrashTest.dataObjects(volume));

            PartFsConfig config = TestVolume.defaultConfig(tmp.resolve("restart"));
            try (PartFs fs = mounted(volume, config.toBuilder().commitSettle(Duration.ZERO).build())) {
                // the dead client's session still counts as alive: its uploads are its own
                assertEquals(2, fs.meta().sessions().size());
                long dead = fs.meta().sessions().keySet().stream().filter(s -> s != fs.meta().session()).findFirst().orElseThrow();
                assertEquals(1, fs.meta().uploadsRecorded(dead).size(), "one slice uploaded and not committed");
                VolumeCheck.Report r = check(volume, fs);
                assertEquals(UNCOMMITTED_BLOCKS, r.uploadingObjects, "gc leaves a registered session's uploads alone");
                assertEquals(0, r.leaked, "even with no minimum age");
                // as the next mount at its mount point does, or any mount once it stopped beating
                fs.meta().removeSession(dead);
                assertEquals(UNCOMMITTED_BLOCKS, check(volume, fs).leaked, "once it ended they are leaks");
            }
            assertEquals(COMMITTED_BLOCKS + UNCOMMITTED_BLOCKS, WriteBackCrashTest.countObjects(volume), "nothing deleted yet");
            if (meta == TestVolume.Meta.REDIS) {
                // a commit the dead process sent may still be on its way to Redis: nothing is deleted before the settle
                mounted(volume, config.toBuilder().commitSettle(Duration.ofHours(1)).build()).close();
                assertEquals(COMMITTED_BLOCKS + UNCOMMITTED_BLOCKS, WriteBackCrashTest.countObjects(volume), "held for the settle");
            }
            try (PartFs fs = mounted(volume, config.toBuilder().commitSettle(Duration.ZERO).build())) {
                assertEquals(COMMITTED_BLOCKS, WriteBackCrashTest.countObjects(volume),
                        "only the committed blocks are left: " + WriteBackCrashTest.dataObjects(volume));
                TestVolume.assertConsistent(volume, fs, "[" + meta + "]"); // no object leaked, none missing
            }
            try (PartFs fs = volume.openAs(config)) {
                // the sweeping mount held the dead one's notes as its own until the objects were gone
                assertEquals(List.of(), fs.meta().uploadNotes(), "and dropped them then");
            }
            try (PartFs fromStore = volume.openAs(PartFsConfig.builder().ioThreads(4).build())) { // no local cache
                assertArrayEquals(WriteBackCrashTest.ChildMain.committed(), WriteBackCrashTest.readAll(fromStore, "committed.bin"),
                        "the fsynced file reads back from the store");
            }
        }
    }

    /** The volume opened as a mount does, its session started, and the sweep its start runs done. */
    private static PartFs mounted(TestVolume volume, PartFsConfig config) throws IOException {
        PartFs fs = volume.openAs(config);
        try {
            fs.startSession("test mount");
            fs.awaitReclaim();
        } catch (IOException | RuntimeException e) {
            fs.close();
            throw e;
        }
        return fs;
    }

    /** What {@code partfs gc} finds, objects of any age counted. */
    private static VolumeCheck.Report check(TestVolume volume, PartFs fs) throws IOException {
        try (ObjectStore store = volume.newObjectStore()) {
            return new VolumeCheck(fs.meta(), store, (phase, n) -> { }).run(new VolumeCheck.Options(false, false, 0));
        }
    }

    /**
     * The killed client: writes and fsyncs {@code committed.bin}, then writes whole blocks of
     * {@code uncommitted.bin}, which are uploaded as they fill, without a flush; once they are
     * in the store and its note of them is in the metadata, says so and waits to be killed.
     */
    static final class ChildMain {
        public static void main(String[] args) throws Exception {
            run(args, false);
        }

        static void run(String[] args, boolean writeBack) throws Exception {
            boolean redis = args[0].startsWith("redis:");
            MetaEngine engine = new MetaEngine(redis ? new io.partfs.engine.meta.RedisKvStore(args[0])
                    : new io.partfs.engine.meta.RocksKvStore(Path.of(args[0])));
            engine.load();
            ObjectStore objects = new LocalObjectStore(Path.of(args[1]));
            PartFs fs = PartFs.open(engine, objects, TestVolume.defaultConfig(Path.of(args[2])).toBuilder()
                    .writeBack(writeBack).build()); // (no upload delay: a staged block is uploaded at once)
            fs.startSession("uncommitted-uploads crash child, pid " + ProcessHandle.current().pid());
            byte[] data = WriteBackCrashTest.ChildMain.committed();
            PartFs.Created c = fs.create(MetaEngine.ROOT, "committed.bin", 0644, PartFs.O_RDWR, 0, 0);
            fs.write(c.fh(), 0, data, 0, data.length);
            fs.fsync(c.fh());
            fs.release(c.fh());
            long ino = c.attr().ino();
            Set<Long> committed = engine.readChunk(ino, 0).stream().map(Slice::id).collect(Collectors.toSet());
            byte[] more = new byte[UNCOMMITTED_BLOCKS << 20];
            new Random(2).nextBytes(more);
            PartFs.Created u = fs.create(MetaEngine.ROOT, "uncommitted.bin", 0644, PartFs.O_RDWR, 0, 0);
            fs.write(u.fh(), 0, more, 0, more.length); // whole blocks: uploaded in the background, no commit
            Poll.until(() -> {
                try {
                    Set<Long> noted = engine.uploadsRecorded(engine.session());
                    return objects.listAll("testvol/chunks/").size() == COMMITTED_BLOCKS + UNCOMMITTED_BLOCKS
                            && noted.size() == 1 && Collections.disjoint(noted, committed)
                            && (!writeBack || fs.chunks().staging().pendingBlocks() == 0);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            }, Duration.ofSeconds(60), "every block uploaded, the uncommitted slice noted");
            System.out.println(WriteBackCrashTest.READY);
            System.out.flush();
            Thread.currentThread().join(); // until killed
        }
    }

    /** The killed client in write-back mode, with no upload delay. */
    static final class WriteBackChildMain {
        public static void main(String[] args) throws Exception {
            ChildMain.run(args, true);
        }
    }
}
