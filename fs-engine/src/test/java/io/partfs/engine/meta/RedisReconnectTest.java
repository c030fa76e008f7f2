package io.partfs.engine.meta;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.Attr;
import io.partfs.engine.FileType;
import io.partfs.engine.VolumeFormat;
import io.partfs.engine.testing.Pipes;
import io.partfs.engine.testing.RedisServer;
import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Redis connections lost in the middle of a transaction, and a Sentinel failover under a mounted volume. */
class RedisReconnectTest {

    private static String value(KvStore kv, String key) throws IOException {
        return new String(kv.read(r -> r.get(key)), StandardCharsets.UTF_8);
    }

    /** Sets the counter "n" of the tests to 0. */
    private static void setZero(KvStore kv) throws IOException {
        kv.update(tx -> {
            tx.put("n", "0".getBytes(StandardCharsets.UTF_8));
            return null;
        });
    }

    /**
     * A dropped connection is tried again at least every second, however long Redis was away:
     * with lettuce's default (doubling up to 30 s) the mount came back up to 30 s after Redis did
     * (29 s measured after a 95 s outage, scripts/redis-outage-bench), failing what waited meanwhile.
     */
    @Test
    void aDroppedConnectionIsTriedAgainEverySecondAtMost() {
        for (long attempt = 1; attempt <= 1000; attempt++) {
            java.time.Duration d = RedisKvStore.RECONNECT_DELAY.createDelay(attempt);
            assertTrue(d.compareTo(java.time.Duration.ofSeconds(1)) <= 0, "attempt " + attempt + " waits " + d);
        }
        assertTrue(RedisKvStore.RECONNECT_DELAY.createDelay(1).toMillis() <= 10, "a short cut is over at once");
    }

    /**
     * A WATCH does not survive its connection. A transaction that read a key, lost its connection
     * (a Redis restart, a failover, a network cut) and then committed on the new one would
     * overwrite a change another client made meanwhile; it must run again instead.
     */
    @Test
    void aTransactionWhoseConnectionWasLostAfterItsReadsRunsAgain() throws Exception {
        try (RedisServer redis = RedisServer.start();
             KvStore kv = new RedisKvStore(redis.url(0));
             KvStore other = new RedisKvStore(redis.url(0))) {
            setZero(kv);
            AtomicInteger runs = new AtomicInteger();
            kv.update(tx -> {
                long n = Long.parseLong(new String(tx.get("n"), StandardCharsets.UTF_8));
                if (runs.incrementAndGet() == 1) {
                    String killed = redis.command("CLIENT KILL TYPE normal");
                    assertTrue(killed.startsWith(":") && !killed.equals(":0"), "connections cut: " + killed);
                    other.update(t -> {
                        t.put("n", "100".getBytes(StandardCharsets.UTF_8));
                        return null;
                    });
                }
                tx.put("n", Long.toString(n + 1).getBytes(StandardCharsets.UTF_8));
                return null;
            });
            assertEquals("101", value(kv, "n"), "the other client's change is not lost");
            assertEquals(2, runs.get(), "the transaction ran again on the new connection");
        }
    }

    /**
     * The connection drops after a transaction's EXEC went out and before its answer came
     * back: Redis applied it (AFTER) or never saw it (BEFORE). The client cannot tell from the
     * connection; it reads its commit log once Redis answers again, and either returns (the
     * body ran once, its write applied once) or runs the transaction again. Before the commit
     * log, both ended in "may or may not have been applied" (EIO to ClickHouse, seen when Redis
     * was killed under a running INSERT).
     */
    @ParameterizedTest
    @EnumSource(CutProxy.Cut.class)
    void aCommitWhoseAnswerWasLostIsFoundAppliedOrRunAgain(CutProxy.Cut cut) throws Exception {
        try (RedisServer redis = RedisServer.start();
             CutProxy proxy = new CutProxy(redis.port());
             KvStore kv = new RedisKvStore("redis://127.0.0.1:" + proxy.port() + "/0")) {
            setZero(kv);
            AtomicInteger runs = new AtomicInteger();
            proxy.cutAtNextExec(cut);
            String returned = kv.update(tx -> {
                runs.incrementAndGet();
                long n = Long.parseLong(new String(tx.get("n"), StandardCharsets.UTF_8));
                tx.put("n", Long.toString(n + 1).getBytes(StandardCharsets.UTF_8));
                return "done";
            });
            assertEquals("done", returned);
            assertEquals(1, proxy.cuts(), "the connection was cut at the EXEC");
            assertEquals("1", value(kv, "n"), "applied exactly once");
            assertEquals(cut == CutProxy.Cut.AFTER ? 1 : 2, runs.get(), "found applied, or run again");
        }
    }

    /**
     * Transactions of several threads while every connection to Redis is cut every few
     * milliseconds (a flapping network): each applies whole, exactly once, and none fails while
     * Redis answers. Before, lettuce reconnected a transaction connection itself, and a command
     * written just as it dropped was never completed, so an update waited out its whole timeout
     * and failed ("cannot reach Redis ... for 30 s" here, while Redis answered all along); a
     * MULTI failing as its connection dropped broke lettuce's state under the next command (a
     * NullPointerException out of update()); and commands of one MULTI/EXEC could go out on two
     * connections (half a transaction applied on its own, or without its WATCH).
     */
    @Test
    void transactionsUnderConnectionsCutEveryFewMillisecondsApplyWholeAndSucceed() throws Exception {
        int threads = 4;
        int each = 100;
        try (RedisServer redis = RedisServer.start();
             KvStore kv = new RedisKvStore(redis.url(0))) {
            java.util.concurrent.atomic.AtomicBoolean cutting = new java.util.concurrent.atomic.AtomicBoolean(true);
            AtomicInteger cuts = new AtomicInteger();
            Thread cutter = new Thread(() -> {
                java.util.Random rnd = new java.util.Random(7);
                while (cutting.get()) {
                    java.util.concurrent.locks.LockSupport.parkNanos(rnd.nextInt(5_000_000)); // the pace: 0-5 ms
                    try {
                        redis.command("CLIENT KILL TYPE normal");
                        cuts.incrementAndGet();
                    } catch (IOException e) {
                        return;
                    }
                }
            }, "redis-cutter");
            cutter.start();
            try {
                io.partfs.engine.testing.Concurrently.run(threads, t -> {
                    for (int i = 1; i <= each; i++) {
                        kv.update(tx -> {
                            byte[] v = tx.get("n" + t);
                            long n = v == null ? 0 : Long.parseLong(new String(v, StandardCharsets.UTF_8));
                            for (int k = 0; k < 6; k++) {
                                tx.put("k" + k + "." + t, Long.toString(n + 1).getBytes(StandardCharsets.UTF_8));
                            }
                            tx.add("count" + t, 1);
                            tx.put("n" + t, Long.toString(n + 1).getBytes(StandardCharsets.UTF_8));
                            return null;
                        });
                    }
                });
            } finally {
                cutting.set(false);
                cutter.join();
            }
            assertTrue(cuts.get() > 100, "connections were cut " + cuts.get() + " times");
            for (int t = 0; t < threads; t++) {
                String key = "n" + t;
                assertEquals(Integer.toString(each), value(kv, key), "every transaction of thread " + t + " applied once");
                int thread = t;
                assertEquals((long) each, (long) kv.read(r -> r.counter("count" + thread)), "its counter");
                for (int k = 0; k < 6; k++) {
                    assertEquals(Integer.toString(each), value(kv, "k" + k + "." + t), "every write of the transaction");
                }
            }
        }
    }

    /**
     * A command lettuce wrote just as the transaction connection dropped, and keeps from being
     * sent later (its replay filter), fails at once as not sent (update() then runs the
     * transaction again on a new connection) instead of never completing.
     */
    @Test
    void aCommandCaughtByTheDropFailsAtOnceAsNotSent() {
        io.lettuce.core.protocol.AsyncCommand<byte[], byte[], String> command = new io.lettuce.core.protocol.AsyncCommand<>(
                new io.lettuce.core.protocol.Command<>(io.lettuce.core.protocol.CommandType.EXEC,
                        new io.lettuce.core.output.StatusOutput<>(io.lettuce.core.codec.ByteArrayCodec.INSTANCE)));
        assertTrue(RedisKvStore.failUnsent(command), "kept from being sent at the reconnect");
        assertTrue(command.isCompletedExceptionally(), "failed at once");
        java.util.concurrent.CompletionException e = org.junit.jupiter.api.Assertions.assertThrows(
                java.util.concurrent.CompletionException.class, command::join);
        assertTrue(e.getCause().getMessage().startsWith("Currently not connected"), "as lettuce refuses one while disconnected");
        // failUnsent is right only where lettuce asks the filter about commands never sent: read in 7.7
        assertEquals("7.7", io.lettuce.core.RedisClient.class.getPackage().getSpecificationVersion(),
                "lettuce was upgraded: check where its DefaultEndpoint asks the replay filter (RedisKvStore.failUnsent)");
    }

    /**
     * A read outside a transaction that a connection reset cut off (Redis restarted, a proxy or
     * a load balancer dropped the connection) is sent again once the connection is back. Before,
     * the getattr, lookup or listing it served failed with EIO (found by SharedVolumeFuzzTest's
     * redis-cut mode).
     */
    @ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {"MGET", "HGETALL"})
    void aReadCutOffByAConnectionResetIsSentAgain(String command) throws Exception {
        try (RedisServer redis = RedisServer.start();
             CutProxy proxy = new CutProxy(redis.port());
             KvStore kv = new RedisKvStore("redis://127.0.0.1:" + proxy.port() + "/0")) {
            setZero(kv);
            kv.update(tx -> {
                tx.hset("h", "f", "v".getBytes(StandardCharsets.UTF_8));
                return null;
            });
            proxy.resetAtNext(command);
            String read = kv.read(r -> command.equals("MGET")
                    ? new String(r.getAll(java.util.List.of("n", "m")).get(0), StandardCharsets.UTF_8)
                    : new String(r.hgetAll("h").get("f"), StandardCharsets.UTF_8));
            assertEquals(1, proxy.cuts(), "the connection was reset under the " + command);
            assertEquals(command.equals("MGET") ? "0" : "v", read);
        }
    }

    /**
     * A transaction that needs a new connection (the client's first, or one more under load)
     * while Redis restarts waits for it, as one whose connection dropped does; before, the
     * failed connect failed it at once with EIO (found by SharedVolumeFuzzTest's redis-cut mode:
     * a connection cut during its handshake).
     */
    @Test
    void aTransactionThatMustConnectWhileRedisRestartsWaitsForIt() throws Exception {
        try (RedisServer redis = RedisServer.start("--appendonly", "yes");
             KvStore kv = new RedisKvStore(redis.url(0))) { // connects its reads' connection, not yet a transaction's
            redis.kill();
            Thread restart = new Thread(() -> {
                try {
                    java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(300)); // down for a while
                    redis.restart();
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            restart.start();
            setZero(kv);
            restart.join();
            assertEquals("0", value(kv, "n"));
        }
    }

    /**
     * An id allocation (INCRBY) that a connection reset cut off is sent again: the create that
     * needed the id failed with EIO before (found by SharedVolumeFuzzTest with write-back and
     * cut connections). Reset here before Redis saw it, so it is applied once.
     */
    @Test
    void anIdAllocationCutOffByAConnectionResetIsSentAgain() throws Exception {
        try (RedisServer redis = RedisServer.start();
             CutProxy proxy = new CutProxy(redis.port());
             KvStore kv = new RedisKvStore("redis://127.0.0.1:" + proxy.port() + "/0")) {
            setZero(kv);
            proxy.resetAtNext("INCRBY");
            assertEquals(5, kv.increment("ids", 5));
            assertEquals(1, proxy.cuts(), "the connection was reset under the INCRBY");
        }
    }

    /** What asked to run at a reconnect runs once each time the connection is back after an outage, and not before. */
    @Test
    void actionsAskedForAtReconnectRunOncePerOutage() throws Exception {
        try (RedisServer redis = RedisServer.start();
             KvStore kv = new RedisKvStore(redis.url(0))) {
            AtomicInteger runs = new AtomicInteger();
            kv.onReconnect(runs::incrementAndGet);
            setZero(kv);
            assertEquals(0, runs.get(), "connecting the first time is no reconnect");
            for (int outage = 1; outage <= 2; outage++) {
                redis.kill();
                redis.restart();
                int expected = outage;
                io.partfs.engine.testing.Poll.until(() -> runs.get() >= expected, "the action after outage " + outage);
                setZero(kv); // the store works again
                assertEquals(expected, runs.get(), "once per outage, though every connection of the store reconnected");
            }
        }
    }

    /**
     * After a restart Redis loads its data before it serves anything, and answers LOADING to
     * every request meanwhile: seconds to minutes for a large volume's metadata. Reads,
     * transactions and counters sent then wait for it (up to the URL's timeout): nothing of a
     * refused request was done. Before, every getattr, lookup and write failed with EIO until
     * the load was over.
     */
    @Test
    void requestsWhileRedisLoadsItsDataWaitForIt() throws Exception {
        try (RedisServer redis = RedisServer.start("--enable-debug-command", "local");
             KvStore kv = new RedisKvStore(redis.url(0))) {
            setZero(kv);
            assertEquals("+OK", redis.command("DEBUG POPULATE 2000000 filler 100"), "filler keys, for a load of seconds");
            assertEquals("+OK", redis.command("SAVE"));
            redis.kill();
            redis.restartNoWait();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            String ping = "";
            while (!ping.startsWith("-LOADING")) {
                assertTrue(System.nanoTime() < deadline, "Redis never answered LOADING (last: " + ping + ")");
                java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5)); // poll interval
                try {
                    ping = redis.command("PING");
                } catch (IOException notListeningYet) {
                    ping = notListeningYet.toString();
                }
            }
            String[] got = new String[4];
            io.partfs.engine.testing.Concurrently.run(4, t -> {
                switch (t) {
                    case 0 -> got[0] = value(kv, "n"); // a read
                    case 1 -> got[1] = kv.update(tx -> { // a transaction that only writes (refused at EXEC)
                        tx.put("m", "1".getBytes(StandardCharsets.UTF_8));
                        return "written";
                    });
                    case 2 -> got[2] = kv.update(tx -> { // one that reads first (refused at its first read)
                        byte[] v = tx.get("r");
                        tx.put("r", (v == null ? "1" : "2").getBytes(StandardCharsets.UTF_8));
                        return "read and written";
                    });
                    default -> got[3] = Long.toString(kv.increment("c", 5)); // a counter
                }
            });
            assertEquals("+PONG", redis.command("PING"), "loaded by now");
            assertEquals(java.util.List.of("0", "written", "read and written", "5"), java.util.List.of(got));
            assertEquals("1", value(kv, "m"));
            assertEquals("1", value(kv, "r"), "applied once");
        }
    }

    /**
     * The commit log (see the test above) is one hash per client: it expires a day after the
     * client's last commit, so a crashed client's goes too, and a client that closes deletes it.
     */
    @Test
    void theCommitLogExpiresAndGoesAtClose() throws Exception {
        try (RedisServer redis = RedisServer.start()) {
            KvStore kv = new RedisKvStore(redis.url(0));
            setZero(kv);
            java.util.List<String> logs = new java.util.ArrayList<>();
            kv.read(r -> {
                r.scanKeys("commitlog:", logs::addAll);
                return null;
            });
            assertEquals(1, logs.size(), "one commit log: " + logs);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            String ttl;
            while ((ttl = redis.command("TTL " + logs.get(0))).equals(":-1")) { // the expiry is sent without waiting
                assertTrue(System.nanoTime() < deadline, "no expiry set on " + logs.get(0));
                java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(10)); // poll interval
            }
            long seconds = Long.parseLong(ttl.substring(1));
            assertTrue(seconds > 86_000 && seconds <= 86_400, "expires in a day: " + ttl);
            kv.close();
            assertEquals(":0", redis.command("EXISTS " + logs.get(0)), "deleted at close");
        }
    }

    /**
     * A loopback proxy in front of Redis that cuts the connection at the next EXEC or script
     * (EVAL, EVALSHA) a client sends: before passing it on, or after passing it on and taking
     * the server's answer, which the client then never gets.
     */
    static final class CutProxy implements AutoCloseable {
        enum Cut { BEFORE, AFTER }

        private final java.net.ServerSocket server = new java.net.ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress());
        /** Where new connections go: {@link #retarget} moves it, as a failover moves a name to another server. */
        private volatile int target;
        private final java.util.concurrent.atomic.AtomicReference<Cut> next = new java.util.concurrent.atomic.AtomicReference<>();
        private final AtomicInteger cuts = new AtomicInteger();
        private final java.util.Set<Socket> open = java.util.concurrent.ConcurrentHashMap.newKeySet();

        CutProxy(int target) throws IOException {
            this.target = target;
            Thread t = new Thread(this::accept, "redis-cut-proxy");
            t.setDaemon(true);
            t.start();
        }

        int port() {
            return server.getLocalPort();
        }

        /** Sends new connections to {@code port}; those open stay where they are. */
        void retarget(int port) {
            target = port;
        }

        void cutAtNextExec(Cut cut) {
            next.set(cut);
        }

        /** Resets the connection (RST, as a restarted server or a dropping proxy does) at the next {@code command} a client sends. */
        void resetAtNext(String command) {
            resetAt.set("\r\n" + command + "\r\n");
        }

        private final java.util.concurrent.atomic.AtomicReference<String> resetAt = new java.util.concurrent.atomic.AtomicReference<>();

        int cuts() {
            return cuts.get();
        }

        private void accept() {
            while (!server.isClosed()) {
                try {
                    Socket client = server.accept();
                    Socket redis = new Socket("127.0.0.1", target);
                    open.add(client);
                    open.add(redis);
                    java.util.concurrent.atomic.AtomicBoolean swallow = new java.util.concurrent.atomic.AtomicBoolean();
                    Pipes.start("redis-cut-proxy-pump", client, redis, open, (buf, n) -> {
                        String sent = new String(buf, 0, n, StandardCharsets.US_ASCII);
                        String reset = resetAt.get();
                        if (reset != null && sent.contains(reset) && resetAt.compareAndSet(reset, null)) {
                            cuts.incrementAndGet();
                            try {
                                client.setSoLinger(true, 0); // the close sends RST: "Connection reset"
                            } catch (IOException e) {
                                throw new java.io.UncheckedIOException(e);
                            }
                            return false;
                        }
                        if (sent.contains("\r\nEXEC\r\n") || sent.contains("\r\nEVAL")) {
                            Cut cut = next.getAndSet(null);
                            if (cut == Cut.BEFORE) {
                                cuts.incrementAndGet();
                                return false; // closes both: the server never sees it
                            }
                            swallow.compareAndSet(false, cut == Cut.AFTER);
                        }
                        return true;
                    });
                    Pipes.start("redis-cut-proxy-pump", redis, client, open, (buf, n) -> {
                        if (swallow.get()) {
                            cuts.incrementAndGet();
                            return false; // the server answered: it applied the transaction; the client never hears of it
                        }
                        return true;
                    });
                } catch (IOException e) {
                    // closed
                }
            }
        }

        @Override
        public void close() throws IOException {
            server.close();
            for (Socket s : open) {
                s.close();
            }
        }
    }

    /**
     * A volume on Redis with a replica under Sentinel (redis-sentinel:// URL): the master is
     * killed, Sentinel promotes the replica, and the engine carries on against the new master
     * with every file that was replicated, operations issued during the failover waiting for it.
     */
    @Test
    void aSentinelFailoverKeepsTheVolumeWorking() throws Exception {
        try (RedisServer master = RedisServer.start();
             RedisServer replica = RedisServer.start("--replicaof", "127.0.0.1", String.valueOf(master.port()));
             RedisServer sentinel = RedisServer.startSentinel("partfs", master.port())) {
            String url = "redis-sentinel://127.0.0.1:" + sentinel.port() + "/0#partfs";
            try (MetaEngine meta = new MetaEngine(MetaUrl.parse(url).open())) {
                assertTrue(meta.store().describe().startsWith("redis-sentinel://127.0.0.1:" + sentinel.port()),
                        meta.store().describe());
                meta.format(VolumeFormat.create("ha", VolumeFormat.DEFAULT_BLOCK_SIZE, "file:///objects"), 0, 0);
                for (int i = 0; i < 20; i++) {
                    meta.mknod(MetaEngine.ROOT, "before-" + i, FileType.FILE, 0644, 0, 0, 0, null);
                }
                awaitReplicated(master);
                master.kill();
                for (int i = 0; i < 20; i++) { // the first ones wait for the failover
                    meta.mknod(MetaEngine.ROOT, "after-" + i, FileType.FILE, 0644, 0, 0, 0, null);
                }
                assertEquals(String.valueOf(replica.port()), masterPort(sentinel.port()), "the replica is the master now");
                for (int i = 0; i < 20; i++) {
                    Attr a = meta.lookup(MetaEngine.ROOT, "before-" + i);
                    assertTrue(a.ino() > 0);
                    assertTrue(meta.lookup(MetaEngine.ROOT, "after-" + i).ino() > 0);
                }
                assertEquals(40, meta.readdir(MetaEngine.ROOT).stream().map(e -> e.name())
                        .filter(n -> n.startsWith("before-") || n.startsWith("after-")).distinct().count(), "40 files, every one once");
            } catch (AssertionError | IOException e) {
                throw new AssertionError(e.getMessage() + "\nsentinel log:\n" + sentinel.log(), e);
            }
        }
    }

    /**
     * A failover that leaves the old master running as a replica of the new one, while the name
     * in the URL leads to the new master from then on (a managed Redis's primary endpoint; here a
     * proxy sending new connections there): open connections stay with the old one, which
     * refuses writes (READONLY). The engine connects again and carries on against the new
     * master, its reads seeing its writes; before, every write failed until the mount restarted.
     * Also as a user that may not use CLIENT (its reads connection stays on the old master, now
     * a replica of the new one, until it drops): the writes go on all the same.
     */
    @ParameterizedTest(name = "user allowed CLIENT: {0}")
    @org.junit.jupiter.params.provider.ValueSource(booleans = {true, false})
    void aMasterDemotedToAReplicaIsLeftForTheNewOne(boolean clientAllowed) throws Exception {
        try (RedisServer master = RedisServer.start();
             RedisServer replica = RedisServer.start("--replicaof", "127.0.0.1", String.valueOf(master.port()));
             CutProxy endpoint = new CutProxy(master.port())) {
            String user = "";
            if (!clientAllowed) {
                for (RedisServer r : new RedisServer[] {master, replica}) {
                    assertEquals("+OK", r.command("ACL SETUSER partfs on >secret ~* &* +@all -client"));
                }
                user = "partfs:secret@";
            }
            try (MetaEngine meta = new MetaEngine(MetaUrl.parse("redis://" + user + "127.0.0.1:" + endpoint.port() + "/0").open())) {
                meta.format(VolumeFormat.create("ha", VolumeFormat.DEFAULT_BLOCK_SIZE, "file:///objects"), 0, 0);
                for (int i = 0; i < 10; i++) {
                    meta.mknod(MetaEngine.ROOT, "before-" + i, FileType.FILE, 0644, 0, 0, 0, null);
                }
                awaitReplicated(master);
                replica.command("REPLICAOF NO ONE");
                endpoint.retarget(replica.port());
                master.command("REPLICAOF 127.0.0.1 " + replica.port());
                for (int i = 0; i < 10; i++) {
                    meta.mknod(MetaEngine.ROOT, "after-" + i, FileType.FILE, 0644, 0, 0, 0, null);
                    if (clientAllowed) {
                        assertTrue(meta.lookup(MetaEngine.ROOT, "after-" + i).ino() > 0, "a read finds the write just made");
                    }
                }
                awaitReplicated(replica); // (for the user without CLIENT, whose reads still go to the old master)
                assertEquals(20, meta.readdir(MetaEngine.ROOT).stream().map(e -> e.name())
                        .filter(n -> n.startsWith("before-") || n.startsWith("after-")).distinct().count());
            }
            try (MetaEngine direct = new MetaEngine(MetaUrl.parse("redis://127.0.0.1:" + replica.port() + "/0").open())) {
                direct.load();
                assertTrue(direct.lookup(MetaEngine.ROOT, "after-9").ino() > 0, "the writes went to the new master");
            }
        }
    }

    /** The master's port as Sentinel names it now. */
    private static String masterPort(int sentinelPort) throws IOException {
        try (Socket s = new Socket("127.0.0.1", sentinelPort)) {
            s.setSoTimeout(5000);
            s.getOutputStream().write("SENTINEL get-master-addr-by-name partfs\r\n".getBytes(StandardCharsets.US_ASCII));
            s.getOutputStream().flush();
            // *2 $9 127.0.0.1 $5 PORT
            String[] lines = new String(readSome(s.getInputStream()), StandardCharsets.US_ASCII).split("\r\n");
            return lines[lines.length - 1];
        }
    }

    private static byte[] readSome(InputStream in) throws IOException {
        byte[] buf = new byte[256];
        int n = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (System.nanoTime() < deadline) {
            n += in.read(buf, n, buf.length - n);
            String got = new String(buf, 0, n, StandardCharsets.US_ASCII);
            if (got.split("\r\n").length >= 5) {
                break;
            }
        }
        return java.util.Arrays.copyOf(buf, n);
    }

    /** Waits until the master's replica has everything the master has (replication is asynchronous). */
    private static void awaitReplicated(RedisServer master) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            String wait = master.command("WAIT 1 1000");
            if (wait.equals(":1")) {
                return;
            }
            assertTrue(System.nanoTime() < deadline, "the replica caught up within 30 s: " + wait);
        }
    }

    /**
     * Redis stalls for a few seconds (a fork for a snapshot of a large dataset, a paused VM; here
     * SIGSTOP, then SIGCONT once a transaction has sent its read): transactions of two
     * clients made during the stall wait for it, none fails, and every one of them applies
     * exactly once, the conflicting ones run again.
     */
    @Test
    void transactionsDuringAStallOfRedisWaitForItAndEachAppliesOnce() throws Exception {
        try (RedisServer redis = RedisServer.start();
             KvStore a = new RedisKvStore(redis.url(0));
             KvStore b = new RedisKvStore(redis.url(0))) {
            setZero(a);
            java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(8);
            // the transaction on the connection setZero left sends its read; the others wait in their new
            // connections' handshake, which the stopped Redis does not answer either
            java.util.concurrent.CountDownLatch reading = new java.util.concurrent.CountDownLatch(1);
            try {
                signal(redis, "STOP");
                java.util.List<java.util.concurrent.Future<?>> done = new java.util.ArrayList<>();
                for (int i = 0; i < 40; i++) {
                    KvStore kv = i % 2 == 0 ? a : b;
                    done.add(pool.submit(() -> kv.update(tx -> {
                        reading.countDown();
                        long n = Long.parseLong(new String(tx.get("n"), StandardCharsets.UTF_8));
                        tx.put("n", Long.toString(n + 1).getBytes(StandardCharsets.UTF_8));
                        return null;
                    })));
                }
                assertTrue(reading.await(30, TimeUnit.SECONDS), "a transaction sent its read to the stopped Redis");
                assertTrue(done.stream().noneMatch(java.util.concurrent.Future::isDone), "nothing commits while Redis is stopped");
                signal(redis, "CONT");
                for (java.util.concurrent.Future<?> f : done) {
                    f.get(60, TimeUnit.SECONDS);
                }
            } finally {
                signal(redis, "CONT");
                pool.shutdownNow();
            }
            assertEquals("40", value(a, "n"), "every increment applied once");
        }
    }

    /**
     * {@code ?timeout=} in the URL bounds how long an operation waits for a Redis that does not
     * answer (here stopped with SIGSTOP) before it fails, instead of the default 30 s; once
     * Redis answers again the store works. A timeout out of range is refused in one line.
     */
    @Test
    void theUrlsTimeoutBoundsTheWaitForAStalledRedis() throws Exception {
        try (RedisServer redis = RedisServer.start();
             RedisKvStore kv = new RedisKvStore(redis.url(0) + "?timeout=2s")) {
            assertEquals(java.time.Duration.ofSeconds(2), kv.timeout());
            setZero(kv);
            long start = System.nanoTime();
            IOException failed;
            signal(redis, "STOP");
            try {
                failed = org.junit.jupiter.api.Assertions.assertThrows(IOException.class, () -> kv.update(tx -> {
                    tx.put("n", "1".getBytes(StandardCharsets.UTF_8));
                    return null;
                }));
            } finally {
                signal(redis, "CONT");
            }
            double waited = (System.nanoTime() - start) / 1e9;
            assertTrue(waited >= 2 && waited < 15, "failed after " + waited + " s, not 30: " + failed);
            assertTrue(failed.getMessage().contains("within 2 s"), failed.getMessage());
            kv.update(tx -> { // another key: the timed-out write of "n" may still apply as Redis resumes
                tx.put("m", "7".getBytes(StandardCharsets.UTF_8));
                return null;
            });
            assertEquals("7", value(kv, "m"), "the store works once Redis answers");
        }
        try (RedisServer redis = RedisServer.start();
             RedisKvStore kv = new RedisKvStore(redis.url(0))) {
            assertEquals(RedisKvStore.DEFAULT_TIMEOUT, kv.timeout());
            for (String bad : new String[] {"?timeout=100ms", "?timeout=2h", "?timeout=abc", "?timeout=1.5s"}) {
                IOException e = org.junit.jupiter.api.Assertions.assertThrows(IOException.class,
                        () -> new RedisKvStore(redis.url(0) + bad).close());
                assertTrue(e.getMessage().contains("timeout must be between 1s and 1h"), e.getMessage());
            }
        }
    }

    private static void signal(RedisServer redis, String signal) throws IOException, InterruptedException {
        Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(redis.pid())).inheritIO().start();
        assertEquals(0, kill.waitFor(), "kill -" + signal);
    }
}
