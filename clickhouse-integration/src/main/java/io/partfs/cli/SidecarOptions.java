package io.partfs.cli;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import picocli.CommandLine.Option;

/** Where the running sidecar's HTTP endpoint is ({@code partfs mount --http-address}), and a small client for it. */
final class SidecarOptions {
    /** Where a mount serves HTTP unless told otherwise ({@code partfs mount --http-address}). */
    static final String DEFAULT_URL = "http://127.0.0.1:9569";

    @Option(names = "--sidecar", paramLabel = "URL",
            description = {"HTTP endpoint of the running mount (its --http-address) (default: " + DEFAULT_URL + ").",
                    "A token, if the mount requires one, is read from $" + MountCommand.HTTP_TOKEN_ENV + "."})
    String url;

    /** Said after "no sidecar answers": why the default endpoint was asked (set by {@link #forPath}). */
    private String unanswered = ": mount the volume first (partfs mount), or pass --sidecar";

    /**
     * The HTTP endpoint the process serving the PartFS mount at {@code mountPoint} recorded under
     * the data home {@code home}. A path that is no PartFS mount, or a mount that recorded none
     * (mounted with {@code --http-address none} or another home), is an IllegalArgumentException
     * saying what to give instead.
     */
    static String recordedFor(Path mountPoint, Path home) throws IOException {
        Path mp = requireMount(mountPoint);
        String url = new RunFiles(home).liveHttp(mp);
        if (url == null) {
            throw new IllegalArgumentException("the mount at " + mp + " recorded no HTTP endpoint under " + home
                    + " (mounted with --http-address none, or another --home): pass its --sidecar");
        }
        return url;
    }

    /**
     * The endpoint to ask about {@code real}, a path on a mount: {@code --sidecar} when given;
     * else the one the PartFS mount holding it recorded under the default data home; else the
     * default. So a command about a file on a mount with another {@code --http-address} needs no
     * {@code --sidecar}, as {@code juicefs warmup PATH} needs none.
     */
    SidecarOptions forPath(Path real) throws IOException {
        SidecarOptions o = new SidecarOptions();
        o.url = url;
        if (url == null) {
            Path mp = io.partfs.engine.fuse.Mounts.partfsMountHolding(real);
            o.url = mp == null ? null : new RunFiles(EmbeddedVolume.defaultHome()).liveHttp(mp);
            if (mp == null) {
                o.unanswered = ", and " + real + " is on no PartFS mount here: give a path on a mounted volume, or --sidecar of the mount serving it";
            }
        }
        return o;
    }

    /** {@code mountPoint}, absolute and normalized, if a PartFS mount is there; else an IllegalArgumentException. */
    static Path requireMount(Path mountPoint) throws IOException {
        Path mp = io.partfs.engine.fuse.Mounts.resolve(mountPoint);
        String type = io.partfs.engine.fuse.Mounts.typeAt(mp);
        if (!"fuse.partfs".equals(type)) {
            Path holding = type == null ? io.partfs.engine.fuse.Mounts.partfsMountHolding(mp) : null;
            throw new IllegalArgumentException(mp + " is not a PartFS mount point (" + (holding != null ? "it is inside the one at "
                    + holding + "): give " + holding : (type == null ? "nothing is mounted there" : "a " + type + " mount")
                    + "): give the path 'partfs mount' was given"));
        }
        return mp;
    }

    URI base() {
        String u = (url == null ? DEFAULT_URL : url).trim();
        if (!u.contains("://")) {
            u = "http://" + u;
        }
        URI uri;
        try {
            uri = URI.create(u.endsWith("/") ? u.substring(0, u.length() - 1) : u);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("invalid --sidecar URL '" + url + "': use http://host:port");
        }
        if (!"http".equals(uri.getScheme()) || uri.getHost() == null || uri.getPort() < 0) {
            throw new IllegalArgumentException("invalid --sidecar URL '" + url + "': use http://host:port");
        }
        return uri;
    }

    static String token() {
        String t = System.getenv(MountCommand.HTTP_TOKEN_ENV);
        return t == null || t.isBlank() ? null : t.trim();
    }

    /** How long {@link #call} waits for an answer once connected. */
    static final Duration ANSWER_TIMEOUT = Duration.ofSeconds(30);

    /** Sends a request to the sidecar and returns the body of a 200 answer. */
    String call(String method, String pathAndQuery) throws IOException {
        return call(method, pathAndQuery, ANSWER_TIMEOUT);
    }

    /** {@link #call(String, String)}, waiting at most {@code timeout} for the answer once connected. */
    String call(String method, String pathAndQuery, Duration timeout) throws IOException {
        return send(method, pathAndQuery, timeout, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8), s -> s).body();
    }

    /**
     * Sends a request whose answer comes a line at a time for as long as the work takes (no
     * timeout once connected), giving each line of a 200 answer to {@code lines} as it arrives.
     */
    void stream(String method, String pathAndQuery, java.util.function.Consumer<String> lines) throws IOException {
        HttpResponse<java.util.stream.Stream<String>> r = send(method, pathAndQuery, null,
                HttpResponse.BodyHandlers.ofLines(), s -> {
                    try (s) {
                        return String.join(" ", s.limit(5).toList());
                    }
                });
        try (java.util.stream.Stream<String> body = r.body()) {
            body.forEach(lines);
        } catch (java.io.UncheckedIOException e) {
            throw new IOException("the sidecar at " + base() + " stopped answering: " + e.getCause().getMessage(), e.getCause());
        }
    }

    /**
     * Runs a job the sidecar streams ({@code progress} lines, then {@code done} or {@code error}:
     * POST /warmup, /compact) and returns the fields of its {@code done} line. Every 2 s a
     * progress line is shown on {@code err} as {@code "partfs COMMAND: WHAT: " + progress(fields)}.
     * An {@code error} line, or an answer without {@code done}, is an IllegalStateException.
     */
    java.util.Map<String, String> job(String pathAndQuery, String command, Object what,
            java.util.function.Function<java.util.Map<String, String>, String> progress, java.io.PrintWriter err) throws IOException {
        java.util.Map<String, String> last = new java.util.HashMap<>();
        long[] shown = {System.nanoTime()};
        stream("POST", pathAndQuery, line -> {
            String kind = line.contains(" ") ? line.substring(0, line.indexOf(' ')) : line;
            java.util.Map<String, String> f = WarmupCommand.fields(line.substring(kind.length()).trim());
            switch (kind) {
                case "progress" -> {
                    if (System.nanoTime() - shown[0] > 2_000_000_000L) {
                        err.println("partfs " + command + ": " + what + ": " + progress.apply(f));
                        err.flush();
                        shown[0] = System.nanoTime();
                    }
                }
                case "done" -> last.putAll(f);
                case "error" -> throw new IllegalStateException(command + " of " + what + " failed: " + line.substring(kind.length()).trim());
                default -> { } // a line a newer mount sends that this command does not know
            }
        });
        if (last.isEmpty()) {
            throw new IllegalStateException("the sidecar at " + base() + " ended the " + command + " of " + what
                    + " without saying it was done: see the mount's log");
        }
        return last;
    }

    private <T> HttpResponse<T> send(String method, String pathAndQuery, Duration timeout, HttpResponse.BodyHandler<T> handler,
            java.util.function.Function<T, String> errorText) throws IOException {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(base() + pathAndQuery))
                .method(method, HttpRequest.BodyPublishers.noBody());
        if (timeout != null) {
            b.timeout(timeout);
        }
        if (token() != null) {
            b.header("Authorization", "Bearer " + token());
        }
        HttpResponse<T> r;
        try {
            r = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build().send(b.build(), handler);
        } catch (java.net.ConnectException e) {
            throw new IOException("no PartFS sidecar answers at " + base() + unanswered);
        } catch (java.net.http.HttpTimeoutException e) {
            boolean connecting = e instanceof java.net.http.HttpConnectTimeoutException;
            throw new IOException("the PartFS sidecar at " + base() + (connecting ? " did not take the connection within 5 s"
                    : " took the connection but did not answer within " + timeout.toSeconds() + " s")
                    + ": its process is stopped or stuck; see its log");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new java.io.InterruptedIOException("interrupted");
        }
        if (r.statusCode() != 200) {
            throw new IOException("the sidecar at " + base() + " answered " + r.statusCode() + ": " + errorText.apply(r.body()).trim());
        }
        return r;
    }

    static String enc(String s) {
        return java.net.URLEncoder.encode(s, StandardCharsets.UTF_8);
    }
}
