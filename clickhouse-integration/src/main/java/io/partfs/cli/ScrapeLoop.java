package io.partfs.cli;

import java.io.IOException;
import java.util.Map;
import picocli.CommandLine.Option;

/**
 * {@code --interval} and {@code --count} of the commands that watch a mount through its
 * {@code /metrics} ({@code stats}, {@code profile}), and the loop that scrapes it once per
 * interval and hands each pair of scrapes on.
 */
final class ScrapeLoop {
    @Option(names = "--interval", paramLabel = "SECONDS", description = "Seconds per report (default: 1 for stats, 2 for profile).")
    Double interval;

    @Option(names = "--count", paramLabel = "N", defaultValue = "0", description = "Reports to print, then exit (default: until interrupted).")
    int count;

    /** Told two scrapes of {@code /metrics}, {@code seconds} apart. */
    @FunctionalInterface
    interface Report {
        void between(Map<String, Double> before, Map<String, Double> after, double seconds);
    }

    /** The interval in seconds ({@code defaultInterval} unless given); bad options are an IllegalArgumentException. */
    double every(double defaultInterval) {
        double every = interval == null ? defaultInterval : interval;
        if (!(every > 0) || count < 0) {
            throw new IllegalArgumentException("--interval must be above 0 and --count 0 or more");
        }
        return every;
    }

    /** Scrapes {@code sidecar} every interval ({@code defaultInterval} unless given) until {@code --count} reports are made. */
    void run(SidecarOptions sidecar, double defaultInterval, Report report) throws IOException {
        double every = every(defaultInterval);
        Map<String, Double> before = StatsCommand.parse(sidecar.call("GET", "/metrics"));
        long at = System.nanoTime();
        for (int n = 0; count == 0 || n < count; n++) {
            java.util.concurrent.locks.LockSupport.parkNanos(Math.max(0, at + (long) (every * 1e9) - System.nanoTime()));
            Map<String, Double> now = StatsCommand.parse(sidecar.call("GET", "/metrics"));
            long t = System.nanoTime();
            report.between(before, now, (t - at) / 1e9);
            before = now;
            at = t;
        }
    }
}
