package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.fuse.Mounts;
import io.partfs.engine.testing.TempDirs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;

/**
 * A sidecar killed (SIGKILL) while its part readahead lists a table's parts exits, and leaves
 * a mount that answers ENOTCONN. The readahead listed through the mount from the sidecar's own
 * threads: a thread waiting on its own mount when the process was killed never exited, so the
 * process never closed /dev/fuse, and the mount, and every process touching it (ClickHouse, in
 * D state), hung until the connection was aborted by hand. The crash soak hit it in one round of
 * five. The listings now run in a child process.
 */
class SidecarKilledWhileReadingAheadIT {
    private static final int PARTS = 1000;
    private static final int FILES = 20;
    /** Kills: a thread is inside a request to its own mount only part of the time. */
    private static final int ROUNDS = 4;

    @Test
    void aSidecarKilledWhileListingPartsExitsAndItsMountAnswersEnotconn() throws Exception {
        Path dir = Files.createTempDirectory("partfs-kill-readahead-");
        Path mnt = dir.resolve("mnt");
        Partfs partfs = new Partfs(dir.resolve("home"));
        List<String> mount = List.of("mount", mnt.toString(), "--http-address", "none");
        Process sidecar = null;
        try {
            sidecar = partfs.startMount(mount, mnt, dir.resolve("sidecar.log"));
            Path table = Files.createDirectories(mnt.resolve("data/db/t"));
            for (int i = 1; i <= PARTS; i++) {
                Path part = Files.createDirectory(table.resolve("202001" + String.format("%02d", 1 + i % 28) + "_" + i + "_" + i + "_0"));
                for (int f = 0; f < FILES; f++) {
                    Files.createFile(part.resolve("c" + f + ".bin"));
                }
            }
            for (int round = 1; round <= ROUNDS; round++) {
                if (round > 1) { // a new mount: its readahead has not seen the table
                    sidecar = partfs.startMount(mount, mnt, dir.resolve("sidecar-" + round + ".log"));
                }
                try (var s = Files.list(table)) { // as ClickHouse loading the table: the readahead starts
                    assertTrue(s.count() == PARTS);
                }
                sidecar.destroyForcibly();
                assertTrue(sidecar.waitFor(30, TimeUnit.SECONDS),
                        "round " + round + ": the killed sidecar did not exit: a thread of it waits on its own mount");
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (!Mounts.disconnected(mnt)) {
                    assertTrue(System.nanoTime() < deadline, "round " + round + ": the dead mount does not answer ENOTCONN");
                    LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20)); // poll interval
                }
            }
        } finally {
            if (sidecar != null && sidecar.isAlive()) {
                Mounts.abortConnection(mnt); // a hung connection would keep this test's JVM waiting too
                sidecar.destroyForcibly().waitFor(30, TimeUnit.SECONDS);
            }
            if (Mounts.isMounted(mnt)) {
                Mounts.abortConnection(mnt);
                new ProcessBuilder("umount", "-l", mnt.toString()).inheritIO().start().waitFor(30, TimeUnit.SECONDS);
            }
            TempDirs.deleteRecursively(dir);
        }
    }
}
