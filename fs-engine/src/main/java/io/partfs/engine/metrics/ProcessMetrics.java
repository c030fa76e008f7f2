package io.partfs.engine.metrics;

import java.io.IOException;
import java.lang.management.BufferPoolMXBean;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The sidecar process's own memory, CPU and file descriptors, under the names Prometheus
 * client libraries use ({@code process_*}), and the JVM's heap and direct buffer memory. The
 * sidecar shares a pod with ClickHouse, so its memory is what an operator sizes the pod's limit
 * by; direct memory is bounded apart from the heap (-XX:MaxDirectMemorySize, 128 MiB in
 * scripts/partfs) and, used up, fails reads and writes with EIO, so it is worth an alert near
 * its maximum.
 */
public final class ProcessMetrics {
    private static final Path STATUS = Path.of("/proc/self/status");

    private ProcessMetrics() {
    }

    public static void register(Metrics metrics) {
        metrics.gauge("process_resident_memory_bytes", "Resident memory of the sidecar process (VmRSS).", ProcessMetrics::residentBytes);
        var os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.UnixOperatingSystemMXBean unix) {
            metrics.counterFrom("process_cpu_seconds_total", "CPU time the sidecar process used, user and system.",
                    () -> unix.getProcessCpuTime() / 1e9);
            metrics.gauge("process_open_fds", "Open file descriptors of the sidecar process.", unix::getOpenFileDescriptorCount);
            metrics.gauge("process_max_fds", "The sidecar process's limit of open file descriptors.", unix::getMaxFileDescriptorCount);
        }
        var heap = ManagementFactory.getMemoryMXBean();
        metrics.gauge("jvm_heap_used_bytes", "JVM heap in use (live objects and garbage not yet collected).",
                () -> heap.getHeapMemoryUsage().getUsed());
        metrics.gauge("jvm_heap_max_bytes", "The JVM heap's maximum (-Xmx).", () -> heap.getHeapMemoryUsage().getMax());
        BufferPoolMXBean direct = ManagementFactory.getPlatformMXBeans(BufferPoolMXBean.class).stream()
                .filter(p -> p.getName().equals("direct")).findFirst().orElse(null);
        if (direct != null) {
            metrics.gauge("jvm_direct_buffer_used_bytes", "Direct (off-heap) buffer memory in use: FUSE request buffers,"
                    + " the Redis client's, I/O copies.", direct::getMemoryUsed);
        }
        long maxDirect = maxDirectMemory();
        if (maxDirect > 0) {
            metrics.gauge("jvm_direct_buffer_max_bytes", "The most direct buffer memory the JVM allows (-XX:MaxDirectMemorySize).",
                    () -> maxDirect);
        }
    }

    /** VmRSS of this process in bytes, or -1 where /proc does not say. */
    static double residentBytes() {
        try {
            for (String line : Files.readAllLines(STATUS)) {
                if (line.startsWith("VmRSS:")) {
                    return Long.parseLong(line.substring(6).trim().split("\\s+")[0]) * 1024.0;
                }
            }
        } catch (IOException | RuntimeException e) {
            // not Linux, or no /proc: the gauge says so with -1
        }
        return -1;
    }

    /** -XX:MaxDirectMemorySize, or the heap's maximum when not set (the JVM's own default); 0 if unknown. */
    static long maxDirectMemory() {
        try {
            var hotspot = ManagementFactory.getPlatformMXBean(com.sun.management.HotSpotDiagnosticMXBean.class);
            long set = Long.parseLong(hotspot.getVMOption("MaxDirectMemorySize").getValue());
            return set > 0 ? set : Runtime.getRuntime().maxMemory();
        } catch (RuntimeException e) {
            return 0;
        }
    }
}
