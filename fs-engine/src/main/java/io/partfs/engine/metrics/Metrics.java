package io.partfs.engine.metrics;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.DoubleSupplier;

/**
 * A small registry of counters, gauges and latency histograms, written out in the Prometheus
 * text exposition format (version 0.0.4). One instance per mounted volume; components get it
 * passed in and record into it, the sidecar's {@code /metrics} endpoint writes it out.
 *
 * <p>Families are declared once with their help text and label names; each distinct tuple of
 * label values is one series, created on first use. Recording is lock-free (LongAdder).
 */
public final class Metrics {
    /** Latency buckets in seconds: 50 µs (a cached stat) to 10 s (a slow S3 request with retries). */
    private static final double[] BUCKETS = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
            0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};

    private enum Kind { COUNTER, GAUGE, HISTOGRAM }

    private record Family(String name, String help, Kind kind, List<String> labels,
                          Map<List<String>, Object> series) {
    }

    private final Map<String, Family> families = new ConcurrentSkipListMap<>();

    /** A registry that records nothing worth reading: for code paths opened without a sidecar. */
    public static Metrics none() {
        return new Metrics();
    }

    /** A monotonically increasing count, one series per tuple of label values. */
    public final class Counter {
        private final Family family;

        private Counter(Family family) {
            this.family = family;
        }

        public void inc(String... labelValues) {
            add(1, labelValues);
        }

        public void add(long delta, String... labelValues) {
            series(labelValues).add(delta);
        }

        /** The series of these label values, to keep and add to without a lookup per call. */
        public LongAdder series(String... labelValues) {
            return (LongAdder) family.series.computeIfAbsent(key(family, labelValues), k -> new LongAdder());
        }
    }

    /** Durations in seconds as a cumulative histogram with _bucket, _sum and _count series. */
    public final class Histogram {
        private final Family family;

        private Histogram(Family family) {
            this.family = family;
        }

        public void observeNanos(long nanos, String... labelValues) {
            series(labelValues).observeNanos(nanos);
        }

        /** The series of these label values, to keep and observe into without a lookup per call. */
        public Buckets series(String... labelValues) {
            return (Buckets) family.series.computeIfAbsent(key(family, labelValues), k -> new Buckets());
        }
    }

    /** One histogram series. */
    public static final class Buckets {
        final LongAdder[] counts = new LongAdder[BUCKETS.length];
        final LongAdder count = new LongAdder();
        final java.util.concurrent.atomic.DoubleAdder sum = new java.util.concurrent.atomic.DoubleAdder();

        Buckets() {
            for (int i = 0; i < counts.length; i++) {
                counts[i] = new LongAdder();
            }
        }

        public void observeNanos(long nanos) {
            observe(nanos / 1e9);
        }

        void observe(double seconds) {
            for (int i = 0; i < BUCKETS.length; i++) {
                if (seconds <= BUCKETS[i]) {
                    counts[i].increment();
                    break;
                }
            }
            count.increment();
            sum.add(seconds);
        }
    }

    public Counter counter(String name, String help, String... labels) {
        return new Counter(family(name, help, Kind.COUNTER, labels));
    }

    public Histogram histogram(String name, String help, String... labels) {
        return new Histogram(family(name, help, Kind.HISTOGRAM, labels));
    }

    /** A value read when scraped (sizes, entries); replaces an earlier gauge of the same series. */
    public void gauge(String name, String help, DoubleSupplier value) {
        family(name, help, Kind.GAUGE, new String[0]).series.put(List.of(), value);
    }

    /**
     * A gauge for a value that is costly to read (counting a table of a million entries): the
     * value read is kept for {@code maxAgeNanos} and scrapes within that time get it again, so
     * a scrape every few seconds does not do the work every few seconds.
     */
    public void sampledGauge(String name, String help, long maxAgeNanos, DoubleSupplier value) {
        gauge(name, help, sampled(maxAgeNanos, System::nanoTime, value));
    }

    /** {@code value}, read again only when the last read is {@code maxAgeNanos} old by {@code clock}. */
    static DoubleSupplier sampled(long maxAgeNanos, java.util.function.LongSupplier clock, DoubleSupplier value) {
        return new DoubleSupplier() {
            private boolean read;
            private long readAt;
            private double last;

            @Override
            public synchronized double getAsDouble() {
                long now = clock.getAsLong();
                if (!read || now - readAt >= maxAgeNanos) {
                    last = value.getAsDouble();
                    readAt = now;
                    read = true;
                }
                return last;
            }
        };
    }

    /** A counter whose value is kept elsewhere (cache hits counted by the cache itself). */
    public void counterFrom(String name, String help, DoubleSupplier value) {
        family(name, help, Kind.COUNTER, new String[0]).series.put(List.of(), value);
    }

    private Family family(String name, String help, Kind kind, String[] labels) {
        if (!name.matches("[a-zA-Z_:][a-zA-Z0-9_:]*")) {
            throw new IllegalArgumentException("invalid metric name " + name);
        }
        Family f = families.computeIfAbsent(name, n -> new Family(n, help, kind, List.of(labels), new ConcurrentHashMap<>()));
        if (f.kind != kind || !f.labels.equals(List.of(labels))) {
            throw new IllegalArgumentException("metric " + name + " declared twice differently");
        }
        return f;
    }

    private static List<String> key(Family f, String[] values) {
        if (values.length != f.labels.size()) {
            throw new IllegalArgumentException(f.name + " takes labels " + f.labels);
        }
        return List.of(values);
    }

    /** Writes every family in the Prometheus text format, families and series in a stable order. */
    public String scrape() {
        StringBuilder out = new StringBuilder(4096);
        for (Family f : families.values()) {
            if (f.series.isEmpty()) {
                continue;
            }
            out.append("# HELP ").append(f.name).append(' ').append(escapeHelp(f.help)).append('\n');
            out.append("# TYPE ").append(f.name).append(' ').append(f.kind.name().toLowerCase(Locale.ROOT)).append('\n');
            List<Map.Entry<List<String>, Object>> series = new ArrayList<>(f.series.entrySet());
            series.sort(Map.Entry.comparingByKey((a, b) -> String.join("\u0000", a).compareTo(String.join("\u0000", b))));
            for (Map.Entry<List<String>, Object> s : series) {
                String labels = labels(f.labels, s.getKey(), null);
                Object v = s.getValue();
                if (v instanceof LongAdder c) {
                    out.append(f.name).append(labels).append(' ').append(c.sum()).append('\n');
                } else if (v instanceof DoubleSupplier d) {
                    out.append(f.name).append(labels).append(' ').append(number(d.getAsDouble())).append('\n');
                } else if (v instanceof Buckets b) {
                    long cumulative = 0;
                    for (int i = 0; i < BUCKETS.length; i++) {
                        cumulative += b.counts[i].sum();
                        out.append(f.name).append("_bucket").append(labels(f.labels, s.getKey(), number(BUCKETS[i])))
                                .append(' ').append(cumulative).append('\n');
                    }
                    long count = b.count.sum();
                    out.append(f.name).append("_bucket").append(labels(f.labels, s.getKey(), "+Inf")).append(' ').append(count).append('\n');
                    out.append(f.name).append("_sum").append(labels).append(' ').append(number(b.sum.sum())).append('\n');
                    out.append(f.name).append("_count").append(labels).append(' ').append(count).append('\n');
                }
            }
        }
        return out.toString();
    }

    private static String labels(List<String> names, List<String> values, String le) {
        if (names.isEmpty() && le == null) {
            return "";
        }
        StringBuilder b = new StringBuilder("{");
        for (int i = 0; i < names.size(); i++) {
            b.append(i == 0 ? "" : ",").append(names.get(i)).append("=\"").append(escapeLabel(values.get(i))).append('"');
        }
        if (le != null) {
            b.append(names.isEmpty() ? "" : ",").append("le=\"").append(le).append('"');
        }
        return b.append('}').toString();
    }

    private static String number(double v) {
        if (Double.isNaN(v)) {
            return "NaN";
        }
        if (Double.isInfinite(v)) {
            return v > 0 ? "+Inf" : "-Inf";
        }
        return v == Math.rint(v) && Math.abs(v) < 1e15 ? Long.toString((long) v) : java.math.BigDecimal.valueOf(v).stripTrailingZeros().toPlainString();
    }

    private static String escapeLabel(String s) {
        return s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
    }

    private static String escapeHelp(String s) {
        return s.replace("\\", "\\\\").replace("\n", "\\n");
    }
}
