package io.partfs.engine.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.TempDirs;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class LocalFilesTest {
    private Path dir;

    @BeforeEach
    void setUp() throws IOException {
        dir = Files.createTempDirectory("partfs-localfiles-");
    }

    @AfterEach
    void tearDown() throws IOException {
        TempDirs.deleteRecursively(dir);
    }

    /**
     * Direct reads (O_DIRECT, on this ext4) of ranges that start and end off the 4 KiB alignment
     * and span several of the 256 KiB pieces they are read in, and of a file's short last piece,
     * return the file's bytes; a range past the end, or a file that is gone, fails.
     */
    @Test
    void directReadsOfUnalignedRangesReturnTheFilesBytes() throws IOException {
        byte[] data = new byte[700_001];
        new Random(5).nextBytes(data);
        Path f = Files.write(dir.resolve("block"), data);
        for (int[] r : new int[][] {{0, data.length}, {5000, 600_000}, {4096, 262_144}, {699_000, 1001}, {1, 1}}) {
            byte[] out = new byte[r[1]];
            assertTrue(LocalFiles.readDirect(f, r[0], out), "ext4 does direct I/O");
            assertArrayEquals(Arrays.copyOfRange(data, r[0], r[0] + r[1]), out, "bytes " + r[0] + " +" + r[1]);
        }
        assertThrows(IOException.class, () -> LocalFiles.readDirect(f, 699_000, new byte[1002]), "one byte past the end");
        assertThrows(IOException.class, () -> LocalFiles.readDirect(f, 800_000, new byte[10]), "wholly past the end");
        assertThrows(NoSuchFileException.class, () -> LocalFiles.readDirect(dir.resolve("gone"), 0, new byte[10]));
    }
}
