package io.partfs.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.TempDirs;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * One run of a benchmark script for its IT: the script with the given options and
 * {@code --out} a report in a temporary directory, its output in a log there; the run must
 * finish within its limit and exit 0. {@link #close} removes the directory.
 */
final class BenchScript implements AutoCloseable {
    private final Path dir;
    private final String log;
    private final String report;

    private BenchScript(Path dir, String log, String report) {
        this.dir = dir;
        this.log = log;
        this.report = report;
    }

    static BenchScript run(String script, Duration limit, String... options) throws Exception {
        Path dir = Files.createTempDirectory("partfs-" + script + "-out-");
        try {
            Path md = dir.resolve("report.md");
            List<String> cmd = new ArrayList<>(List.of(Procs.ROOT.resolve("scripts/" + script).toString()));
            cmd.addAll(List.of(options));
            cmd.addAll(List.of("--out", md.toString()));
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(dir.resolve("log.txt").toFile()).start();
            p.getOutputStream().close();
            boolean finished = p.waitFor(limit.toSeconds(), TimeUnit.SECONDS);
            if (!finished) {
                p.destroyForcibly(); // its own exit hook stops what it started
                p.waitFor(60, TimeUnit.SECONDS);
            }
            String log = Files.readString(dir.resolve("log.txt"));
            assertTrue(finished, script + " finishes within " + limit.toMinutes() + " minutes:\n" + log);
            assertEquals(0, p.exitValue(), log);
            return new BenchScript(dir, log, Files.readString(md));
        } catch (Exception | Error e) {
            TempDirs.deleteRecursively(dir);
            throw e;
        }
    }

    /** What the script printed, stdout and stderr together. */
    String log() {
        return log;
    }

    /** The markdown report it wrote. */
    String report() {
        return report;
    }

    @Override
    public void close() throws IOException {
        TempDirs.deleteRecursively(dir);
    }
}
