package io.partfs.engine.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.object.LocalObjectStore;
import io.partfs.engine.object.ObjectNotFoundException;
import io.partfs.engine.testing.TempDirs;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class MetricsTest {
    @Test
    void textFormatWithLabelsEscapesAndCumulativeBuckets() {
        Metrics m = new Metrics();
        Metrics.Counter c = m.counter("t_requests_total", "Requests.\nSecond line", "op");
        c.inc("get");
        c.add(2, "a\"b\\c");
        Metrics.Histogram h = m.histogram("t_seconds", "Latency.", "op");
        h.observeNanos(30_000, "x");      // 30 µs: first bucket
        h.observeNanos(2_000_000, "x");   // 2 ms
        h.observeNanos(20_000_000_000L, "x"); // 20 s: only +Inf
        m.gauge("t_bytes", "Bytes.", () -> 1.5);
        String text = m.scrape();
        assertTrue(text.contains("# HELP t_requests_total Requests.\\nSecond line\n# TYPE t_requests_total counter\n"), text);
        assertTrue(text.contains("t_requests_total{op=\"a\\\"b\\\\c\"} 2\n"), text);
        assertTrue(text.contains("t_requests_total{op=\"get\"} 1\n"), text);
        assertTrue(text.contains("t_seconds_bucket{op=\"x\",le=\"0.00005\"} 1\n"), text);
        assertTrue(text.contains("t_seconds_bucket{op=\"x\",le=\"0.0025\"} 2\n"), text);
        assertTrue(text.contains("t_seconds_bucket{op=\"x\",le=\"10\"} 2\n"), text);
        assertTrue(text.contains("t_seconds_bucket{op=\"x\",le=\"+Inf\"} 3\n"), text);
        assertTrue(text.contains("t_seconds_count{op=\"x\"} 3\n"), text);
        assertTrue(text.contains("t_bytes 1.5\n"), text);
        assertThrows(IllegalArgumentException.class, () -> c.inc("a", "b"), "label count checked");
        assertThrows(IllegalArgumentException.class, () -> m.histogram("t_requests_total", "x", "op"), "kind checked");
    }

    @Test
    void aSampledGaugeReadsItsValueAgainOnlyWhenTheLastReadIsOldEnough() {
        long[] now = {1_000};
        int[] reads = {0};
        java.util.function.DoubleSupplier g = Metrics.sampled(100, () -> now[0], () -> ++reads[0]);
        assertEquals(1, g.getAsDouble());
        now[0] += 99;
        assertEquals(1, g.getAsDouble(), "within the age: the value read before");
        assertEquals(1, reads[0]);
        now[0] += 1;
        assertEquals(2, g.getAsDouble(), "as old as the age: read again");
        assertEquals(2, g.getAsDouble());
        assertEquals(2, reads[0]);

        Metrics m = new Metrics();
        m.sampledGauge("t_costly", "Costly.", 60_000_000_000L, () -> 7);
        assertTrue(m.scrape().contains("t_costly 7"), m.scrape());
    }

    @Test
    void meteredObjectStoreCountsRequestsBytesAndErrorsButNotMissingKeys() throws Exception {
        Path dir = Files.createTempDirectory("partfs-metrics-");
        try {
            Metrics m = new Metrics();
            try (MeteredObjectStore s = new MeteredObjectStore(new LocalObjectStore(dir), m)) {
                s.put("a/b", new byte[100]);
                assertEquals(100, s.get("a/b", 0, -1).length);
                assertThrows(ObjectNotFoundException.class, () -> s.get("missing", 0, -1));
                assertThrows(IllegalArgumentException.class, () -> s.put("/bad", new byte[1]));
            }
            String text = m.scrape();
            assertTrue(text.contains("partfs_object_requests_total{op=\"get\"} 2\n"), text);
            assertTrue(text.contains("partfs_object_bytes_total{op=\"put\"} 100\n"), text);
            assertTrue(text.contains("partfs_object_bytes_total{op=\"get\"} 100\n"), text);
            assertTrue(text.contains("partfs_object_requests_errors_total{op=\"put\"} 1\n"), text);
            assertTrue(!text.contains("partfs_object_requests_errors_total{op=\"get\"}"), "a missing key is an answer: " + text);
        } finally {
            TempDirs.deleteRecursively(dir);
        }
    }
}
