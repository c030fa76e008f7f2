package io.partfs.engine.meta;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;

/**
 * Blocking connections to Redis for the transactions that are one script: those whose every
 * read was answered by what this mount believed (create, a write's commit, unlink, rename, ...,
 * {@link RedisKvStore}). The calling thread writes the command and reads the reply on a socket
 * of its own. Through lettuce the same round trip hands the command to its event loop thread
 * and the reply back, two thread wake-ups: 80-125 us a GET on an idle host here and 160-350 us
 * on a loaded one, against 28-40 us on a blocking socket (benchmarks/RESULTS.md, round 25).
 * Everything else (reads, WATCH and MULTI/EXEC, counters) stays on lettuce, as do TLS and
 * Sentinel URLs, for which there is no lane.
 *
 * <p>Outcomes: a script that was surely not sent (no connection could be made; a pooled socket
 * the server closed while it was idle is noticed before use and replaced) throws
 * {@link NotSent}, and the caller runs the transaction again on lettuce. Once sent, a lost
 * reply leaves the outcome unknown: {@link IOException}, as lettuce's own path reports it.
 */
final class ScriptLane implements Closeable {
    private static final int POOL_SIZE = 16;
    private static final int CONNECT_TIMEOUT_MS = 10_000;

    /** Nothing of the command reached Redis. */
    static final class NotSent extends IOException {
        NotSent(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** An error reply from Redis ({@code -ERR ...}, {@code -NOSCRIPT ...}). */
    record ErrorReply(String message) {
    }

    private final InetSocketAddress address;
    private final String user;
    private final char[] password;
    private final int database;
    private final int timeoutMs;
    private final BlockingQueue<Conn> idle = new ArrayBlockingQueue<>(POOL_SIZE);
    private volatile boolean closed;

    private ScriptLane(InetSocketAddress address, String user, char[] password, int database, Duration timeout) {
        this.address = address;
        this.user = user;
        this.password = password;
        this.database = database;
        this.timeoutMs = (int) timeout.toMillis();
    }

    /** A lane to the server of {@code uri}, or null where lettuce must keep the connection (TLS, Sentinel, a Unix socket). */
    static ScriptLane forUri(io.lettuce.core.RedisURI uri, Duration timeout) {
        if (uri.isSsl() || !uri.getSentinels().isEmpty() || uri.getSocket() != null || uri.getHost() == null) {
            return null;
        }
        io.lettuce.core.RedisCredentials login = uri.getCredentialsProvider() == null ? null
                : uri.getCredentialsProvider().resolveCredentials().block(timeout); // the URL's own: at once
        return new ScriptLane(InetSocketAddress.createUnresolved(uri.getHost(), uri.getPort()),
                login != null && login.hasUsername() ? login.getUsername() : null,
                login != null && login.hasPassword() ? login.getPassword() : null, uri.getDatabase(), timeout);
    }

    /**
     * Runs {@code script} (known to the server by {@code sha1}, else sent whole once) with
     * {@code keys} and {@code args}; returns its reply: a Long, byte[], String, List or
     * {@link ErrorReply}.
     */
    Object evalsha(byte[] sha1, byte[] script, byte[][] keys, byte[][] args) throws IOException {
        Conn c = idle.poll();
        if (c != null && c.closedWhileIdle()) {
            c.close();
            c = null;
        }
        if (c == null) {
            c = connect();
        }
        boolean reusable = false;
        try {
            Object reply = c.call(command("EVALSHA", sha1, keys, args));
            if (reply instanceof ErrorReply e && e.message().startsWith("NOSCRIPT")) {
                reply = c.call(command("EVAL", script, keys, args)); // the server's script cache was flushed (a restart)
            }
            reusable = true;
            return reply;
        } finally {
            if (reusable && !closed && idle.offer(c)) {
                c = null;
            }
            if (c != null) {
                c.close();
            }
        }
    }

    private static byte[][] command(String name, byte[] script, byte[][] keys, byte[][] args) {
        byte[][] cmd = new byte[3 + keys.length + args.length][];
        cmd[0] = name.getBytes(StandardCharsets.US_ASCII);
        cmd[1] = script;
        cmd[2] = Integer.toString(keys.length).getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(keys, 0, cmd, 3, keys.length);
        System.arraycopy(args, 0, cmd, 3 + keys.length, args.length);
        return cmd;
    }

    private Conn connect() throws NotSent {
        Conn c = null;
        try {
            InetSocketAddress resolved = new InetSocketAddress(address.getHostString(), address.getPort());
            SocketChannel ch = SocketChannel.open();
            c = new Conn(ch);
            ch.socket().connect(resolved, CONNECT_TIMEOUT_MS);
            ch.socket().setTcpNoDelay(true);
            ch.socket().setSoTimeout(timeoutMs);
            c.open();
            if (password != null && password.length > 0) {
                byte[] pass = new String(password).getBytes(StandardCharsets.UTF_8);
                Object r = user == null || user.isEmpty() ? c.call(new byte[][] {ascii("AUTH"), pass})
                        : c.call(new byte[][] {ascii("AUTH"), user.getBytes(StandardCharsets.UTF_8), pass});
                if (r instanceof ErrorReply e) {
                    throw new IOException("login refused: " + e.message());
                }
            }
            if (database != 0) {
                Object r = c.call(new byte[][] {ascii("SELECT"), ascii(Integer.toString(database))});
                if (r instanceof ErrorReply e) {
                    throw new IOException("SELECT " + database + " refused: " + e.message());
                }
            }
            return c;
        } catch (IOException | RuntimeException e) {
            if (c != null) {
                c.close();
            }
            throw new NotSent("cannot open a connection to Redis for a metadata script: " + e.getMessage(), e);
        }
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }

    @Override
    public void close() {
        closed = true;
        Conn c;
        while ((c = idle.poll()) != null) {
            c.close();
        }
    }

    /** One blocking connection; used by one thread at a time (taken from and given back to {@link #idle}). */
    private static final class Conn {
        private final SocketChannel ch;
        private InputStream in;
        private OutputStream out;
        private final ByteBuffer probe = ByteBuffer.allocate(1);

        Conn(SocketChannel ch) {
            this.ch = ch;
        }

        void open() throws IOException {
            in = new BufferedInputStream(ch.socket().getInputStream(), 16 << 10);
            out = new BufferedOutputStream(ch.socket().getOutputStream(), 16 << 10);
        }

        /**
         * Whether the server closed this connection while it sat in the pool (a restart, its
         * idle timeout): then nothing may be sent on it. A reply waiting here unasked would
         * mean the protocol lost step, so that closes it too.
         */
        boolean closedWhileIdle() {
            try {
                ch.configureBlocking(false);
                probe.clear();
                int n = ch.read(probe);
                ch.configureBlocking(true);
                return n != 0;
            } catch (IOException e) {
                return true;
            }
        }

        Object call(byte[][] parts) throws IOException {
            writeCommand(parts);
            out.flush();
            return readReply();
        }

        private void writeCommand(byte[][] parts) throws IOException {
            out.write('*');
            writeNumber(parts.length);
            for (byte[] p : parts) {
                out.write('$');
                writeNumber(p.length);
                out.write(p);
                out.write('\r');
                out.write('\n');
            }
        }

        private void writeNumber(long n) throws IOException {
            out.write(Long.toString(n).getBytes(StandardCharsets.US_ASCII));
            out.write('\r');
            out.write('\n');
        }

        private Object readReply() throws IOException {
            int type = in.read();
            switch (type) {
                case '+':
                    return readLine();
                case '-':
                    return new ErrorReply(readLine());
                case ':':
                    return Long.parseLong(readLine());
                case '$': {
                    int len = Integer.parseInt(readLine());
                    if (len < 0) {
                        return null;
                    }
                    byte[] b = in.readNBytes(len);
                    if (b.length < len || in.read() != '\r' || in.read() != '\n') {
                        throw new EOFException("Redis closed the connection in the middle of a reply");
                    }
                    return b;
                }
                case '*': {
                    int n = Integer.parseInt(readLine());
                    if (n < 0) {
                        return null;
                    }
                    java.util.List<Object> items = new java.util.ArrayList<>(n);
                    for (int i = 0; i < n; i++) {
                        items.add(readReply());
                    }
                    return items;
                }
                case -1:
                    throw new EOFException("Redis closed the connection before replying");
                default:
                    throw new IOException("unexpected reply from Redis (type byte " + type + ")");
            }
        }

        private String readLine() throws IOException {
            StringBuilder sb = new StringBuilder();
            while (true) {
                int b = in.read();
                if (b == -1) {
                    throw new EOFException("Redis closed the connection in the middle of a reply");
                }
                if (b == '\r') {
                    if (in.read() != '\n') {
                        throw new IOException("malformed reply from Redis");
                    }
                    return sb.toString();
                }
                sb.append((char) b);
            }
        }

        void close() {
            try {
                ch.close();
            } catch (IOException e) {
                // closing a socket that failed: nothing to do
            }
        }
    }
}
