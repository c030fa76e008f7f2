package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.LatencyProxy;
import io.partfs.engine.testing.Poll;
import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.S3Server;
import java.io.IOException;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * ClickHouse on a PartFS mount while its object store is unreachable for a while: an INSERT
 * made during the outage fails (its part's files cannot be uploaded, so the rename that would
 * make the part exist reports EIO) and leaves nothing behind; the INSERTs before it are intact,
 * the first one after the store is back succeeds, nothing is found broken when ClickHouse
 * restarts, and fsck finds every block. The outage is real: the proxy in front of s3proxy cuts
 * every connection and refuses new ones. The mount runs with its defaults (ten attempts a
 * request): the INSERT must fail within one round of retries, because once a request has used
 * all its attempts the others are tried once each. Before that it took 50 s to more than two
 * minutes; now 3.7-8.5 s.
 */
class ObjectStoreOutageIT {
    @Test
    void anInsertDuringAnOutageFailsCleanlyAndTheTableCarriesOnAfterIt() throws Exception {
        try (Stack st = Stack.start("partfs-outage")) {
            st.mount();
            st.ch.start();
            Batches.createTable(st.ch);
            for (int batch = 1; batch <= 4; batch++) {
                Batches.insert(st.ch, batch);
            }

            st.proxy.setDown(true);
            long started = System.nanoTime();
            IOException failed = assertThrows(IOException.class, () -> Batches.insert(st.ch, 5), "an INSERT with S3 unreachable");
            double seconds = (System.nanoTime() - started) / 1e9;
            System.out.printf("the INSERT during the outage failed after %.1f s: %s%n", seconds, failed.getMessage());
            // one request's ten attempts back off for at most 16 s in all, and the requests
            // already retrying stop at their next failure (at most 5 s of backoff later)
            assertTrue(seconds < 40, "the INSERT failed within one round of retries, not " + seconds + " s");
            assertTrue(failed.getMessage().contains("I/O error"),
                    "ClickHouse reports the I/O error: " + failed.getMessage());
            st.proxy.setDown(false);

            Batches.insert(st.ch, 6);
            assertEquals(Batches.wholeBatches(1, 2, 3, 4, 6), Batches.read(st.ch), "the failed INSERT left nothing, the others are whole");
            st.ch.stop();
            st.ch.start();
            assertEquals(Batches.wholeBatches(1, 2, 3, 4, 6), Batches.read(st.ch), "after a restart of ClickHouse");
            Batches.assertNothingDetached(st.w.mnt, "after the outage");
            st.ch.stop();

            Partfs.Result u = st.w.partfs.run("umount", st.w.mnt.toString());
            assertEquals(0, u.exit(), "umount has nothing left to upload: " + u.all());
            Partfs.Result fsck = st.w.partfs.run("fsck", "--meta", st.meta);
            assertEquals(0, fsck.exit(), fsck.all());
            assertTrue(fsck.out().contains("fsck: OK"), fsck.out());
        }
    }

    /**
     * The store hangs instead: it takes connections and never answers. An INSERT into a table
     * of 41 columns (some 90 files a part, six rounds of the sixteen upload threads) must fail
     * after about one request timeout, not one per round: the first uploads to time out mark
     * the store unreachable, and then requests are sent only after a probe got an answer. With
     * a 3 s timeout it failed after 27 s when each request waited for a probe, and after 6.1-9.2
     * s now. Once the store answers again the next INSERT succeeds: its requests made together
     * wait for the first one's probe rather than fail.
     */
    @Test
    void anInsertWhileTheStoreHangsFailsAfterAboutOneTimeoutAndTheNextOneAfterItSucceeds() throws Exception {
        int timeout = 3;
        try (Stack st = Stack.start("partfs-hang")) {
            st.mount("--io-timeout", String.valueOf(timeout));
            st.ch.start();
            StringBuilder columns = new StringBuilder("k UInt32");
            StringBuilder values = new StringBuilder("number");
            for (int c = 1; c <= 40; c++) {
                columns.append(", c").append(c).append(" String");
                values.append(", toString(number * ").append(c).append(')');
            }
            st.ch.query("CREATE TABLE wide (" + columns + ") ENGINE = MergeTree ORDER BY k");
            String insert = "INSERT INTO wide SELECT " + values + " FROM system.numbers LIMIT 1000";
            st.ch.query(insert);

            st.proxy.setHung(true);
            long started = System.nanoTime();
            IOException failed = assertThrows(IOException.class, () -> st.ch.query(insert), "an INSERT while S3 hangs");
            double seconds = (System.nanoTime() - started) / 1e9;
            System.out.printf("the INSERT while the store hung failed after %.1f s: %s%n", seconds, failed.getMessage());
            assertTrue(seconds < 5 * timeout, "the INSERT failed after about one timeout of " + timeout + " s, not " + seconds + " s");
            assertTrue(st.w.partfs.mountLogs().contains("requests fail without being sent until a probe request gets an answer"), "the mount logged the outage");
            st.proxy.setHung(false);

            st.ch.query(insert);
            assertEquals("2000", st.ch.query("SELECT count() FROM wide").trim(), "the first and the last INSERT, nothing of the failed one");
            st.ch.stop();
            Partfs.Result u = st.w.partfs.run("umount", st.w.mnt.toString());
            assertEquals(0, u.exit(), "umount has nothing left to upload: " + u.all());
            Partfs.Result fsck = st.w.partfs.run("fsck", "--meta", st.meta);
            assertEquals(0, fsck.exit(), fsck.all());
        }
    }

    /**
     * Write-back while the store hangs: fsync and close return once the blocks are on local
     * disk, so INSERTs succeed during the hang; the blocks reach S3 once it answers again, which
     * a second mount with an empty cache of its own shows by reading every row back from S3.
     */
    @Test
    void withWriteBackInsertsSucceedWhileTheStoreHangsAndReachItOnceItAnswers() throws Exception {
        try (Stack st = Stack.start("partfs-hang-wb")) {
            st.mount("--writeback", "--io-timeout", "3", "--cache-dir", st.w.dir.resolve("cache1").toString());
            st.ch.start();
            Batches.createTable(st.ch);
            Batches.insert(st.ch, 1);

            st.proxy.setHung(true);
            for (int batch = 2; batch <= 4; batch++) {
                long started = System.nanoTime();
                Batches.insert(st.ch, batch);
                System.out.printf("write-back INSERT %d while the store hung: %.2f s%n", batch, (System.nanoTime() - started) / 1e9);
                if (batch == 2) { // the next ones while the mount knows the store is down: its uploads timed out
                    Poll.until(() -> st.logged("requests fail without being sent"), java.time.Duration.ofSeconds(60),
                            "the staged uploads hit the hang");
                }
            }
            st.proxy.setHung(false);
            long back = System.nanoTime();
            Poll.until(() -> st.logged("staged block(s) that waited for it"),
                    "the staged blocks go up together once a probe is answered, not each at its own backoff");
            System.out.printf("write-back: staged blocks sent %.1f s after the store answered again%n", (System.nanoTime() - back) / 1e9);
            Batches.insert(st.ch, 5);
            st.ch.stop();
            long umountStarted = System.nanoTime();
            Partfs.Result u = st.w.partfs.run("umount", st.w.mnt.toString());
            System.out.printf("write-back umount after the hang: %.1f s%n", (System.nanoTime() - umountStarted) / 1e9);
            assertEquals(0, u.exit(), "umount uploaded every staged block: " + u.all());

            st.mount("--cache-dir", st.w.dir.resolve("cache2").toString());
            st.ch.start();
            assertEquals(Batches.wholeBatches(1, 2, 3, 4, 5), Batches.read(st.ch), "every row, read from S3");
            st.ch.stop();
            assertEquals(0, st.w.partfs.run("umount", st.w.mnt.toString()).exit());
            Partfs.Result fsck = st.w.partfs.run("fsck", "--meta", st.meta);
            assertEquals(0, fsck.exit(), fsck.all());
        }
    }

    /**
     * {@code partfs umount} while the store is down, of a mount with a file's writes still
     * buffered (the file open), then of a write-back mount with blocks staged: each mount waits
     * for the store to upload them, and umount, once it has waited 3 s, shows the mount's own
     * lines about it (KiB, or blocks and MiB, left; waiting for the store), and returns once all
     * is uploaded; fsck then finds every block in the store, and the files read back whole. An
     * umount whose --timeout passes first says so and exits 1, and the mount goes on.
     */
    @Test
    void umountShowsWhatTheMountStillUploadsAndWaitsForIt() throws Exception {
        try (Stack st = Stack.start("partfs-drain")) {
            java.nio.file.Path out = st.w.dir.resolve("umount.out");
            st.mount();
            // started before the file is opened: a process started while it is open would flush
            // it (the child closes the descriptors it inherited from this JVM), uploading it all
            Process umount = umountOnceToldTo(st, out);
            try (var open = java.nio.channels.FileChannel.open(st.w.mnt.resolve("buffered.bin"),
                    java.nio.file.StandardOpenOption.CREATE_NEW, java.nio.file.StandardOpenOption.WRITE)) {
                open.write(java.nio.ByteBuffer.wrap(randomBytes(6 << 20, 1))); // buffered until flushed
                st.proxy.setDown(true);
                umount.getOutputStream().close(); // go
                try {
                    // the uploads fail all their attempts (16 s at most), then the mount waits for the store
                    Poll.until(() -> read(out).contains("waiting up to 60 s for it to answer"), Duration.ofSeconds(60),
                            "umount shows the mount waiting for the store");
                    assertTrue(umount.isAlive(), "umount waits for the uploads: " + read(out));
                } finally {
                    st.proxy.setDown(false);
                }
                Poll.until(() -> read(out).contains("the object store answers again"), "the mount found the store back");
            } // the mount, busy until now, ends
            String said = umountSaid(umount, out, st.w.mnt);
            assertTrue(java.util.regex.Pattern.compile("(?m)^  \\d\\d:\\d\\d:\\d\\d unmounting " + st.w.mnt
                    + ": \\d+ KiB of buffered writes left to upload$").matcher(said).find(), "the mount's 5 s line, shortened: " + said);

            st.mount("--writeback");
            st.proxy.setDown(true);
            try (var ch = java.nio.channels.FileChannel.open(st.w.mnt.resolve("staged.bin"),
                    java.nio.file.StandardOpenOption.CREATE_NEW, java.nio.file.StandardOpenOption.WRITE)) {
                ch.write(java.nio.ByteBuffer.wrap(randomBytes(6 << 20, 2)));
                ch.force(true); // durable in the local staging directory while the store is down
            }
            Partfs.Result gaveUp = st.w.partfs.run("umount", st.w.mnt.toString(), "--timeout", "6");
            assertEquals(1, gaveUp.exit(), gaveUp.all());
            assertTrue(gaveUp.out().contains("write-back: 6 staged block(s), 6 MiB, left to upload"), gaveUp.all());
            assertTrue(gaveUp.err().contains("still runs after 6 s (uploads pending?): see its log "), gaveUp.all());
            // the mount goes on stopping: a second umount waits for it again
            umount = umountOnceToldTo(st, out);
            umount.getOutputStream().close();
            try {
                Poll.until(() -> read(out).contains("left to upload"), "umount shows what the mount has left to upload");
                assertTrue(umount.isAlive(), "umount waits for the uploads: " + read(out));
            } finally {
                st.proxy.setDown(false);
            }
            said = umountSaid(umount, out, st.w.mnt);
            assertTrue(java.util.regex.Pattern.compile("(?m)^  \\d\\d:\\d\\d:\\d\\d write-back: \\d+ staged block\\(s\\), 6 MiB, left to upload$")
                    .matcher(said).find(), "the mount's line, shortened: " + said);

            Partfs.Result fsck = st.w.partfs.run("fsck", "--meta", st.meta);
            assertEquals(0, fsck.exit(), fsck.all());
            assertTrue(fsck.out().contains("fsck: OK"), fsck.out());
            st.mount();
            assertTrue(java.util.Arrays.equals(randomBytes(6 << 20, 1), java.nio.file.Files.readAllBytes(st.w.mnt.resolve("buffered.bin"))));
            assertTrue(java.util.Arrays.equals(randomBytes(6 << 20, 2), java.nio.file.Files.readAllBytes(st.w.mnt.resolve("staged.bin"))));
        }
    }

    /** Starts {@code partfs umount} of the stack's mount, held until its standard input is closed, its output to {@code out}. */
    private static Process umountOnceToldTo(Stack st, java.nio.file.Path out) throws IOException {
        ProcessBuilder b = st.w.partfs.builder("umount", st.w.mnt.toString());
        java.util.List<String> command = new java.util.ArrayList<>(java.util.List.of("sh", "-c", "cat >/dev/null && exec \"$@\"", "sh"));
        command.addAll(b.command());
        return b.command(command).redirectErrorStream(true).redirectOutput(out.toFile()).start();
    }

    /** What {@code umount} said, once it exited 0 after saying it waited and then that {@code mnt} is unmounted. */
    private static String umountSaid(Process umount, java.nio.file.Path out, java.nio.file.Path mnt) throws Exception {
        assertTrue(umount.waitFor(120, java.util.concurrent.TimeUnit.SECONDS), "umount returns once all is uploaded");
        String said = read(out);
        System.out.print("partfs umount said:\n" + said);
        assertEquals(0, umount.exitValue(), said);
        assertTrue(said.startsWith("partfs: waiting for mount process "), said);
        assertTrue(said.endsWith("partfs: unmounted " + mnt + "\n"), said);
        return said;
    }

    private static byte[] randomBytes(int n, long seed) {
        byte[] b = new byte[n];
        new java.util.Random(seed).nextBytes(b);
        return b;
    }

    private static String read(java.nio.file.Path file) {
        try {
            return java.nio.file.Files.readString(file);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /**
     * Redis, s3proxy behind a {@link LatencyProxy}, a volume formatted on them (bucket
     * {@code bucket}), and a ClickHouse server for the mount point, closed in the reverse order
     * (the mount unmounted after ClickHouse stops, before the servers do).
     */
    private static final class Stack implements AutoCloseable {
        final Workdir w;
        final LatencyProxy proxy;
        final ClickHouseServer ch;
        final String meta;
        private final java.util.List<AutoCloseable> opened;

        private Stack(Workdir w, LatencyProxy proxy, ClickHouseServer ch, String meta, java.util.List<AutoCloseable> opened) {
            this.w = w;
            this.proxy = proxy;
            this.ch = ch;
            this.meta = meta;
            this.opened = opened;
        }

        /** Whether the mount's log has {@code text}. */
        boolean logged(String text) {
            try {
                return w.partfs.mountLogs().contains(text);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }

        /** Mounts the volume in the background, with {@code options} after the usual ones. */
        void mount(String... options) throws Exception {
            java.util.List<String> args = new java.util.ArrayList<>(java.util.List.of(
                    "mount", w.mnt.toString(), "--meta", meta, "--background", "--http-address", "none"));
            args.addAll(java.util.List.of(options));
            w.partfs.ok(args.toArray(String[]::new));
        }

        static Stack start(String bucket) throws Exception {
            java.util.List<AutoCloseable> opened = new java.util.ArrayList<>();
            try {
                Workdir w = Workdir.create(bucket + "-");
                opened.add(w);
                RedisServer redis = RedisServer.start();
                opened.add(redis);
                S3Server s3 = S3Server.start();
                opened.add(s3);
                LatencyProxy proxy = new LatencyProxy(s3.endpoint().getPort());
                opened.add(proxy);
                opened.add(() -> { // while the servers still run: a mount cut off from them takes long to stop
                    if (io.partfs.engine.fuse.Mounts.isMounted(w.mnt)) {
                        w.partfs.run("umount", w.mnt.toString());
                    }
                });
                ClickHouseServer ch = new ClickHouseServer(w.dir.resolve("ch"), w.mnt);
                opened.add(ch);
                String meta = redis.url(0);
                w.partfs.formatOnS3(meta, java.net.URI.create("http://127.0.0.1:" + proxy.port()), bucket, "vol");
                return new Stack(w, proxy, ch, meta, opened);
            } catch (Exception | Error e) {
                closeAll(opened, e);
                throw e;
            }
        }

        @Override
        public void close() throws Exception {
            Exception first = new Exception("closing the test's servers");
            closeAll(opened, first);
            if (first.getSuppressed().length > 0) {
                throw first;
            }
        }

        /** Closes {@code all} last first, adding what fails to {@code failures}. */
        private static void closeAll(java.util.List<AutoCloseable> all, Throwable failures) {
            for (int i = all.size() - 1; i >= 0; i--) {
                try {
                    all.get(i).close();
                } catch (Exception e) {
                    failures.addSuppressed(e);
                }
            }
        }
    }
}
