package io.partfs.engine.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A TCP proxy on loopback in front of a real server that can fail the next connections: answer
 * HTTP 503 SlowDown or 501 NotImplemented, drop the connection without an answer, or pass the request on and cut
 * the answer off after its first {@value #CUT_AFTER} bytes. Other connections are piped
 * through unchanged, and the head of the first request on each is kept ({@link #requestHeads}).
 * For testing retries against real failures, not mocked ones.
 */
public final class FaultyProxy implements AutoCloseable {
    /** What to do to one incoming connection. */
    public enum Fault { SLOW_DOWN_503, DROP, CUT_ANSWER, NOT_IMPLEMENTED_501, BAD_GATEWAY_502, WRONG_REGION_301 }

    /** The bucket's region {@link Fault#WRONG_REGION_301} names, as AWS S3 does in its x-amz-bucket-region header. */
    public static final String BUCKET_REGION = "eu-central-1";

    /** Bytes of an answer (headers included) that {@link Fault#CUT_ANSWER} lets through. */
    public static final int CUT_AFTER = 16 << 10;

    private final ServerSocket server;
    private final URI upstream;
    private final Queue<Fault> faults = new ConcurrentLinkedQueue<>();
    private final AtomicInteger connections = new AtomicInteger();
    private final Thread acceptor;
    private final Queue<String> heads = new ConcurrentLinkedQueue<>();

    public FaultyProxy(URI upstream) throws IOException {
        this.upstream = upstream;
        this.server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        this.acceptor = new Thread(this::acceptLoop, "faulty-proxy");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    public URI endpoint() {
        return URI.create("http://127.0.0.1:" + server.getLocalPort());
    }

    /** Fails the next connections, one fault each, in order. */
    public void failNext(Fault... next) {
        faults.addAll(java.util.List.of(next));
    }

    public int connections() {
        return connections.get();
    }

    /** The request line and headers of the first request of each connection piped through, in order. */
    public java.util.List<String> requestHeads() {
        return java.util.List.copyOf(heads);
    }

    private void acceptLoop() {
        while (!server.isClosed()) {
            try {
                Socket client = server.accept();
                connections.incrementAndGet();
                Fault f = faults.poll();
                Thread t = new Thread(() -> handle(client, f), "faulty-proxy-conn");
                t.setDaemon(true);
                t.start();
            } catch (IOException e) {
                return; // closed
            }
        }
    }

    private void handle(Socket client, Fault fault) {
        try (client) {
            if (fault == Fault.DROP) {
                return;
            }
            String[] answer = fault == null ? null : switch (fault) { // status line, S3 error code, message
                case SLOW_DOWN_503 -> new String[] {"503 Slow Down", "SlowDown", "Please reduce your request rate."};
                case NOT_IMPLEMENTED_501 -> new String[] {"501 Not Implemented", "NotImplemented", "Not implemented."};
                case BAD_GATEWAY_502 -> new String[] {"502 Bad Gateway", "BadGateway", "The gateway cannot reach the store."};
                case WRONG_REGION_301 -> new String[] {"301 Moved Permanently", "PermanentRedirect",
                        "The bucket you are attempting to access must be addressed using the specified endpoint."};
                default -> null;
            };
            if (answer != null) {
                boolean head = readHeaders(client.getInputStream()).startsWith("HEAD ");
                String body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>" + answer[1]
                        + "</Code><Message>" + answer[2] + "</Message></Error>";
                String resp = "HTTP/1.1 " + answer[0]
                        + (fault == Fault.WRONG_REGION_301 ? "\r\nx-amz-bucket-region: " + BUCKET_REGION : "")
                        + "\r\nContent-Type: application/xml\r\nContent-Length: "
                        + body.length() + "\r\nConnection: close\r\n\r\n" + (head ? "" : body);
                client.getOutputStream().write(resp.getBytes(StandardCharsets.US_ASCII));
                client.getOutputStream().flush();
                return;
            }
            try (Socket up = new Socket(upstream.getHost(), upstream.getPort())) {
                long limit = fault == Fault.CUT_ANSWER ? CUT_AFTER : Long.MAX_VALUE;
                Thread back = new Thread(() -> pipe(up, client, limit, null), "faulty-proxy-back");
                back.setDaemon(true);
                back.start();
                pipe(client, up, Long.MAX_VALUE, heads);
                back.join();
            }
        } catch (IOException | InterruptedException e) {
            // the client or the server went away; nothing to report
        }
    }

    /** Reads a request's head, up to its empty line, and returns it. */
    private static String readHeaders(InputStream in) throws IOException {
        StringBuilder head = new StringBuilder();
        int state = 0;
        int b;
        while ((b = in.read()) >= 0) {
            head.append((char) b);
            state = (b == '\r' && (state == 0 || state == 2)) ? state + 1 : (b == '\n' && (state == 1 || state == 3)) ? state + 1 : 0;
            if (state == 4) {
                break;
            }
        }
        return head.toString();
    }

    /**
     * Copies {@code from} to {@code to} until the end or {@code limit} bytes; at the limit closes
     * both. The head of what came first goes to {@code heads} unless that is null.
     */
    private static void pipe(Socket from, Socket to, long limit, Queue<String> heads) {
        try {
            InputStream in = from.getInputStream();
            OutputStream out = to.getOutputStream();
            byte[] buf = new byte[64 << 10];
            StringBuilder head = new StringBuilder();
            long left = limit;
            int n;
            while (left > 0 && (n = in.read(buf, 0, (int) Math.min(buf.length, left))) >= 0) {
                if (heads != null) { // until the blank line that ends it
                    head.append(new String(buf, 0, n, StandardCharsets.ISO_8859_1));
                    int end = head.indexOf("\r\n\r\n");
                    if (end >= 0 || head.length() > (64 << 10)) {
                        heads.add(head.substring(0, end < 0 ? head.length() : end));
                        heads = null;
                    }
                }
                out.write(buf, 0, n);
                out.flush();
                left -= n;
            }
            if (left == 0) {
                to.close();
                from.close();
            } else {
                to.shutdownOutput();
            }
        } catch (IOException e) {
            // connection closed
        }
    }

    @Override
    public void close() throws IOException {
        server.close();
        try {
            acceptor.join(5000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
