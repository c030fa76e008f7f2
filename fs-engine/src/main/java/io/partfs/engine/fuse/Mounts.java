package io.partfs.engine.fuse;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** What the kernel says is mounted, from /proc/self/mountinfo. */
public final class Mounts {
    private Mounts() {
    }

    /** The filesystem type mounted exactly at {@code dir} (e.g. "fuse.partfs"), or null. */
    public static String typeAt(Path dir) throws IOException {
        String[] f = mountedAt(dir);
        if (f == null) {
            return null;
        }
        int dash = java.util.Arrays.asList(f).indexOf("-");
        return dash > 0 && dash + 1 < f.length ? f[dash + 1] : "unknown";
    }

    /** The fields of the mountinfo line of the mount in use at {@code dir} (the last one mounted there), or null. */
    private static String[] mountedAt(Path dir) throws IOException {
        String want = escape(dir.toAbsolutePath().normalize().toString());
        String[] found = null;
        for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
            String[] f = line.split(" ");
            if (f.length > 4 && f[4].equals(want)) {
                found = f;
            }
        }
        return found;
    }

    /**
     * {@code path} made absolute with its symbolic links resolved (as realpath(3) would), up to
     * the first FUSE mount on the way: from there on its names are kept as given, since looking
     * at anything on a FUSE mount waits for that mount's process, which may be stopped or gone.
     * A mount point reached through a symlink (/var/lib/clickhouse -> /data/ch) is thus named as
     * the kernel names it in mountinfo. Names that do not exist are kept as given too.
     */
    public static Path resolve(Path path) throws IOException {
        java.util.List<Path> fuse = mountPoints(t -> t.equals("fuse") || t.equals("fuseblk") || t.startsWith("fuse."));
        Path abs = path.toAbsolutePath();
        java.util.Deque<String> rest = new java.util.ArrayDeque<>();
        abs.forEach(name -> rest.add(name.toString()));
        Path cur = abs.getRoot();
        int links = 0;
        while (!rest.isEmpty()) {
            String name = rest.poll();
            if (name.equals(".")) {
                continue;
            }
            if (name.equals("..")) {
                cur = cur.getParent() == null ? cur : cur.getParent();
                continue;
            }
            Path next = cur.resolve(name);
            Path at = cur;
            boolean onFuse = fuse.stream().anyMatch(mp -> at.startsWith(mp) || next.equals(mp));
            if (onFuse || !Files.isSymbolicLink(next)) {
                cur = next;
                continue;
            }
            if (++links > 40) {
                throw new IllegalArgumentException(path + ": too many levels of symbolic links");
            }
            Path target = Files.readSymbolicLink(next);
            java.util.List<String> names = new java.util.ArrayList<>();
            target.forEach(n -> names.add(n.toString()));
            for (int i = names.size() - 1; i >= 0; i--) {
                rest.addFirst(names.get(i));
            }
            if (target.isAbsolute()) {
                cur = target.getRoot();
            }
        }
        return cur;
    }

    /**
     * The mount point of the PartFS mount {@code path} is on (the innermost one, when mounts are
     * nested), or null when it is on none. {@code path} should be real (symlinks resolved).
     */
    public static Path partfsMountHolding(Path path) throws IOException {
        Path p = path.toAbsolutePath().normalize();
        Path best = null;
        for (Path mp : mountPoints("fuse.partfs"::equals)) {
            if (p.startsWith(mp) && (best == null || mp.getNameCount() >= best.getNameCount())) {
                best = mp;
            }
        }
        return best;
    }

    /** The mount points of the mounts whose filesystem type (as mountinfo gives it, e.g. "fuse.partfs") passes {@code type}. */
    private static java.util.List<Path> mountPoints(java.util.function.Predicate<String> type) throws IOException {
        java.util.List<Path> found = new java.util.ArrayList<>();
        for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
            String[] f = line.split(" ");
            int dash = java.util.Arrays.asList(f).indexOf("-");
            if (f.length > 4 && dash > 0 && dash + 1 < f.length && type.test(f[dash + 1])) {
                found.add(Path.of(unescape(f[4])));
            }
        }
        return found;
    }

    /**
     * The processes keeping the mount at {@code mp} busy, as "PID (command)", at most
     * {@code limit}: those with their working or root directory, an open file or a mapped file
     * under it (what lsof would list), from /proc. Processes this user may not look at are left
     * out. Only reads /proc, never the mount.
     */
    public static java.util.List<String> holders(Path mp, int limit) {
        java.util.List<Path> procs;
        try (java.util.stream.Stream<Path> all = Files.list(Path.of("/proc"))) {
            procs = all.filter(p -> p.getFileName().toString().chars().allMatch(Character::isDigit))
                    .sorted(java.util.Comparator.comparingLong(p -> Long.parseLong(p.getFileName().toString())))
                    .toList();
        } catch (IOException e) {
            return java.util.List.of(); // no /proc to read
        }
        java.util.List<String> found = new java.util.ArrayList<>();
        for (Path proc : procs) {
            if (found.size() >= limit) {
                break;
            }
            if (holds(proc, mp)) {
                String comm;
                try {
                    comm = Files.readString(proc.resolve("comm")).trim();
                } catch (IOException e) {
                    comm = "?"; // gone meanwhile
                }
                found.add(proc.getFileName() + " (" + comm + ")");
            }
        }
        return found;
    }

    private static boolean holds(Path proc, Path mp) {
        if (under(link(proc.resolve("cwd")), mp) || under(link(proc.resolve("root")), mp)) {
            return true;
        }
        try (java.util.stream.Stream<Path> fds = Files.list(proc.resolve("fd"))) {
            if (fds.anyMatch(fd -> under(link(fd), mp))) {
                return true;
            }
        } catch (IOException | java.io.UncheckedIOException e) {
            // gone meanwhile, or not ours to look at
        }
        try {
            for (String line : Files.readAllLines(proc.resolve("maps"), java.nio.charset.StandardCharsets.ISO_8859_1)) {
                int slash = line.indexOf('/');
                if (slash > 0 && under(line.substring(slash), mp)) {
                    return true;
                }
            }
        } catch (IOException | java.io.UncheckedIOException e) {
            // as above
        }
        return false;
    }

    private static String link(Path p) {
        try {
            return Files.readSymbolicLink(p).toString();
        } catch (IOException | UnsupportedOperationException e) {
            return "";
        }
    }

    /** Whether the path {@code s} (as /proc shows it: maybe " (deleted)" after it) is {@code mp} or under it. */
    private static boolean under(String s, Path mp) {
        String m = mp.toString();
        return s.startsWith(m) && (s.length() == m.length() || s.charAt(m.length()) == '/' || s.startsWith(" (deleted)", m.length()));
    }

    public static boolean isMounted(Path dir) throws IOException {
        return typeAt(dir) != null;
    }

    /**
     * Whether the FUSE mount at {@code dir} has lost its process: the kernel answers every call
     * there with ENOTCONN once the process that served it has exited (killed, out of memory)
     * without unmounting. Such a mount can serve nothing again; it can only be taken down.
     * Asked with statfs(2), which the kernel always sends to the process: a lookup or access(2)
     * of the mount's root may be answered from its attribute cache without it.
     */
    public static boolean disconnected(Path dir) {
        return ask(dir, ANSWER_TIMEOUT) == Answer.DISCONNECTED;
    }

    /** How long {@link #disconnected} waits for a mount's process to answer (PartFS: one metadata read). */
    public static final java.time.Duration ANSWER_TIMEOUT = java.time.Duration.ofSeconds(5);

    /** How the process behind a FUSE mount answers, as {@link #ask} finds out. */
    public enum Answer {
        /** It answered. */
        SERVES,
        /** The kernel answers ENOTCONN: the process exited without unmounting (killed, out of memory). */
        DISCONNECTED,
        /**
         * Nothing answered in time: the process is stopped or stuck, or it exited while one of
         * its threads waited on its own mount, which keeps the connection open with nobody to
         * answer. Every process that touches such a mount hangs with it (ClickHouse too).
         */
        SILENT
    }

    /**
     * Asks the filesystem at {@code dir} for statfs(2), which the kernel always passes to the
     * mount's process, and waits at most {@code timeout} for the answer. On {@link Answer#SILENT}
     * the asking thread stays blocked in the kernel until the mount answers or is aborted; it is
     * a daemon, and a fatal signal ends its wait, so it keeps neither the JVM nor its exit.
     */
    public static Answer ask(Path dir, java.time.Duration timeout) {
        var answer = new java.util.concurrent.CompletableFuture<Answer>();
        Thread t = new Thread(() -> {
            int rc = LibC.INSTANCE.statfs(dir.toString(), new byte[256]);
            answer.complete(rc < 0 && LibC.errno() == LibC.ENOTCONN ? Answer.DISCONNECTED : Answer.SERVES);
        }, "partfs-statfs");
        t.setDaemon(true);
        t.start();
        try {
            return answer.get(timeout.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            return Answer.SILENT;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Answer.SILENT;
        } catch (java.util.concurrent.ExecutionException e) {
            throw new IllegalStateException(e.getCause());
        }
    }

    /** The directory in the kernel's fusectl filesystem of the FUSE connection mounted at {@code dir}, or null. */
    public static Path connection(Path dir) throws IOException {
        String[] f = mountedAt(dir);
        if (f == null) {
            return null;
        }
        String[] mm = f[2].split(":"); // major:minor of the mount's device
        long dev = (Long.parseLong(mm[0]) << 20) | Long.parseLong(mm[1]); // the kernel's dev_t, as fusectl names it
        return FUSECTL.resolve(Long.toString(dev));
    }

    /**
     * {@link #connection}, or null when mountinfo cannot be read: for a mount that just came up,
     * kept to abort it later, which must not fail the mount.
     */
    static Path connectionIfKnown(Path dir) {
        try {
            return connection(dir);
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /** Where the kernel's fusectl filesystem is mounted, one directory per FUSE connection. */
    static final Path FUSECTL = Path.of("/sys/fs/fuse/connections");

    /**
     * Aborts the FUSE connection mounted at {@code dir} through fusectl: every request waiting
     * on it fails, the threads stuck on it (the mount's own, ClickHouse's) go on, and the mount
     * answers ENOTCONN from then on, so it can be taken down. Mounts fusectl when it is not
     * (root only). What the mount held in memory is lost, as when its process was killed.
     */
    public static void abortConnection(Path dir) throws IOException {
        Path conn = connection(dir);
        if (conn == null) {
            return; // taken down meanwhile
        }
        abort(conn, dir.toString());
    }

    /**
     * Aborts the FUSE connection whose fusectl directory is {@code conn} (from {@link
     * #connection}), as {@link #abortConnection} does; also one detached from the namespace
     * already, which no path reaches any more. {@code what}: the mount, for the error.
     */
    static void abort(Path conn, String what) throws IOException {
        if (!Files.isDirectory(conn)) {
            Files.createDirectories(FUSECTL);
            if (LibC.INSTANCE.mount("fusectl", FUSECTL.toString(), "fusectl", 0, null) != 0 && !Files.isDirectory(conn)) {
                throw new IOException("cannot abort the FUSE connection of " + what + ": " + FUSECTL + " is not mounted and mounting"
                        + " it failed (" + LibC.error() + "): as root, mount -t fusectl none " + FUSECTL + ", then retry");
            }
        }
        Files.writeString(conn.resolve("abort"), "1");
    }

    /** The path a mountinfo field names ({@link #escape} undone). */
    static String unescape(String s) {
        StringBuilder b = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\' && i + 3 < s.length() && s.substring(i + 1, i + 4).chars().allMatch(d -> d >= '0' && d <= '7')) {
                b.append((char) Integer.parseInt(s.substring(i + 1, i + 4), 8));
                i += 3;
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }

    /** mountinfo escapes space, tab, newline and backslash as octal. */
    private static String escape(String s) {
        return s.replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011").replace("\n", "\\012");
    }
}
