package io.partfs.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.TempDirs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * scripts/fsck-bench end to end on a small volume: every listing found one object per file and
 * the check found every file with nothing missing (the benchmark fails otherwise), and the
 * report has a row per latency. The times are not checked; RESULTS.md has them.
 */
class FsckBenchIT {
    @Test
    void smallVolumeIsListedEveryWayAndChecked() throws Exception {
        Path out = Files.createTempDirectory("partfs-fsck-bench-out-");
        try {
            Path md = out.resolve("fsck.md");
            Process p = new ProcessBuilder(Procs.ROOT.resolve("scripts/fsck-bench").toString(), "--files", "2500", "--latency", "0,5",
                    "--delete-objects", "300", "--delete-latency", "5", "--out", md.toString())
                    .redirectErrorStream(true).redirectOutput(out.resolve("log.txt").toFile()).start();
            p.getOutputStream().close();
            assertTrue(p.waitFor(5, TimeUnit.MINUTES), "the small volume finishes");
            String log = Files.readString(out.resolve("log.txt"));
            assertEquals(0, p.exitValue(), log);
            String report = Files.readString(md);
            assertTrue(report.contains("2500 64-byte files (2 directories)"), report);
            for (String latency : new String[] {"0", "5"}) {
                assertTrue(report.lines().anyMatch(l -> l.matches("\\| " + latency + " ms \\|( [0-9.]+ \\|){5} [0-9]+ \\|")),
                        latency + " ms in\n" + report);
            }
            assertTrue(report.matches("(?s).*Deleting 300 objects at 5 ms .*: one request each \\(before\\) [0-9.]+ s, a thousand a request [0-9.]+ s.*"),
                    report);
        } finally {
            TempDirs.deleteRecursively(out);
        }
    }
}
