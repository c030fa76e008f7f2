package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.cache.MergeTreePaths;
import io.partfs.engine.fuse.Mounts;
import io.partfs.engine.testing.RedisServer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 5 end to end on Debian's ClickHouse 18.16: the config from {@code partfs clickhouse
 * config} puts the server on the mount, {@code partfs sql} creates a table with
 * {@code use_metadata_cache = true} (which 18.16 rejects) and registers it, {@code partfs
 * clickhouse install} creates the view, and the view answers like
 * system.merge_tree_metadata_cache did, values byte-identical to the files, point lookups
 * transferring one row. /metrics passes promtool. All of it again after both restart.
 */
class ClickHouseViewIT {
    private static final String VIEW = "partfs.merge_tree_metadata_cache";

    private Path dir;
    private Path mnt;
    private Partfs partfs;
    private ClickHouseServer ch;
    private int httpPort;
    private final HttpClient http = HttpClient.newHttpClient();

    @BeforeEach
    void setUp() throws Exception {
        dir = Files.createTempDirectory("partfs-chview-");
        mnt = dir.resolve("mnt");
        partfs = new Partfs(dir.resolve("home")).env(ClickHouseOptions.PASSWORD_ENV, "");
        httpPort = RedisServer.freePort();
    }

    @AfterEach
    void tearDown() throws Exception {
        if (ch != null) {
            ch.close();
        }
        partfs.unmountAndDelete(mnt, dir);
    }


    private String chUrl() {
        return "http://127.0.0.1:" + ch.httpPort();
    }

    private String sidecar() {
        return "http://127.0.0.1:" + httpPort;
    }

    private void mount() throws Exception {
        partfs.ok("mount", mnt.toString(), "--background", "--http-address", "127.0.0.1:" + httpPort, "--clickhouse", chUrl());
    }

    private String get(String path) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(sidecar() + path)).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        return r.body();
    }

    private long rowsSentToTheView() throws Exception {
        return get("/metrics").lines().filter(l -> l.startsWith("partfs_http_cache_rows_total{path=\"/metadata-cache/view\"}"))
                .mapToLong(l -> Long.parseLong(l.substring(l.lastIndexOf(' ') + 1))).sum();
    }

    @Test
    void viewSqlConfigTablesAndMetricsOnClickHouse1816() throws Exception {
        ch = new ClickHouseServer(dir.resolve("conf"), Files.createDirectories(dir.resolve("local-data")));
        mount();
        Partfs.Result config = partfs.ok("clickhouse", "config", "--mountpoint", mnt.toString(), "--style", "path",
                "--write", dir.resolve("conf/config.d").toString());
        assertTrue(Files.readString(dir.resolve("conf/config.d/partfs.xml")).contains("<path>" + mnt + "/</path>"), config.out());
        ch.start();

        Partfs.Result created = partfs.ok("sql", "--clickhouse", chUrl(), "--sidecar", sidecar(),
                "CREATE TABLE default.hits (d Date, k UInt64, s String) ENGINE = MergeTree PARTITION BY d ORDER BY k "
                        + "SETTINGS index_granularity = 8192, use_metadata_cache = true");
        assertTrue(created.out().contains("registered it with the sidecar"), created.all());
        partfs.ok("sql", "--clickhouse", chUrl(), "CREATE TABLE default.plain (d Date, k UInt64) ENGINE = MergeTree PARTITION BY d ORDER BY k");
        for (String t : List.of("hits", "plain")) {
            ch.query("INSERT INTO default." + t + " SELECT toDate('2020-01-01') + number % 3, number"
                    + (t.equals("hits") ? ", toString(number)" : "") + " FROM system.numbers LIMIT 30000");
        }
        assertTablesListing();

        Partfs.Result install = partfs.ok("clickhouse", "install", "--clickhouse", chUrl(), "--sidecar", sidecar());
        assertTrue(install.out().contains("created partfs.merge_tree_metadata_cache"), install.out());

        List<String> ten = ch.query("SELECT key FROM " + VIEW + " WHERE key LIKE 'default:%' LIMIT 10").lines().toList();
        assertEquals(10, ten.size(), String.valueOf(ten));
        ten.forEach(k -> assertTrue(k.startsWith("default:data/default/hits/"), "only the cached table: " + k));

        Set<String> expected = metadataFilesOf("data/default/hits");
        Set<String> listed = new TreeSet<>(ch.query("SELECT key FROM " + VIEW + " WHERE key LIKE 'default:data/default/hits/%'").lines().toList());
        assertEquals(expected, listed, "the view lists every part-metadata file of the cached table");
        assertValuesByteIdentical(expected);

        String metrics = get("/metrics");
        assertPromtoolAccepts(metrics);
        for (String family : List.of("partfs_fuse_operations_total", "partfs_fuse_operations_seconds_bucket", "partfs_object_requests_total",
                "partfs_object_bytes_total", "partfs_meta_transactions_total", "partfs_block_cache_hits_total",
                "partfs_metadata_cache_hits_total", "partfs_metadata_cache_misses_total", "partfs_metadata_cache_entries")) {
            assertTrue(metrics.contains("\n" + family), family + " missing from /metrics");
        }

        // Both restarted: the registration is kept, the view still answers from the cache.
        ch.stop();
        partfs.ok("umount", mnt.toString());
        mount();
        ch.start();
        assertTablesListing();
        assertValuesByteIdentical(expected);
        assertTrue(metricValue("partfs_metadata_cache_hits_total") > 0, "ClickHouse's part loading was served from the cache");
        // written before the table was registered, so cached when ClickHouse read them at its start
        assertEquals("default:data/default/hits/format_version.txt\ndefault:metadata/default/hits.sql",
                ch.query("SELECT key FROM " + VIEW + " WHERE key IN ('default:data/default/hits/format_version.txt', "
                        + "'default:metadata/default/hits.sql') ORDER BY key").trim());

        String secret = "hunter2-secret";
        Partfs.Result denied = new Partfs(dir.resolve("home")).env(ClickHouseOptions.PASSWORD_ENV, secret)
                .run("sql", "--clickhouse", chUrl(), "--clickhouse-user", "nobody", "SELECT 1");
        assertEquals(1, denied.exit(), denied.all());
        assertEquals(1, Partfs.errorLines(denied).size(), denied.err());
        assertFalse(denied.all().contains(secret), "the password never appears: " + denied.all());
        assertEquals(List.of(), ch.errors().stream().filter(l -> !l.contains("nobody")).toList(), "ClickHouse logged errors");
    }

    private void assertTablesListing() throws Exception {
        Partfs.Result tables = partfs.ok("clickhouse", "tables", "--clickhouse", chUrl(), "--sidecar", sidecar());
        String hits = tables.out().lines().filter(l -> l.startsWith("default.hits ")).findFirst().orElseThrow();
        String plain = tables.out().lines().filter(l -> l.startsWith("default.plain ")).findFirst().orElseThrow();
        assertTrue(hits.contains("yes (registered)") && hits.contains(mnt + "/data/default/hits/"), tables.out());
        assertTrue(plain.contains(" no "), tables.out());
    }

    /** Every key's value read through ClickHouse equals the file on the mount; each lookup sends one row. */
    private void assertValuesByteIdentical(Set<String> keys) throws Exception {
        boolean binarySeen = false;
        for (String key : keys) {
            long before = rowsSentToTheView();
            String hex = ch.query("SELECT hex(value) FROM " + VIEW + " WHERE key = '" + key + "'").trim();
            byte[] file = Files.readAllBytes(mnt.resolve(key.substring("default:".length())));
            assertEquals(HexFormat.of().withUpperCase().formatHex(file), hex, key);
            assertEquals(1, rowsSentToTheView() - before, "a point lookup transfers one row: " + key);
            for (byte b : file) {
                binarySeen |= b == 0 || b == '\t' || b == '\n' || b < 0;
            }
        }
        assertTrue(binarySeen, "some values (primary.idx, minmax) hold binary bytes");
    }

    private Set<String> metadataFilesOf(String tableDir) throws Exception {
        Set<String> out = new TreeSet<>();
        try (Stream<Path> s = Files.walk(mnt.resolve(tableDir))) {
            s.filter(Files::isRegularFile).map(p -> mnt.relativize(p).toString())
                    .filter(MergeTreePaths::isPartMetadataFile).forEach(p -> out.add("default:" + p));
        }
        assertTrue(out.size() >= 3 * 6, "3 parts with at least 6 metadata files each: " + out);
        return out;
    }

    private long metricValue(String name) throws Exception {
        return get("/metrics").lines().filter(l -> l.startsWith(name + " ")).mapToLong(l -> Long.parseLong(l.substring(name.length() + 1))).sum();
    }

    private static void assertPromtoolAccepts(String metrics) throws Exception {
        Path promtool = Path.of("/usr/bin/promtool");
        assertTrue(Files.isExecutable(promtool), "promtool (Debian package prometheus) checks the format; scripts/test installs it");
        Process p = new ProcessBuilder(promtool.toString(), "check", "metrics").redirectErrorStream(true).start();
        p.getOutputStream().write(metrics.getBytes(java.nio.charset.StandardCharsets.UTF_8));
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes());
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), "promtool check metrics: " + out);
        assertEquals("", out.trim(), "promtool lint findings");
    }

    @Test
    void badInputGetsOneLineAndAnExitCode() throws Exception {
        int closed = RedisServer.freePort();
        String[][] cases = {
                {"sql", "--clickhouse", "127.0.0.1:" + closed, "SELECT 1"},
                {"sql", "--clickhouse", "http://user:pw@127.0.0.1:8123", "SELECT 1"},
                {"clickhouse", "install", "--sidecar", "http://127.0.0.1:" + closed},
                {"clickhouse", "config", "--mountpoint", mnt.toString(), "--style", "bogus"},
                {"clickhouse", "config", "--mountpoint", mnt.toString(), "--clickhouse", "127.0.0.1:" + closed},
                {"mount", mnt.toString(), "--http-address", "0.0.0.0:" + closed},
                {"mount", mnt.toString(), "--http-address", "nonsense"},
        };
        for (String[] args : cases) {
            Partfs.Result r = partfs.run(args);
            assertEquals(1, r.exit(), String.join(" ", args) + ": " + r.all());
            List<String> lines = Partfs.errorLines(r);
            assertEquals(1, lines.size(), String.join(" ", args) + ": " + r.err());
            assertFalse(lines.get(0).contains("Exception"), lines.get(0));
            System.out.println(String.join(" ", args) + "\n  -> " + lines.get(0));
        }
        assertFalse(Mounts.isMounted(mnt));
    }
}
