package io.partfs.cache;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.Attr;
import io.partfs.engine.FileType;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The cache's reactions to file events, with attributes made up for each case. */
class PartMetadataCacheTest {
    @TempDir
    Path tmp;
    PartMetadataStore store;
    PartMetadataCache cache;
    final Map<String, byte[]> ddl = new java.util.HashMap<>();
    /** Reads {@link #ddl} as files of inode 99 at data version 1. */
    final PartMetadataCache.FileReader reader = p -> new PartMetadataCache.FileContent(attr(99, ddl.get(p).length, 1), ddl.get(p));

    @BeforeEach
    void open() throws Exception {
        store = PartMetadataStore.open(tmp.resolve("c"), 8 << 20, false);
        cache = new PartMetadataCache(store, "default", TableSelector.parse("db.*"), reader);
    }

    @AfterEach
    void close() {
        store.close();
    }

    private static Attr attr(long ino, int size, long version) {
        return new Attr(ino, FileType.FILE, 0644, 0, 0, 1, size, 0, 0, 0, 0, 0, version);
    }

    private static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void selectsPartMetadataOfSelectedTablesOnly() {
        assertTrue(cache.caches("data/db/t/all_1_1_0/checksums.txt"));
        assertFalse(cache.caches("data/db/t/all_1_1_0/x.bin"));
        assertFalse(cache.caches("data/other/t/all_1_1_0/checksums.txt"));
    }

    @Test
    void selectsTheFilesClickHouseReadsPerTableToo() {
        assertTrue(cache.caches("data/db/t/format_version.txt"));
        assertTrue(cache.caches("metadata/db/t.sql"));
        assertFalse(cache.caches("data/db/t/mutation_1.txt"));
        assertFalse(cache.caches("metadata/db/t.sql.tmp"));
        assertFalse(cache.caches("metadata/db.sql"), "a database's DDL belongs to no table");
        assertFalse(cache.caches("data/other/t/format_version.txt"));
        assertFalse(cache.caches("metadata/other/t.sql"));
    }

    @Test
    void escapedFileNamesAreTheTablesTheyName() {
        PartMetadataCache named = new PartMetadataCache(store, "default", TableSelector.parse("my-db.events-2"), reader);
        assertTrue(named.caches("data/my%2Ddb/events%2D2/all_1_1_0/checksums.txt"));
        assertTrue(named.caches("data/my%2Ddb/events%2D2/format_version.txt"));
        assertTrue(named.caches("metadata/my%2Ddb/events%2D2.sql"));
        assertFalse(named.caches("data/my%2Ddb/events/all_1_1_0/checksums.txt"));
    }

    /** What {@code partfs info} shows: each standing of a file, and the key it is under. */
    @Test
    void standingOfAFileInTheCache() throws Exception {
        String p = "data/db/t/all_1_1_0/count.txt";
        assertEquals(Map.entry(PartMetadataCache.Standing.ABSENT, "default:" + p), cache.standing(p, attr(10, 4, 1)));
        cache.store(p, attr(10, 4, 1), b("8192"));
        assertEquals(PartMetadataCache.Standing.CURRENT, cache.standing(p, attr(10, 4, 1)).getKey());
        assertEquals(PartMetadataCache.Standing.STALE, cache.standing(p, attr(10, 4, 2)).getKey(), "written since");
        assertEquals(PartMetadataCache.Standing.STALE, cache.standing(p, attr(11, 4, 1)).getKey(), "another inode");
        assertEquals(PartMetadataCache.Standing.NOT_METADATA, cache.standing("data/db/t/all_1_1_0/k.bin", attr(12, 4, 1)).getKey());
        assertEquals(PartMetadataCache.Standing.TABLE_NOT_CACHED,
                cache.standing("data/other/t/all_1_1_0/count.txt", attr(13, 4, 1)).getKey());
    }

    @Test
    void servesOnlyACopyMatchingTheCurrentAttributes() {
        String p = "data/db/t/all_1_1_0/count.txt";
        cache.store(p, attr(10, 4, 1), b("8192"));
        assertArrayEquals(b("8192"), cache.cached(p, attr(10, 4, 1)));
        assertNull(cache.cached(p, attr(10, 4, 2)), "content changed (data version moved)");
        assertNull(cache.cached(p, attr(11, 4, 1)), "another file now has this name");
        assertNull(cache.cached(p, attr(10, 5, 1)), "size changed");
        assertEquals(List.of("default:data/db/t/all_1_1_0/count.txt"), store.keys("default:"));
    }

    @Test
    void partDirectoryRenamesMoveEntries() {
        cache.store("data/db/t/tmp_insert_all_1_1_0/checksums.txt", attr(1, 2, 1), b("ck"));
        cache.store("data/db/t/tmp_insert_all_1_1_0/columns.txt", attr(2, 2, 1), b("co"));
        cache.renamed("data/db/t/tmp_insert_all_1_1_0", "data/db/t/all_1_1_0");
        assertArrayEquals(b("ck"), cache.cached("data/db/t/all_1_1_0/checksums.txt", attr(1, 2, 1)));
        assertEquals(2, store.keys("default:data/db/t/all_1_1_0/").size());
        assertEquals(0, store.keys("default:data/db/t/tmp_insert").size());
        cache.renamed("data/db/t/all_1_1_0", "data/db/t/detached/all_1_1_0");
        assertEquals(2, store.keys("default:data/db/t/detached/all_1_1_0/").size());
        cache.removed("data/db/t/detached/all_1_1_0");
        assertEquals(List.of(), store.keys("default:"));
    }

    @Test
    void fileRenameOverwriteAndUnlink() {
        cache.store("data/db/t/all_1_1_0/checksums.txt", attr(1, 3, 1), b("old"));
        cache.store("data/db/t/all_1_1_0/checksums.txt.tmp", attr(2, 3, 1), b("new"));
        assertEquals(1, store.keys("default:").size(), "the .tmp file is not part metadata");
        cache.renamed("data/db/t/all_1_1_0/checksums.txt.tmp", "data/db/t/all_1_1_0/checksums.txt");
        assertNull(cache.cached("data/db/t/all_1_1_0/checksums.txt", attr(1, 3, 1)), "the rename replaced the old file");
        cache.store("data/db/t/all_1_1_0/checksums.txt", attr(2, 3, 1), b("new"));
        cache.removed("data/db/t/all_1_1_0/checksums.txt");
        assertEquals(List.of(), store.keys("default:"));
    }

    @Test
    void hardLinkCopiesACurrentEntry() {
        cache.store("data/db/t/all_1_1_0/primary.idx", attr(5, 2, 3), b("px"));
        cache.linked("data/db/t/all_1_1_0/primary.idx", "data/db/t/all_1_1_0_2/primary.idx", attr(5, 2, 3));
        assertArrayEquals(b("px"), cache.cached("data/db/t/all_1_1_0_2/primary.idx", attr(5, 2, 3)));
    }

    @Test
    void ddlRenamedIntoPlaceSelectsTheTable() {
        PartMetadataCache only = new PartMetadataCache(store, "default", TableSelector.parse(""), reader);
        assertFalse(only.caches("data/x/y/all_1_1_0/count.txt"));
        byte[] text = b("ATTACH TABLE y (d Date) ENGINE = MergeTree ORDER BY d SETTINGS use_metadata_cache = true");
        ddl.put("metadata/x/y.sql", text);
        only.renamed("metadata/x/y.sql.tmp", "metadata/x/y.sql");
        assertTrue(only.caches("data/x/y/all_1_1_0/count.txt"));
        assertArrayEquals(text, only.cached("metadata/x/y.sql", attr(99, text.length, 1)), "kept for the next start");
        only.renamed("metadata/x/y.sql", "metadata_dropped/x.y.sql");
        assertFalse(only.caches("data/x/y/all_1_1_0/count.txt"));
    }
}
