package io.partfs.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.TempDirs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * scripts/backup-bench end to end on small volumes: each engine's backups restore every file
 * (the benchmark fails otherwise) and the report has a row per engine. The times are not
 * checked; RESULTS.md has them.
 */
class BackupBenchIT {
    @Test
    void smallVolumesAreBackedUpAndRestoredOnBothEngines() throws Exception {
        Path out = Files.createTempDirectory("partfs-backup-bench-out-");
        try {
            Path md = out.resolve("backup.md");
            Process p = new ProcessBuilder(Procs.ROOT.resolve("scripts/backup-bench").toString(), "--files", "3000",
                    "--redis-files", "500", "--runs", "2", "--out", md.toString())
                    .redirectErrorStream(true).redirectOutput(out.resolve("log.txt").toFile()).start();
            p.getOutputStream().close();
            assertTrue(p.waitFor(5, TimeUnit.MINUTES), "the small volumes finish");
            String log = Files.readString(out.resolve("log.txt"));
            assertEquals(0, p.exitValue(), log);
            String report = Files.readString(md);
            assertTrue(report.lines().anyMatch(l -> l.matches("\\| RocksDB \\| 3000 \\| [0-9.-]+ \\| [0-9.-]+ \\| [0-9.]+ MiB \\| [0-9.]+ \\|")), report);
            assertTrue(report.lines().anyMatch(l -> l.matches("\\| Redis \\| 500 \\| [0-9.-]+ \\| [0-9.-]+ \\| [0-9.]+ MiB \\| [0-9.]+ \\|")), report);
        } finally {
            TempDirs.deleteRecursively(out);
        }
    }
}
