package io.partfs.engine.fuse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * flock(2) across two mounts of one Redis volume, as two machines would have them: the lock a
 * ClickHouse server takes on its status file keeps a second server on the same data path out,
 * whichever machine it runs on. Driven by util-linux's {@code flock} command, which calls
 * flock(2) as ClickHouse does; a holder keeps its lock until its stdin closes, so no test waits
 * on a clock.
 */
class SharedVolumeFlockTest {
    private TwoMounts mounts;
    private final List<Process> processes = new ArrayList<>();
    private Path a;
    private Path b;

    @BeforeEach
    void mountTwice() throws Exception {
        mounts = new TwoMounts(true);
        a = mounts.a;
        b = mounts.b;
        Files.writeString(a.resolve("status"), "PID: 1\n");
    }

    @AfterEach
    void unmount() throws Exception {
        try {
            for (Process p : processes) {
                p.destroyForcibly();
                p.waitFor(10, TimeUnit.SECONDS);
            }
        } finally {
            if (mounts != null) {
                mounts.close();
            }
        }
    }

    /** {@code flock ARGS FILE -c 'echo locked; read line || true'}: holds the lock until its stdin closes. */
    private Process hold(Path file, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of("flock"));
        cmd.addAll(List.of(args));
        cmd.addAll(List.of(file.toString(), "-c", "echo locked; read line || true"));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        processes.add(p);
        return p;
    }

    /** Waits until {@code p} says it holds its lock. */
    private static void awaitLocked(Process p) throws IOException {
        byte[] line = new byte[7];
        assertEquals(7, p.getInputStream().readNBytes(line, 0, 7), "flock ended without the lock");
        assertEquals("locked\n", new String(line));
    }

    private static void release(Process p) throws Exception {
        p.getOutputStream().close();
        assertTrue(p.waitFor(30, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue());
    }

    /** {@code flock -n ARGS FILE true}: 0 if the lock was free, 1 if not. */
    private static int tryLock(Path file, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of("flock", "-n", "-E", "1"));
        cmd.addAll(List.of(args));
        cmd.addAll(List.of(file.toString(), "true"));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        assertTrue(p.waitFor(30, TimeUnit.SECONDS));
        return p.exitValue();
    }

    /**
     * Polls {@code flock -n} until the lock is free, 10 s at most: the kernel tells PartFS of a
     * file's last close (FUSE_RELEASE, which drops its flock lock) after close(2) returned.
     */
    private static void awaitFree(Path file, String what) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (tryLock(file, "-x") != 0) {
            assertTrue(System.nanoTime() < deadline, what + ": still locked after 10 s");
        }
    }

    @Test
    void aLockTakenThroughOneMountKeepsTheOtherOutUntilItIsReleased() throws Exception {
        Process holder = hold(a.resolve("status"), "-x");
        awaitLocked(holder);
        assertEquals(1, tryLock(b.resolve("status"), "-x"), "exclusive against exclusive, across mounts");
        assertEquals(1, tryLock(b.resolve("status"), "-s"), "shared against exclusive");
        assertEquals(1, tryLock(a.resolve("status"), "-x"), "and through the same mount, as on one machine");
        release(holder);
        awaitFree(b.resolve("status"), "once its holder closed the file");

        Process shared = hold(a.resolve("status"), "-s");
        awaitLocked(shared);
        assertEquals(0, tryLock(b.resolve("status"), "-s"), "shared with shared");
        assertEquals(1, tryLock(b.resolve("status"), "-x"));
        release(shared);
    }

    @Test
    void aBlockingLockWaitsForTheOtherMountsHolderAndASignalEndsTheWait() throws Exception {
        Process holder = hold(a.resolve("status"), "-x");
        awaitLocked(holder);
        Process waiter = hold(b.resolve("status"), "-x");
        assertFalse(waiter.waitFor(300, TimeUnit.MILLISECONDS), "it waits");
        release(holder);
        awaitLocked(waiter); // taken once the holder let go
        assertEquals(1, tryLock(a.resolve("status"), "-x"), "and now it keeps the first mount out");

        Process killed = hold(a.resolve("status"), "-x");
        assertFalse(killed.waitFor(300, TimeUnit.MILLISECONDS), "waits for the second holder");
        killed.destroyForcibly(); // SIGKILL: the kernel interrupts the request, PartFS ends it with EINTR
        assertTrue(killed.waitFor(10, TimeUnit.SECONDS), "a killed waiter does not hang in the kernel");
        release(waiter);
        awaitFree(a.resolve("status"), "nothing left behind by the killed waiter");
    }

    @Test
    void aMountsLocksGoWhenItsSessionIsRemoved() throws Exception {
        Process holder = hold(a.resolve("status"), "-x");
        awaitLocked(holder);
        assertEquals(1, tryLock(b.resolve("status"), "-x"));
        // as the next mount at A's mount point does once A died, or any mount once A stopped beating
        assertTrue(mounts.fsB.meta().removeSession(mounts.fsA.meta().session()));
        assertEquals(0, tryLock(b.resolve("status"), "-x"), "A's lock went with its session");
        release(holder);
    }

    /**
     * A mount cut off from Redis long enough for the others to take it for crashed finds, on
     * its return, its session removed (here removed at once, and the heartbeat that a change
     * after the lapse runs called directly: MetaEngineContract drives that with a clock). It
     * holds its lock again if it is still free; if another mount took it, every change through
     * it fails with EROFS, and reads go on.
     */
    @Test
    void aMountBackFromACutOffHoldsItsLockAgainOrRefusesChanges() throws Exception {
        Process holder = hold(a.resolve("status"), "-x");
        awaitLocked(holder);
        assertTrue(mounts.fsB.meta().removeSession(mounts.fsA.meta().session()));
        assertFalse(mounts.fsA.meta().heartbeat(), "A learns its session was removed");
        assertEquals(1, tryLock(b.resolve("status"), "-x"), "A holds its lock again: no one took it meanwhile");
        Files.writeString(a.resolve("still-writable"), "yes");

        assertTrue(mounts.fsB.meta().removeSession(mounts.fsA.meta().session()));
        Process second = hold(b.resolve("status"), "-x"); // a second ClickHouse starts while A is away
        awaitLocked(second);
        assertFalse(mounts.fsA.meta().heartbeat());
        java.nio.file.FileSystemException refused = org.junit.jupiter.api.Assertions.assertThrows(
                java.nio.file.FileSystemException.class, () -> Files.writeString(a.resolve("part"), "x"));
        assertTrue(String.valueOf(refused.getMessage()).contains("Read-only file system"), refused.toString());
        org.junit.jupiter.api.Assertions.assertThrows(java.nio.file.FileSystemException.class,
                () -> Files.delete(a.resolve("still-writable")), "no change of any kind");
        assertEquals("yes", Files.readString(a.resolve("still-writable")), "reads go on");
        Files.writeString(b.resolve("b-writes"), "b"); // the lock's new holder works as before
        release(holder);
        release(second);
    }
}
