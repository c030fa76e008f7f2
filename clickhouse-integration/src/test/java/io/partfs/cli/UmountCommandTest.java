package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** How {@code partfs umount} tells that the mount process it stopped has exited. */
class UmountCommandTest {
    /**
     * A background mount's parent is init, which may reap it late; until then the exited process
     * is a zombie, which ProcessHandle counts alive. The zombie here: a shell starts a child
     * that exits a second later and execs into {@code sleep}, which never reaps it. (A child that
     * exited at once, {@code true}, was sometimes reaped by the shell before its exec: CI failed.)
     */
    @Test
    void aZombieHasExitedThoughProcessHandleCountsItAlive() throws Exception {
        Process parent = new ProcessBuilder("sh", "-c", "sleep 1 & echo $!; exec sleep 60").start();
        try {
            long pid;
            try (BufferedReader r = new BufferedReader(new InputStreamReader(parent.getInputStream(), StandardCharsets.US_ASCII))) {
                pid = Long.parseLong(r.readLine().trim());
                ProcessHandle child = ProcessHandle.of(pid).orElseThrow(); // never reaped: a zombie at least
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (UmountCommand.running(child)) {
                    assertTrue(System.nanoTime() < deadline, "the child of the shell still runs after 30 s");
                    java.util.concurrent.locks.LockSupport.parkNanos(10_000_000L);
                }
                assertTrue(child.isAlive(), "the child should stay a zombie while its parent sleeps");
            }
            assertTrue(UmountCommand.running(parent.toHandle()), "a sleeping process runs");
        } finally {
            parent.destroy();
            assertTrue(parent.waitFor(30, TimeUnit.SECONDS));
        }
        assertFalse(UmountCommand.running(parent.toHandle()), "a reaped process no longer runs");
    }
}
