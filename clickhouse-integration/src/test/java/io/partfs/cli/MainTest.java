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
}
