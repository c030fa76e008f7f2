package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** How {@code partfs umount} tells that the mount process it stopped has exited, and shows what it logs meanwhile. */
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

    /**
     * The lines a process's log file (its standard error) gains after umount looked at it:
     * earlier lines are not shown again, a line still being written waits for its end, and the
     * process's own output (not from the logger) is left out.
     */
    @Test
    void followsTheLogFileTheMountProcessWritesItsStandardErrorTo(@TempDir Path dir) throws Exception {
        Path log = dir.resolve("mount.log");
        Files.writeString(log, "2026-12-07 09:14:19.230 INFO  i.p.cli.MountCommand - mounted before the umount\n");
        Process mount = new ProcessBuilder("sleep", "60").redirectError(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
        try {
            UmountCommand.MountLog followed = UmountCommand.MountLog.of(mount.pid());
            assertEquals(List.of(), followed.newLines(), "nothing new yet");
            append(log, "2026-12-07 09:14:22.918 INFO  i.p.cli.MountCommand - unmounting /mnt: uploading 300 KiB of buffered writes\n"
                    + "partfs: unmounted /mnt\n"
                    + "2026-12-07 09:14:23.001 WARN  i.p.e.d.Staging - write-back: 3 staged bl");
            assertEquals(List.of("  09:14:22 unmounting /mnt: uploading 300 KiB of buffered writes"), followed.newLines());
            append(log, "ock(s), 12 MiB, left to upload\n");
            assertEquals(List.of("  09:14:23 WARN write-back: 3 staged block(s), 12 MiB, left to upload"), followed.newLines());
            assertEquals(List.of(), followed.newLines(), "each line once");
        } finally {
            mount.destroy();
            assertTrue(mount.waitFor(30, TimeUnit.SECONDS));
        }
    }

    /** A mount in the foreground logs to a terminal or a pipe, where its lines show already. */
    @Test
    void aMountLoggingToAPipeHasNothingToFollow() throws Exception {
        Process mount = new ProcessBuilder("sleep", "60").start();
        try {
            assertEquals(List.of(), UmountCommand.MountLog.of(mount.pid()).newLines());
        } finally {
            mount.destroy();
            assertTrue(mount.waitFor(30, TimeUnit.SECONDS));
        }
    }

    private static void append(Path file, String text) throws java.io.IOException {
        Files.writeString(file, text, StandardOpenOption.APPEND);
    }

    @Test
    void theCommandToPasteQuotesAPathTheShellWouldSplit() throws Exception {
        assertEquals("partfs umount /var/lib/clickhouse", UmountCommand.commandFor(Path.of("/var/lib/clickhouse")));
        for (String p : List.of("/tmp/sp ace/mnt", "/mnt/it's", "/mnt/$HOME;x", "/mnt/a\"b")) {
            String cmd = UmountCommand.commandFor(Path.of(p));
            Process sh = new ProcessBuilder("sh", "-c", "set -- " + cmd + "; printf %s \"$3\"").start(); // the words a shell makes of it
            String third = new String(sh.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(sh.waitFor(10, TimeUnit.SECONDS));
            assertEquals(p, third, cmd);
        }
    }
}
