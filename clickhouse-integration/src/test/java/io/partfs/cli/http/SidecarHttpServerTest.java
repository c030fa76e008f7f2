package io.partfs.cli.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.cache.PartMetadataCache;
import io.partfs.cache.PartMetadataStore;
import io.partfs.cache.TableSelector;
import io.partfs.engine.metrics.Metrics;
import io.partfs.engine.testing.TempDirs;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The endpoint over a real RocksDB store: rows in both formats, filters, tables, drop, auth. */
class SidecarHttpServerTest {
    private Path dir;
    private PartMetadataStore store;
    private PartMetadataCache cache;
    private SidecarHttpServer server;
    private final HttpClient http = HttpClient.newHttpClient();

    @BeforeEach
    void setUp() throws Exception {
        dir = Files.createTempDirectory("partfs-http-");
        store = PartMetadataStore.open(dir.resolve("cache"), 8 << 20, false);
        cache = new PartMetadataCache(store, "default", TableSelector.parse("db.*"),
                p -> { throw new java.io.IOException("no DDL in this test"); });
        store.put("default:data/db/t/all_1_1_0/primary.idx", new PartMetadataStore.Entry(7, 5, 1, new byte[] {0, '\t', '\n', '\\', (byte) 0xff}));
        store.put("default:data/db/t/all_1_1_0/count.txt", new PartMetadataStore.Entry(8, 1, 1, new byte[] {'3'}));
        store.put("default:data/db/u/all_2_2_0/count.txt", new PartMetadataStore.Entry(9, 1, 1, new byte[] {'4'}));
    }

    @AfterEach
    void tearDown() throws Exception {
        if (server != null) {
            server.close();
        }
        store.close();
        TempDirs.deleteRecursively(dir);
    }

    private SidecarHttpServer start(String token) throws Exception {
        server = SidecarHttpServer.start("127.0.0.1:0", token, new SidecarHttpServer.Sources(new Metrics(), cache, null, "partfs.v"));
        return server;
    }

    private HttpResponse<byte[]> send(String method, String path, String bearer) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + server.port() + path))
                .method(method, HttpRequest.BodyPublishers.noBody());
        if (bearer != null) {
            b.header("Authorization", "Bearer " + bearer);
        }
        return http.send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
    }

    private String get(String path) throws Exception {
        HttpResponse<byte[]> r = send("GET", path, null);
        assertEquals(200, r.statusCode(), new String(r.body()));
        return new String(r.body(), java.nio.charset.StandardCharsets.ISO_8859_1);
    }

    @Test
    void rowsInTabSeparatedAndJsonEscapeBinaryValues() throws Exception {
        start(null);
        assertEquals("default:data/db/t/all_1_1_0/primary.idx\t\\0\\t\\n\\\\\u00ff\tdb.t\tall_1_1_0\tprimary.idx\t5\n",
                get("/metadata-cache?key=default:data/db/t/all_1_1_0/primary.idx"));
        assertEquals("{\"key\":\"default:data/db/t/all_1_1_0/primary.idx\",\"value\":\"\\u0000\\u0009\\u000a\\\\\u00ff\","
                + "\"table\":\"db.t\",\"part\":\"all_1_1_0\",\"file\":\"primary.idx\",\"size\":5}\n",
                get("/metadata-cache?format=JSONEachRow&key=default:data/db/t/all_1_1_0/primary.idx"));
    }

    @Test
    void aTablesOwnFilesHaveATableAndNoPart() throws Exception {
        store.put("default:data/db/t/format_version.txt", new PartMetadataStore.Entry(10, 1, 1, new byte[] {'1'}));
        store.put("default:metadata/db/t%2D1.sql", new PartMetadataStore.Entry(11, 6, 1, "ATTACH".getBytes(java.nio.charset.StandardCharsets.UTF_8)));
        start(null);
        assertEquals("default:data/db/t/format_version.txt\t\tdb.t\t\tformat_version.txt\t1\n",
                get("/metadata-cache?key=default:data/db/t/format_version.txt&values=0"));
        assertEquals("default:metadata/db/t%2D1.sql\t\tdb.t-1\t\tt%2D1.sql\t6\n", get("/metadata-cache?prefix=default:metadata/&values=0"));
    }

    @Test
    void keysPrefixesLimitAndValuesLeftOut() throws Exception {
        start(null);
        assertEquals(2, get("/metadata-cache?prefix=default:data/db/t/").lines().count());
        assertEquals(3, get("/metadata-cache").lines().count());
        assertEquals(1, get("/metadata-cache?limit=1").lines().count());
        assertEquals(2, get("/metadata-cache?prefix=default:data/db/u/&key=default:data/db/t/all_1_1_0/count.txt").lines().count());
        assertEquals("default:data/db/u/all_2_2_0/count.txt\t\tdb.u\tall_2_2_0\tcount.txt\t1\n",
                get("/metadata-cache?prefix=default:data/db/u/&values=0"));
        assertEquals("", get("/metadata-cache?key=default:nothing"));
        assertEquals(400, send("GET", "/metadata-cache?format=CSV", null).statusCode());
        assertEquals(404, send("GET", "/nothing", null).statusCode());
        String metrics = get("/metrics");
        assertTrue(metrics.contains("partfs_http_cache_rows_total{path=\"/metadata-cache\"} 9"), metrics);
    }

    @Test
    void tablesAreRegisteredPersistentlyAndDropEmptiesAPrefix() throws Exception {
        start(null);
        assertEquals("db.t\t1\toption\nother.x\t0\t\n", get("/tables?name=db.t&name=other.x"));
        assertEquals(200, send("POST", "/tables?name=other.x", null).statusCode());
        assertEquals("other.x\t1\tregistered\n", get("/tables?name=other.x"));
        assertEquals(java.util.Set.of("other.x"), store.registeredTables());
        assertEquals(200, send("DELETE", "/tables?name=other.x", null).statusCode());
        assertEquals(java.util.Set.of(), store.registeredTables());
        assertEquals(400, send("POST", "/tables?name=nodot", null).statusCode());

        assertEquals(405, send("GET", "/metadata-cache/drop", null).statusCode());
        assertEquals("2\n", new String(send("POST", "/metadata-cache/drop?prefix=default:data/db/t/", null).body()));
        assertEquals(1, get("/metadata-cache").lines().count());
    }

    @Test
    void aTokenIsRequiredWhenSetAndForAddressesOtherThanLoopback() throws Exception {
        start("s3cret");
        assertEquals(401, send("GET", "/metrics", null).statusCode());
        assertEquals(401, send("GET", "/metrics", "wrong").statusCode());
        assertEquals(200, send("GET", "/metrics", "s3cret").statusCode());
        assertEquals(200, send("GET", "/health?token=s3cret", null).statusCode());
        var noToken = assertThrows(IllegalArgumentException.class,
                () -> SidecarHttpServer.start("0.0.0.0:0", null, new SidecarHttpServer.Sources(new Metrics(), cache, null, "partfs.v")));
        assertTrue(noToken.getMessage().contains("PARTFS_HTTP_TOKEN"), noToken.getMessage());
        assertThrows(IllegalArgumentException.class, () -> SidecarHttpServer.parseAddress("localhost"));
        assertThrows(IllegalArgumentException.class, () -> SidecarHttpServer.parseAddress("127.0.0.1:99999"));
    }
}
