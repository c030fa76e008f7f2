package io.partfs.bench;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * scripts/fsck-bench end to end on a small volume: every listing found one object per file and
 * the check found every file with nothing missing (the benchmark fails otherwise), and the
 * report has a row per latency. The times are not checked; RESULTS.md has them.
 */
class FsckBenchIT {
    @Test
    void smallVolumeIsListedEveryWayAndChecked() throws Exception {
        try (BenchScript run = BenchScript.run("fsck-bench", Duration.ofMinutes(5),
                "--files", "2500", "--latency", "0,5", "--delete-objects", "300", "--delete-latency", "5")) {
            String report = run.report();
            assertTrue(report.contains("2500 64-byte files (2 directories)"), report);
            for (String latency : new String[] {"0", "5"}) {
                assertTrue(report.lines().anyMatch(l -> l.matches("\\| " + latency + " ms \\|( [0-9.]+ \\|){5} [0-9]+ \\|")),
                        latency + " ms in\n" + report);
            }
            assertTrue(report.matches("(?s).*Deleting 300 objects at 5 ms .*: one request each \\(before\\) [0-9.]+ s, a thousand a request [0-9.]+ s.*"),
                    report);
        }
    }
}
