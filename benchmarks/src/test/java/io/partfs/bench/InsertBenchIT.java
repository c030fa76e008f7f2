package io.partfs.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.TempDirs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * scripts/insert-bench end to end at a tiny profile: ClickHouse inserts and merges on local
 * disk and both PartFS modes, every table reads back right after a remount (the benchmark
 * fails otherwise), and the report has a row per mode with no error. The times are not
 * checked; RESULTS.md has them.
 */
class InsertBenchIT {
    @Test
    void insertsAndAMergeReadBackRightOnEveryMode() throws Exception {
        Path out = Files.createTempDirectory("partfs-insert-bench-out-");
        try {
            Path md = out.resolve("insert.md");
            Process p = new ProcessBuilder(Procs.ROOT.resolve("scripts/insert-bench").toString(), "--inserts", "6", "--rows", "500",
                    "--columns", "3", "--latency", "5", "--modes", "local,partfs,partfs-writeback", "--out", md.toString())
                    .redirectErrorStream(true).redirectOutput(out.resolve("log.txt").toFile()).start();
            p.getOutputStream().close();
            assertTrue(p.waitFor(10, TimeUnit.MINUTES), "the tiny profile finishes");
            String log = Files.readString(out.resolve("log.txt"));
            assertEquals(0, p.exitValue(), log);
            String report = Files.readString(md);
            for (String mode : new String[] {"local", "partfs", "partfs-writeback"}) {
                assertTrue(report.lines().anyMatch(l -> l.matches("\\| " + mode + " \\| [0-9.]+ s \\|.*\\|  \\|")), mode + " without error in\n" + report);
            }
            assertEquals(3, log.lines().filter(l -> l.contains("read back after a remount: right")).count(), log);
            assertTrue(report.contains("6 INSERTs of 500 rows"), report);
        } finally {
            TempDirs.deleteRecursively(out);
        }
    }
}
