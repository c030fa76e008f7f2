package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The arithmetic of {@code partfs profile} on two scrapes of the Prometheus text a mount serves. */
class ProfileCommandTest {
    private static final String BEFORE = """
            partfs_fuse_operations_total{op="read"} 100
            partfs_fuse_operations_total{op="lookup"} 10
            partfs_fuse_operations_errors_total{op="lookup"} 2
            partfs_fuse_operations_seconds_sum{op="read"} 0.1
            partfs_fuse_operations_seconds_sum{op="lookup"} 0.01
            partfs_fuse_operations_seconds_bucket{op="read",le="0.001"} 100
            partfs_fuse_operations_seconds_bucket{op="read",le="0.01"} 100
            partfs_fuse_operations_seconds_bucket{op="read",le="+Inf"} 100
            partfs_object_requests_total{op="get"} 5
            partfs_object_requests_seconds_sum{op="get"} 0.05
            """;
    private static final String AFTER = """
            partfs_fuse_operations_total{op="read"} 300
            partfs_fuse_operations_total{op="lookup"} 10
            partfs_fuse_operations_total{op="write"} 4
            partfs_fuse_operations_errors_total{op="lookup"} 2
            partfs_fuse_operations_seconds_sum{op="read"} 0.5
            partfs_fuse_operations_seconds_sum{op="lookup"} 0.01
            partfs_fuse_operations_seconds_sum{op="write"} 0.1
            partfs_fuse_operations_seconds_bucket{op="read",le="0.001"} 290
            partfs_fuse_operations_seconds_bucket{op="read",le="0.01"} 299
            partfs_fuse_operations_seconds_bucket{op="read",le="+Inf"} 300
            partfs_object_requests_total{op="get"} 25
            partfs_object_requests_seconds_sum{op="get"} 0.45
            """;

    @Test
    void rowsAreTheIntervalsOperationsMostTimeFirst() {
        List<ProfileCommand.Row> rows = ProfileCommand.rows(StatsCommand.parse(BEFORE), StatsCommand.parse(AFTER));
        assertEquals(3, rows.size(), "lookup had no calls in the interval: " + rows);
        assertEquals(new ProfileCommand.Row("fuse", "read", 200, 0, 0.4, 0.01), rows.get(0),
                "p99 of 200 reads (190 under 1 ms, 9 under 10 ms, 1 above) is the 10 ms bucket");
        assertEquals("object", rows.get(1).layer());
        assertEquals(0.4, rows.get(1).seconds(), 1e-9);
        assertEquals("write", rows.get(2).op());
        assertTrue(Double.isNaN(rows.get(2).p99Seconds()), "no buckets served: no p99");

        String table = ProfileCommand.table(rows, 2.0, 2);
        List<String> lines = table.lines().toList();
        assertTrue(lines.get(0).contains("204 FUSE operations, 0.500 s in them"), table);
        String[] read = lines.get(2).trim().split("\\s+");
        assertEquals(List.of("fuse", "read", "200", "100.0", "0", "2.000", "10.000", "400.0", "80.0"), List.of(read), table);
        assertTrue(lines.get(4).contains("1 more operations"), table);
    }

    @Test
    void anIdleIntervalSaysSo() {
        Map<String, Double> same = StatsCommand.parse(BEFORE);
        assertTrue(ProfileCommand.table(ProfileCommand.rows(same, same), 1.0, 15).contains("no operations in this interval"));
    }
}
