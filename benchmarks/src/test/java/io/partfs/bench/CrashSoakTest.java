package io.partfs.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What crash-soak removes before ClickHouse starts again after a kill. */
class CrashSoakTest {
    @Test
    void onlyTheUnfinishedPartDirectoriesOfTablesGo(@TempDir Path data) throws Exception {
        Path table = Files.createDirectories(data.resolve("soak/mut"));
        Files.createDirectories(table.resolve("tmp_mut_20200201_39_39_0_44/n.null.bin.d"));
        Files.writeString(table.resolve("tmp_mut_20200201_39_39_0_44/n.mrk"), "marks");
        Files.createDirectories(table.resolve("tmp_insert_20200201_45_45_0"));
        Files.createDirectories(table.resolve("tmp_merge_20200201_1_45_2"));
        Files.writeString(Files.createDirectories(table.resolve("20200201_39_39_0")).resolve("n.mrk"), "marks");
        Files.createDirectories(table.resolve("detached/tmp_kept_by_the_user"));
        Files.writeString(table.resolve("tmp_mutation_46.txt"), "a mutation being written is a file, left to ClickHouse");
        Path elsewhere = Files.createDirectories(data.getParent().resolve(data.getFileName() + "-outside"));
        Files.createSymbolicLink(table.resolve("tmp_link"), elsewhere);
        Files.writeString(Files.createDirectories(data.resolve("soak/ins")).resolve("format_version.txt"), "1");

        assertEquals(3, CrashSoak.removeTemporaryParts(data));

        assertFalse(Files.exists(table.resolve("tmp_mut_20200201_39_39_0_44")));
        assertFalse(Files.exists(table.resolve("tmp_insert_20200201_45_45_0")));
        assertFalse(Files.exists(table.resolve("tmp_merge_20200201_1_45_2")));
        assertTrue(Files.exists(table.resolve("20200201_39_39_0/n.mrk")), "finished parts stay");
        assertTrue(Files.isDirectory(table.resolve("detached/tmp_kept_by_the_user")), "detached/ is the user's");
        assertTrue(Files.exists(table.resolve("tmp_mutation_46.txt")));
        assertTrue(Files.isSymbolicLink(table.resolve("tmp_link")) && Files.isDirectory(elsewhere), "a link is not followed");
        assertEquals(0, CrashSoak.removeTemporaryParts(data.resolve("missing")), "no data directory yet: nothing to do");
        Files.delete(table.resolve("tmp_link"));
        Files.delete(elsewhere);
    }

    @Test
    void detachedCopiesGoOnlyWhereThePartIsStillInItsTable(@TempDir Path data) throws Exception {
        Path table = Files.createDirectories(data.resolve("soak/mut"));
        // a DETACH cut short: the part is still in the table, its copy lacks count.txt
        Files.writeString(Files.createDirectories(table.resolve("20200203_372_397_9_389")).resolve("count.txt"), "6808");
        Files.writeString(Files.createDirectories(table.resolve("detached/20200203_372_397_9_389")).resolve("n.mrk"), "marks");
        // a DETACH done: the part left the table, its copy is the only one
        Files.writeString(Files.createDirectories(table.resolve("detached/20200203_1_371_9_300")).resolve("count.txt"), "100");
        Files.createDirectories(table.resolve("detached/broken_20200203_5_5_0"));
        Files.createDirectories(data.resolve("soak/ins"));

        assertEquals(1, CrashSoak.removeDetachedCopiesOfLoadedParts(data));

        assertFalse(Files.exists(table.resolve("detached/20200203_372_397_9_389")));
        assertTrue(Files.exists(table.resolve("20200203_372_397_9_389/count.txt")), "the part itself stays");
        assertTrue(Files.exists(table.resolve("detached/20200203_1_371_9_300/count.txt")), "a detached part without another copy stays");
        assertTrue(Files.isDirectory(table.resolve("detached/broken_20200203_5_5_0")));
        assertEquals(0, CrashSoak.removeDetachedCopiesOfLoadedParts(data.resolve("missing")));
    }
}
