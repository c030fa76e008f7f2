package io.partfs.cli;

import java.io.PrintWriter;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Spec;

/**
 * {@code partfs stats}: what a running mount is doing, a line per interval, in the spirit of
 * {@code juicefs stats}: read from its Prometheus endpoint, as differences between two scrapes.
 */
@Command(name = "stats", mixinStandardHelpOptions = true,
        description = {"Show what a running mount is doing, one line per interval: FUSE operations, object store",
                "requests and bytes, metadata transactions (each with its mean latency), block cache hits, and",
                "what is buffered or staged for upload. Reads the mount's /metrics (its --http-address)."})
final class StatsCommand implements Callable<Integer> {
    @Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Mixin
    SidecarOptions sidecar;

    @Mixin
    ScrapeLoop loop;

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        // the header once the sidecar answered: bad options and no sidecar are one line
        loop.run(sidecar, 1, () -> out.println(" fuse ops/s  ms/op | obj get/s  MiB/s  put/s  MiB/s  ms/req | meta txn/s  ms/txn"
                + " | cache hit |  buffered    staged |       rss"), (before, after, seconds) -> {
            out.println(line(new Delta(before, after, seconds)));
            out.flush();
        });
        return 0;
    }

    static String line(Delta d) {
        double getBytes = d.rate("partfs_object_bytes_total", "op=\"get\"") / (1 << 20);
        double putBytes = d.rate("partfs_object_bytes_total", "op=\"put\"") / (1 << 20);
        double hits = d.diff("partfs_block_cache_hits_total", "");
        double misses = d.diff("partfs_block_cache_misses_total", "");
        return String.format(java.util.Locale.ROOT, "%11.0f %6.2f | %9.0f %6.1f %6.0f %6.1f %7.2f | %10.0f %7.2f | %9s | %9s %9s | %9s",
                d.rate("partfs_fuse_operations_total", ""), d.meanMillis("partfs_fuse_operations_seconds", ""),
                d.rate("partfs_object_requests_total", "op=\"get\""), getBytes,
                d.rate("partfs_object_requests_total", "op=\"put\""), putBytes,
                d.meanMillis("partfs_object_requests_seconds", ""),
                d.rate("partfs_meta_transactions_total", ""), d.meanMillis("partfs_meta_transactions_seconds", ""),
                hits + misses == 0 ? "-" : String.format(java.util.Locale.ROOT, "%.0f%%", 100 * hits / (hits + misses)),
                Sizes.human((long) d.now("partfs_write_buffer_bytes", "")),
                Sizes.human((long) d.now("partfs_writeback_staged_bytes", "")),
                d.has("process_resident_memory_bytes") ? Sizes.human((long) d.now("process_resident_memory_bytes", "")) : "-")
                + warnings(d);
    }

    /**
     * What needs the operator, after the numbers: the object store down, write-back staging out
     * of room, a cache disk returning other bytes than were cached.
     */
    private static String warnings(Delta d) {
        StringBuilder w = new StringBuilder();
        if (d.now("partfs_object_store_unreachable", "") > 0) {
            w.append("  ! object store unreachable");
        }
        double directMax = d.now("jvm_direct_buffer_max_bytes", "");
        if (directMax > 0 && d.now("jvm_direct_buffer_used_bytes", "") >= 0.9 * directMax) {
            w.append(String.format(java.util.Locale.ROOT, "  ! direct memory %.0f%% used: I/O fails with EIO when full",
                    100 * d.now("jvm_direct_buffer_used_bytes", "") / directMax));
        }
        if (d.diff("partfs_writeback_unstaged_blocks", "") > 0) {
            w.append("  ! staging disk full: uploading before fsync");
        }
        if (d.diff("partfs_block_cache_corrupt_blocks_total", "") > 0) {
            w.append(String.format(java.util.Locale.ROOT, "  ! %.0f cached blocks did not match their checksums (read again from"
                    + " the object store): check the cache disk", d.diff("partfs_block_cache_corrupt_blocks_total", "")));
        }
        return w.toString();
    }

    /** Prometheus text format: {@code name{labels} value} per line, comments skipped. */
    static Map<String, Double> parse(String text) {
        Map<String, Double> out = new HashMap<>();
        for (String l : text.split("\n")) {
            if (l.isBlank() || l.startsWith("#")) {
                continue;
            }
            int sp = l.lastIndexOf(' ');
            try {
                out.put(l.substring(0, sp), Double.parseDouble(l.substring(sp + 1)));
            } catch (RuntimeException e) {
                // a line this reader does not understand is not one it shows
            }
        }
        return out;
    }

    /** Two scrapes {@code seconds} apart. */
    record Delta(Map<String, Double> before, Map<String, Double> after, double seconds) {
        /** Sum over a family's series whose labels contain {@code label} ("" for all), in {@code m}. */
        private static double sum(Map<String, Double> m, String family, String label) {
            double s = 0;
            for (Map.Entry<String, Double> e : m.entrySet()) {
                String k = e.getKey();
                int brace = k.indexOf('{');
                String name = brace < 0 ? k : k.substring(0, brace);
                if (name.equals(family) && (label.isEmpty() || k.contains(label))) {
                    s += e.getValue();
                }
            }
            return s;
        }

        double diff(String family, String label) {
            return sum(after, family, label) - sum(before, family, label);
        }

        double rate(String family, String label) {
            return diff(family, label) / seconds;
        }

        double now(String family, String label) {
            return sum(after, family, label);
        }

        /** Whether the later scrape has the series {@code name} (a sidecar older than a metric lacks it). */
        boolean has(String name) {
            return after.containsKey(name);
        }

        /** Mean latency in ms over the interval of a {@code _seconds} histogram. */
        double meanMillis(String histogram, String label) {
            double n = diff(histogram + "_count", label);
            return n == 0 ? 0 : 1000 * diff(histogram + "_sum", label) / n;
        }
    }
}
