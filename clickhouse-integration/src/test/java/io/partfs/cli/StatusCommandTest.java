package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.PartFs;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.testing.TestVolume;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What {@code partfs status MOUNTPOINT} says of a mount. */
class StatusCommandTest {
    @TempDir
    Path dir;

    private PartFs open(boolean writeBack) throws Exception {
        var config = TestVolume.defaultConfig(dir).toBuilder().writeBack(writeBack);
        if (writeBack) {
            config.uploadDelay(Duration.ofHours(1)); // staged blocks stay staged while the test looks
        }
        return new TestVolume(TestVolume.Meta.ROCKSDB, TestVolume.Store.LOCAL, dir, null, null, config.build()).open();
    }

    @Test
    void uploadsNotCommittedAreCountedByWhetherTheirSessionEnded() {
        java.util.Map<Long, MetaEngine.Session> sessions = java.util.Map.of(1L, new MetaEngine.Session(1, "a", 0));
        assertEquals(null, StatusCommand.uploadNotes(java.util.List.of(), sessions));
        assertEquals(null, StatusCommand.uploadNotes(java.util.List.of(new MetaEngine.UploadNotes(1, 0, 0)), sessions));
        assertEquals("2 slice(s) uploaded by mounts before their commit (writes under way, or committed in the last seconds:"
                + " a note is dropped a few seconds after its commit)",
                StatusCommand.uploadNotes(java.util.List.of(new MetaEngine.UploadNotes(1, 2, 0)), sessions));
        String both = StatusCommand.uploadNotes(java.util.List.of(new MetaEngine.UploadNotes(1, 2, 0),
                new MetaEngine.UploadNotes(7, 3, 1_700_000_000_000L), new MetaEngine.UploadNotes(8, 1, 0)), sessions);
        assertTrue(both.startsWith("2 slice(s) uploaded by mounts before their commit (writes under way, or committed in the last"
                + " seconds: a note is dropped a few seconds after its commit); 4 slice(s) that 2"
                + " ended session(s) uploaded before their commit: a mount deletes the objects of those never committed once no"
                + " commit of theirs can arrive (20 min"), both);
        String ended = StatusCommand.uploadNotes(java.util.List.of(new MetaEngine.UploadNotes(7, 3, 0)), sessions);
        assertTrue(ended.startsWith("3 slice(s) that 1 ended session(s) uploaded before their commit: "), ended);
    }

    @Test
    void aMountThatRefusesChangesSaysSoAndWhy() throws Exception {
        try (PartFs fs = open(false)) {
            MetaEngine mount = fs.meta();
            MetaEngine other = new MetaEngine(mount.store()); // another mount; shares the store, not closed
            other.load();
            other.registerSession("other");
            mount.registerSession("this");
            assertTrue(mount.flock(MetaEngine.ROOT, 1, MetaEngine.Flock.EXCLUSIVE));
            String fine = StatusCommand.report(fs, "meta", Path.of("/mnt/x"));
            assertFalse(fine.contains("REFUSING"), fine);

            assertTrue(other.removeSession(mount.session())); // taken for crashed while cut off
            assertTrue(other.flock(MetaEngine.ROOT, 1, MetaEngine.Flock.EXCLUSIVE));
            assertFalse(mount.heartbeat());
            String fenced = StatusCommand.report(fs, "meta", Path.of("/mnt/x"));
            assertTrue(fenced.contains("REFUSING CHANGES: this mount lost its flock(2) lock on inode 1"), fenced);
        }
    }

    @Test
    void aWriteBackMountSaysWhatIsStagedOnlyOnThisMachine() throws Exception {
        try (PartFs fs = open(true)) {
            String empty = StatusCommand.report(fs, "meta", Path.of("/mnt/x"));
            assertTrue(empty.contains("writes:     write-back (fsync stages blocks on this machine's disk; they upload in the"
                    + " background); nothing staged, 0 B buffered in memory"), empty);

            PartFs.Created f = fs.create(MetaEngine.ROOT, "f", 0644, PartFs.O_RDWR, 0, 0);
            byte[] data = new byte[300_000];
            fs.write(f.fh(), 0, data, 0, data.length);
            assertTrue(StatusCommand.report(fs, "meta", Path.of("/mnt/x")).contains("293.0 KiB buffered in memory"),
                    StatusCommand.report(fs, "meta", Path.of("/mnt/x")));
            fs.fsync(f.fh());
            fs.release(f.fh());
            String staged = StatusCommand.report(fs, "meta", Path.of("/mnt/x"));
            assertTrue(staged.contains("; 1 block(s), 293.0 KiB staged and not yet uploaded (only on this machine's disk until"
                    + " then; the oldest staged "), staged);
            assertTrue(staged.contains(" s ago), 0 B buffered in memory"), staged);
        }
    }

    @Test
    void theBlockCacheLineSaysWhatItHoldsAndWhenItsDiskReturnedOtherBytes() throws Exception {
        assertEquals("no block cache (--cache-size 0): every read goes to the object store",
                StatusCommand.blockCache(io.partfs.engine.data.BlockCache.disabled(), false));
        io.partfs.engine.data.BlockCache cache = new io.partfs.engine.data.BlockCache(dir.resolve("c"), 1 << 20);
        cache.awaitLoaded();
        cache.put("v/chunks/1_0_4096", new byte[4096]);
        cache.read("v/chunks/1_0_4096", 0, 10);
        cache.read("v/chunks/2_0_4096", 0, 10);
        assertEquals("4.0 KiB in 1 block(s) of 1.0 MiB, 50% of 2 reads served", StatusCommand.blockCache(cache, false));

        Path block;
        try (var files = java.nio.file.Files.walk(dir.resolve("c"))) {
            block = files.filter(f -> f.getFileName().toString().endsWith("1_0_4096")).findFirst().orElseThrow();
        }
        try (var ch = java.nio.channels.FileChannel.open(block, java.nio.file.StandardOpenOption.WRITE)) {
            ch.write(java.nio.ByteBuffer.wrap(new byte[] {1}), 100);
        }
        io.partfs.engine.data.BlockCache again = new io.partfs.engine.data.BlockCache(dir.resolve("c"), 1 << 20);
        again.awaitLoaded();
        again.read("v/chunks/1_0_4096", 0, 10);
        String line = StatusCommand.blockCache(again, false);
        assertTrue(line.endsWith("; 1 block(s) did not match their checksums and were read again from the object store:"
                + " CHECK THE CACHE DISK"), line);
    }

    @Test
    void aMountThatUploadsBeforeFsyncSaysSo() throws Exception {
        try (PartFs fs = open(false)) {
            String s = StatusCommand.report(fs, "meta", Path.of("/mnt/x"));
            assertTrue(s.contains("writes:     fsync returns once blocks are in the object store; nothing staged,"), s);
        }
    }
}
