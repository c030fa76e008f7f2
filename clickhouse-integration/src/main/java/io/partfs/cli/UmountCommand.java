package io.partfs.cli;

import io.partfs.engine.fuse.Mounts;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.OptionalLong;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/** {@code partfs umount}: stops a mount after its buffered writes are uploaded. */
@Command(name = "umount", aliases = "unmount", mixinStandardHelpOptions = true,
        description = {"Unmount a PartFS mount point. Asks the mount process to flush buffered writes,",
                "wait for uploads and unmount, and waits until it has exited."})
final class UmountCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Parameters(index = "0", paramLabel = "MOUNTPOINT")
    Path mountPoint;

    @Option(names = "--home", paramLabel = "DIR", description = "Data home the mount was started with (default: $PARTFS_HOME or ~/.partfs).")
    Path home;

    @Option(names = "--timeout", paramLabel = "SECONDS", defaultValue = "300",
            description = "How long to wait for uploads to finish (default: ${DEFAULT-VALUE}).")
    long timeout;

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        Path mp = mountPoint.toAbsolutePath().normalize();
        String type = Mounts.typeAt(mp);
        RunFiles run = new RunFiles(home != null ? home : EmbeddedVolume.defaultHome());
        OptionalLong pid = run.livePid(mp);
        if (type == null && pid.isEmpty()) {
            throw new IllegalArgumentException(mp + " is not mounted");
        }
        if (type != null && !type.equals("fuse.partfs")) {
            throw new IllegalArgumentException(mp + " is a " + type + " mount, not PartFS: use umount(8)");
        }
        if (pid.isEmpty()) {
            Process p = new ProcessBuilder("fusermount", "-u", mp.toString()).inheritIO().start();
            if (p.waitFor() != 0) {
                throw new IllegalStateException("fusermount -u " + mp + " failed: close the files open there and retry");
            }
            out.printf("partfs: unmounted %s (no mount process was found to flush)%n", mp);
            return 0;
        }
        run.takeLost(mp); // a line left by an earlier mount is not about this one
        ProcessHandle h = ProcessHandle.of(pid.getAsLong()).orElseThrow();
        h.destroy(); // SIGTERM: the mount flushes, uploads, unmounts and exits
        long deadline = System.nanoTime() + timeout * 1_000_000_000L;
        while (h.isAlive()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("mount process " + pid.getAsLong() + " still runs after " + timeout
                        + " s (uploads pending?): see its log " + run.logFile(mp));
            }
            java.util.concurrent.locks.LockSupport.parkNanos(50_000_000L); // poll interval
        }
        if (Mounts.isMounted(mp)) {
            throw new IllegalStateException(mp + " is still mounted after its process exited: run fusermount -u " + mp);
        }
        String lost = run.takeLost(mp);
        if (lost != null) {
            throw new IllegalStateException(lost);
        }
        out.printf("partfs: unmounted %s%n", mp);
        return 0;
    }
}
