package io.partfs.cli;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code partfs profile}: where a running mount's time goes, by operation, in the spirit of
 * {@code juicefs profile}: each FUSE operation, object-store request and metadata call with
 * its count, mean and p99 latency and its share of the time, from the mount's {@code /metrics}
 * (differences between two scrapes, so only what happened in the interval).
 */
@Command(name = "profile", mixinStandardHelpOptions = true,
        description = {"Show where a running mount's time goes, by operation. Every FUSE operation, object store",
                "request and metadata call of the interval with its calls, errors, mean and p99 latency and total",
                "time, the most expensive first; %%time is a FUSE operation's share of all FUSE time, which includes",
                "the object store's and metadata's time beneath it. Reads the mount's /metrics (its --http-address);",
                "a table per interval."})
final class ProfileCommand implements Callable<Integer> {
    @Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Mixin
    SidecarOptions sidecar;

    @Mixin
    ScrapeLoop loop;

    @Option(names = "--top", paramLabel = "N", defaultValue = "15", description = "Rows per table, the most total time first (default: ${DEFAULT-VALUE}).")
    int top;

    /** The three families of operation metrics a mount serves, and what the table calls them. */
    private static final Map<String, String> LAYERS = Map.of(
            "fuse", "partfs_fuse_operations", "object", "partfs_object_requests", "meta", "partfs_meta_transactions");

    /** One operation's activity in an interval. */
    record Row(String layer, String op, double calls, double errors, double seconds, double p99Seconds) {
    }

    @Override
    public Integer call() throws Exception {
        if (top < 1) {
            throw new IllegalArgumentException("--top must be at least 1");
        }
        PrintWriter out = spec.commandLine().getOut();
        loop.run(sidecar, 2, (before, after, seconds) -> {
            out.print(table(rows(before, after), seconds, top));
            out.flush();
        });
        return 0;
    }

    /** Every operation with calls between the two scrapes. */
    static List<Row> rows(Map<String, Double> before, Map<String, Double> after) {
        List<Row> rows = new ArrayList<>();
        for (Map.Entry<String, String> layer : new TreeMap<>(LAYERS).entrySet()) {
            String family = layer.getValue();
            Map<String, Double> calls = byOp(before, after, family + "_total");
            Map<String, Double> errors = byOp(before, after, family + "_errors_total");
            Map<String, Double> seconds = byOp(before, after, family + "_seconds_sum");
            for (Map.Entry<String, Double> c : calls.entrySet()) {
                if (c.getValue() > 0) {
                    String op = c.getKey();
                    rows.add(new Row(layer.getKey(), op, c.getValue(), errors.getOrDefault(op, 0.0), seconds.getOrDefault(op, 0.0),
                            quantile(before, after, family + "_seconds_bucket", op, 0.99)));
                }
            }
        }
        rows.sort(Comparator.comparingDouble(Row::seconds).reversed().thenComparing(Row::layer).thenComparing(Row::op));
        return rows;
    }

    /** The value of a {@code {op="..."}} series of {@code name} in {@code after} less that in {@code before}, by op. */
    private static Map<String, Double> byOp(Map<String, Double> before, Map<String, Double> after, String name) {
        Map<String, Double> out = new TreeMap<>();
        String prefix = name + "{op=\"";
        for (Map.Entry<String, Double> e : after.entrySet()) {
            String k = e.getKey();
            if (k.startsWith(prefix) && k.endsWith("\"}")) {
                out.put(k.substring(prefix.length(), k.length() - 2), e.getValue() - before.getOrDefault(k, 0.0));
            }
        }
        return out;
    }

    /**
     * The {@code q} quantile of an op's latency in the interval, as the upper bound of the
     * histogram bucket it falls in (NaN above the last finite bucket).
     */
    static double quantile(Map<String, Double> before, Map<String, Double> after, String bucketName, String op, double q) {
        String prefix = bucketName + "{op=\"" + op + "\",le=\"";
        TreeMap<Double, Double> cumulative = new TreeMap<>();
        for (Map.Entry<String, Double> e : after.entrySet()) {
            String k = e.getKey();
            if (k.startsWith(prefix)) {
                String le = k.substring(prefix.length(), k.length() - 2);
                double bound = le.equals("+Inf") ? Double.POSITIVE_INFINITY : Double.parseDouble(le);
                cumulative.put(bound, e.getValue() - before.getOrDefault(k, 0.0));
            }
        }
        if (cumulative.isEmpty()) {
            return Double.NaN;
        }
        double total = cumulative.lastEntry().getValue();
        for (Map.Entry<Double, Double> b : cumulative.entrySet()) {
            if (b.getValue() >= q * total) {
                return b.getKey().isInfinite() ? Double.NaN : b.getKey();
            }
        }
        return Double.NaN;
    }

    static String table(List<Row> rows, double seconds, int top) {
        StringBuilder b = new StringBuilder();
        double fuseSeconds = rows.stream().filter(r -> r.layer().equals("fuse")).mapToDouble(Row::seconds).sum();
        double fuseCalls = rows.stream().filter(r -> r.layer().equals("fuse")).mapToDouble(Row::calls).sum();
        b.append(String.format(Locale.ROOT, "--- %.1f s: %.0f FUSE operations, %.3f s in them ---%n", seconds, fuseCalls, fuseSeconds));
        b.append(String.format(Locale.ROOT, "%-6s %-14s %9s %9s %7s %8s %8s %10s %6s%n",
                "layer", "operation", "calls", "calls/s", "errors", "avg ms", "p99 ms", "total ms", "%time"));
        for (Row r : rows.subList(0, Math.min(top, rows.size()))) {
            b.append(String.format(Locale.ROOT, "%-6s %-14s %9.0f %9.1f %7.0f %8.3f %8s %10.1f %6s%n", r.layer(), r.op(), r.calls(),
                    r.calls() / seconds, r.errors(), 1000 * r.seconds() / r.calls(),
                    Double.isNaN(r.p99Seconds()) ? "-" : String.format(Locale.ROOT, "%.3f", 1000 * r.p99Seconds()),
                    1000 * r.seconds(), r.layer().equals("fuse") && fuseSeconds > 0
                            ? String.format(Locale.ROOT, "%.1f", 100 * r.seconds() / fuseSeconds) : ""));
        }
        if (rows.size() > top) {
            b.append(String.format(Locale.ROOT, "(%d more operations; --top to show them)%n", rows.size() - top));
        }
        if (rows.isEmpty()) {
            b.append("(no operations in this interval)\n");
        }
        return b.toString();
    }
}
