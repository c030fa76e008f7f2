package io.partfs.engine.testing;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * A loopback TCP proxy that adds a fixed delay to every request: WAN-like object-store latency
 * where {@code tc netem} is not available. A request is the first bytes a client sends after
 * the server last answered on that connection (HTTP/1.1 requests are sequential on a
 * connection), so each S3 request costs one delay, whatever its size. The delay can be
 * changed while running (data is loaded at 0 ms, startup measured at 20 ms).
 */
public final class LatencyProxy implements AutoCloseable {
    private final ServerSocket server;
    private final InetSocketAddress target;
    private final Set<Socket> open = ConcurrentHashMap.newKeySet();
    private final AtomicLong requests = new AtomicLong();
    private final AtomicLong refused = new AtomicLong();
    private final AtomicLong heldRequests = new AtomicLong();
    private volatile long delayNanos;
    private volatile boolean closed;
    private volatile boolean down;
    private volatile boolean hung;
    /** Connections accepted while hung: held open, never connected to the server, closed when the hang ends. */
    private final Set<Socket> held = ConcurrentHashMap.newKeySet();

    public LatencyProxy(int targetPort) throws IOException {
        this.target = new InetSocketAddress(InetAddress.getLoopbackAddress(), targetPort);
        this.server = new ServerSocket(0, 200, InetAddress.getLoopbackAddress());
        Thread acceptor = new Thread(this::accept, "latency-proxy-accept");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    public int port() {
        return server.getLocalPort();
    }

    public void setDelayMillis(double ms) {
        this.delayNanos = (long) (ms * 1_000_000);
    }

    /**
     * Takes the server "down" (true): every open connection is cut and every new one closed as
     * soon as it is accepted, as when the object store is unreachable; false brings it back.
     */
    public void setDown(boolean down) {
        this.down = down;
        if (down) {
            for (Socket s : open) {
                try {
                    s.close();
                } catch (IOException e) {
                    // already closed
                }
            }
        }
    }

    /**
     * Makes the server "hang" (true): connections are accepted but nothing more happens on them,
     * and requests on connections already open are never passed on, so no request is answered,
     * as with a store whose process or network is wedged rather than gone. false lets held
     * requests through and closes the connections accepted meanwhile.
     */
    public void setHung(boolean hung) {
        this.hung = hung;
        if (!hung) {
            for (Socket s : held) {
                try {
                    s.close();
                } catch (IOException e) {
                    // already closed
                }
            }
            held.clear();
        }
    }

    /**
     * Request attempts the hang has held since start: one for each connection accepted while
     * hung, and one for each request held on a connection that was open before.
     */
    public long heldRequests() {
        return heldRequests.get();
    }

    /** Connections closed at once because the server was down: one a request attempt. */
    public long refused() {
        return refused.get();
    }

    /** Requests seen since start. */
    public long requests() {
        return requests.get();
    }

    private void accept() {
        while (!closed) {
            try {
                Socket client = server.accept();
                if (down) {
                    refused.incrementAndGet();
                    client.close();
                    continue;
                }
                if (hung) {
                    held.add(client);
                    heldRequests.incrementAndGet();
                    continue;
                }
                Socket upstream = new Socket(target.getAddress(), target.getPort());
                client.setTcpNoDelay(true);
                upstream.setTcpNoDelay(true);
                open.add(client);
                open.add(upstream);
                Connection c = new Connection();
                Pipes.start("latency-proxy-pump", client, upstream, open, (buf, n) -> {
                    if (hung) {
                        heldRequests.incrementAndGet();
                        while (hung && !closed) {
                            LockSupport.parkNanos(5_000_000); // held, as the server would hold it
                        }
                    }
                    if (c.answered) {
                        c.answered = false;
                        requests.incrementAndGet();
                        long d = delayNanos;
                        if (d > 0) {
                            LockSupport.parkNanos(d); // the injected latency, once per request
                        }
                    }
                    return true;
                });
                Pipes.start("latency-proxy-pump", upstream, client, open, (buf, n) -> {
                    c.answered = true;
                    return true;
                });
                if (down) { // went down while this one was being set up
                    client.close();
                }
            } catch (IOException e) {
                if (closed) {
                    return;
                }
            }
        }
    }

    /** Per-connection state: whether the server answered since the client last sent. */
    private static final class Connection {
        volatile boolean answered = true;
    }

    @Override
    public void close() throws IOException {
        closed = true;
        server.close();
        setHung(false);
        for (Socket s : open) {
            s.close();
        }
    }
}
