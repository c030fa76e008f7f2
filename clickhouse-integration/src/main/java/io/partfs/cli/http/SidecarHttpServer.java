package io.partfs.cli.http;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.partfs.cache.PartMetadataCache;
import io.partfs.engine.metrics.Metrics;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The sidecar's HTTP endpoint, served by the mount process.
 *
 * <pre>
 * GET  /health                    "ok"
 * GET  /metrics                   Prometheus text format
 * GET  /metadata-cache            rows key, value, table, part, file, size
 *        ?format=TabSeparated|JSONEachRow  &amp;key=K (repeatable) &amp;prefix=P (repeatable) &amp;limit=N &amp;values=0
 * GET  /metadata-cache/view       the same rows for ClickHouse's url() in the system-table view,
 *                                 filtered by the WHERE clauses of the queries reading the view
 * POST /metadata-cache/drop?prefix=P&amp;table=db.t   deletes the entries under P (default: this disk),
 *                                 only those of the given tables when table= is given
 * GET  /tables?name=db.t          whether each table is cached, and why: name, cached (0/1), reason
 * POST /tables?name=db.t[&amp;uuid=U] caches db.t (its store/ directory by UUID) from now on, kept
 *                                 across restarts; DELETE undoes it
 * GET  /status[?mountpoint=P]    what 'partfs status' prints of the mounted volume; 400 if P is not
 *                                 this mount's mount point
 * POST /warmup?path=P[&amp;threads=N] fetches the blocks under P (absolute, on this mount) into the
 *                                 block cache; a progress line a second, then done or error;
 *                                 check=1 fetches nothing, verify=1 checks cached blocks' sums
 *                                 ({@link WarmupEndpoint})
 * POST /compact?path=P           compacts the fragmented chunks of the files at or under P (absolute,
 *                                 on this mount); a progress line a second, then done or error
 *                                 ({@link CompactEndpoint})
 * GET  /info?path=P[&amp;check=1]    how the file or directory at P is stored: its inode, a file's
 *                                 extents and blocks and where each is, a directory's tree;
 *                                 check=1 asks the object store for blocks not on local disk
 *                                 ({@link InfoEndpoint})
 * </pre>
 *
 * A bearer token, when set, is required on every request ({@code Authorization: Bearer T}, or
 * {@code token=T} for ClickHouse's url(), which cannot send headers in older servers).
 */
public final class SidecarHttpServer implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(SidecarHttpServer.class);

    /**
     * What the endpoint serves; the cache may be null when the mount runs without one, the
     * volume when there is no mount (tests of the cache alone).
     */
    public record Sources(Metrics metrics, PartMetadataCache cache, RunningQueries queries, String viewName, Volume volume) {
        public Sources(Metrics metrics, PartMetadataCache cache, RunningQueries queries, String viewName) {
            this(metrics, cache, queries, viewName, null);
        }
    }

    /** The mounted volume, where it is mounted, and what {@code partfs status} says of it. */
    public record Volume(io.partfs.engine.PartFs fs, java.nio.file.Path mountPoint, java.util.concurrent.Callable<String> status) {
        /**
         * {@code path} (absolute, under the mount point) relative to the volume's root, without a
         * leading slash ("" for the root); bad input is an IllegalArgumentException.
         */
        String relative(String path) {
            if (path == null || !path.startsWith("/")) {
                throw new IllegalArgumentException("give path= as an absolute path on the mount at " + mountPoint);
            }
            java.nio.file.Path p = java.nio.file.Path.of(path).normalize();
            if (!p.startsWith(mountPoint)) {
                throw new IllegalArgumentException(p + " is not under this mount's mount point " + mountPoint
                        + ": pass --sidecar of the mount that serves it");
            }
            return mountPoint.relativize(p).toString();
        }

        /** The inode at {@code path} (as {@link #relative}); a name that is not there is an IllegalArgumentException. */
        io.partfs.engine.Attr resolve(String path) throws IOException {
            String rel = relative(path);
            try {
                return fs.resolve("/" + rel);
            } catch (io.partfs.engine.FsException.NoSuchEntry | io.partfs.engine.FsException.NotDirectory e) {
                throw new IllegalArgumentException("no such file or directory on the volume: " + path);
            }
        }
    }

    private final HttpServer server;
    private final ExecutorService executor;
    private final byte[] token;
    private final Sources sources;
    private final WarmupEndpoint warmup;
    private final CompactEndpoint compact;
    private final InfoEndpoint info;
    private final io.partfs.engine.metrics.Metrics.Counter rowsSent;
    private final io.partfs.engine.metrics.Metrics.Counter requests;

    private SidecarHttpServer(HttpServer server, ExecutorService executor, String token, Sources sources) {
        this.server = server;
        this.executor = executor;
        this.token = token == null ? null : token.getBytes(StandardCharsets.UTF_8);
        this.sources = sources;
        this.warmup = new WarmupEndpoint(sources.volume());
        this.compact = new CompactEndpoint(sources.volume());
        this.info = new InfoEndpoint(sources.volume(), sources.cache());
        this.rowsSent = sources.metrics().counter("partfs_http_cache_rows_total",
                "Part-metadata cache rows sent by the HTTP endpoint, by path.", "path");
        this.requests = sources.metrics().counter("partfs_http_requests_total", "HTTP endpoint requests by path and status.", "path", "status");
    }

    /**
     * Starts serving on {@code address} ({@code host:port}; port 0 picks a free one). A token is
     * required unless the address is loopback.
     */
    public static SidecarHttpServer start(String address, String token, Sources sources) throws IOException {
        InetSocketAddress addr = checkAddress(address, token);
        HttpServer server;
        try {
            server = HttpServer.create(addr, 64);
        } catch (java.net.BindException e) {
            throw new IllegalArgumentException("cannot listen on " + address + ": " + e.getMessage()
                    + "; choose another --http-address port");
        }
        ExecutorService executor = Executors.newFixedThreadPool(4, r -> {
            Thread t = new Thread(r, "partfs-http");
            t.setDaemon(true);
            return t;
        });
        server.setExecutor(executor);
        SidecarHttpServer s = new SidecarHttpServer(server, executor, token == null || token.isBlank() ? null : token, sources);
        server.createContext("/", s::handle);
        server.start();
        return s;
    }

    /** The address to listen on; refuses one other than loopback without a token. */
    public static InetSocketAddress checkAddress(String address, String token) {
        InetSocketAddress addr = parseAddress(address);
        if (!addr.getAddress().isLoopbackAddress() && (token == null || token.isBlank())) {
            throw new IllegalArgumentException("--http-address " + address + " is not loopback: set a token in "
                    + "$PARTFS_HTTP_TOKEN so that only those who know it can read the cache");
        }
        return addr;
    }

    static InetSocketAddress parseAddress(String address) {
        int colon = address == null ? -1 : address.lastIndexOf(':');
        if (colon < 0) {
            throw new IllegalArgumentException("invalid --http-address '" + address + "': use host:port, e.g. 127.0.0.1:9569");
        }
        String host = address.substring(0, colon).replace("[", "").replace("]", "");
        int port;
        try {
            port = Integer.parseInt(address.substring(colon + 1));
        } catch (NumberFormatException e) {
            port = -1;
        }
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("invalid port in --http-address '" + address + "': use 0-65535");
        }
        InetSocketAddress a = new InetSocketAddress(host.isEmpty() ? "127.0.0.1" : host, port);
        if (a.isUnresolved()) {
            throw new IllegalArgumentException("unknown host in --http-address '" + address + "'");
        }
        return a;
    }

    /** The port actually bound. */
    public int port() {
        return server.getAddress().getPort();
    }

    public String host() {
        return server.getAddress().getAddress().getHostAddress();
    }

    private void handle(HttpExchange ex) throws IOException {
        try {
            Map<String, List<String>> params = params(ex.getRequestURI().getRawQuery());
            if (!authorized(ex, params)) {
                text(ex, 401, "a bearer token is required: Authorization: Bearer <token> or ?token=<token>\n");
                return;
            }
            String path = ex.getRequestURI().getPath();
            String method = ex.getRequestMethod();
            switch (path) {
                case "/health" -> text(ex, 200, "ok\n");
                case "/metrics" -> {
                    ex.getResponseHeaders().set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
                    body(ex, 200, sources.metrics().scrape());
                }
                case "/metadata-cache" -> rows(ex, params, explicitFilter(params));
                case "/metadata-cache/view" -> rows(ex, params, sources.queries() == null ? KeyFilter.all()
                        : sources.queries().filterFor(viewName(params)));
                case "/metadata-cache/drop" -> drop(ex, method, params);
                case "/tables" -> tables(ex, method, params);
                case "/status" -> status(ex, first(params, "mountpoint"));
                case "/warmup" -> warmup.serve(ex, method, first(params, "path"), first(params, "threads"), first(params, "check"),
                        first(params, "verify"), () -> requests.inc(known(path), "200"));
                case "/compact" -> compact.serve(ex, method, first(params, "path"), () -> requests.inc(known(path), "200"));
                case "/info" -> {
                    if (!method.equals("GET")) {
                        throw new IllegalArgumentException("use GET");
                    }
                    String answer;
                    try {
                        answer = info.answer(first(params, "path"), "1".equals(first(params, "check")));
                    } catch (IOException e) { // the metadata engine or the object store failed: say so, not a dropped connection
                        text(ex, 503, "cannot read how " + first(params, "path") + " is stored: " + e.getMessage() + "\n");
                        return;
                    }
                    text(ex, 200, answer);
                }
                default -> text(ex, 404, "unknown path " + path + ": try /metrics, /metadata-cache, /tables, /status, /warmup, /compact, /info\n");
            }
        } catch (IllegalArgumentException e) {
            text(ex, 400, e.getMessage() + "\n");
        } catch (IOException e) {
            log.debug("HTTP request {} ended: {}", ex.getRequestURI().getPath(), e.toString()); // a client that stopped reading (LIMIT)
        } catch (RuntimeException e) {
            log.warn("HTTP request {} failed", ex.getRequestURI().getPath(), e);
            text(ex, 500, "internal error: " + e + "\n");
        } finally {
            ex.close();
        }
    }

    /** The path as a metric label: one of ours, or "other" (labels must not grow without bound). */
    private static String known(String path) {
        return switch (path) {
            case "/health", "/metrics", "/metadata-cache", "/metadata-cache/view", "/metadata-cache/drop", "/tables", "/status", "/warmup",
                 "/compact", "/info" -> path;
            default -> "other";
        };
    }

    private boolean authorized(HttpExchange ex, Map<String, List<String>> params) {
        if (token == null) {
            return true;
        }
        String header = ex.getRequestHeaders().getFirst("Authorization");
        String given = header != null && header.startsWith("Bearer ") ? header.substring(7).trim()
                : params.getOrDefault("token", List.of("")).get(0);
        return MessageDigest.isEqual(token, given.getBytes(StandardCharsets.UTF_8));
    }

    /** The view the request is for (install passes it; a database other than partfs is allowed). */
    private String viewName(Map<String, List<String>> params) {
        String v = first(params, "view");
        if (v == null) {
            return sources.viewName();
        }
        if (!v.matches("[A-Za-z_][A-Za-z0-9_]*\\.[A-Za-z_][A-Za-z0-9_]*")) {
            throw new IllegalArgumentException("invalid view name '" + v + "': use db.name");
        }
        return v;
    }

    private static KeyFilter explicitFilter(Map<String, List<String>> params) {
        return KeyFilter.of(params.getOrDefault("key", List.of()), params.getOrDefault("prefix", List.of()),
                !"0".equals(params.getOrDefault("values", List.of("1")).get(0)));
    }

    private void rows(HttpExchange ex, Map<String, List<String>> params, KeyFilter filter) throws IOException {
        PartMetadataCache cache = requireCache();
        CacheRows.Format format = CacheRows.Format.parse(first(params, "format"));
        long limit = first(params, "limit") == null ? Long.MAX_VALUE : Long.parseLong(first(params, "limit"));
        log.debug("metadata-cache rows for {}", filter);
        ex.getResponseHeaders().set("Content-Type", format.contentType());
        ex.getResponseHeaders().set("X-PartFS-Filter", filter.isAll() ? "all" : "keys=" + filter.keys().size()
                + ",prefixes=" + filter.prefixes().size());
        requests.inc(known(ex.getRequestURI().getPath()), "200");
        ex.sendResponseHeaders(200, 0);
        try (OutputStream out = new BufferedOutputStream(ex.getResponseBody(), 1 << 16)) {
            long n = new CacheRows(cache.store(), cache.tables()).write(filter, limit, format, out);
            rowsSent.add(n, ex.getRequestURI().getPath());
        }
    }

    private void status(HttpExchange ex, String mountPoint) throws IOException {
        Volume v = sources.volume();
        if (v == null) {
            text(ex, 404, "this endpoint serves no mounted volume\n");
            return;
        }
        if (mountPoint != null && !java.nio.file.Path.of(mountPoint).equals(v.mountPoint())) {
            throw new IllegalArgumentException("this sidecar serves the mount at " + v.mountPoint() + ", not " + mountPoint
                    + ": pass the --sidecar of the mount there");
        }
        String report;
        try {
            report = v.status().call();
        } catch (Exception e) { // the metadata engine unreachable, for one
            text(ex, 500, "cannot read the volume's status: " + e.getMessage() + "\n");
            return;
        }
        text(ex, 200, report);
    }

    private void drop(HttpExchange ex, String method, Map<String, List<String>> params) throws IOException {
        if (!method.equals("POST")) {
            text(ex, 405, "use POST\n");
            return;
        }
        PartMetadataCache cache = requireCache();
        List<String> tables = params.getOrDefault("table", List.of());
        String prefix = first(params, "prefix") == null ? cache.disk() + ":" : first(params, "prefix");
        int n = 0;
        if (tables.isEmpty()) {
            n = cache.store().deletePrefix(prefix);
        } else {
            for (String key : cache.store().keys(prefix)) {
                String table = cache.tables().tableNameOf(key.substring(key.indexOf(':') + 1)).orElse("");
                if (tables.contains(table)) {
                    cache.store().delete(key);
                    n++;
                }
            }
        }
        log.info("dropped {} part-metadata cache entries (prefix {}{})", n, prefix, tables.isEmpty() ? "" : ", tables " + tables);
        text(ex, 200, n + "\n");
    }

    private void tables(HttpExchange ex, String method, Map<String, List<String>> params) throws IOException {
        PartMetadataCache cache = requireCache();
        List<String> names = params.getOrDefault("name", List.of());
        if (method.equals("POST") || method.equals("DELETE")) {
            String uuid = first(params, "uuid");
            if (uuid != null && names.size() != 1) {
                throw new IllegalArgumentException("give uuid= with exactly one name=");
            }
            for (String n : names) {
                if (method.equals("POST")) {
                    cache.tables().register(n, uuid);
                } else {
                    cache.tables().unregister(n);
                }
            }
            cache.store().saveRegisteredTables(cache.tables().registered());
            log.info("{} tables for the part-metadata cache: {}", method.equals("POST") ? "registered" : "unregistered", names);
        }
        StringBuilder b = new StringBuilder();
        for (String n : names) {
            int dot = n.indexOf('.');
            if (dot <= 0) {
                throw new IllegalArgumentException("invalid table '" + n + "': use db.table");
            }
            String reason = cache.tables().reason(n.substring(0, dot), n.substring(dot + 1)).orElse("");
            b.append(n).append('\t').append(reason.isEmpty() ? 0 : 1).append('\t').append(reason).append('\n');
        }
        text(ex, 200, b.toString());
    }

    private PartMetadataCache requireCache() {
        if (sources.cache() == null) {
            throw new IllegalArgumentException("this mount runs without the part-metadata cache (--no-metadata-cache)");
        }
        return sources.cache();
    }

    private static String first(Map<String, List<String>> params, String name) {
        List<String> v = params.get(name);
        return v == null || v.isEmpty() ? null : v.get(0);
    }

    static Map<String, List<String>> params(String rawQuery) {
        Map<String, List<String>> out = new LinkedHashMap<>();
        if (rawQuery == null || rawQuery.isEmpty()) {
            return out;
        }
        for (String pair : rawQuery.split("&")) {
            int eq = pair.indexOf('=');
            String k = URLDecoder.decode(eq < 0 ? pair : pair.substring(0, eq), StandardCharsets.UTF_8);
            String v = eq < 0 ? "" : URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8);
            out.computeIfAbsent(k, x -> new ArrayList<>()).add(v);
        }
        return out;
    }

    private void text(HttpExchange ex, int status, String body) throws IOException {
        ex.getResponseHeaders().set("Content-Type", "text/plain; charset=utf-8");
        body(ex, status, body);
    }

    private void body(HttpExchange ex, int status, String body) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        requests.inc(known(ex.getRequestURI().getPath()), Integer.toString(status));
        ex.sendResponseHeaders(status, b.length == 0 ? -1 : b.length);
        if (b.length > 0) {
            ex.getResponseBody().write(b);
        }
    }

    @Override
    public void close() {
        server.stop(0);
        executor.shutdownNow();
    }
}
