package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** How {@code partfs info} lays out what a mount answers ({@code GET /info}): counts, rows, a bad block's exit. */
class InfoCommandTest {
    /** A file whose first slice an overwrite split (its first block is in both outer runs), then a hole, then a slice of two blocks. */
    private static final String FILE = """
            inode ino=6 type=file mode=0640 nlink=2 uid=101 gid=101 size=3145738 mtime=2026-12-05T16:18:13Z version=4
            cache standing=CURRENT key=default:data/db/t/all_1_1_0/checksums.txt
            extent offset=0 length=100 slice=1 slice_offset=0
            block offset=0 length=100 where=BLOCK_CACHE size=300 stored=-1 key=v/chunks/0/0/1_0_300
            extent offset=100 length=10 slice=4 slice_offset=0
            block offset=100 length=10 where=STAGED size=10 stored=-1 key=v/chunks/0/0/4_0_10
            extent offset=110 length=190 slice=1 slice_offset=110
            block offset=110 length=190 where=BLOCK_CACHE size=300 stored=-1 key=v/chunks/0/0/1_0_300
            extent offset=300 length=1048276 slice=0 slice_offset=0
            extent offset=1048576 length=2097162 slice=7 slice_offset=0
            block offset=1048576 length=1048576 where=MISSING size=1048576 stored=-1 key=v/chunks/0/0/7_0_1048576
            block offset=2097152 length=1048586 where=WRONG_SIZE size=1048586 stored=3 key=v/chunks/0/0/7_1_1048586
            a-line-of-a-newer-mount x=1
            """;

    private static String print(String answer, int[] bad) {
        StringWriter s = new StringWriter();
        try (PrintWriter out = new PrintWriter(s)) {
            bad[0] = InfoCommand.print(out, Path.of("/mnt/data/db/t/all_1_1_0/checksums.txt"), answer);
        }
        return s.toString();
    }

    @Test
    void aFilesExtentsBlocksAndWhereEachIs() {
        int[] bad = new int[1];
        String out = print(FILE, bad);
        assertEquals(2, bad[0], "a missing block and one of the wrong size:\n" + out);
        assertTrue(out.contains("inode 6, file, mode 0640, 2 links, uid 101 gid 101"), out);
        assertTrue(out.contains("size 3.0 MiB (3145738 bytes), modified 2026-12-05T16:18:13Z, data version 4"), out);
        assertTrue(out.contains("part-metadata cache: cached, current (key default:data/db/t/all_1_1_0/checksums.txt)"), out);
        assertTrue(out.contains("data: 4 extents and 1 hole, 4 blocks (2.0 MiB): 1 in the block cache, 1 staged (not uploaded yet),"
                + " 1 MISSING from the object store, 1 WRONG SIZE in the object store"), "the shared block counts once:\n" + out);
        List<String> rows = out.lines().filter(l -> l.startsWith("    ")).map(String::trim).toList();
        assertEquals(7, rows.size(), "a header, five blocks (one twice) and the hole:\n" + out);
        assertTrue(rows.get(3).matches("110 +190 +1 +in the block cache +v/chunks/0/0/1_0_300"), rows.get(3));
        assertTrue(rows.get(4).matches("300 +1048276 +- +hole: reads as zeros"), rows.get(4));
        assertTrue(rows.get(6).matches("2097152 +1048586 +7 +WRONG SIZE in the object store \\(3 bytes\\) +v/chunks/0/0/7_1_1048586"),
                rows.get(6));
    }

    @Test
    void aDirectoryASymlinkAndAnEmptyFile() {
        int[] bad = new int[1];
        String dir = print("""
                inode ino=2 type=directory mode=0755 nlink=3 uid=0 gid=0 size=4096 mtime=2026-12-05T16:18:13Z version=0
                tree directories=1400 files=154011 bytes=1288490188 symlinks=1 others=0
                """, bad);
        assertTrue(dir.contains("inode 2, directory, mode 0755, 3 links"), dir);
        assertTrue(dir.contains("under it: 1,400 directories, 154,011 files (1.2 GiB), 1 symlink\n"), dir);
        String link = print("""
                inode ino=8 type=symlink mode=0777 nlink=1 uid=0 gid=0 size=9 mtime=2026-12-05T16:18:13Z version=0
                target data/db/a b
                """, bad);
        assertTrue(link.contains("  -> data/db/a b\n"), link);
        String empty = print("""
                inode ino=9 type=file mode=0644 nlink=1 uid=0 gid=0 size=0 mtime=2026-12-05T16:18:13Z version=1
                cache standing=NOT_METADATA key=default:x
                """, bad);
        assertTrue(empty.contains("part-metadata cache: not a part-metadata file (column data and marks are not cached)\n"), empty);
        assertTrue(empty.contains("data: none"), empty);
        assertEquals(0, bad[0]);
    }
}
