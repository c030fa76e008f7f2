package io.partfs.engine.fs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.FsException;
import io.partfs.engine.PartFs;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.testing.Poll;
import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.TestVolume;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A mount whose Redis comes back after an outage beats at once, out of turn: a Redis that
 * restarted without the volume's metadata (no append-only file) fences the mount as soon as
 * it answers again, not at the next heartbeat up to 20 s later, during which every change
 * failed with ESTALE instead of EROFS and the log said nothing.
 */
class RedisRestartUnderAMountTest {
    @TempDir
    Path tmp;

    @Test
    void aMountLearnsItsVolumeIsGoneAsSoonAsRedisIsBack() throws Exception {
        // no append-only file: a restart comes back empty; databases for TestVolume's numbering
        try (RedisServer redis = RedisServer.start("--databases", "1000")) {
            TestVolume volume = new TestVolume(TestVolume.Meta.REDIS, TestVolume.Store.LOCAL, tmp.resolve("vol"), redis, null,
                    TestVolume.defaultConfig(tmp.resolve("a")));
            try (PartFs fs = volume.open()) {
                fs.startSession("mount"); // its first heartbeat is due in 20 s
                long started = System.nanoTime();
                redis.kill();
                redis.restart();
                long back = System.nanoTime(); // Redis answers PING
                Poll.until(() -> fs.meta().fenced() != null, Duration.ofSeconds(10), "the mount fenced after Redis came back empty");
                assertTrue(System.nanoTime() - started < MetaEngine.HEARTBEAT.toNanos(), "before the first heartbeat was due");
                System.out.printf("fenced %d ms after Redis answered again%n", (System.nanoTime() - back) / 1_000_000);
                assertTrue(fs.meta().fenced().contains("--from-backup latest"), fs.meta().fenced());
                FsException refused = assertThrows(FsException.class,
                        () -> fs.meta().mknod(MetaEngine.ROOT, "f", io.partfs.engine.FileType.FILE, 0644, 0, 0, 0, null));
                assertEquals(io.partfs.engine.Errno.EROFS, refused.errno(), refused.getMessage());
                try (io.partfs.engine.meta.KvStore kv = volume.newKvStore()) {
                    assertTrue(kv.read(r -> r.hgetAll("sessions")).isEmpty(), "no session written into the empty Redis");
                }
            }
        }
    }
}
