package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Which earlier session at a mount point the next mount there may end at once. */
class RunFilesTest {
    private static final String UUID = "9cbb6af2-34f6-47d9-8f11-b8f237424056";

    @TempDir
    Path home;

    private final Path mnt = Path.of("/var/lib/clickhouse");

    private RunFiles recorded(long pid, long session) throws Exception {
        RunFiles run = new RunFiles(home);
        run.writeSession(mnt, UUID, session);
        Files.writeString(run.pidFile(mnt), String.valueOf(pid));
        return run;
    }

    @Test
    void theSessionOfAMountWhoseProcessIsGoneIsEnded() throws Exception {
        Process gone = new ProcessBuilder("true").start();
        gone.waitFor(10, TimeUnit.SECONDS);
        assertEquals(7, recorded(gone.pid(), 7).deadPredecessorSession(mnt, UUID));
    }

    @Test
    void soIsOneRecordedUnderThisProcesssOwnPidAsInARestartedContainer() throws Exception {
        assertEquals(7, recorded(ProcessHandle.current().pid(), 7).deadPredecessorSession(mnt, UUID));
    }

    @Test
    void notOneOfAnotherVolumeNorOfAProcessStillRunning() throws Exception {
        assertEquals(0, recorded(ProcessHandle.current().pid(), 7).deadPredecessorSession(mnt, "another-uuid"));
        Process alive = new ProcessBuilder("sleep", "60").start();
        try {
            assertEquals(0, recorded(alive.pid(), 7).deadPredecessorSession(mnt, UUID));
            assertFalse(RunFiles.zombie(alive.pid()));
        } finally {
            alive.destroyForcibly();
            alive.waitFor(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void nothingRecordedOrACleanExitIsNothingToEnd() throws Exception {
        RunFiles run = new RunFiles(home);
        assertEquals(0, run.deadPredecessorSession(mnt, UUID));
        run = recorded(ProcessHandle.current().pid(), 7);
        run.removePid(mnt); // an unmount ended its session itself
        assertEquals(0, run.deadPredecessorSession(mnt, UUID));
    }

    @Test
    void aBackgroundMountsLogMovesAsideForTheNextKeepingThree() throws Exception {
        RunFiles run = new RunFiles(home);
        Path log = run.rotateLog(mnt);
        assertFalse(Files.exists(log), "nothing to move the first time");
        for (int start = 1; start <= 5; start++) {
            Files.writeString(log, "start " + start);
            assertEquals(log, run.rotateLog(mnt));
            assertFalse(Files.exists(log), "the new mount starts a fresh log");
        }
        assertEquals("start 5", Files.readString(log.resolveSibling(log.getFileName() + ".1")), "the last one, crashed or not");
        assertEquals("start 4", Files.readString(log.resolveSibling(log.getFileName() + ".2")));
        assertEquals("start 3", Files.readString(log.resolveSibling(log.getFileName() + ".3")));
        assertFalse(Files.exists(log.resolveSibling(log.getFileName() + ".4")), "no more than " + RunFiles.KEPT_LOGS);
        Files.writeString(log, "");
        run.rotateLog(mnt);
        assertEquals("start 5", Files.readString(log.resolveSibling(log.getFileName() + ".1")), "an empty log is not kept");
    }
}
