package io.partfs.engine.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ProcessMetricsTest {
    @TempDir
    Path dir;

    private static double value(Metrics m, String name) {
        for (String line : m.scrape().split("\n")) {
            if (line.startsWith(name + " ")) {
                return Double.parseDouble(line.substring(name.length() + 1));
            }
        }
        throw new AssertionError(name + " not in the scrape:\n" + m.scrape());
    }

    @Test
    void reportsTheProcesssMemoryCpuAndFilesAsTheyChange() throws Exception {
        Metrics m = new Metrics();
        ProcessMetrics.register(m);
        assertTrue(value(m, "process_resident_memory_bytes") > 16 << 20, "a JVM is larger than 16 MiB");
        assertTrue(value(m, "process_cpu_seconds_total") > 0);
        assertTrue(value(m, "jvm_heap_used_bytes") > 0);
        assertEquals((double) Runtime.getRuntime().maxMemory(), value(m, "jvm_heap_max_bytes"));
        assertTrue(value(m, "jvm_direct_buffer_max_bytes") > 0);

        double direct = value(m, "jvm_direct_buffer_used_bytes");
        double fds = value(m, "process_open_fds");
        ByteBuffer held = ByteBuffer.allocateDirect(8 << 20);
        try (FileChannel f = FileChannel.open(dir.resolve("f"), StandardOpenOption.CREATE, StandardOpenOption.WRITE)) {
            assertTrue(value(m, "jvm_direct_buffer_used_bytes") >= direct + (8 << 20), "the 8 MiB buffer shows");
            assertTrue(value(m, "process_open_fds") >= fds + 1, "the open file shows");
            assertTrue(value(m, "process_max_fds") >= value(m, "process_open_fds"));
        }
        assertEquals(8 << 20, held.capacity());
    }
}
