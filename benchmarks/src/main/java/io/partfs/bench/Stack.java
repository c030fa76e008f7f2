package io.partfs.bench;

import io.partfs.engine.object.S3ObjectStore;
import io.partfs.engine.testing.LatencyProxy;
import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.S3Server;
import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The servers and mounts the benchmarks compare on: a real redis-server, an s3proxy keeping
 * objects in files, a {@link LatencyProxy} in front of it, a PartFS volume (Redis metadata,
 * data in bucket "partfs") mounted through scripts/partfs, and rclone mount / s3fs over plain
 * objects in bucket "plain" through the same proxy. Everything started here is stopped by
 * {@link #close()}.
 */
final class Stack implements AutoCloseable {
    final Path work;
    final RedisServer redis;
    final S3Server s3;
    final LatencyProxy proxy;
    final int httpPort;
    final Map<String, String> env = new HashMap<>();

    Stack(Path work) throws Exception {
        this.work = work;
        RedisServer r = null;
        S3Server s = null;
        try {
            r = RedisServer.start();
            s = S3Server.start(Files.createDirectories(work.resolve("s3")));
            this.proxy = new LatencyProxy(s.endpoint().getPort());
        } catch (Exception e) {
            if (s != null) {
                s.close();
            }
            if (r != null) {
                r.close();
            }
            throw e;
        }
        this.redis = r;
        this.s3 = s;
        this.httpPort = RedisServer.freePort();
        env.put("PARTFS_HOME", work.resolve("home").toString());
        env.put("PARTFS_ACCESS_KEY", S3Server.ACCESS_KEY);
        env.put("PARTFS_SECRET_KEY", S3Server.SECRET_KEY);
    }

    /** Fails, before anything runs, on a mode in --modes that the benchmark does not have. */
    static void checkModes(java.util.List<String> modes, java.util.List<String> known) {
        for (String m : modes) {
            if (!known.contains(m)) {
                throw new IllegalArgumentException("unknown mode " + m + " in --modes; the modes are " + String.join(",", known));
            }
        }
    }

    /**
     * Where a benchmark's report goes, settled before the benchmark runs, so that a bad --out
     * fails at once rather than after the run: {@code out} itself, or {@code name} inside it
     * when it is a directory. Its parent directory is made if need be.
     */
    static Path reportFile(Path out, String name) {
        Path file = (Files.isDirectory(out) ? out.resolve(name) : out).toAbsolutePath();
        try {
            Files.createDirectories(file.getParent());
        } catch (IOException e) {
            throw new IllegalArgumentException("--out " + out + ": cannot make its directory (" + e + ")");
        }
        if (!Files.isWritable(file.getParent()) || Files.exists(file) && !Files.isWritable(file)) {
            throw new IllegalArgumentException("--out " + file + " is not writable; give a file or a directory you can write");
        }
        return file;
    }

    /** Prints a benchmark's markdown report and writes it to {@code out} (its directory made if need be). */
    static void report(java.nio.file.Path out, CharSequence md) throws java.io.IOException {
        System.out.println(md);
        java.nio.file.Files.createDirectories(out.toAbsolutePath().getParent());
        java.nio.file.Files.writeString(out, md);
    }

    static void progress(String fmt, Object... args) {
        System.err.printf("[%s] %s%n", LocalDateTime.now().format(DateTimeFormatter.ofPattern("HH:mm:ss")), String.format(fmt, args));
    }

    /** Where the PartFS volume's metadata is: Redis database 1, or the RocksDB directory {@link #useRocksDb} chose. */
    String metaUrl() {
        return rocksDb != null ? rocksDb.toString() : "redis://127.0.0.1:" + redis.port() + "/1";
    }

    private Path rocksDb;

    /** Keeps the PartFS volume's metadata in RocksDB under the work directory, as the Kubernetes sidecar does, not in Redis. */
    void useRocksDb() {
        rocksDb = work.resolve("meta");
    }

    /** Formats the PartFS volume "bench" ({@link #metaUrl}, bucket partfs via the proxy). */
    void formatPartFs() throws Exception {
        String storage = "s3://partfs/bench?endpoint=http://127.0.0.1:" + proxy.port() + "&path-style=true&region=us-east-1";
        Procs.ok(Procs.partfs("format", "bench", "--meta", metaUrl(), "--storage", storage), env);
    }

    /** Mounts PartFS at {@code mnt} with the given extra options; returns the sidecar's pid. */
    long mountPartFs(Path mnt, List<String> options) throws Exception {
        List<String> a = new ArrayList<>(List.of("mount", mnt.toString(), "--background", "--meta", metaUrl(),
                "--http-address", "127.0.0.1:" + httpPort));
        a.addAll(options);
        String o = Procs.ok(Procs.partfs(a.toArray(String[]::new)), env);
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("pid (\\d+)").matcher(o);
        if (!m.find()) {
            throw new IOException("no pid in: " + o);
        }
        return Long.parseLong(m.group(1));
    }

    void umountPartFs(Path mnt) throws Exception {
        Procs.ok(Procs.partfs("umount", mnt.toString()), env);
    }

    /** The plain bucket rclone and s3fs read, under prefix {@code ch/}. */
    S3ObjectStore plainStore() {
        return new S3ObjectStore(s3.config("plain").endpoint(URI.create("http://127.0.0.1:" + proxy.port())).prefix("ch/").build());
    }

    /** rclone mount of plain/ch with its full VFS cache; stop with {@link #stopTool}. */
    Process startRclone(Path mnt) throws Exception {
        Map<String, String> e = new LinkedHashMap<>();
        e.put("RCLONE_CONFIG_BENCH_TYPE", "s3");
        e.put("RCLONE_CONFIG_BENCH_PROVIDER", "Other");
        e.put("RCLONE_CONFIG_BENCH_ENV_AUTH", "false");
        e.put("RCLONE_CONFIG_BENCH_ACCESS_KEY_ID", S3Server.ACCESS_KEY);
        e.put("RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY", S3Server.SECRET_KEY);
        e.put("RCLONE_CONFIG_BENCH_ENDPOINT", "http://127.0.0.1:" + proxy.port());
        e.put("RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE", "true");
        ProcessBuilder pb = new ProcessBuilder("rclone", "mount", "bench:plain/ch", mnt.toString(), "--vfs-cache-mode", "full",
                "--cache-dir", work.resolve("rclone-cache").toString(), "--allow-other", "--log-file", work.resolve("rclone.log").toString())
                .redirectErrorStream(true).redirectOutput(work.resolve("rclone.out").toFile());
        pb.environment().putAll(e);
        pb.environment().remove("AWS_CA_BUNDLE"); // rclone cannot use one with its own HTTP transport
        Process p = pb.start();
        Procs.awaitMounted(mnt, true, p);
        return p;
    }

    /** s3fs of plain:/ch with its local cache; stop with {@link #stopTool}. */
    Process startS3fs(Path mnt) throws Exception {
        Path passwd = work.resolve("s3fs.passwd");
        Files.writeString(passwd, S3Server.ACCESS_KEY + ":" + S3Server.SECRET_KEY + "\n");
        Files.setPosixFilePermissions(passwd, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
        Process p = new ProcessBuilder("s3fs", "plain:/ch", mnt.toString(), "-f", "-o", "url=http://127.0.0.1:" + proxy.port(),
                "-o", "use_path_request_style", "-o", "passwd_file=" + passwd, "-o", "allow_other", "-o", "umask=0022",
                "-o", "use_cache=" + Files.createDirectories(work.resolve("s3fs-cache")), "-o", "nonempty")
                .redirectErrorStream(true).redirectOutput(work.resolve("s3fs.out").toFile()).start();
        Procs.awaitMounted(mnt, true, p);
        return p;
    }

    /**
     * bindfs of {@code source} at {@code mnt}: a C FUSE filesystem (libfuse 2) that passes each
     * call through to local disk, with 128 KiB writes as the others get; stop with {@link #stopTool}.
     */
    Process startBindfs(Path source, Path mnt) throws Exception {
        Process p = new ProcessBuilder("bindfs", "-f", "-o", "big_writes", source.toString(), mnt.toString())
                .redirectErrorStream(true).redirectOutput(work.resolve("bindfs.out").toFile()).start();
        Procs.awaitMounted(mnt, true, p);
        return p;
    }

    /** Unmounts rclone, s3fs or bindfs and waits for the process. */
    static void stopTool(Process tool, Path mnt) throws Exception {
        Procs.unmount(mnt);
        tool.destroy();
        tool.waitFor();
    }

    @Override
    public void close() throws Exception {
        proxy.close();
        s3.close();
        redis.close();
    }
}
