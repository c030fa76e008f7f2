package io.partfs.bench;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * scripts/scan-bench end to end on a small table: every mode's scan returned what ClickHouse
 * computed on local disk (the benchmark fails otherwise) and the report has a row per mode,
 * with the warmup's and the scrub's times for partfs-warmup; the scrub found every block sound.
 * The times are not checked; RESULTS.md has them.
 */
class ScanBenchIT {
    @Test
    void smallTableIsScannedThroughEveryModeWithTheSameAnswer() throws Exception {
        try (BenchScript run = BenchScript.run("scan-bench", Duration.ofMinutes(10),
                "--rows", "100000", "--runs", "1", "--latency", "5", "--modes", "local,partfs,partfs-s3,partfs-cold,partfs-warmup")) {
            String log = run.log();
            String report = run.report();
            for (String mode : new String[] {"local", "partfs", "partfs-s3", "partfs-cold", "partfs-warmup"}) {
                assertTrue(report.lines().anyMatch(l -> l.matches("\\| " + mode + " \\| [0-9.]+ s \\|.*")), mode + " in\n" + report);
            }
            assertTrue(report.lines().anyMatch(l -> l.matches("\\| partfs-warmup \\|.*\\| [0-9.]+ s \\([0-9]+ MiB/s\\) \\| [0-9.]+ s \\([0-9]+ MiB/s\\) \\|")),
                    "the warmup and the scrub are timed: " + report);
            assertTrue(log.contains("0 damaged, 0 without checksums"), "the scrub checked every block: " + log);
            assertTrue(log.contains("1 files") || log.contains("files ("), "partfs warmup's summary is in the log: " + log);
            assertTrue(report.contains("100000 rows"), report);
        }
    }
}
