package io.partfs.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.TempDirs;
import java.awt.image.BufferedImage;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;

/**
 * The startup benchmark's report at more than one latency, without starting anything:
 * StartupBenchIT runs the script end to end at one latency, this covers how the tables and the
 * chart lay out several.
 */
class StartupReportTest {
    private static StartupReport.Row ok(String mode, double latency, int run, double seconds) {
        return new StartupReport.Row(mode, latency, run, seconds, 6, mode.startsWith("partfs") ? 300L << 20 : -1, Double.NaN,
                mode.startsWith("partfs") ? 0.5 : Double.NaN, "", "");
    }

    private static StartupReport.Row failed(String mode, double latency, int run, String why) {
        return new StartupReport.Row(mode, latency, run, Double.NaN, 0, -1, Double.NaN, Double.NaN, why, "");
    }

    private static StartupReport report() {
        return new StartupReport(List.of(
                ok("local", 0, 1, 1.0), ok("local", 0, 2, 3.0), ok("local", 0, 3, 2.0),
                ok("partfs-cache", 0, 1, 3.0), ok("partfs-cache", 0, 2, 5.0),
                failed("rclone", 0, 1, "timed out after 600 s"),
                ok("local", 20, 1, 2.0),
                ok("partfs-cache", 20, 1, 4.0),
                ok("rclone", 20, 1, 80.0), failed("rclone", 20, 2, "parts missing: 3 of 6")),
                2, 3, 2, 5, true, List.of("s3fs: not installed"));
    }

    @Test
    void eachLatencyGetsItsOwnRowsComparedWithLocalDiskAtThatLatency() {
        String md = report().markdown();
        List<String> rows = md.lines().filter(l -> l.startsWith("| ") && l.contains(" ms |")).toList();
        assertEquals(List.of(
                "| 0 ms | local disk (ext4) | 2.00 s | 3/3 | 1.00 - 3.00 | 1.0x |  |  |  |",
                "| 0 ms | PartFS, cache on, sidecar restarted | 4.00 s | 2/2 | 3.00 - 5.00 | 2.0x |  | 0.50 s | 300 MiB |",
                "| 0 ms | rclone mount (VFS cache full) | failed | 0/1 | timed out after 600 s |  |  |  |  |",
                "| 20 ms | local disk (ext4) | 2.00 s | 1/1 | 2.00 - 2.00 | 1.0x |  |  |  |",
                "| 20 ms | PartFS, cache on, sidecar restarted | 4.00 s | 1/1 | 4.00 - 4.00 | 2.0x |  | 0.50 s | 300 MiB |",
                "| 20 ms | rclone mount (VFS cache full) | 80.00 s | 1/2 | 80.00 - 80.00 | 40.0x |  |  |  |"), rows, md);
        assertTrue(md.startsWith("Profile: 2 tables x 3 parts x 2 String columns (5 rows per part)."), md);
        assertTrue(md.contains("page cache dropped before each"), md);
        assertTrue(md.contains("\nSkipped: s3fs: not installed\n"), md);
    }

    @Test
    void theCsvHasEveryRunIncludingTheFailedOnes() {
        List<String> csv = report().csv().lines().toList();
        assertEquals(11, csv.size(), String.join("\n", csv));
        assertTrue(csv.get(0).startsWith("mode,latency_ms,run,startup_s,parts,"), csv.get(0));
        assertTrue(csv.contains("partfs-cache,20,1,4.000,6,314572800,,0.500,\"\",\"\""), String.join("\n", csv));
        assertTrue(csv.contains("rclone,20,2,,0,-1,,,\"parts missing: 3 of 6\",\"\""), String.join("\n", csv));
    }

    @Test
    void theChartDrawsABarPerMeasuredMedianInAGroupPerLatency() throws Exception {
        BufferedImage chart = report().chart();
        assertEquals(List.of(56, 56, 56, 56, 56), barsAcross(chart, chart.getHeight() - 95),
                "two bars at 0 ms (rclone failed there), three at 20 ms");
        Path dir = Files.createTempDirectory("partfs-startup-report-");
        try {
            report().write(dir);
            assertEquals(barsAcross(chart, chart.getHeight() - 95), barsAcross(ImageIO.read(dir.resolve("startup.png").toFile()), chart.getHeight() - 95));
            assertTrue(Files.readString(dir.resolve("results.md")).startsWith("# ClickHouse startup time\n\nProfile: "));
            assertEquals(report().csv(), Files.readString(dir.resolve("results.csv")));
        } finally {
            TempDirs.deleteRecursively(dir);
        }
    }

    /** Widths of the runs of one coloured (not white, grey or black) pixel wider than 10 along row y: the bars. */
    private static List<Integer> barsAcross(BufferedImage img, int y) {
        List<Integer> bars = new java.util.ArrayList<>();
        int run = 0;
        int runColour = 0;
        for (int x = 0; x <= img.getWidth(); x++) {
            int rgb = x < img.getWidth() ? img.getRGB(x, y) & 0xffffff : 0xffffff;
            boolean bar = rgb != 0xffffff && rgb != 0 && rgb != 0xdcdcdc;
            if (bar && (run == 0 || rgb == runColour)) {
                runColour = rgb;
                run++;
                continue;
            }
            if (run > 10) {
                bars.add(run);
            }
            run = bar ? 1 : 0;
            runColour = rgb;
        }
        return bars;
    }
}
