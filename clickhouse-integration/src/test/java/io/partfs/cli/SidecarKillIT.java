package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.fuse.Mounts;
import io.partfs.engine.testing.LatencyProxy;
import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.S3Server;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * "Nothing lost on a crash", end to end: ClickHouse inserts into a MergeTree table on a PartFS
 * mount (Redis metadata, S3) while the sidecar is killed with SIGKILL (the out-of-memory
 * killer), and ClickHouse after it (its pod restarted). The sidecar and ClickHouse start
 * again, as a restarted pod would, and then:
 * <ul>
 * <li>every INSERT ClickHouse acknowledged is in the table, whole, once;</li>
 * <li>the INSERT that was in flight is there whole or not at all (one INSERT is one part, and
 *     a part exists only once its directory's rename is committed);</li>
 * <li>no part was found broken (none detached), and every row reads back as written;</li>
 * <li>after a clean stop, {@code partfs fsck} finds every block of every file in S3.</li>
 * </ul>
 * In the default mode a part's files are in S3 before its rename returns; in write-back mode
 * (with uploads held back an hour, so that nothing is uploaded before the kill) they are on
 * the sidecar's local disk only, and the next mount with the same cache directory uploads them.
 */
class SidecarKillIT {
    enum Mode {
        DEFAULT(),
        WRITEBACK("--writeback", "--upload-delay", "3600");

        final List<String> options;

        Mode(String... options) {
            this.options = List.of(options);
        }
    }

    /** INSERTs acknowledged before the kill; merges of the first ones run by then. */
    private static final int ACKNOWLEDGED_BEFORE_KILL = 16;

    @ParameterizedTest
    @EnumSource(Mode.class)
    void everyAcknowledgedInsertSurvivesKillingTheSidecarThenClickHouse(Mode mode) throws Exception {
        Path dir = Files.createTempDirectory("partfs-kill-");
        Path mnt = dir.resolve("mnt");
        Partfs partfs = new Partfs(dir.resolve("home"));
        Process sidecar = null;
        try (RedisServer redis = RedisServer.start(); S3Server s3 = S3Server.start();
             LatencyProxy wan = new LatencyProxy(s3.endpoint().getPort());
             ClickHouseServer ch = new ClickHouseServer(dir.resolve("ch"), mnt)) {
            // S3 at a WAN-like 20 ms a request: a part's uploads outlast the moment between an
            // INSERT's acknowledgement and the kill, had the rename not waited for them
            wan.setDelayMillis(20);
            String meta = redis.url(0);
            partfs.formatOnS3(meta, java.net.URI.create("http://127.0.0.1:" + wan.port()), "partfs-kill", "vol");
            List<String> mount = new ArrayList<>(List.of("mount", mnt.toString(), "--meta", meta, "--http-address", "none"));
            mount.addAll(mode.options);

            sidecar = partfs.startMount(mount, mnt, dir.resolve("sidecar-1.log"));
            ch.start();
            Batches.createTable(ch);

            Batches.Writer writer = new Batches.Writer(ch);
            writer.awaitAcknowledged(ACKNOWLEDGED_BEFORE_KILL);

            sidecar.destroyForcibly(); // an INSERT is (almost certainly) in flight
            assertTrue(sidecar.waitFor(30, TimeUnit.SECONDS), "the sidecar exits on SIGKILL");
            String writerEnd = writer.stop();
            ch.kill();
            assertTrue(Mounts.isMounted(mnt) && Mounts.disconnected(mnt), "a dead mount is left behind");
            int inFlight = writer.attempted.get();
            Set<Integer> acked = Set.copyOf(writer.acknowledged);
            if (mode == Mode.WRITEBACK) {
                assertTrue(backingFiles(dir) > 0, "the kernel wrote the parts' files into staging files itself (write "
                        + "passthrough), and the restart is to upload what their attributes name");
            }

            sidecar = partfs.startMount(mount, mnt, dir.resolve("sidecar-2.log"));
            assertTrue(Files.readString(dir.resolve("sidecar-2.log")).contains("took down the mount at " + mnt),
                    "the restarted sidecar replaced the dead mount");
            // and ended the dead mount's session: with it the flock(2) lock of the killed ClickHouse's
            // status file, which would keep the restarted server out for minutes
            assertTrue(Files.readString(dir.resolve("sidecar-2.log")).contains("ended session"),
                    "the restarted sidecar ended the dead mount's session");
            ch.start();
            TreeMap<Integer, String> batches = Batches.read(ch);
            String what = "after the kill (" + mode + "; " + acked.size() + " INSERTs acknowledged, batch "
                    + inFlight + " in flight, the writer: " + writerEnd + "): batches found " + batches.keySet();
            System.out.println(what);
            for (var b : batches.entrySet()) {
                assertEquals(Batches.whole(b.getKey()), b.getValue(), "batch " + b.getKey() + " whole: " + what);
            }
            for (int b : acked) {
                assertTrue(batches.containsKey(b), "acknowledged batch " + b + " is lost: " + what);
            }
            for (int b : batches.keySet()) {
                assertTrue(acked.contains(b) || b == inFlight, "batch " + b + " was never inserted: " + what);
            }
            Batches.assertNothingDetached(mnt, what);
            assertEquals(List.of(), ch.logLines("broken", 5), "ClickHouse found no broken part at its start: " + what);
            ch.stop();

            sidecar.destroy(); // SIGTERM: uploads what is staged, unmounts
            assertTrue(sidecar.waitFor(120, TimeUnit.SECONDS), "the sidecar stops on SIGTERM");
            assertEquals(0, sidecar.exitValue(), Files.readString(dir.resolve("sidecar-2.log")));
            Partfs.Result fsck = partfs.run("fsck", "--meta", meta);
            assertEquals(0, fsck.exit(), fsck.all());
            assertTrue(fsck.out().contains("fsck: OK"), fsck.out());
        } finally {
            if (sidecar != null && sidecar.isAlive()) { // a failed assertion left it running
                sidecar.destroyForcibly();
                sidecar.waitFor(30, TimeUnit.SECONDS);
            }
            partfs.unmountAndDelete(mnt, dir);
        }
    }

    /**
     * A file the kernel writes itself on a write-back mount (embedded volume, uploads held back an
     * hour), fsynced every 2 MiB as it grows, its start written over and then back on the way: the
     * sidecar is killed with SIGKILL after 16 fsyncs, the file still open. The commits after the
     * first two took only what changed (runs, named a line each in the staging file's attribute:
     * fewer than the 24 lines after which a commit takes the whole file again), and nothing of
     * them was uploaded; the restarted sidecar uploads them, and every acknowledged byte reads
     * back, also from the object store alone.
     */
    @org.junit.jupiter.api.Test
    void everyFsyncedByteOfAGrowingFileSurvivesKillingTheSidecar() throws Exception {
        Path dir = Files.createTempDirectory("partfs-kill-grow-");
        Path mnt = dir.resolve("mnt");
        Partfs partfs = new Partfs(dir.resolve("home"));
        Process sidecar = null;
        try {
            List<String> mount = List.of("mount", mnt.toString(), "--http-address", "none", "--writeback", "--upload-delay", "3600");
            sidecar = partfs.startMount(mount, mnt, dir.resolve("sidecar-1.log"));
            int step = 2 << 20;
            int steps = 16;
            byte[] data = new byte[steps * step];
            new java.util.Random(12).nextBytes(data);
            java.util.concurrent.atomic.AtomicLong acked = new java.util.concurrent.atomic.AtomicLong();
            java.util.concurrent.CountDownLatch killed = new java.util.concurrent.CountDownLatch(1);
            Thread writer = new Thread(() -> {
                try (var ch = java.nio.channels.FileChannel.open(mnt.resolve("grown.bin"), java.nio.file.StandardOpenOption.CREATE_NEW,
                        java.nio.file.StandardOpenOption.WRITE)) {
                    for (int i = 0; i < steps; i++) {
                        ch.write(java.nio.ByteBuffer.wrap(data, i * step, step), (long) i * step);
                        if (i == 8 || i == 9) { // over the start, then back: two runs in one commit, each time
                            byte[] start = java.util.Arrays.copyOf(data, 4096);
                            if (i == 8) {
                                java.util.Arrays.fill(start, (byte) 7);
                            }
                            ch.write(java.nio.ByteBuffer.wrap(start), 0);
                        }
                        ch.force(true);
                        acked.set((long) (i + 1) * step);
                    }
                    killed.await(120, TimeUnit.SECONDS); // open until the sidecar is gone
                } catch (java.io.IOException e) {
                    // the sidecar is gone: what was acknowledged so far is what counts
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            writer.start();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (acked.get() < (long) steps * step) {
                assertTrue(writer.isAlive() && System.nanoTime() < deadline, steps + " fsyncs within 120 s; acknowledged " + acked.get());
                java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5)); // poll interval
            }
            sidecar.destroyForcibly();
            assertTrue(sidecar.waitFor(30, TimeUnit.SECONDS), "the sidecar exits on SIGKILL");
            killed.countDown();
            writer.join(TimeUnit.SECONDS.toMillis(60));
            long survived = acked.get();
            assertTrue(backingFiles(dir) > 0, "the kernel wrote the file into a staging file itself");
            assertTrue(slicesAttributes(dir).stream().anyMatch(a -> a.lines().anyMatch(l -> l.split(" ").length == 5)),
                    "commits of runs are named in the staging file's attribute: " + slicesAttributes(dir));

            sidecar = partfs.startMount(mount, mnt, dir.resolve("sidecar-2.log"));
            byte[] back = Files.readAllBytes(mnt.resolve("grown.bin"));
            assertTrue(back.length >= survived, back.length + " bytes read back, " + survived + " acknowledged");
            assertTrue(java.util.Arrays.equals(data, 0, (int) survived, back, 0, (int) survived), "the acknowledged bytes read back");
            sidecar.destroy(); // SIGTERM: uploads what is staged, unmounts
            assertTrue(sidecar.waitFor(120, TimeUnit.SECONDS), "the sidecar stops on SIGTERM");
            assertEquals(0, sidecar.exitValue(), Files.readString(dir.resolve("sidecar-2.log")));

            List<String> fresh = List.of("mount", mnt.toString(), "--http-address", "none", "--cache-dir", dir.resolve("cache2").toString());
            sidecar = partfs.startMount(fresh, mnt, dir.resolve("sidecar-3.log"));
            byte[] stored = Files.readAllBytes(mnt.resolve("grown.bin"));
            assertTrue(java.util.Arrays.equals(data, 0, (int) survived, stored, 0, (int) survived),
                    "the acknowledged bytes read back from the object store alone");
        } finally {
            if (sidecar != null && sidecar.isAlive()) {
                sidecar.destroy();
                sidecar.waitFor(120, TimeUnit.SECONDS);
            }
            partfs.unmountAndDelete(mnt, dir);
        }
    }

    /** The {@code partfs.slices} attributes of the staging files under {@code dir}. */
    private static List<String> slicesAttributes(Path dir) throws java.io.IOException {
        List<String> out = new ArrayList<>();
        try (var files = Files.walk(dir.resolve("home"))) {
            for (Path f : files.filter(f -> f.getFileName().toString().startsWith(".spare-") && Files.isRegularFile(f)).toList()) {
                var view = Files.getFileAttributeView(f, java.nio.file.attribute.UserDefinedFileAttributeView.class);
                if (view != null && view.list().contains("partfs.slices")) {
                    java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(view.size("partfs.slices"));
                    view.read("partfs.slices", b);
                    out.add(new String(b.array(), 0, b.position(), java.nio.charset.StandardCharsets.UTF_8));
                }
            }
        }
        return out;
    }

    /** Staging files under {@code dir} the kernel wrote a new file into and a commit named slices in. */
    private static long backingFiles(Path dir) throws java.io.IOException {
        try (var files = Files.walk(dir.resolve("home"))) {
            return files.filter(f -> f.getFileName().toString().startsWith(".spare-") && Files.isRegularFile(f)).filter(f -> {
                try {
                    var view = Files.getFileAttributeView(f, java.nio.file.attribute.UserDefinedFileAttributeView.class);
                    return view != null && view.list().contains("partfs.slices");
                } catch (java.io.IOException e) {
                    return false;
                }
            }).count();
        }
    }
}
