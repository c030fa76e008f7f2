package io.partfs.cli;

import io.partfs.engine.testing.RedisServer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A real clickhouse-server (Debian's 18.16 package) on free loopback ports, with its config and
 * logs in {@code confDir} and its whole {@code <path>} in {@code dataDir}. Queries go over HTTP.
 * Stopped with SIGTERM by its own process handle. Shared with the benchmarks (test-jar).
 */
public final class ClickHouseServer implements AutoCloseable {
    public static final Path BINARY = Path.of("/usr/sbin/clickhouse-server");

    private final Path confDir;
    private final Path dataDir;
    private final String logLevel;
    private int httpPort;
    private int tcpPort;
    private Process process;

    public ClickHouseServer(Path confDir, Path dataDir) throws IOException {
        this(confDir, dataDir, "information");
    }

    /** As above, logging at {@code logLevel} (trace names every part created, renamed and removed). */
    public ClickHouseServer(Path confDir, Path dataDir, String logLevel) throws IOException {
        if (!Files.isExecutable(BINARY)) {
            throw new IOException("clickhouse-server is not installed: apt-get install clickhouse-server (scripts/test does)");
        }
        this.confDir = confDir;
        this.dataDir = dataDir;
        this.logLevel = logLevel;
        Files.createDirectories(confDir.resolve("log"));
        writeConfig();
        Files.writeString(confDir.resolve("users.xml"), """
                <?xml version="1.0"?>
                <yandex>
                    <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
                    <users><default><password></password><networks><ip>127.0.0.1</ip></networks>
                        <profile>default</profile><quota>default</quota></default></users>
                    <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
                        <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time>
                    </interval></default></quotas>
                </yandex>
                """);
    }

    /** Writes config.xml, with a free port for each of the server's ports not chosen yet (0). */
    private void writeConfig() throws IOException {
        if (httpPort == 0) {
            httpPort = RedisServer.freePort();
        }
        if (tcpPort == 0) {
            tcpPort = RedisServer.freePort();
        }
        Files.writeString(confDir.resolve("config.xml"), """
                <?xml version="1.0"?>
                <yandex>
                    <logger>
                        <level>%5$s</level>
                        <log>%1$s/log/server.log</log>
                        <errorlog>%1$s/log/server.err.log</errorlog>
                        <size>100M</size>
                        <count>2</count>
                    </logger>
                    <http_port>%2$d</http_port>
                    <tcp_port>%3$d</tcp_port>
                    <listen_host>127.0.0.1</listen_host>
                    <max_connections>100</max_connections>
                    <max_concurrent_queries>20</max_concurrent_queries>
                    <uncompressed_cache_size>104857600</uncompressed_cache_size>
                    <mark_cache_size>104857600</mark_cache_size>
                    <path>%4$s/</path>
                    <tmp_path>%4$s/tmp/</tmp_path>
                    <user_files_path>%4$s/user_files/</user_files_path>
                    <users_config>%1$s/users.xml</users_config>
                    <default_profile>default</default_profile>
                    <default_database>default</default_database>
                    <mlock_executable>false</mlock_executable>
                </yandex>
                """.formatted(confDir, httpPort, tcpPort, dataDir, logLevel));
    }

    /** The server's process id, once started (benchmarks read its CPU time). */
    public long pid() {
        return process.pid();
    }

    public int httpPort() {
        return httpPort;
    }

    /** Starts the server and waits (polling SELECT 1, 120 s at most) until it answers. */
    public void start() throws Exception {
        start(Duration.ofSeconds(120));
    }

    /**
     * Starts the server and waits (polling SELECT 1 every 10 ms) until it answers, {@code timeout}
     * at most. A server that exits because another socket took one of its ports before it bound
     * it is started again with another port in its place (twice at most; {@link #httpPort} can
     * change so), its logs of that start kept aside, so that {@link #errors} reads only those of
     * the start that served.
     */
    public void start(Duration timeout) throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                startOnce(timeout);
                return;
            } catch (PortTaken e) {
                if (attempt == 3) {
                    throw e;
                }
                for (String log : List.of("server.log", "server.err.log")) {
                    Path f = confDir.resolve("log").resolve(log);
                    if (Files.exists(f)) {
                        Files.move(f, f.resolveSibling(log + ".port-taken-" + attempt), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
                    }
                }
                boolean http = names(e.getMessage(), httpPort);
                boolean tcp = names(e.getMessage(), tcpPort);
                if (http || !tcp) {
                    httpPort = 0;
                }
                if (tcp || !http) {
                    tcpPort = 0;
                }
                writeConfig();
            }
        }
    }

    private void startOnce(Duration timeout) throws Exception {
        process = new ProcessBuilder(BINARY.toString(), "--config-file=" + confDir.resolve("config.xml"))
                .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(confDir.resolve("log/stdout.log").toFile()))
                .start();
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            try {
                if ("1".equals(query("SELECT 1").trim())) {
                    return;
                }
            } catch (IOException e) {
                // not listening yet
            }
            if (!process.isAlive()) {
                String message = "clickhouse-server exited with " + process.exitValue() + ": " + tail(confDir.resolve("log/server.err.log"));
                process = null;
                throw RedisServer.portTaken(message) ? new PortTaken(message) : new IOException(message);
            }
            if (System.nanoTime() > deadline) {
                throw new IOException("clickhouse-server did not answer within " + timeout.toSeconds() + " s");
            }
            java.util.concurrent.locks.LockSupport.parkNanos(10_000_000L); // poll interval (the startup benchmark times this)
        }
    }

    private static boolean names(String message, int port) {
        return java.util.regex.Pattern.compile(":" + port + "\\b").matcher(message).find();
    }

    /** A start that failed because a port was taken: {@link #start} tries others. */
    private static final class PortTaken extends IOException {
        PortTaken(String message) {
            super(message);
        }
    }

    /**
     * Runs one statement over HTTP and returns its TabSeparated result. Each statement is one
     * HTTP/1.0 request on its own connection, which the server closes once it has answered:
     * 18.16 waits at shutdown for idle keep-alive connections until their keep_alive_timeout
     * (10 s) ends, so with a pooled connection every stop of a server that a test had queried
     * took 10 s instead of 1. A statement is sent once, never retried.
     */
    public String query(String sql) throws IOException {
        byte[] body = sql.getBytes(StandardCharsets.UTF_8);
        try (java.net.Socket socket = new java.net.Socket()) {
            socket.connect(new java.net.InetSocketAddress("127.0.0.1", httpPort), 5_000);
            socket.setSoTimeout(120_000);
            java.io.OutputStream out = socket.getOutputStream();
            out.write(("POST / HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " + body.length
                    + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            out.write(body);
            out.flush();
            String response = new String(socket.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            int headersEnd = response.indexOf("\r\n\r\n");
            if (!response.startsWith("HTTP/1.") || headersEnd < 0) {
                throw new IOException("ClickHouse answered [" + sql + "] with no HTTP response: " + response);
            }
            String answer = response.substring(headersEnd + 4);
            if (!response.substring(0, response.indexOf("\r\n")).matches("HTTP/1\\.[01] 200 .*")) {
                throw new IOException("ClickHouse rejected [" + sql + "]: " + answer.trim());
            }
            return answer;
        }
    }

    /** Stops the server (SIGTERM) and waits for it to exit. */
    public void stop() throws Exception {
        if (process == null) {
            return;
        }
        process.destroy();
        if (!process.waitFor(60, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
        }
        process = null;
    }

    /** Kills the server (SIGKILL, as a pod's restart after its grace period) and waits for it to exit. */
    public void kill() throws Exception {
        if (process == null) {
            return;
        }
        process.destroyForcibly();
        if (!process.waitFor(30, TimeUnit.SECONDS)) {
            throw new IOException("clickhouse-server (pid " + process.pid() + ") did not exit on SIGKILL");
        }
        process = null;
    }

    /** Lines of the error log at level Error or worse. */
    public List<String> errors() throws IOException {
        Path err = confDir.resolve("log/server.err.log");
        if (!Files.exists(err)) {
            return List.of();
        }
        return Files.readAllLines(err).stream()
                .filter(l -> l.contains("<Error>") || l.contains("<Fatal>") || l.contains("<Critical>"))
                .toList();
    }

    /**
     * The server log's 30 lines up to the first error, for a failure message: what ClickHouse
     * was doing when it logged it. Empty when nothing was logged as an error.
     */
    public String errorContext() throws IOException {
        Path log = confDir.resolve("log/server.log");
        if (!Files.exists(log)) {
            return "";
        }
        List<String> lines = Files.readAllLines(log);
        for (int i = 0; i < lines.size(); i++) {
            String l = lines.get(i);
            if (l.contains("<Error>") || l.contains("<Fatal>") || l.contains("<Critical>")) {
                return String.join("\n", lines.subList(Math.max(0, i - 29), i + 1));
            }
        }
        return "";
    }

    /** The server log's first {@code max} lines that contain {@code needle}. */
    public List<String> logLines(String needle, int max) throws IOException {
        Path log = confDir.resolve("log/server.log");
        if (!Files.exists(log)) {
            return List.of();
        }
        List<String> hits = Files.readAllLines(log).stream().filter(l -> l.contains(needle)).toList();
        return hits.subList(0, Math.min(max, hits.size()));
    }

    private static String tail(Path f) throws IOException {
        if (!Files.exists(f)) {
            return "(no error log)";
        }
        List<String> lines = Files.readAllLines(f);
        return String.join("\n", lines.subList(Math.max(0, lines.size() - 5), lines.size()));
    }

    @Override
    public void close() throws Exception {
        stop();
    }
}
