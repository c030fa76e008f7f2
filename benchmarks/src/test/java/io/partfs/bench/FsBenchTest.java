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
}
