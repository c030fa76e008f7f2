package io.partfs.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Optional;
import org.junit.jupiter.api.Test;

class MergeTreePathsTest {
    @Test
    void partMetadataFilesOfOrdinaryAndAtomicTables() {
        for (String p : new String[] {
            "data/db/table/20200101_1_1_0/checksums.txt",
            "data/db/table/20200101_1_1_0/columns.txt",
            "data/db/table/all_1_1_0/count.txt",
            "data/db/table/all_1_5_2_7/primary.idx",
            "data/db/table/all_1_1_0/primary.cidx",
            "data/db/table/202001_1_1_0/partition.dat",
            "data/db/table/202001_1_1_0/minmax_day.idx",
            "data/db/table/202001_1_1_0/default_compression_codec.txt",
            "data/db/table/202001_1_1_0/uuid.txt",
            "data/db/table/202001_1_1_0/ttl.txt",
            "data/db/table/202001_1_1_0/serialization.json",
            "data/db/table/202001_1_1_0/metadata_version.txt",
            "data/db/table/202001_1_1_0/agg.proj/checksums.txt",
            "data/db/table/tmp_insert_202001_1_1_0/checksums.txt",
            "data/db/table/detached/202001_1_1_0/columns.txt",
            "store/b47/b47ee9c8-afa1-41ac-adfb-2e0dc42de819/0_1_1_0/columns.txt",
            "/data/db/table/-1_1_1_0/count.txt"}) {
            assertTrue(MergeTreePaths.isPartMetadataFile(p), p);
        }
    }

    @Test
    void columnDataMarksAndOtherFilesAreNot() {
        for (String p : new String[] {
            "data/db/table/20200101_1_1_0/value.bin",
            "data/db/table/20200101_1_1_0/value.mrk2",
            "data/db/table/20200101_1_1_0/data.bin",
            "data/db/table/format_version.txt",
            "data/db/table/mutation_3.txt",
            "data/db/table/20200101_1_1_0/agg.proj/x.bin",
            "data/db/table/20200101_1_1_0/sub/dir/checksums.txt",
            "metadata/db/table.sql",
            "store/b47/b47ee9c8-afa1-41ac-adfb-2e0dc42de819/format_version.txt",
            "store/zzz/b47ee9c8-afa1-41ac-adfb-2e0dc42de819/0_1_1_0/columns.txt",
            "shadow/1/data/db/table/all_1_1_0/checksums.txt",
            "data/db/table/checksums.txt"}) {
            assertFalse(MergeTreePaths.isPartMetadataFile(p), p);
        }
    }

    @Test
    void tableMetadataFilesAreFormatVersionAndDdl() {
        for (String p : new String[] {
            "data/db/table/format_version.txt",
            "store/b47/b47ee9c8-afa1-41ac-adfb-2e0dc42de819/format_version.txt",
            "metadata/db/table.sql",
            "/metadata/db/my%2Dtable.sql"}) {
            assertTrue(MergeTreePaths.isTableMetadataFile(p), p);
            assertTrue(MergeTreePaths.tableOfMetadataFile(p).isPresent(), p);
        }
        for (String p : new String[] {
            "data/db/table/all_1_1_0/format_version.txt",
            "data/db/format_version.txt",
            "metadata/db.sql",
            "metadata/db/table.sql.tmp",
            "metadata_dropped/db.table.sql",
            "data/db/table/20200101_1_1_0/checksums.txt"}) {
            assertFalse(MergeTreePaths.isTableMetadataFile(p), p);
        }
        assertEquals(Optional.of(MergeTreePaths.TableRef.ordinary("db", "my-table")), MergeTreePaths.ddlTable("metadata/db/my%2Dtable.sql"));
        assertEquals(Optional.of(MergeTreePaths.TableRef.ordinary("db", "t")), MergeTreePaths.tableOfMetadataFile("data/db/t/all_1_1_0/count.txt"));
        assertEquals(Optional.empty(), MergeTreePaths.tableOfMetadataFile("data/db/t/all_1_1_0/k.bin"));
    }

    @Test
    void escapedNamesAreUnescaped() {
        MergeTreePaths.TablePath t = MergeTreePaths.parse("data/my%2Ddb/a%20b%25/all_1_1_0/count.txt").orElseThrow();
        assertEquals(MergeTreePaths.TableRef.ordinary("my-db", "a b%"), t.table());
        assertEquals("data/my%2Ddb/a%20b%25", t.tableDir(), "directories keep their names on disk");
        assertEquals("db.50%off", MergeTreePaths.parse("data/db/50%off/format_version.txt").orElseThrow().table().toString(),
                "a name ClickHouse did not escape stays as it is");
    }

    @Test
    void tablesAndPartsAreFound() {
        MergeTreePaths.TablePath t = MergeTreePaths.parse("data/db/events/202001_1_1_0/count.txt").orElseThrow();
        assertEquals(MergeTreePaths.TableRef.ordinary("db", "events"), t.table());
        assertEquals("data/db/events", t.tableDir());
        assertEquals(Optional.of("202001_1_1_0"), t.partDir());
        assertEquals(Optional.of("count.txt"), t.fileInPart());
        MergeTreePaths.TablePath a = MergeTreePaths.parse("store/b47/b47ee9c8-afa1-41ac-adfb-2e0dc42de819/0_1_1_0/columns.txt").orElseThrow();
        assertTrue(a.table().isAtomic());
        assertEquals("b47ee9c8-afa1-41ac-adfb-2e0dc42de819", a.table().uuid());
        MergeTreePaths.TablePath d = MergeTreePaths.parse("data/db/events/detached/202001_1_1_0/count.txt").orElseThrow();
        assertEquals(Optional.of("detached/202001_1_1_0"), d.partDir());
        assertEquals(Optional.empty(), MergeTreePaths.parse("metadata/db/events.sql"));
    }

    @Test
    void keysAreDiskColonRelativePath() {
        assertEquals("default:data/db/t/all_1_1_0/checksums.txt", MergeTreePaths.key("default", "/data/db/t/all_1_1_0/checksums.txt"));
        assertEquals("s3disk:store/b47/x/0_1_1_0/columns.txt", MergeTreePaths.key("s3disk", "store/b47/x/0_1_1_0/columns.txt"));
    }
}
