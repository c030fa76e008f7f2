package io.partfs.bench;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/** What the sidecar did during one startup, from its /metrics before and after. */
final class SidecarMetrics {
    private SidecarMetrics() {
    }

    /** Totals by family (labels summed), or empty when the sidecar does not answer. */
    static Map<String, Double> scrape(int port) {
        Map<String, Double> out = new HashMap<>();
        try {
            String text = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/metrics")).build(),
                    HttpResponse.BodyHandlers.ofString()).body();
            for (String line : text.split("\n")) {
                if (line.startsWith("#") || line.isBlank()) {
                    continue;
                }
                String name = line.substring(0, line.indexOf(line.contains("{") ? '{' : ' '));
                if (line.contains("op=\"get\"") && name.equals("partfs_object_requests_total")) {
                    out.merge("object_gets", Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1)), Double::sum);
                }
                if (line.contains("op=\"read\"") && name.equals("partfs_meta_transactions_total")) {
                    out.merge("meta_reads", Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1)), Double::sum);
                }
                out.merge(name, Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1)), Double::sum);
                if (name.equals("partfs_fuse_operations_seconds_sum") || name.equals("partfs_fuse_operations_total")) {
                    String op = line.substring(line.indexOf("op=\"") + 4, line.indexOf('"', line.indexOf("op=\"") + 4));
                    out.merge(name + "/" + op, Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1)), Double::sum);
                }
            }
        } catch (Exception e) {
            return Map.of();
        }
        return out;
    }

    static Map<String, Double> delta(Map<String, Double> before, Map<String, Double> after) {
        Map<String, Double> d = new HashMap<>();
        after.forEach((k, v) -> d.put(k, v - before.getOrDefault(k, 0.0)));
        return d;
    }

    /** FUSE calls and time inside the sidecar, object GETs, metadata reads and in-memory evictions, cache hits. */
    static String summary(Map<String, Double> d) {
        if (d.isEmpty()) {
            return "";
        }
        return String.format(Locale.ROOT, "; sidecar: %.0f FUSE calls (%.2f s in handlers), %.0f object GETs, %.0f metadata reads "
                + "(%.0f in-memory entries evicted), %.0f cache hits",
                d.getOrDefault("partfs_fuse_operations_total", 0.0), d.getOrDefault("partfs_fuse_operations_seconds_sum", 0.0),
                d.getOrDefault("object_gets", 0.0), d.getOrDefault("meta_reads", 0.0), d.getOrDefault("partfs_meta_cache_evictions_total", 0.0),
                d.getOrDefault("partfs_metadata_cache_hits_total", 0.0))
                + topOps(d);
    }

    /** The FUSE operations that took the most handler time: op count/seconds. */
    private static String topOps(Map<String, Double> d) {
        String prefix = "partfs_fuse_operations_seconds_sum/";
        return d.entrySet().stream().filter(e -> e.getKey().startsWith(prefix)).sorted((a, b) -> Double.compare(b.getValue(), a.getValue()))
                .limit(4).map(e -> {
                    String op = e.getKey().substring(prefix.length());
                    return String.format(Locale.ROOT, "%s %.0f/%.2fs", op, d.getOrDefault("partfs_fuse_operations_total/" + op, 0.0), e.getValue());
                }).reduce((a, b) -> a + ", " + b).map(s -> " (" + s + ")").orElse("");
    }
}
