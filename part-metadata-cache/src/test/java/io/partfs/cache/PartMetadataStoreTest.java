package io.partfs.cache;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PartMetadataStoreTest {
    @TempDir
    Path tmp;

    private static PartMetadataStore.Entry entry(String text, long ino) {
        byte[] b = text.getBytes(StandardCharsets.UTF_8);
        return new PartMetadataStore.Entry(ino, b.length, 1_700_000_000_000_000_000L + ino, b);
    }

    @Test
    void putGetDeleteAndStats() throws Exception {
        try (PartMetadataStore s = PartMetadataStore.open(tmp.resolve("cache"), 8 << 20, false)) {
            String key = "default:data/db/t/all_1_1_0/checksums.txt";
            s.put(key, entry("checksums format version: 4", 7));
            assertEquals(Optional.of(entry("checksums format version: 4", 7)), s.get(key));
            assertEquals(Optional.empty(), s.get("default:data/db/t/all_1_1_0/columns.txt"));
            PartMetadataStore.Stats st = s.stats();
            assertEquals(1, st.entries());
            assertEquals(27, st.bytes());
            assertEquals(1, st.hits());
            assertEquals(1, st.misses());
            s.delete(key);
            assertEquals(Optional.empty(), s.get(key));
        }
    }

    /** {@code --metadata-cache-lru-size 0}: no blocks kept in memory, and reads still answer, after a reopen too. */
    @Test
    void aZeroSizedLruKeepsNothingInMemoryAndStillAnswers() throws Exception {
        String key = "default:data/db/t/all_1_1_0/count.txt";
        try (PartMetadataStore s = PartMetadataStore.open(tmp.resolve("cache"), 0, false)) {
            s.put(key, entry("350", 9));
            assertEquals(Optional.of(entry("350", 9)), s.get(key));
        }
        try (PartMetadataStore s = PartMetadataStore.open(tmp.resolve("cache"), 0, false)) {
            assertEquals(Optional.of(entry("350", 9)), s.get(key));
            assertEquals(Optional.empty(), s.get("default:data/db/t/all_1_1_0/columns.txt"));
        }
    }

    /**
     * A real disk that another file fills (a tmpfs of a few MiB): a put fails with ENOSPC, reads
     * go on, and once the other file is gone the store takes writes again without a restart
     * (before, RocksDB refused every write until the mount restarted, so the cache stopped filling).
     */
    @Test
    void aFullDiskFailsPutsWithNoSpaceAndPutsResumeOnceThereIsRoom() throws Exception {
        try (io.partfs.engine.testing.SmallDisk disk = new io.partfs.engine.testing.SmallDisk(16)) {
            Path dir = disk.dir().resolve("cache");
            String key = "default:data/db/t/all_1_1_0/primary.idx";
            try (PartMetadataStore s = PartMetadataStore.open(dir, 8 << 20, false)) {
                s.put("default:data/db/t/all_1_1_0/count.txt", entry("10", 3));
                Path filler = disk.fill("filler");
                String big = "x".repeat(256 << 10);
                io.partfs.engine.FsException.NoSpace full = assertThrows(io.partfs.engine.FsException.NoSpace.class, () -> {
                    for (int i = 0; i < 100; i++) {
                        s.put("default:data/db/t/all_" + i + "_" + i + "_0/primary.idx", entry(big, 100 + i));
                    }
                });
                assertTrue(full.getMessage().contains("part-metadata cache") && full.getMessage().contains("free space on it"),
                        full.getMessage());
                assertEquals(Optional.of(entry("10", 3)), s.get("default:data/db/t/all_1_1_0/count.txt"), "reads go on");
                assertThrows(io.partfs.engine.FsException.NoSpace.class, () -> s.put(key, entry("small", 4)),
                        "while the disk is full, no reopen and no write");

                Files.delete(filler);
                s.put(key, entry("small", 4)); // the first write with room reopens the store
                assertEquals(Optional.of(entry("small", 4)), s.get(key));
                s.delete("default:data/db/t/all_1_1_0/count.txt");
                assertEquals(Optional.empty(), s.peek("default:data/db/t/all_1_1_0/count.txt"));
            }
            try (PartMetadataStore again = PartMetadataStore.open(dir, 8 << 20, false)) {
                assertEquals(Optional.of(entry("small", 4)), again.get(key), "and it is there after a restart");
            }
        }
    }

    @Test
    void deletingAKeyNeverStoredWritesNothing() throws Exception {
        try (PartMetadataStore s = PartMetadataStore.open(tmp.resolve("cache"), 8 << 20, false)) {
            s.put("default:data/db/t/all_1_1_0/count.txt", entry("10", 3));
            long before = s.lastSequence();
            s.delete("default:data/db/t/all_1_1_0/c1.bin"); // a file the cache never holds
            assertEquals(before, s.lastSequence(), "no tombstone for a key that was never there");
            s.delete("default:data/db/t/all_1_1_0/count.txt");
            assertEquals(before + 1, s.lastSequence());
            assertEquals(Optional.empty(), s.peek("default:data/db/t/all_1_1_0/count.txt"));
        }
    }

    @Test
    void aPrefixScanStopsAtThePrefixInsteadOfSteppingOverDeletedKeysAfterIt() throws Exception {
        try (PartMetadataStore s = PartMetadataStore.open(tmp.resolve("cache"), 8 << 20, false)) {
            s.put("d:data/db/t/all_1_1_0/checksums.txt", entry("a", 1));
            s.put("d:data/db/t/all_1_1_0/columns.txt", entry("b", 2));
            for (int i = 0; i < 500; i++) { // a merged-away part's entries, deleted: tombstones after the prefix
                s.put("d:data/db/t/all_2_2_0/f" + i, entry("x", 10 + i));
            }
            assertEquals(500, s.deletePrefix("d:data/db/t/all_2_2_0/"));
            List<String>[] found = new List[1];
            long skipped = s.deletedKeysSkippedBy(() -> found[0] = s.keys("d:data/db/t/all_1_1_0/"));
            assertEquals(List.of("d:data/db/t/all_1_1_0/checksums.txt", "d:data/db/t/all_1_1_0/columns.txt"), found[0]);
            assertEquals(0, skipped, "deleted keys outside the prefix were stepped over");
            assertEquals(0, s.deletedKeysSkippedBy(() -> s.keys("d:data/db/t/all_1_1_0/columns.txt/")));
        }
    }

    @Test
    void successorIsTheFirstKeyPastAPrefix() {
        assertArrayEquals(new byte[] {'a', 'c'}, PartMetadataStore.successor(new byte[] {'a', 'b'}));
        assertArrayEquals(new byte[] {'a', (byte) 0x80}, PartMetadataStore.successor(new byte[] {'a', 0x7F}));
        assertArrayEquals(new byte[] {'b'}, PartMetadataStore.successor(new byte[] {'a', (byte) 0xFF, (byte) 0xFF}));
        assertEquals(null, PartMetadataStore.successor(new byte[] {(byte) 0xFF}));
        assertEquals(null, PartMetadataStore.successor(new byte[0]));
    }

    @Test
    void survivesReopen() throws Exception {
        try (PartMetadataStore s = PartMetadataStore.open(tmp.resolve("cache"), 8 << 20, false)) {
            s.put("default:a", entry("x", 1));
        }
        try (PartMetadataStore s = PartMetadataStore.open(tmp.resolve("cache"), 8 << 20, false)) {
            assertEquals(Optional.of(entry("x", 1)), s.get("default:a"));
        }
    }

    @Test
    void renamePrefixMovesAPartAtomicallyAndReplacesTheTarget() throws Exception {
        try (PartMetadataStore s = PartMetadataStore.open(tmp.resolve("cache"), 8 << 20, false)) {
            String tmpPart = "default:data/db/t/tmp_insert_all_1_1_0/";
            s.put(tmpPart + "checksums.txt", entry("c", 1));
            s.put(tmpPart + "columns.txt", entry("k", 2));
            s.put("default:data/db/t/all_1_1_0/count.txt", entry("stale", 3));
            s.put("default:data/db/t/tmp_insert_all_1_1_0x/count.txt", entry("other", 4));
            assertEquals(2, s.renamePrefix(tmpPart, "default:data/db/t/all_1_1_0/"));
            assertEquals(List.of("default:data/db/t/all_1_1_0/checksums.txt", "default:data/db/t/all_1_1_0/columns.txt"),
                    s.keys("default:data/db/t/all_1_1_0/"));
            assertEquals(List.of(), s.keys(tmpPart));
            assertEquals(1, s.keys("default:data/db/t/tmp_insert_all_1_1_0x/").size(), "a sibling with a longer name is untouched");
            assertEquals(2, s.deletePrefix("default:data/db/t/all_1_1_0/"));
        }
    }

    @Test
    void aValueWithABadChecksumIsAMissAndIsRemoved() throws Exception {
        try (PartMetadataStore s = PartMetadataStore.open(tmp.resolve("cache"), 8 << 20, false)) {
            byte[] good = PartMetadataStore.encode(entry("primary index bytes", 9));
            good[good.length - 1] ^= 0x55; // flip bits in the cached bytes
            s.putRaw("default:p", good);
            assertEquals(Optional.empty(), s.get("default:p"));
            assertEquals(1, s.stats().corrupt());
            assertEquals(List.of(), s.keys("default:p"), "the corrupt value was deleted so it is written again");
        }
    }

    /** Really corrupts the directory: garbage over the MANIFEST and CURRENT files. */
    private static Path corruptedStore(Path dir) throws Exception {
        try (PartMetadataStore s = PartMetadataStore.open(dir, 8 << 20, false)) {
            s.put("default:x", entry("x", 1));
        }
        try (Stream<Path> files = Files.list(dir)) {
            for (Path f : files.toList()) {
                String n = f.getFileName().toString();
                if (n.startsWith("MANIFEST") || n.equals("CURRENT")) {
                    Files.write(f, "this is not a rocksdb file\n".repeat(10).getBytes(StandardCharsets.UTF_8));
                }
            }
        }
        return dir;
    }

    @Test
    void corruptedDirectoryIsRefusedWithoutContinueIfCorrupted() throws Exception {
        Path dir = corruptedStore(tmp.resolve("cache"));
        CacheCorruptedException e = assertThrows(CacheCorruptedException.class, () -> PartMetadataStore.open(dir, 8 << 20, false));
        assertTrue(e.getMessage().contains("no table data is lost"), e.getMessage());
        assertTrue(e.getMessage().contains("--continue-if-corrupted"), e.getMessage());
        assertTrue(Files.exists(dir.resolve("CURRENT")), "the directory is left as it was");
    }

    @Test
    void corruptedDirectoryIsMovedAsideWithContinueIfCorrupted() throws Exception {
        Path dir = corruptedStore(tmp.resolve("cache"));
        try (PartMetadataStore s = PartMetadataStore.open(dir, 8 << 20, true)) {
            assertEquals(0, s.stats().entries(), "starts empty");
            s.put("default:y", entry("y", 2));
            assertArrayEquals("y".getBytes(StandardCharsets.UTF_8), s.get("default:y").orElseThrow().bytes());
        }
        try (Stream<Path> siblings = Files.list(tmp)) {
            List<String> names = siblings.map(p -> p.getFileName().toString()).toList();
            assertTrue(names.stream().anyMatch(n -> n.matches("cache\\.corrupted\\.\\d+")), names.toString());
        }
        assertFalse(Files.exists(tmp.resolve("cache/garbage")));
    }
}
