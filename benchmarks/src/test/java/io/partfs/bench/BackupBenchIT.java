package io.partfs.bench;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * scripts/backup-bench end to end on small volumes: each engine's backups restore every file
 * (the benchmark fails otherwise) and the report has a row per engine. The times are not
 * checked; RESULTS.md has them.
 */
class BackupBenchIT {
    @Test
    void smallVolumesAreBackedUpAndRestoredOnBothEngines() throws Exception {
        try (BenchScript run = BenchScript.run("backup-bench", Duration.ofMinutes(5),
                "--files", "3000", "--redis-files", "500", "--runs", "2")) {
            String report = run.report();
            assertTrue(report.lines().anyMatch(l -> l.matches("\\| RocksDB \\| 3000 \\| [0-9.-]+ \\| [0-9.-]+ \\| [0-9.]+ MiB \\| [0-9.]+ \\|")), report);
            assertTrue(report.lines().anyMatch(l -> l.matches("\\| Redis \\| 500 \\| [0-9.-]+ \\| [0-9.-]+ \\| [0-9.]+ MiB \\| [0-9.]+ \\|")), report);
        }
    }
}
