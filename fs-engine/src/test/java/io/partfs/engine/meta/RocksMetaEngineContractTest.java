package io.partfs.engine.meta;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.Attr;
import java.io.IOException;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The metadata engine contract on embedded RocksDB. */
class RocksMetaEngineContractTest extends MetaEngineContract {
    @TempDir
    Path dir;
    private final AtomicInteger stores = new AtomicInteger();
    private Path lastStore;

    @Override
    KvStore newStore() throws Exception {
        lastStore = dir.resolve("meta-" + stores.incrementAndGet());
        return new RocksKvStore(lastStore);
    }

    @Test
    void metadataSurvivesReopen() throws Exception {
        Attr f = file(ROOT, "kept");
        meta.close();
        meta = new MetaEngine(new RocksKvStore(lastStore), () -> clock.addAndGet(1000));
        assertEquals("test", meta.load().name());
        assertEquals(f.ino(), meta.lookup(ROOT, "kept").ino());
        Attr g = file(ROOT, "new");
        assertTrue(g.ino() > f.ino(), "inode numbers are not reused after a restart");
    }

    @Test
    void closingTwiceIsHarmless() throws Exception {
        KvStore kv = new RocksKvStore(dir.resolve("twice"));
        kv.close();
        kv.close(); // RocksDB itself aborts the JVM when a closed database is flushed
    }

    @Test
    void secondOpenOfTheSameDirectoryIsAClearError() {
        IOException e = assertThrows(IOException.class, () -> new RocksKvStore(lastStore));
        assertTrue(e.getMessage().contains("in use by another process"), e.getMessage());
    }

    @Test
    void unformattedStoreSaysToFormat() throws Exception {
        try (MetaEngine empty = newEngine()) {
            IOException e = assertThrows(IOException.class, empty::load);
            assertTrue(e.getMessage().contains("partfs format"), e.getMessage());
        }
    }
}
