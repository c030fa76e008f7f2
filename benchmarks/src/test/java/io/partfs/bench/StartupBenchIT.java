package io.partfs.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.TempDirs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * scripts/startup-bench end to end at a tiny profile (2 tables x 3 parts x 2 columns, one run
 * per mode at 5 ms, so through the latency proxy), every mode that can run here: the numbers are
 * not checked (that is what RESULTS.md is for), only that each mode started ClickHouse with all
 * parts loaded and that the reports were written. The layout of a report at several latencies
 * is StartupReportTest's.
 */
class StartupBenchIT {
    @Test
    void tinyProfileRunsEveryModeAndWritesTheReports() throws Exception {
        Path out = Files.createTempDirectory("partfs-startup-bench-out-");
        try {
            Process p = new ProcessBuilder(Procs.ROOT.resolve("scripts/startup-bench").toString(), "--tables", "2", "--parts", "3",
                    "--columns", "2", "--rows", "5", "--runs", "1", "--latency", "5", "--out", out.toString())
                    .redirectErrorStream(true).redirectOutput(out.resolve("log.txt").toFile()).start();
            p.getOutputStream().close();
            assertTrue(p.waitFor(15, java.util.concurrent.TimeUnit.MINUTES), "the tiny profile finishes");
            String log = Files.readString(out.resolve("log.txt"));
            assertEquals(0, p.exitValue(), log);
            List<String> csv = Files.readAllLines(out.resolve("results.csv"));
            List<String> modes = List.of("local", "partfs-nocache", "partfs-cache", "partfs-blockcache", "partfs-warmup", "rclone", "s3fs");
            for (String mode : modes) {
                String row = csv.stream().filter(l -> l.startsWith(mode + ",5,")).findFirst()
                        .orElseThrow(() -> new AssertionError("no row for " + mode + " at 5 ms:\n" + log));
                // mode,latency,run,startup_s,parts,rss,warmup_s,mount_s,"error","sidecar counters"
                assertTrue(row.matches("[^,]+,[^,]+,1,[0-9.]+,6,-?\\d+,[0-9.]*,[0-9.]*,\"\",\".*\""),
                        "started with all 6 parts, no error: " + row + "\n" + log);
                if (mode.startsWith("partfs")) {
                    assertTrue(row.matches("[^,]+,[^,]+,1,[0-9.]+,6,-?\\d+,[0-9.]*,[0-9.]+,.*"), "the mount was timed: " + row);
                    assertTrue(row.matches(".*CPU: clickhouse [0-9.]+ s \\(sidecar: fuse [0-9.]+ .*\\), redis-server [0-9.]+ s.*"),
                            "where the startup's CPU went: " + row);
                }
            }
            String md = Files.readString(out.resolve("results.md"));
            assertTrue(md.contains("| 5 ms | PartFS, cache on, sidecar restarted |"), md);
            byte[] png = Files.readAllBytes(out.resolve("startup.png"));
            assertTrue(png.length > 1000 && png[1] == 'P' && png[2] == 'N' && png[3] == 'G', "a PNG chart");
        } finally {
            TempDirs.deleteRecursively(out);
        }
    }
}
