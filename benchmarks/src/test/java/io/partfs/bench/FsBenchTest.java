package io.partfs.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The tables fs-bench builds from partfs bench's output. */
class FsBenchTest {
    private static String table(String bigRead, String stat) {
        return """
                +------------------+-----------------+--------------+
                | ITEM             | VALUE           | COST         |
                +------------------+-----------------+--------------+
                | Read big file    | %s | 1.00 ms/IO   |
                | Stat file        | %s | 0.10 ms/file |
                +------------------+-----------------+--------------+
                """.formatted(bigRead, stat);
    }

    @Test
    void ratiosDividePartFsRatesByEachOtherFilesystemsItemByItem() {
        Map<String, Map<String, String[]>> results = new LinkedHashMap<>();
        results.put("local", FsBench.parse(table("400.00 MiB/s", "30000.00 files/s")));
        results.put("bindfs", FsBench.parse(table("500.00 MiB/s", "9000.00 files/s")));
        results.put("partfs", FsBench.parse(table("1000.00 MiB/s", "9000.00 files/s")));
        results.put("rclone", FsBench.parse(table("250.00 MiB/s", "4500.00 files/s")));
        results.put("s3fs", Map.of()); // failed to mount
        assertEquals("1000.00 MiB/s", results.get("partfs").get("Read big file")[0]);
        String r = FsBench.ratios(results);
        assertTrue(r.startsWith("| ratio | partfs / rclone | partfs / s3fs | bindfs / rclone | bindfs / s3fs |"),
                "PartFS first, then the FUSE floor: " + r);
        assertTrue(r.contains("| Read big file | 4.00x | - | 2.00x | - |"), r);
        assertTrue(r.contains("| Stat file | 2.00x | - | 2.00x | - |"), r);
        assertTrue(r.contains("| Stat file | 2.00x | - | 2.00x | - |\n"), "measured items stay: " + r);
        assertTrue(!r.contains("Write big file") && !r.contains("List directory"), "items no run measured are left out: " + r);
    }

    @Test
    void theMainTableIsTheMedianOfThePassesAfterTheFirst() {
        Map<String, java.util.List<Map<String, String[]>>> results = new LinkedHashMap<>();
        results.put("partfs", java.util.List.of(
                FsBench.parse(table("100.00 MiB/s", "1000.00 files/s")), // the first pass: left out
                FsBench.parse(table("900.00 MiB/s", "9000.00 files/s")),
                FsBench.parse(table("300.00 MiB/s", "5000.00 files/s")),
                FsBench.parse(table("500.00 MiB/s", "7000.00 files/s"))));
        results.put("rclone", java.util.List.of(
                FsBench.parse(table("200.00 MiB/s", "4000.00 files/s")),
                FsBench.parse(table("250.00 MiB/s", "4500.00 files/s")),
                FsBench.parse(table("260.00 MiB/s", "4700.00 files/s")),
                FsBench.parse(table("280.00 MiB/s", "4900.00 files/s"))));
        results.put("s3fs", java.util.List.of(
                FsBench.parse(table("200.00 MiB/s", "1000.00 files/s")),
                Map.of(), // failed in its second pass
                FsBench.parse(table("260.00 MiB/s", "1000.00 files/s"))));
        Map<String, Map<String, String[]>> steady = FsBench.steady(results);
        assertEquals("500.00 MiB/s", steady.get("partfs").get("Read big file")[0], "the middle of 900, 300, 500");
        assertEquals("7000.00 files/s", steady.get("partfs").get("Stat file")[0]);
        assertEquals("1.00 ms/IO", steady.get("partfs").get("Read big file")[1], "costs by their own median");
        assertEquals("260.00 MiB/s", steady.get("rclone").get("Read big file")[0]);
        assertTrue(steady.get("s3fs").isEmpty(), "a pass without the item: no median for it");
        String r = FsBench.ratios(steady);
        assertTrue(r.contains("| Read big file | 1.92x | - |"), r);

        String every = FsBench.everyPass(results);
        assertTrue(every.contains("| Read big file | pass 1 | pass 2 | pass 3 | pass 4 |"), every);
        assertTrue(every.contains("| s3fs | 1.00 ms/IO | - | 1.00 ms/IO | - |"), every);
    }

    @Test
    void ofAnEvenNumberOfPassesTheTwoMiddleOnesAreAveraged() {
        Map<String, java.util.List<Map<String, String[]>>> results = new LinkedHashMap<>();
        results.put("partfs", java.util.List.of(
                FsBench.parse(table("1.00 MiB/s", "1.00 files/s")),
                FsBench.parse(table("100.00 MiB/s", "1000.00 files/s")),
                FsBench.parse(table("300.00 MiB/s", "2000.00 files/s"))));
        assertEquals("200.00 MiB/s", FsBench.steady(results).get("partfs").get("Read big file")[0]);
    }

    @Test
    void theReportSaysEachFilesystemsPeakRss() {
        Map<String, Long> rss = new LinkedHashMap<>();
        rss.put("partfs", 412L << 20);
        rss.put("rclone", -1L);
        assertEquals("\nPeak RSS of each filesystem's process (for PartFS: the sidecar) over its passes: partfs 412 MiB, rclone unknown.\n",
                FsBench.memory(rss));
        assertEquals("", FsBench.memory(Map.of()), "local disk alone: no process, no line");
    }
}
