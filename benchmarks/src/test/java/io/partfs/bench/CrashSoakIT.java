package io.partfs.bench;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * scripts/crash-soak end to end at a tiny profile: one round of ClickHouse load on PartFS, the
 * sidecar and ClickHouse killed, both restarted, every check held (the soak exits 1 otherwise)
 * and fsck clean. Longer runs are in RESULTS.md.
 */
class CrashSoakIT {
    @Test
    void oneKillAndRestartLosesNothingAcknowledged() throws Exception {
        try (BenchScript run = BenchScript.run("crash-soak", Duration.ofMinutes(10),
                "--rounds", "1", "--seconds", "12", "--rows", "1000")) {
            String report = run.report();
            assertTrue(report.lines().anyMatch(l -> l.matches("\\| 1 \\| [1-9][0-9]* \\| .*\\| all held \\|")),
                    "INSERTs were acknowledged before the kill, and every check held:\n" + report);
            assertTrue(report.contains("`fsck: OK"), report);
        }
    }
}
