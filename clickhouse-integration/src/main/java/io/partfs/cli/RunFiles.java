package io.partfs.cli;

import java.io.IOException;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalLong;

/**
 * Per-mount files under {@code <home>/run} and {@code <home>/logs}: the pid of the process
 * serving a mount point (so {@code partfs umount} can stop it cleanly), the address of its HTTP
 * endpoint (so {@code partfs status MOUNTPOINT} can ask it), its session in the volume (so the
 * next mount there can end it at once if it died), its log, and the line it leaves when it
 * exits with writes it could not upload (so {@code partfs umount} can say so).
 */
final class RunFiles {
    private final Path home;

    RunFiles(Path home) {
        this.home = home;
    }

    private static String key(Path mountPoint) {
        return URLEncoder.encode(mountPoint.toAbsolutePath().normalize().toString(), StandardCharsets.UTF_8);
    }

    Path pidFile(Path mountPoint) {
        return home.resolve("run").resolve(key(mountPoint) + ".pid");
    }

    Path logFile(Path mountPoint) {
        return home.resolve("logs").resolve("mount-" + key(mountPoint) + ".log");
    }

    /** Logs of earlier background mounts at one mount point kept beside the current one ({@code .log.1} the last). */
    static final int KEPT_LOGS = 3;

    /**
     * Makes room for a new background mount's log: the last one becomes {@code .log.1}, and so
     * on up to {@link #KEPT_LOGS}, so that the log of a mount that crashed is still there
     * after the next one started (the reason it crashed is in it). Returns the fresh log's path.
     */
    Path rotateLog(Path mountPoint) throws IOException {
        Path log = logFile(mountPoint);
        Files.createDirectories(log.getParent());
        if (Files.exists(log) && Files.size(log) > 0) {
            for (int i = KEPT_LOGS; i >= 1; i--) {
                Path older = log.resolveSibling(log.getFileName() + "." + i);
                Path newer = i == 1 ? log : log.resolveSibling(log.getFileName() + "." + (i - 1));
                if (Files.exists(newer)) {
                    Files.move(newer, older, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
                }
            }
        }
        return log;
    }

    Path lostFile(Path mountPoint) {
        return home.resolve("run").resolve(key(mountPoint) + ".lost");
    }

    /** Records why the mount's last writes are lost; {@link #takeLost} reads it once. */
    void writeLost(Path mountPoint, String message) throws IOException {
        write(lostFile(mountPoint), message);
    }

    private static void write(Path f, String text) throws IOException {
        Files.createDirectories(f.getParent());
        Files.writeString(f, text);
    }

    /** The line a mount left about lost writes when it exited, removed as it is read; null if none. */
    String takeLost(Path mountPoint) throws IOException {
        Path f = lostFile(mountPoint);
        if (!Files.exists(f)) {
            return null;
        }
        String message = Files.readString(f).trim();
        Files.deleteIfExists(f);
        return message;
    }

    void writePid(Path mountPoint) throws IOException {
        write(pidFile(mountPoint), String.valueOf(ProcessHandle.current().pid()));
    }

    /** Also forgets the mount's HTTP address and session: all describe a running process. */
    void removePid(Path mountPoint) throws IOException {
        Files.deleteIfExists(pidFile(mountPoint));
        Files.deleteIfExists(httpFile(mountPoint));
        Files.deleteIfExists(sessionFile(mountPoint));
    }

    private Path sessionFile(Path mountPoint) {
        return home.resolve("run").resolve(key(mountPoint) + ".session");
    }

    /** Records the session the process serving {@code mountPoint} has in volume {@code uuid}. */
    void writeSession(Path mountPoint, String uuid, long session) throws IOException {
        write(sessionFile(mountPoint), uuid + " " + session);
    }

    /**
     * The session in volume {@code uuid} of the mount that served {@code mountPoint} before and
     * exited without unmounting (its pid is no longer alive, or is this process's own, as in a
     * restarted container), or 0. Its session would otherwise hold its file locks and its
     * kept-open files for minutes, until other mounts take it for crashed.
     */
    long deadPredecessorSession(Path mountPoint, String uuid) throws IOException {
        Path f = sessionFile(mountPoint);
        if (!Files.exists(f)) {
            return 0;
        }
        String[] recorded = Files.readString(f).trim().split(" ");
        OptionalLong alive = livePid(mountPoint);
        if (recorded.length != 2 || !recorded[0].equals(uuid)
                || alive.isPresent() && alive.getAsLong() != ProcessHandle.current().pid() && !zombie(alive.getAsLong())) {
            return 0;
        }
        try {
            return Long.parseLong(recorded[1]);
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    private Path httpFile(Path mountPoint) {
        return home.resolve("run").resolve(key(mountPoint) + ".http");
    }

    /** Records where the process serving {@code mountPoint} serves HTTP ({@code host:port}). */
    void writeHttp(Path mountPoint, String address) throws IOException {
        write(httpFile(mountPoint), address);
    }

    /** The HTTP address recorded for a mount point whose process is still alive; null if none. */
    String liveHttp(Path mountPoint) throws IOException {
        Path f = httpFile(mountPoint);
        return livePid(mountPoint).isPresent() && Files.exists(f) ? Files.readString(f).trim() : null;
    }

    /**
     * Whether process {@code pid} has exited and waits to be reaped (state Z, or X): a killed
     * sidecar whose parent is slow to reap it (a container's init) still counts as alive for
     * {@link ProcessHandle#isAlive}.
     */
    static boolean zombie(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc", String.valueOf(pid), "stat"));
            String state = stat.substring(stat.lastIndexOf(')') + 1).trim();
            return state.startsWith("Z") || state.startsWith("X");
        } catch (IOException | RuntimeException e) {
            return true; // gone since
        }
    }

    /** The pid recorded for a mount point, if its process is still alive. */
    OptionalLong livePid(Path mountPoint) throws IOException {
        Path f = pidFile(mountPoint);
        if (!Files.exists(f)) {
            return OptionalLong.empty();
        }
        try {
            long pid = Long.parseLong(Files.readString(f).trim());
            return ProcessHandle.of(pid).filter(ProcessHandle::isAlive).isPresent() ? OptionalLong.of(pid) : OptionalLong.empty();
        } catch (NumberFormatException e) {
            return OptionalLong.empty();
        }
    }
}
