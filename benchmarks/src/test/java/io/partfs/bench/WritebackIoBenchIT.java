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
 * scripts/writeback-io-bench end to end at a small size, on a real write-back mount with default
 * options: the new part files are uploaded and cached, read back equal (the script fails
 * otherwise), and the sidecar writes each byte once, into the object directory: the block cache
 * links the closed files' blocks instead of copying them (a copy would double what it wrote).
 */
class WritebackIoBenchIT {
    @Test
    void newFilesAreUploadedAndCachedWithoutASecondLocalCopy() throws Exception {
        Path out = Files.createTempDirectory("partfs-wbio-out-");
        Process p = null;
        try {
            p = new ProcessBuilder(Procs.ROOT.resolve("scripts/writeback-io-bench").toString(), "--files", "2", "--size", "16")
                    .redirectErrorStream(true).redirectOutput(out.resolve("log.txt").toFile()).start();
            p.getOutputStream().close();
            assertTrue(p.waitFor(5, TimeUnit.MINUTES), "two files of 16 MiB finish");
            String log = Files.readString(out.resolve("log.txt"));
            assertEquals(0, p.exitValue(), log);
            assertTrue(log.contains("2 files of 16 MiB copied in") && log.contains("uploaded and cached: 8 blocks"), log);
            Matcher m = Pattern.compile("sidecar wrote (\\d+) MiB to local disk \\(the object directory holds (\\d+) MiB").matcher(log);
            assertTrue(m.find(), log);
            long wrote = Long.parseLong(m.group(1));
            long objects = Long.parseLong(m.group(2));
            assertEquals(32, objects, log);
            assertTrue(wrote <= objects + 2, "the sidecar wrote the data once, not a cache copy besides: " + log);
            assertTrue(log.matches("(?s).*read back with the page cache dropped: [0-9]+ MiB/s.*"), log);
        } finally {
            if (p != null && p.isAlive()) {
                p.destroy(); // the script unmounts and removes its directory on TERM
                p.waitFor(60, TimeUnit.SECONDS);
            }
            TempDirs.deleteRecursively(out);
        }
    }
}
