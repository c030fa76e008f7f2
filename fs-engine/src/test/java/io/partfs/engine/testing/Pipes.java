package io.partfs.engine.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.util.Set;

/** The copying loop of the test proxies: one direction of a proxied TCP connection, on a daemon thread. */
public final class Pipes {
    private Pipes() {
    }

    /** Decides about each chunk read before it is passed on. */
    @FunctionalInterface
    public interface Chunk {
        /** Called with the {@code n} bytes read into {@code buf}; false cuts the connection instead of passing them on. */
        boolean pass(byte[] buf, int n);
    }

    /**
     * Copies {@code from} to {@code to} on a new daemon thread named {@code name}, asking
     * {@code chunk} about each chunk, until either side closes or {@code chunk} cuts; then
     * closes both and removes them from {@code open}.
     */
    public static void start(String name, Socket from, Socket to, Set<Socket> open, Chunk chunk) {
        Thread t = new Thread(() -> pump(from, to, open, chunk), name);
        t.setDaemon(true);
        t.start();
    }

    private static void pump(Socket from, Socket to, Set<Socket> open, Chunk chunk) {
        byte[] buf = new byte[64 << 10];
        try (from; to) {
            InputStream in = from.getInputStream();
            OutputStream out = to.getOutputStream();
            for (int n; (n = in.read(buf)) >= 0; ) {
                if (!chunk.pass(buf, n)) {
                    return;
                }
                out.write(buf, 0, n);
                out.flush();
            }
        } catch (IOException e) {
            // connection closed by either side
        } finally {
            open.remove(from);
            open.remove(to);
        }
    }
}
