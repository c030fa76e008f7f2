package io.partfs.bench;

import io.partfs.engine.fuse.Mounts;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/** Small process and system helpers for the benchmarks. */
final class Procs {
    private Procs() {
    }

    static final Path ROOT = findRoot();

    /**
     * Runs a benchmark's picocli command and exits with its code; its help is wrapped as the
     * partfs command's is (each option's description one paragraph, not a line per source line).
     * Bad options (an IllegalArgumentException from the command) get one line and exit 2, as
     * picocli's own usage errors do; anything else is a bug and keeps its stack trace.
     */
    static void main(Object command, String[] args) {
        System.exit(commandLine(command).execute(args));
    }

    static picocli.CommandLine commandLine(Object command) {
        picocli.CommandLine cl = new picocli.CommandLine(command);
        io.partfs.cli.Main.reflow(cl);
        cl.setExecutionExceptionHandler((e, c, parsed) -> {
            if (!(e instanceof IllegalArgumentException)) {
                throw e;
            }
            c.getErr().println(c.getCommandName() + ": " + e.getMessage());
            return 2;
        });
        return cl;
    }

    private static Path findRoot() {
        Path p = Path.of("").toAbsolutePath();
        while (p != null && !Files.exists(p.resolve("scripts/partfs"))) {
            p = p.getParent();
        }
        if (p == null) {
            throw new IllegalStateException("run the benchmarks from the PartFS checkout (scripts/partfs not found)");
        }
        return p;
    }

    record Result(int exit, String out) {
    }

    /** Runs a command to completion (10 minutes at most), stdout and stderr together. */
    static Result run(List<String> cmd, Map<String, String> env) throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().putAll(env);
        Process p = pb.start();
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(10, TimeUnit.MINUTES)) {
            p.destroyForcibly();
            throw new IOException(String.join(" ", cmd) + " did not finish in 10 minutes");
        }
        return new Result(p.exitValue(), out);
    }

    /** Runs a command and fails with its output unless it exits 0. */
    static String ok(List<String> cmd, Map<String, String> env) throws IOException, InterruptedException {
        Result r = run(cmd, env);
        if (r.exit() != 0) {
            throw new IOException(String.join(" ", cmd) + " exited " + r.exit() + ": " + r.out().trim());
        }
        return r.out();
    }

    static List<String> partfs(String... args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(ROOT.resolve("scripts/partfs").toString());
        cmd.addAll(List.of(args));
        return cmd;
    }

    static void awaitMounted(Path mp, boolean mounted, Process owner) throws IOException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (Mounts.isMounted(mp) != mounted) {
            if (owner != null && !owner.isAlive() && mounted) {
                throw new IOException("the mount process exited with " + owner.exitValue());
            }
            if (System.nanoTime() > deadline) {
                throw new IOException(mp + (mounted ? " did not get mounted" : " is still mounted") + " after 60 s");
            }
            LockSupport.parkNanos(20_000_000L); // poll interval
        }
    }

    /** Unmounts a FUSE mount (lazily if busy) and waits until it is gone. */
    static void unmount(Path mp) throws IOException, InterruptedException {
        if (Mounts.isMounted(mp)) {
            if (run(List.of("fusermount", "-u", mp.toString()), Map.of()).exit() != 0) {
                run(List.of("fusermount", "-u", "-z", mp.toString()), Map.of());
            }
            awaitMounted(mp, false, null);
        }
    }

    /** Peak resident set size of a process in bytes (VmHWM), or -1. */
    static long peakRss(long pid) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
                if (line.startsWith("VmHWM:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
                }
            }
        } catch (IOException | NumberFormatException e) {
            return -1;
        }
        return -1;
    }

    /** CPU time (user and system) a live process has used, from /proc; NaN when it cannot be read. */
    static double cpuSeconds(long pid) {
        try {
            return cpuOfStat(Files.readString(Path.of("/proc/" + pid + "/stat")));
        } catch (IOException | RuntimeException e) {
            return Double.NaN;
        }
    }

    /** User plus system seconds from a /proc stat line (of a process or of one of its threads). */
    private static double cpuOfStat(String stat) {
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return (Long.parseLong(f[11]) + Long.parseLong(f[12])) / 100.0; // utime, stime in USER_HZ (100)
    }

    /**
     * CPU seconds of process {@code pid} by kind of thread (the sidecar's FUSE workers, JIT
     * compilers, Redis client, readahead, GC, other), from /proc/PID/task; empty when unreadable.
     * Threads that ended meanwhile are not counted.
     */
    static Map<String, Double> cpuByThread(long pid) {
        Map<String, Double> out = new java.util.TreeMap<>();
        try (var tasks = Files.list(Path.of("/proc/" + pid + "/task"))) {
            for (Path t : (Iterable<Path>) tasks::iterator) {
                String stat;
                try {
                    stat = Files.readString(t.resolve("stat"));
                } catch (IOException e) {
                    continue; // the thread ended
                }
                String comm = stat.substring(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
                out.merge(threadKind(comm), cpuOfStat(stat), Double::sum);
            }
        } catch (IOException | RuntimeException e) {
            return Map.of();
        }
        return out;
    }

    private static String threadKind(String comm) {
        if (comm.startsWith("partfs-fuse")) {
            return "fuse";
        } else if (comm.startsWith("C1 ") || comm.startsWith("C2 ")) {
            return "jit";
        } else if (comm.startsWith("lettuce")) {
            return "redis-client";
        } else if (comm.startsWith("partfs-prefetch")) {
            return "readahead";
        } else if (comm.startsWith("GC ") || comm.startsWith("G1 ")) {
            return "gc";
        }
        return "other";
    }

    static boolean installed(String binary) {
        for (String dir : List.of("/usr/bin", "/usr/sbin", "/usr/local/bin", "/bin", "/sbin")) {
            if (Files.isExecutable(Path.of(dir, binary))) {
                return true;
            }
        }
        return false;
    }
}
