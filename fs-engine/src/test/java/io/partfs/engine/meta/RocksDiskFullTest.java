package io.partfs.engine.meta;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.FsException;
import io.partfs.engine.testing.SmallDisk;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * RocksDB on a real disk that fills up (a tmpfs of a few MiB, filled by another file, as when
 * another process fills the disk the metadata shares): a commit fails with ENOSPC, and once
 * the other file is gone commits go on, without reopening the store by hand. Without the
 * reopen, RocksDB refused every later write with the same error until the process restarted.
 */
class RocksDiskFullTest {
    @Test
    void aCommitOnAFullDiskFailsWithNoSpaceAndCommitsResumeOnceThereIsRoom() throws Exception {
        try (SmallDisk disk = new SmallDisk(16)) {
            Path dir = disk.dir().resolve("meta");
            try (RocksKvStore kv = new RocksKvStore(dir)) {
                put(kv, "before", new byte[] {1});
                Path filler = disk.fill("filler");
                byte[] big = new byte[256 << 10];
                FsException.NoSpace full = assertThrows(FsException.NoSpace.class, () -> {
                    for (int i = 0; i < 100; i++) {
                        put(kv, "big" + i, big);
                    }
                });
                assertTrue(full.getMessage().contains("free space on it"), full.getMessage());
                assertArrayEquals(new byte[] {1}, kv.read(r -> r.get("before")), "reads go on");
                assertThrows(FsException.NoSpace.class, () -> put(kv, "small", new byte[] {2}),
                        "while the disk is full, no reopen and no commit");

                Files.delete(filler);
                put(kv, "after", new byte[] {3}); // the first commit with room reopens the store
                assertArrayEquals(new byte[] {3}, kv.read(r -> r.get("after")));
                assertArrayEquals(new byte[] {1}, kv.read(r -> r.get("before")));
                assertNull(kv.read(r -> r.get("small")), "the failed commit left nothing");
                kv.update(tx -> {
                    tx.delete("after");
                    return null;
                });
            }
            try (RocksKvStore again = new RocksKvStore(dir)) {
                assertArrayEquals(new byte[] {1}, again.read(r -> r.get("before")), "and all of it is there after a restart");
                assertNull(again.read(r -> r.get("after")));
            }
        }
    }

    private static void put(RocksKvStore kv, String key, byte[] value) throws IOException {
        kv.update(tx -> {
            tx.put(key, value);
            return null;
        });
    }
}
