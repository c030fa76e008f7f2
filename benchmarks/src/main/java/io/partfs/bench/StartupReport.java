package io.partfs.bench;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import javax.imageio.ImageIO;

/** The startup benchmark's results: a markdown table of medians, every run as CSV, and a bar chart. */
final class StartupReport {
    /**
     * One startup; seconds is NaN when it failed (error says why). mountSeconds is how long
     * {@code partfs mount} took before it (the sidecar's own restart), NaN for other modes.
     */
    record Row(String mode, double latencyMs, int run, double seconds, long parts, long sidecarPeakRss, double warmupSeconds,
               double mountSeconds, String error, String sidecarCounts) {
    }

    private static final Map<String, String> LABELS = Map.of(
            "local", "local disk (ext4)",
            "partfs-nocache", "PartFS, part-metadata cache off",
            "partfs-cache", "PartFS, cache on, sidecar restarted",
            "partfs-blockcache", "PartFS, cache on, block cache on disk, sidecar restarted",
            "partfs-warmup", "PartFS, empty cache + warmup",
            "rclone", "rclone mount (VFS cache full)",
            "s3fs", "s3fs");

    private final List<Row> rows;
    private final String profile;
    private final boolean pageCacheDropped;
    private final List<String> skipped;

    StartupReport(List<Row> rows, int tables, int parts, int columns, int rowsPerPart, boolean pageCacheDropped, List<String> skipped) {
        this.rows = rows;
        this.profile = String.format("%d tables x %d parts x %d String columns (%d rows per part)", tables, parts, columns, rowsPerPart);
        this.pageCacheDropped = pageCacheDropped;
        this.skipped = skipped;
    }

    private Set<String> modes() {
        Set<String> m = new LinkedHashSet<>();
        rows.forEach(r -> m.add(r.mode()));
        return m;
    }

    private Set<Double> latencies() {
        Set<Double> l = new LinkedHashSet<>();
        rows.forEach(r -> l.add(r.latencyMs()));
        return l;
    }

    private List<Row> of(String mode, double latency) {
        return rows.stream().filter(r -> r.mode().equals(mode) && r.latencyMs() == latency).toList();
    }

    static double median(List<Double> v) {
        List<Double> s = v.stream().filter(d -> !Double.isNaN(d)).sorted().toList();
        if (s.isEmpty()) {
            return Double.NaN;
        }
        int n = s.size();
        return n % 2 == 1 ? s.get(n / 2) : (s.get(n / 2 - 1) + s.get(n / 2)) / 2;
    }

    double medianSeconds(String mode, double latency) {
        return median(of(mode, latency).stream().map(Row::seconds).toList());
    }

    String markdown() {
        StringBuilder b = new StringBuilder();
        b.append("Profile: ").append(profile).append(". Startup = clickhouse-server start until `SELECT 1` answers")
                .append(pageCacheDropped ? ", page cache dropped before each." : " (the page cache could NOT be dropped here).")
                .append(" Median of the runs; PartFS sidecar peak RSS is the largest seen.\n\n");
        b.append("| S3 latency | mode | startup (median) | runs ok | min - max | vs local | warmup | sidecar mount (median) | sidecar peak RSS |\n");
        b.append("|---|---|---|---|---|---|---|---|---|\n");
        for (double lat : latencies()) {
            double localMedian = medianSeconds("local", lat);
            for (String mode : modes()) {
                List<Row> rs = of(mode, lat);
                List<Double> ok = rs.stream().map(Row::seconds).filter(d -> !Double.isNaN(d)).sorted().toList();
                double med = median(ok);
                long rss = rs.stream().mapToLong(Row::sidecarPeakRss).max().orElse(-1);
                double warm = median(rs.stream().map(Row::warmupSeconds).toList());
                double mount = median(rs.stream().map(Row::mountSeconds).toList());
                String errors = rs.stream().map(Row::error).filter(e -> !e.isEmpty()).distinct().reduce((x, y) -> x + "; " + y).orElse("");
                b.append(String.format(Locale.ROOT, "| %.0f ms | %s | %s | %d/%d | %s | %s | %s | %s | %s |%n", lat, LABELS.getOrDefault(mode, mode),
                        Double.isNaN(med) ? "failed" : String.format(Locale.ROOT, "%.2f s", med), ok.size(), rs.size(),
                        ok.isEmpty() ? errors : String.format(Locale.ROOT, "%.2f - %.2f", ok.get(0), ok.get(ok.size() - 1)),
                        Double.isNaN(med) || Double.isNaN(localMedian) ? "" : String.format(Locale.ROOT, "%.1fx", med / localMedian),
                        Double.isNaN(warm) ? "" : String.format(Locale.ROOT, "%.2f s", warm),
                        Double.isNaN(mount) ? "" : String.format(Locale.ROOT, "%.2f s", mount),
                        rss > 0 ? (rss >> 20) + " MiB" : ""));
            }
        }
        for (String s : skipped) {
            b.append("\nSkipped: ").append(s).append('\n');
        }
        return b.toString();
    }

    String csv() {
        StringBuilder b = new StringBuilder("mode,latency_ms,run,startup_s,parts,sidecar_peak_rss_bytes,warmup_s,mount_s,error,sidecar_during_startup\n");
        for (Row r : rows) {
            b.append(String.format(Locale.ROOT, "%s,%.0f,%d,%s,%d,%d,%s,%s,\"%s\",\"%s\"%n", r.mode(), r.latencyMs(), r.run(),
                    Double.isNaN(r.seconds()) ? "" : String.format(Locale.ROOT, "%.3f", r.seconds()), r.parts(), r.sidecarPeakRss(),
                    Double.isNaN(r.warmupSeconds()) ? "" : String.format(Locale.ROOT, "%.3f", r.warmupSeconds()),
                    Double.isNaN(r.mountSeconds()) ? "" : String.format(Locale.ROOT, "%.3f", r.mountSeconds()), r.error().replace("\"", "'"), r.sidecarCounts()));
        }
        return b.toString();
    }

    void write(Path dir) throws IOException {
        Files.writeString(dir.resolve("results.md"), "# ClickHouse startup time\n\n" + markdown());
        Files.writeString(dir.resolve("results.csv"), csv());
        ImageIO.write(chart(), "png", dir.resolve("startup.png").toFile());
    }

    /** Grouped bars: one group per latency, one bar per mode, median seconds (log-free, labelled). */
    BufferedImage chart() {
        System.setProperty("java.awt.headless", "true");
        List<String> modes = new ArrayList<>(modes());
        List<Double> lats = new ArrayList<>(latencies());
        int w = Math.max(900, 220 + lats.size() * (modes.size() * 70 + 60));
        int h = 520;
        BufferedImage img = new BufferedImage(w, h, BufferedImage.TYPE_INT_RGB);
        Graphics2D g = img.createGraphics();
        g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
        g.setColor(Color.WHITE);
        g.fillRect(0, 0, w, h);
        double max = 0;
        Map<String, Double> med = new LinkedHashMap<>();
        for (double l : lats) {
            for (String m : modes) {
                double v = medianSeconds(m, l);
                med.put(m + "@" + l, v);
                if (!Double.isNaN(v)) {
                    max = Math.max(max, v);
                }
            }
        }
        max = max <= 0 ? 1 : max * 1.15;
        int left = 70;
        int top = 60;
        int bottom = h - 90;
        g.setColor(Color.BLACK);
        g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 15));
        g.drawString("ClickHouse startup, median seconds", 10, 20);
        g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
        g.drawString(profile + "; Redis metadata, S3 via s3proxy", 10, 38);
        g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 11));
        g.drawLine(left, top, left, bottom);
        g.drawLine(left, bottom, w - 10, bottom);
        for (int i = 0; i <= 5; i++) {
            int y = bottom - (bottom - top) * i / 5;
            g.setColor(new Color(220, 220, 220));
            g.drawLine(left + 1, y, w - 10, y);
            g.setColor(Color.BLACK);
            g.drawString(String.format(Locale.ROOT, "%.2f s", max * i / 5), 10, y + 4);
        }
        Color[] palette = {new Color(90, 90, 90), new Color(214, 39, 40), new Color(44, 160, 44), new Color(31, 119, 180),
                new Color(255, 127, 14), new Color(148, 103, 189), new Color(23, 190, 207)};
        int x = left + 30;
        for (double l : lats) {
            int groupStart = x;
            for (int i = 0; i < modes.size(); i++) {
                double v = med.get(modes.get(i) + "@" + l);
                g.setColor(palette[i % palette.length]);
                if (!Double.isNaN(v)) {
                    int bh = (int) ((bottom - top) * v / max);
                    g.fillRect(x, bottom - bh, 56, bh);
                    g.setColor(Color.BLACK);
                    g.drawString(String.format(Locale.ROOT, "%.2f", v), x + 4, bottom - bh - 4);
                } else {
                    g.setStroke(new BasicStroke(1));
                    g.drawRect(x, bottom - 20, 56, 20);
                    g.drawString("failed", x + 10, bottom - 6);
                }
                x += 70;
            }
            g.setColor(Color.BLACK);
            g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 12));
            g.drawString(String.format(Locale.ROOT, "S3 latency %.0f ms", l), groupStart, bottom + 20);
            g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 11));
            x += 60;
        }
        int lx = left;
        int ly = h - 45;
        for (int i = 0; i < modes.size(); i++) {
            g.setColor(palette[i % palette.length]);
            g.fillRect(lx, ly, 12, 12);
            g.setColor(Color.BLACK);
            String label = LABELS.getOrDefault(modes.get(i), modes.get(i));
            g.drawString(label, lx + 16, ly + 11);
            lx += 22 + g.getFontMetrics().stringWidth(label);
            if (lx > w - 200) {
                lx = left;
                ly += 18;
            }
        }
        g.dispose();
        return img;
    }
}
