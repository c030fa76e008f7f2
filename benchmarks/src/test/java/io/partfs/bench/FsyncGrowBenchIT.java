package io.partfs.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.TempDirs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * scripts/fsync-grow-bench end to end at a small size, on a real write-back mount with default
 * options: a new file fsynced every 1 MiB as it grows to 16 MiB reads back the same (the script
 * fails otherwise), and what is PUT stays near its size, each commit taking what changed since
 * the last (whole-file commits would PUT 8.5 times it).
 */
class FsyncGrowBenchIT {
    @Test
    void aFileFsyncedAsItGrowsIsUploadedAboutOnce() throws Exception {
        Path out = Files.createTempDirectory("partfs-fsyncgrow-out-");
        Process p = null;
        try {
            int port = io.partfs.engine.testing.RedisServer.freePort(); // the mount's HTTP endpoint, which the script reads the PUT bytes from
            p = new ProcessBuilder(Procs.ROOT.resolve("scripts/fsync-grow-bench").toString(), "--size", "16", "--every", "1",
                    "--port", String.valueOf(port)).redirectErrorStream(true).redirectOutput(out.resolve("log.txt").toFile()).start();
            p.getOutputStream().close();
            assertTrue(p.waitFor(5, TimeUnit.MINUTES), "a file of 16 MiB finishes");
            String log = Files.readString(out.resolve("log.txt"));
            assertEquals(0, p.exitValue(), log);
            assertTrue(log.contains("16 MiB in 16 writes, each followed by an fsync"), log);
            Matcher m = Pattern.compile("PUT (\\d+) MiB for a file of 16 MiB \\(([0-9.]+)x\\); the file reads back the same").matcher(log);
            assertTrue(m.find(), log);
            assertTrue(Double.parseDouble(m.group(2)) < 1.5, "each fsync committed what changed, not the whole file: " + log);
        } finally {
            if (p != null && p.isAlive()) {
                p.destroy(); // the script unmounts and removes its directory on TERM
                p.waitFor(60, TimeUnit.SECONDS);
            }
            TempDirs.deleteRecursively(out);
        }
    }
}
