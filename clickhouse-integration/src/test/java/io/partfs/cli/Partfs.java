package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Runs the real {@code scripts/partfs} launcher as a user would, with its own data home.
 * Integration tests only: it needs the packaged jar (failsafe runs after package).
 */
final class Partfs {
    static final Path ROOT = Path.of(System.getProperty("basedir", ".")).toAbsolutePath().getParent();
    static final Path LAUNCHER = ROOT.resolve("scripts/partfs");

    private final Path home;
    private final Map<String, String> env = new java.util.HashMap<>();

    Partfs(Path home) {
        this.home = home;
        env.put("PARTFS_HOME", home.toString());
    }

    Partfs env(String k, String v) {
        env.put(k, v);
        return this;
    }

    /** Leaves variable {@code k} out of the commands' environment, whatever this JVM's holds. */
    Partfs unset(String k) {
        env.put(k, null);
        return this;
    }

    Path home() {
        return home;
    }

    private static int freePort() {
        try {
            return io.partfs.engine.testing.RedisServer.freePort();
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    record Result(int exit, String out, String err) {
        String all() {
            return out + err;
        }
    }

    ProcessBuilder builder(String... args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(LAUNCHER.toString());
        cmd.addAll(List.of(args));
        if (args.length > 0 && args[0].equals("mount") && cmd.stream().noneMatch(a -> a.startsWith("--http-address"))) {
            // a port of its own: mount's default (127.0.0.1:9569) may be held by a test in the other test JVM,
            // and a mount whose default port is taken runs without its HTTP endpoint
            cmd.add("--http-address");
            cmd.add("127.0.0.1:" + freePort());
        }
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.environment().remove("PARTFS_ACCESS_KEY");
        pb.environment().remove("PARTFS_SECRET_KEY");
        env.forEach((k, v) -> {
            if (v == null) {
                pb.environment().remove(k);
            } else {
                pb.environment().put(k, v);
            }
        });
        return pb;
    }

    /**
     * Starts {@code partfs mount ...} in the foreground, as a sidecar container runs it, output
     * to {@code log}, and returns once a live PartFS mount is at {@code mnt}.
     */
    Process startMount(List<String> mountArgs, Path mnt, Path log) throws Exception {
        Process p = builder(mountArgs.toArray(String[]::new)).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (!(io.partfs.engine.fuse.Mounts.isMounted(mnt) && !io.partfs.engine.fuse.Mounts.disconnected(mnt)
                && "fuse.partfs".equals(io.partfs.engine.fuse.Mounts.typeAt(mnt)))) {
            assertTrue(p.isAlive(), "the sidecar exited: " + Files.readString(log));
            assertTrue(System.nanoTime() < deadline, "no live mount within 120 s: " + Files.readString(log));
            java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20)); // poll interval
        }
        return p;
    }

    Result run(String... args) throws Exception {
        Process p = builder(args).start();
        p.getOutputStream().close();
        var out = p.getInputStream();
        var err = p.getErrorStream();
        java.util.concurrent.CompletableFuture<String> errText = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
            try {
                return new String(err.readAllBytes(), StandardCharsets.UTF_8);
            } catch (IOException e) {
                return e.toString();
            }
        });
        String outText = new String(out.readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(300, TimeUnit.SECONDS), "partfs " + String.join(" ", args) + " did not finish");
        return new Result(p.exitValue(), outText, errText.get());
    }

    /**
     * Formats volume {@code name} (1 MiB blocks) in {@code bucket} of the S3 server at
     * {@code endpoint} (path-style, the test server's keys), metadata at {@code meta}.
     */
    void formatOnS3(String meta, java.net.URI endpoint, String bucket, String name) throws Exception {
        env("PARTFS_ACCESS_KEY", io.partfs.engine.testing.S3Server.ACCESS_KEY)
                .env("PARTFS_SECRET_KEY", io.partfs.engine.testing.S3Server.SECRET_KEY);
        ok("format", "--meta", meta, "--storage", "s3://" + bucket + "/" + name + "?endpoint=" + endpoint + "&path-style=true",
                "--block-size", "1M", name);
    }

    /** What the background mounts of this home logged, all their log files together. */
    String mountLogs() throws IOException {
        StringBuilder all = new StringBuilder();
        try (java.util.stream.Stream<Path> logs = Files.list(home.resolve("logs"))) {
            for (Path p : logs.filter(p -> p.getFileName().toString().startsWith("mount-")).sorted().toList()) {
                all.append(Files.readString(p));
            }
        }
        return all.toString();
    }

    /** Runs and requires exit 0. */
    Result ok(String... args) throws Exception {
        Result r = run(args);
        org.junit.jupiter.api.Assertions.assertEquals(0, r.exit(), String.join(" ", args) + ": " + r.all());
        return r;
    }

    /** Unmounts {@code mnt} (through partfs umount, then fusermount -z if needed) and deletes {@code dir}. */
    void unmountAndDelete(Path mnt, Path dir) throws Exception {
        if (io.partfs.engine.fuse.Mounts.isMounted(mnt)) {
            run("umount", mnt.toString());
        }
        ensureUnmounted(mnt);
        io.partfs.engine.testing.TempDirs.deleteRecursively(dir);
    }

    /** The partfs: lines of stderr (the launcher's own build notice and logging left out). */
    static List<String> errorLines(Result r) {
        return r.err().lines().filter(l -> l.startsWith("partfs: ") && !l.startsWith("partfs: building") && !l.startsWith("partfs: preparing")).toList();
    }

    static void awaitMounted(Path mp, boolean mounted) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (io.partfs.engine.fuse.Mounts.isMounted(mp) != mounted) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError(mp + (mounted ? " did not get mounted" : " is still mounted"));
            }
            java.util.concurrent.locks.LockSupport.parkNanos(20_000_000L); // poll interval
        }
    }

    static void ensureUnmounted(Path mp) throws Exception {
        if (io.partfs.engine.fuse.Mounts.isMounted(mp)) {
            new ProcessBuilder("fusermount", "-u", "-z", mp.toString()).inheritIO().start().waitFor();
        }
        Files.createDirectories(mp);
    }
}
