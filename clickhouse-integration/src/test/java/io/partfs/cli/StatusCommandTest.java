package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.TimeSource;
import io.partfs.engine.VolumeFormat;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.RocksKvStore;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What {@code partfs status MOUNTPOINT} says of a mount. */
class StatusCommandTest {
    @TempDir
    Path dir;

    @Test
    void aMountThatRefusesChangesSaysSoAndWhy() throws Exception {
        try (MetaEngine mount = new MetaEngine(new RocksKvStore(dir.resolve("meta"), false), TimeSource.SYSTEM)) {
            mount.format(VolumeFormat.create("vol", 1 << 20, dir.resolve("objects").toUri().toString()), 0, 0);
            MetaEngine other = new MetaEngine(mount.store(), TimeSource.SYSTEM); // another mount; shares the store, not closed
            other.load();
            other.registerSession("other");
            mount.registerSession("this");
            assertTrue(mount.flock(MetaEngine.ROOT, 1, MetaEngine.Flock.EXCLUSIVE));
            String fine = StatusCommand.report(mount, "meta", Path.of("/mnt/x"));
            assertFalse(fine.contains("REFUSING"), fine);

            assertTrue(other.removeSession(mount.session())); // taken for crashed while cut off
            assertTrue(other.flock(MetaEngine.ROOT, 1, MetaEngine.Flock.EXCLUSIVE));
            assertFalse(mount.heartbeat());
            String fenced = StatusCommand.report(mount, "meta", Path.of("/mnt/x"));
            assertTrue(fenced.contains("REFUSING CHANGES: this mount lost its flock(2) lock on inode 1"), fenced);
        }
    }
}
