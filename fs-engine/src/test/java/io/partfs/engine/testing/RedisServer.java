package io.partfs.engine.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * A real redis-server (Debian's package) on a free loopback port with its own temp directory,
 * for tests. Stopped by its own process handle in {@link #close()}.
 */
public final class RedisServer implements AutoCloseable {
    private Process process;
    private final int port;
    private final Path dir;
    /** The command line it was started with, for {@link #restart}; null for a sentinel. */
    private java.util.List<String> command;

    private RedisServer(Process process, int port, Path dir) {
        this.process = process;
        this.port = port;
        this.dir = dir;
    }

    /** The server's process id (benchmarks read its CPU time). */
    public long pid() {
        return process.pid();
    }

    /**
     * Starts a server and waits (polling PING, 20 s at most) until it answers. A port some other
     * socket took before the server bound it is replaced by another, twice at most.
     */
    public static RedisServer start(String... extraArgs) throws IOException {
        for (int attempt = 1; ; attempt++) {
            try {
                return startOnce(extraArgs);
            } catch (PortTaken e) {
                if (attempt == 3) {
                    throw e;
                }
            }
        }
    }

    private static RedisServer startOnce(String... extraArgs) throws IOException {
        String binary = findBinary();
        int port = freePort();
        Path dir = Files.createTempDirectory("partfs-redis-");
        java.util.List<String> cmd = new java.util.ArrayList<>(java.util.List.of(binary, "--port", String.valueOf(port),
                "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir.toString()));
        cmd.addAll(java.util.List.of(extraArgs));
        Process p = new ProcessBuilder(cmd)
                .redirectErrorStream(true)
                .redirectOutput(dir.resolve("redis.log").toFile())
                .start();
        RedisServer server = awaitStarted(new RedisServer(p, port, dir), p, dir);
        server.command = cmd;
        return server;
    }

    /** A server that exited because its port was taken: {@link #start} tries another. */
    private static final class PortTaken extends IOException {
        PortTaken(String message) {
            super(message);
        }
    }

    /**
     * Starts the server again after {@link #kill}, on the same port and directory, as a
     * supervisor restarts a crashed Redis: what it had persisted (start it with
     * {@code --appendonly yes}) is loaded again. Waits until it answers.
     */
    public void restart() throws IOException {
        if (process.isAlive()) {
            throw new IllegalStateException("redis-server on port " + port + " is still running");
        }
        Process p = new ProcessBuilder(command)
                .redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve("redis.log").toFile()))
                .start();
        process = p;
        awaitStarted(this, p, dir);
    }

    /**
     * Starts the server again after {@link #kill} as {@link #restart} does, without waiting for
     * it: one with much data answers LOADING to every request until it has loaded it.
     */
    public void restartNoWait() throws IOException {
        if (process.isAlive()) {
            throw new IllegalStateException("redis-server on port " + port + " is still running");
        }
        process = new ProcessBuilder(command)
                .redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve("redis.log").toFile()))
                .start();
    }

    private static RedisServer awaitStarted(RedisServer server, Process p, Path dir) throws IOException {
        int port = server.port;
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (!server.answersPing()) {
            if (!p.isAlive() || System.nanoTime() > deadline) {
                String log = Files.exists(dir.resolve("redis.log")) ? Files.readString(dir.resolve("redis.log")) : "";
                server.close();
                String message = "redis-server did not start on port " + port + ": " + log;
                throw portTaken(log) ? new PortTaken(message) : new IOException(message);
            }
            java.util.concurrent.locks.LockSupport.parkNanos(20_000_000L); // poll interval
        }
        return server;
    }

    /**
     * Starts a Redis Sentinel watching the master {@code masterName} on {@code masterPort}
     * (quorum 1, down after 1 s), with {@code confLines} in its configuration besides (say its
     * TLS port and files), and waits until it answers on its plain port.
     */
    public static RedisServer startSentinel(String masterName, int masterPort, String... confLines) throws IOException {
        String binary = findBinary();
        int port = freePort();
        Path dir = Files.createTempDirectory("partfs-sentinel-");
        Path conf = dir.resolve("sentinel.conf"); // a sentinel rewrites its config file: one of its own
        java.util.List<String> lines = new java.util.ArrayList<>(java.util.List.of("port " + port, "bind 127.0.0.1", "dir " + dir));
        lines.addAll(java.util.List.of(confLines)); // before the monitor: a sentinel reaches its master as they say (TLS)
        lines.addAll(java.util.List.of("sentinel monitor " + masterName + " 127.0.0.1 " + masterPort + " 1",
                "sentinel down-after-milliseconds " + masterName + " 1000",
                "sentinel failover-timeout " + masterName + " 10000", ""));
        Files.writeString(conf, String.join("\n", lines));
        Process p = new ProcessBuilder(binary, conf.toString(), "--sentinel")
                .redirectErrorStream(true)
                .redirectOutput(dir.resolve("redis.log").toFile())
                .start();
        return awaitStarted(new RedisServer(p, port, dir), p, dir);
    }

    /** Sends one inline command (say {@code WAIT 1 1000}) and returns the first line of the answer. */
    public String command(String line) throws IOException {
        try (Socket s = new Socket("127.0.0.1", port)) {
            s.setSoTimeout(15_000);
            OutputStream out = s.getOutputStream();
            out.write((line + "\r\n").getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            StringBuilder b = new StringBuilder();
            for (int c = in.read(); c >= 0 && c != '\n'; c = in.read()) {
                b.append((char) c);
            }
            return b.toString().trim();
        }
    }

    /** The server's log so far, for test failure messages. */
    public String log() throws IOException {
        Path f = dir.resolve("redis.log");
        return Files.exists(f) ? Files.readString(f) : "";
    }

    /** Kills the server outright (SIGKILL), as a crash would; {@link #close()} still cleans up. */
    public void kill() throws InterruptedException {
        process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    }

    private static String findBinary() throws IOException {
        for (String candidate : new String[] {"/usr/bin/redis-server", "/usr/local/bin/redis-server"}) {
            if (Files.isExecutable(Path.of(candidate))) {
                return candidate;
            }
        }
        throw new IOException("redis-server is not installed: run 'apt-get install redis-server' (CI's .ci/run does)");
    }

    /** Ports this process handed out: not handed out again, as the server given one may not have bound it yet. */
    private static final java.util.Set<Integer> GIVEN = java.util.concurrent.ConcurrentHashMap.newKeySet();

    /**
     * A loopback port free now for a server to be started on, outside the kernel's range for
     * outgoing connections ({@code ip_local_port_range}) where there is room below or above it: a
     * port from that range, as port 0 gives, can be taken by any client socket between this check
     * and the server's bind (CI saw ClickHouse exit with "Address already in use" so). Servers
     * started here still retry on a clash ({@link #start}, ClickHouseServer), as no choice of
     * port can rule it out.
     */
    public static int freePort() throws IOException {
        int[] range = ephemeralRange();
        java.util.concurrent.ThreadLocalRandom random = java.util.concurrent.ThreadLocalRandom.current();
        int below = range[0] - 15_000; // ports 15000 .. range start
        int above = 65_535 - range[1]; // ports after the range end
        for (int attempt = 0; attempt < 200 && (below > 1_000 || above > 1_000); attempt++) {
            int pick = random.nextInt(Math.max(below, 0) + Math.max(above, 0));
            int port = pick < Math.max(below, 0) ? 15_000 + pick : range[1] + 1 + pick - Math.max(below, 0);
            if (GIVEN.contains(port)) {
                continue;
            }
            try (ServerSocket s = new ServerSocket()) {
                s.bind(new InetSocketAddress(java.net.InetAddress.getLoopbackAddress(), port), 1);
            } catch (IOException e) {
                continue; // some server listens there
            }
            if (GIVEN.add(port)) {
                return port;
            }
        }
        while (true) { // no room outside the range: any port the kernel gives
            try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
                if (GIVEN.add(s.getLocalPort())) {
                    return s.getLocalPort();
                }
            }
        }
    }

    /**
     * The kernel's range for outgoing connections (32768 to 60999 unless configured otherwise).
     * Read by lines: {@code Files.readString} returned only its first byte ("3") on these
     * machines, which had made the check above fall back to port 0 every time.
     */
    static int[] ephemeralRange() {
        Path file = Path.of("/proc/sys/net/ipv4/ip_local_port_range");
        String text = "";
        try {
            text = String.join(" ", Files.readAllLines(file)).trim();
            String[] r = text.split("\\s+");
            return new int[] {Integer.parseInt(r[0]), Integer.parseInt(r[1])};
        } catch (java.nio.file.NoSuchFileException e) {
            return new int[] {32_768, 60_999};
        } catch (IOException | RuntimeException e) {
            throw new IllegalStateException("cannot read the port range in " + file + " [" + text + "]", e);
        }
    }

    /** Whether a server's log says it could not listen because its port was taken. */
    public static boolean portTaken(String log) {
        return log.contains("Address already in use");
    }

    private boolean answersPing() {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", port), 200);
            s.setSoTimeout(500);
            OutputStream out = s.getOutputStream();
            out.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = s.getInputStream();
            int first = in.read();
            // "+PONG", or "-NOAUTH" from a server that requires a password: either way it serves.
            return first == '+' || first == '-';
        } catch (IOException e) {
            return false;
        }
    }

    public int port() {
        return port;
    }

    /** URL of database {@code db}. */
    public String url(int db) {
        return "redis://127.0.0.1:" + port + "/" + db;
    }

    @Override
    public void close() throws IOException {
        process.destroy();
        try {
            if (!process.waitFor(10, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        TempDirs.deleteRecursively(dir);
    }
}
