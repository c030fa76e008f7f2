package io.partfs.engine.fs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.FsException;
import io.partfs.engine.PartFs;
import io.partfs.engine.PartFsConfig;
import io.partfs.engine.testing.TestVolume;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The filesystem contract on metadata engine ROCKSDB and object store LOCAL, and what only an embedded volume does. */
class PartFsRocksLocalTest extends PartFsContract {
    @BeforeAll
    static void startBackends() throws Exception {
        start(TestVolume.Meta.ROCKSDB, TestVolume.Store.LOCAL);
    }

    @Override
    TestVolume.Meta meta() {
        return TestVolume.Meta.ROCKSDB;
    }

    @Override
    TestVolume.Store store() {
        return TestVolume.Store.LOCAL;
    }

    /**
     * Objects on this machine's disk (an embedded volume, RocksDB beside them on a real 64 MiB
     * tmpfs): statfs reports that disk; writes that would eat into the share kept for the
     * metadata fail with ENOSPC, deleting files still works, the trash gives up its objects
     * early while the disk is full, and writes then go on.
     */
    @Test
    void aFullLocalDiskFailsWritesWithNoSpaceAndDeletesMakeRoom() throws Exception {
        fs.close();
        try (io.partfs.engine.testing.SmallDisk disk = new io.partfs.engine.testing.SmallDisk(64)) {
            TestVolume small = new TestVolume(TestVolume.Meta.ROCKSDB, TestVolume.Store.LOCAL, disk.dir(), null, null,
                    PartFsConfig.builder().ioThreads(4).build());
            fs = small.open();
            PartFs.StatFs st = fs.statfs();
            assertEquals(disk.total() / 4096, st.totalBlocks(), "the disk's size");
            assertTrue(st.freeBlocks() * 4096 < disk.free(), "its free space, less what is kept for the metadata");
            byte[] mib = random(1 << 20, 40);
            int written = 0;
            FsException.NoSpace full = null;
            while (full == null && written < 64) {
                try {
                    writeFsynced("fill-" + written, mib);
                    written++;
                } catch (FsException.NoSpace e) {
                    full = e;
                }
            }
            assertTrue(full != null && written >= 40, written + " MiB written before ENOSPC: " + full);
            assertTrue(fs.statfs().freeBlocks() < 256, "statfs says it is full: " + fs.statfs().freeBlocks() + " blocks");
            fs.meta().setTrashHours(24); // as a volume partfs formats keeps them (2 hours there)
            for (int i = 0; i < 8; i++) {
                fs.unlink(ROOT, "fill-" + i); // metadata writes, in the space kept for them
            }
            fs.awaitReclaim(); // the deletion finds the disk full, so the trash gives its objects up at once
            assertEquals(0, fs.meta().trash().slices(), "the trash gave its objects up early for the full disk");
            writeFsynced("after", mib);
            assertArrayEquals(mib, readAll(ino("after")));
            assertArrayEquals(mib, readAll(ino("fill-" + (written - 1))));
            fs.close();
            fs = small.open();
            assertArrayEquals(mib, readAll(ino("after")), "after a reopen");
            fs.close();
        } finally {
            fs = volume.open();
        }
    }
}
