package io.partfs.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
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
        try (BenchScript run = BenchScript.run("insert-bench", Duration.ofMinutes(10),
                "--inserts", "6", "--rows", "500", "--columns", "3", "--latency", "5", "--modes", "local,partfs,partfs-writeback")) {
            String log = run.log();
            String report = run.report();
            for (String mode : new String[] {"local", "partfs", "partfs-writeback"}) {
                assertTrue(report.lines().anyMatch(l -> l.matches("\\| " + mode + " \\| [0-9.]+ s \\|.*\\|  \\|")), mode + " without error in\n" + report);
            }
            assertEquals(3, log.lines().filter(l -> l.contains("read back after a remount: right")).count(), log);
            assertTrue(report.contains("6 INSERTs of 500 rows"), report);
        }
    }
}
