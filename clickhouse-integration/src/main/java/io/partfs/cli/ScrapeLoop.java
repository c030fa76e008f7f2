package io.partfs.cli;

import java.io.IOException;
import java.nio.file.Path;
import java.util.Map;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * The MOUNTPOINT, {@code --interval} and {@code --count} of the commands that watch a mount through its
 * {@code /metrics} ({@code stats}, {@code profile}), and the loop that scrapes it once per
 * interval and hands each pair of scrapes on.
 */
final class ScrapeLoop {
    @Parameters(paramLabel = "MOUNTPOINT", arity = "0..1",
            description = {"The mount to watch: its HTTP endpoint is found from its run files under --home",
                    "(default: --sidecar, or " + SidecarOptions.DEFAULT_URL + ")."})
    Path mountPoint;

    @Option(names = "--home", paramLabel = "DIR", description = "With MOUNTPOINT: the data home it was mounted with (default: $PARTFS_HOME or ~/.partfs).")
    Path home;

    @Option(names = "--interval", paramLabel = "SECONDS", description = "Seconds per report (default: 1 for stats, 2 for profile).")
    Double interval;

    @Option(names = "--count", paramLabel = "N", defaultValue = "0", description = "Reports to print, then exit (default: until interrupted).")
    int count;

    /** Whether {@link #prepare} ran: {@code sidecar.url} may be the MOUNTPOINT's since. */
    private boolean prepared;

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

    /**
     * Checks the options and points {@code sidecar} at the MOUNTPOINT's recorded endpoint when one
     * is given; returns the interval in seconds ({@code defaultInterval} unless given). Bad
     * options are an IllegalArgumentException.
     */
    double prepare(SidecarOptions sidecar, double defaultInterval) throws IOException {
        double every = every(defaultInterval);
        if (prepared) {
            return every;
        }
        if (mountPoint != null && sidecar.url != null) {
            throw new IllegalArgumentException("give a MOUNTPOINT or --sidecar, not both: the mount recorded its endpoint");
        }
        if (home != null && mountPoint == null) {
            throw new IllegalArgumentException("--home goes with a MOUNTPOINT: give the mount point to watch");
        }
        if (mountPoint != null) {
            sidecar.url = SidecarOptions.recordedFor(mountPoint, home != null ? home : EmbeddedVolume.defaultHome());
        }
        prepared = true;
        return every;
    }

    /** Scrapes {@code sidecar} every interval ({@code defaultInterval} unless given) until {@code --count} reports are made. */
    void run(SidecarOptions sidecar, double defaultInterval, Report report) throws IOException {
        run(sidecar, defaultInterval, () -> { }, report);
    }

    /** As {@link #run(SidecarOptions, double, Report)}, calling {@code answered} once the first scrape came back (for a header). */
    void run(SidecarOptions sidecar, double defaultInterval, Runnable answered, Report report) throws IOException {
        double every = prepare(sidecar, defaultInterval);
        Map<String, Double> before = StatsCommand.parse(sidecar.call("GET", "/metrics"));
        answered.run();
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
