package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Map;
import org.junit.jupiter.api.Test;

/** The arithmetic of {@code partfs stats} on two scrapes of the Prometheus text a mount serves. */
class StatsCommandTest {
    private static final String BEFORE = """
            # HELP partfs_fuse_operations_total FUSE operations by operation.
            # TYPE partfs_fuse_operations_total counter
            partfs_fuse_operations_total{op="read"} 100
            partfs_fuse_operations_total{op="write"} 50
            partfs_fuse_operations_seconds_count{op="read"} 100
            partfs_fuse_operations_seconds_count{op="write"} 50
            partfs_fuse_operations_seconds_sum{op="read"} 0.1
            partfs_fuse_operations_seconds_sum{op="write"} 0.2
            partfs_object_requests_total{op="get"} 10
            partfs_object_requests_total{op="put"} 4
            partfs_object_bytes_total{op="get"} 0
            partfs_object_bytes_total{op="put"} 0
            partfs_block_cache_hits_total 30
            partfs_block_cache_misses_total 10
            partfs_write_buffer_bytes 0
            """;
    private static final String AFTER = """
            partfs_fuse_operations_total{op="read"} 300
            partfs_fuse_operations_total{op="write"} 250
            partfs_fuse_operations_seconds_count{op="read"} 300
            partfs_fuse_operations_seconds_count{op="write"} 250
            partfs_fuse_operations_seconds_sum{op="read"} 0.3
            partfs_fuse_operations_seconds_sum{op="write"} 0.6
            partfs_object_requests_total{op="get"} 30
            partfs_object_requests_total{op="put"} 4
            partfs_object_bytes_total{op="get"} 41943040
            partfs_object_bytes_total{op="put"} 0
            partfs_block_cache_hits_total 60
            partfs_block_cache_misses_total 20
            partfs_write_buffer_bytes 2097152
            process_resident_memory_bytes 440401920
            """;

    @Test
    void ratesAndMeansAreOverTheInterval() {
        Map<String, Double> before = StatsCommand.parse(BEFORE);
        StatsCommand.Delta d = new StatsCommand.Delta(before, StatsCommand.parse(AFTER), 2.0);
        assertEquals(200, d.rate("partfs_fuse_operations_total", ""), 1e-9, "400 operations in 2 s");
        assertEquals(100, d.rate("partfs_fuse_operations_total", "op=\"write\""), 1e-9);
        assertEquals(1.5, d.meanMillis("partfs_fuse_operations_seconds", ""), 1e-9, "0.6 s over 400 operations");
        assertEquals(10, d.rate("partfs_object_requests_total", "op=\"get\""), 1e-9);
        String line = StatsCommand.line(d);
        String[] cols = line.replace("|", " ").trim().split("\\s+");
        assertEquals("200", cols[0], line);
        assertEquals("1.50", cols[1], line);
        assertEquals("10", cols[2], line);
        assertEquals("20.0", cols[3], line);
        assertEquals("75%", cols[9], "30 hits of 40 lookups in the interval: " + line);
        assertEquals("2.0", cols[10], "the write buffer as it is now: " + line);
        assertEquals("420.0", cols[14], "the sidecar's resident memory: " + line);
        assertEquals("-", StatsCommand.line(new StatsCommand.Delta(before, before, 1.0)).replace("|", " ").trim().split("\\s+")[14],
                "an older sidecar without the metric");
    }

    @Test
    void aStoreDownAFullStagingDiskAndARottingCacheDiskAreSaidAfterTheNumbers() {
        String up = BEFORE + "partfs_object_store_unreachable 0\npartfs_writeback_unstaged_blocks 3\n";
        String down = AFTER + "partfs_object_store_unreachable 1\npartfs_writeback_unstaged_blocks 3\n";
        String line = StatsCommand.line(new StatsCommand.Delta(StatsCommand.parse(up), StatsCommand.parse(down), 1.0));
        assertEquals(true, line.endsWith("  ! object store unreachable"), line);
        String more = AFTER + "partfs_object_store_unreachable 0\npartfs_writeback_unstaged_blocks 5\n";
        line = StatsCommand.line(new StatsCommand.Delta(StatsCommand.parse(up), StatsCommand.parse(more), 1.0));
        assertEquals(true, line.endsWith("  ! staging disk full: uploading before fsync"), line);
        String full = AFTER + "jvm_direct_buffer_used_bytes 125829120\njvm_direct_buffer_max_bytes 134217728\n";
        line = StatsCommand.line(new StatsCommand.Delta(StatsCommand.parse(BEFORE), StatsCommand.parse(full), 1.0));
        assertEquals(true, line.endsWith("  ! direct memory 94% used: I/O fails with EIO when full"), line);
        String rot = AFTER + "partfs_block_cache_corrupt_blocks_total 2\n";
        line = StatsCommand.line(new StatsCommand.Delta(StatsCommand.parse(BEFORE + "partfs_block_cache_corrupt_blocks_total 0\n"),
                StatsCommand.parse(rot), 1.0));
        assertEquals(true, line.endsWith("  ! 2 cached blocks did not match their checksums (read again from the object store):"
                + " check the cache disk"), line);
        assertEquals(false, StatsCommand.line(new StatsCommand.Delta(StatsCommand.parse(rot), StatsCommand.parse(rot), 1.0))
                .contains("checksums"), "said in the interval they were found only");
        String roomy = AFTER + "jvm_direct_buffer_used_bytes 33554432\njvm_direct_buffer_max_bytes 134217728\n";
        assertEquals(false, StatsCommand.line(new StatsCommand.Delta(StatsCommand.parse(BEFORE), StatsCommand.parse(roomy), 1.0))
                .contains("!"), "nothing to say: no warning");
    }
}
