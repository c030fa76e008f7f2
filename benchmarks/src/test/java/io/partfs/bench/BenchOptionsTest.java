package io.partfs.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.TempDirs;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** What the benchmarks do with bad options, before they start anything. */
class BenchOptionsTest {
    @Test
    void theReportGoesIntoADirectoryAndABadOutFailsBeforeTheRun() throws Exception {
        Path dir = Files.createTempDirectory("partfs-bench-out-");
        try {
            assertEquals(dir.resolve("scan-bench.md"), Stack.reportFile(dir, "scan-bench.md"), "a directory gets the report inside it");
            assertEquals(dir.resolve("a/b/r.md"), Stack.reportFile(dir.resolve("a/b/r.md"), "scan-bench.md"));
            assertTrue(Files.isDirectory(dir.resolve("a/b")), "the report's directory is made up front");
            Files.writeString(dir.resolve("file"), "x");
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> Stack.reportFile(dir.resolve("file/r.md"), "scan-bench.md"));
            assertTrue(e.getMessage().startsWith("--out " + dir.resolve("file/r.md") + ": cannot make its directory"), e.getMessage());
        } finally {
            TempDirs.deleteRecursively(dir);
        }
    }

    @Test
    void aBadOptionIsOneLineAndExitTwo() {
        String err = refused(new ScanBench(), "--runs", "0");
        assertEquals("scan-bench: --runs and --rows must be at least 1", err);
        assertFalse(err.contains("\tat "), "no stack trace");
    }

    @Test
    void aNegativeWarmupIsRefusedBeforeAnythingStarts() {
        assertEquals("fs-bench: --warmup-small-files must be 0 or more", refused(new FsBench(), "--warmup-small-files", "-1"));
    }

    /** What a benchmark run with {@code args} prints to stderr, once it exited with 2 (bad input). */
    private static String refused(Object bench, String... args) {
        StringWriter err = new StringWriter();
        int exit = Procs.commandLine(bench).setErr(new PrintWriter(err, true)).execute(args);
        assertEquals(2, exit, err.toString());
        return err.toString().trim();
    }
}
