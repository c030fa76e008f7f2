package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.fuse.LibC;
import io.partfs.engine.fuse.Mounts;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A PartFS mount that answers nothing: its FUSE connection is open, but no process reads it. A
 * sidecar killed while one of its threads waited on its own mount left one (round 42 of the
 * crash soak): the thread never exited, so neither did the process, nor did it close
 * /dev/fuse; every process touching the mount hung, statfs(2) of {@code partfs mount} included,
 * so a restarted sidecar hung too. Here this test's JVM makes such a mount itself: it opens
 * /dev/fuse, mounts it as {@code fuse.partfs} and never reads it (the kernel waits for the
 * answer to its first request for ever). Root only, as every mount test.
 */
class SilentMountIT {
    private static final Duration LIMIT = Duration.ofSeconds(90);

    @Test
    void aMountThatAnswersNothingIsAbortedAndReplacedWhenNoPartFsProcessServesIt() throws Exception {
        try (Workdir w = Workdir.create("partfs-silent-"); SilentMount silent = SilentMount.at(w.mnt)) {
            assertEquals(Mounts.Answer.SILENT, Mounts.ask(w.mnt, Duration.ofSeconds(1)));
            Partfs.Result m = within(() -> w.partfs.run("mount", w.mnt.toString(), "--background", "--http-address", "none"));
            assertEquals(0, m.exit(), m.all());
            assertTrue(m.err().contains("partfs: the mount at " + w.mnt + " answered nothing for 5 s and no PartFS process serves it:"
                    + " aborted its FUSE connection"), m.err());
            assertTrue(m.err().contains("took down the mount at " + w.mnt), m.err());
            assertEquals(Mounts.Answer.SERVES, Mounts.ask(w.mnt, Duration.ofSeconds(5)), "the new mount serves the path");
            Files.writeString(w.mnt.resolve("f"), "after");
            assertEquals("after", Files.readString(w.mnt.resolve("f")));
            assertEquals(0, w.partfs.run("umount", w.mnt.toString()).exit());
            assertFalse(Mounts.isMounted(w.mnt), "the silent mount was taken down, not left beneath the new one");
        }
    }

    @Test
    void umountAbortsAndTakesDownAMountThatAnswersNothing() throws Exception {
        try (Workdir w = Workdir.create("partfs-silent-umount-"); SilentMount silent = SilentMount.at(w.mnt)) {
            Partfs.Result u = within(() -> w.partfs.run("umount", w.mnt.toString()));
            assertEquals(0, u.exit(), u.all());
            assertTrue(u.out().contains("partfs: took down " + w.mnt + ", a mount whose process exited without unmounting,"
                    + " which answered nothing for 5 s: its FUSE connection was aborted"), u.all());
            assertFalse(Mounts.isMounted(w.mnt));
        }
    }

    @Test
    void aMountWhoseProcessIsStoppedIsRefusedNotWaitedOn() throws Exception {
        try (Workdir w = Workdir.create("partfs-stopped-")) {
            String http = "127.0.0.1:" + io.partfs.engine.testing.RedisServer.freePort(); // status asks it there
            Process sidecar = w.partfs.startMount(List.of("mount", w.mnt.toString(), "--http-address", http), w.mnt,
                    w.dir.resolve("sidecar.log"));
            awaitPidFile(w.partfs.home().resolve("run"), sidecar.pid()); // written last: its HTTP address is recorded too
            signal(sidecar.pid(), "STOP");
            try {
                Partfs.Result m = within(() -> w.partfs.run("mount", w.mnt.toString(), "--background"));
                assertEquals(1, m.exit(), m.all());
                assertTrue(m.err().contains("partfs: the PartFS mount at " + w.mnt + " answers nothing, and its process "
                        + sidecar.pid() + " still runs (stopped or stuck): see its log, end it (kill -9 " + sidecar.pid()
                        + "), then mount again"), m.err());
                long asked = System.nanoTime();
                Partfs.Result status = within(() -> w.partfs.run("status", w.mnt.toString(), "--timeout", "2"));
                assertEquals(1, status.exit(), status.all());
                assertTrue(status.err().contains("did not answer within 2 s: its process is stopped or stuck"), status.err());
                assertTrue(System.nanoTime() - asked < TimeUnit.SECONDS.toNanos(30), "status gave up after its --timeout, not 30 s");
            } finally {
                signal(sidecar.pid(), "CONT");
            }
            assertEquals(Mounts.Answer.SERVES, Mounts.ask(w.mnt, Duration.ofSeconds(30)), "the mount was left to its process");
            sidecar.destroy();
            assertTrue(sidecar.waitFor(60, TimeUnit.SECONDS));
            assertEquals(0, sidecar.exitValue(), "SIGTERM: flushed and unmounted");
        }
    }

    private interface Run {
        Partfs.Result run() throws Exception;
    }

    /** Runs a partfs command that must finish within {@link #LIMIT} (a hang fails the test instead of stalling it). */
    private static Partfs.Result within(Run run) throws Exception {
        var f = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
            try {
                return run.run();
            } catch (Exception e) {
                throw new java.util.concurrent.CompletionException(e);
            }
        });
        return f.get(LIMIT.toSeconds(), TimeUnit.SECONDS);
    }

    /** Waits until a mount's pid file under {@code run} holds {@code pid}: the mount serves before it records itself. */
    private static void awaitPidFile(Path run, long pid) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            if (Files.isDirectory(run)) {
                try (var files = Files.list(run)) {
                    for (Path f : files.filter(f -> f.getFileName().toString().endsWith(".pid")).toList()) {
                        if (Files.readString(f).trim().equals(Long.toString(pid))) {
                            return;
                        }
                    }
                }
            }
            assertTrue(System.nanoTime() < deadline, "the mount recorded no pid file in " + run + " within 60 s");
            java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20)); // poll interval
        }
    }

    private static void signal(long pid, String sig) throws Exception {
        assertEquals(0, new ProcessBuilder("kill", "-" + sig, Long.toString(pid)).inheritIO().start().waitFor());
    }

    /**
     * A {@code fuse.partfs} mount of this JVM's that no one serves. Closing aborts it if the code
     * under test has not, and takes it down: a silent mount left behind would hang the deletion
     * of the test's directory, and every later listing of /tmp.
     */
    private static final class SilentMount implements AutoCloseable {
        private final Path mp;
        private final int fd;

        private SilentMount(Path mp, int fd) {
            this.mp = mp;
            this.fd = fd;
        }

        static SilentMount at(Path mp) throws Exception {
            Files.createDirectories(mp);
            LibC c = LibC.INSTANCE;
            int fd = c.open("/dev/fuse", LibC.O_RDWR | LibC.O_CLOEXEC);
            assertTrue(fd >= 0, "open /dev/fuse: " + LibC.error());
            String data = "fd=" + fd + ",rootmode=40000,user_id=0,group_id=0";
            if (c.mount("partfs", mp.toString(), "fuse.partfs", LibC.MS_NOSUID | LibC.MS_NODEV, data) != 0) {
                String why = LibC.error();
                c.close(fd);
                throw new AssertionError("mount(2) of a silent FUSE mount at " + mp + ": " + why);
            }
            return new SilentMount(mp, fd);
        }

        @Override
        public void close() throws Exception {
            try {
                Path conn = Mounts.connection(mp);
                if (conn != null && "fuse.partfs".equals(Mounts.typeAt(mp)) && Mounts.ask(mp, Duration.ofSeconds(2)) == Mounts.Answer.SILENT) {
                    Mounts.abortConnection(mp);
                }
                // our own mount may be under the test's by now, or already taken down by it
                List<String> mine = Files.readAllLines(Path.of("/proc/self/mountinfo")).stream()
                        .filter(l -> l.split(" ")[4].equals(mp.toString()) && l.contains(" - fuse.partfs "))
                        .toList();
                if (!mine.isEmpty() && Mounts.ask(mp, Duration.ofSeconds(2)) == Mounts.Answer.DISCONNECTED) {
                    LibC.INSTANCE.umount2(mp.toString(), LibC.MNT_DETACH);
                }
            } finally {
                LibC.INSTANCE.close(fd);
            }
        }
    }
}
