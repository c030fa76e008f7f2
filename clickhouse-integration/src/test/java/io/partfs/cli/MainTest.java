package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;

class MainTest {
    @Test
    void runningOutOfMemoryIsOneLineThatSaysWhatToDo() {
        StringWriter err = new StringWriter();
        int code = Main.outOfMemoryIsOneLine(() -> {
            throw new OutOfMemoryError("Java heap space");
        }, new PrintWriter(err));
        assertEquals(1, code);
        String said = err.toString();
        assertEquals(1, said.lines().count(), said);
        assertTrue(said.startsWith("partfs: ran out of memory ("), said);
        assertTrue(said.contains("Java heap space") && said.contains("PARTFS_JAVA_EXTRA_OPTS=-Xmx"), said);
    }

    @Test
    void aCommandsOwnExitCodeIsKept() {
        assertEquals(3, Main.outOfMemoryIsOneLine(() -> 3, new PrintWriter(new StringWriter())));
    }

    @Test
    void aFileWhereADirectoryIsNeededIsSaidSo(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) throws Exception {
        java.nio.file.Path file = java.nio.file.Files.writeString(dir.resolve("afile"), "x");
        Exception e = org.junit.jupiter.api.Assertions.assertThrows(java.nio.file.FileAlreadyExistsException.class,
                () -> java.nio.file.Files.createDirectories(file)); // as a --cache-dir that is a file meets it
        assertEquals("cannot use " + file + ": it is a file where a directory is needed: give a directory path", Main.oneLine(e));
    }
}
