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

    /** A volume changed while it is dumped (a mount's backup): the dump is the volume as it was when the dump began. */
    @Test
    void aDumpIsOneSnapshotEvenWhileTheVolumeChanges() throws Exception {
        Attr gone = file(ROOT, "deleted-during-the-dump");
        for (int i = 0; i < 3000; i++) {
            file(ROOT, "f" + i);
        }
        java.io.StringWriter copy = new java.io.StringWriter();
        java.io.Writer changing = new java.io.Writer() {
            private int writes;

            @Override
            public void write(char[] buf, int off, int len) throws IOException {
                if (++writes == 5) { // the header and the counters are out: the volume changes
                    meta.unlink(ROOT, "deleted-during-the-dump");
                    file(ROOT, "created-during-the-dump");
                }
                copy.write(buf, off, len);
            }

            @Override
            public void flush() {
            }

            @Override
            public void close() {
            }
        };
        MetaDump.dump(meta.store(), changing, n -> { });
        String dump = copy.toString();
        java.util.function.Function<String, String> b64 = n -> java.util.Base64.getEncoder()
                .encodeToString(n.getBytes(java.nio.charset.StandardCharsets.UTF_8));
        assertTrue(dump.contains("\nP\ti" + gone.ino() + "\t") && dump.contains(b64.apply("deleted-during-the-dump")),
                "the file deleted during the dump is in it, with its name");
        assertTrue(!dump.contains(b64.apply("created-during-the-dump")), "the file created during the dump is not");
        assertTrue(meta.lookup(ROOT, "created-during-the-dump").ino() > 0);
    }

    /** A damaged database is named as damaged, with the way back (a backup or a dump), and left as it is. */
    @Test
    void damagedMetadataIsAClearErrorThatSaysHowToRestore() throws Exception {
        file(ROOT, "kept");
        meta.close();
        new RocksKvStore(lastStore).close(); // reopening writes the recovered log into a table file
        Path table;
        try (var files = java.nio.file.Files.list(lastStore)) {
            table = files.filter(f -> f.toString().endsWith(".sst")).findFirst().orElseThrow();
        }
        byte[] goodTable = java.nio.file.Files.readAllBytes(table);

        byte[] damaged = goodTable.clone();
        for (int i = 20; i < 40; i++) {
            damaged[i] ^= 0x5a;
        }
        java.nio.file.Files.write(table, damaged);
        IOException read = assertThrows(IOException.class, () -> {
            try (MetaEngine m = new MetaEngine(new RocksKvStore(lastStore), () -> clock.addAndGet(1000))) {
                m.load();
                m.lookup(ROOT, "kept");
            }
        });
        assertDamaged(read);
        assertTrue(java.util.Arrays.equals(damaged, java.nio.file.Files.readAllBytes(table)), "the table file is left as it was");

        java.nio.file.Files.write(table, goodTable);
        // each open starts a manifest of its own; CURRENT names the one in use
        Path manifest = lastStore.resolve(java.nio.file.Files.readString(lastStore.resolve("CURRENT")).strip());
        byte[] goodManifest = java.nio.file.Files.readAllBytes(manifest);
        byte[] cut = java.util.Arrays.copyOf(goodManifest, 40);
        java.nio.file.Files.write(manifest, cut);
        assertDamaged(assertThrows(IOException.class, () -> new RocksKvStore(lastStore).close()));
        assertTrue(java.util.Arrays.equals(cut, java.nio.file.Files.readAllBytes(manifest)), "the manifest is left as it was");

        java.nio.file.Files.write(manifest, goodManifest);
        meta = new MetaEngine(new RocksKvStore(lastStore), () -> clock.addAndGet(1000));
        assertTrue(meta.lookup(ROOT, "kept").ino() > 0, "with its files put back, the volume opens as before");
    }

    private static void assertDamaged(IOException e) {
        String m = e.getMessage();
        assertTrue(m.contains("is damaged") && m.contains("--from-backup latest") && m.contains("partfs load"), m);
        assertTrue(m.lines().count() == 1, "one line: " + m);
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
