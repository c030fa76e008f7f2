package io.partfs.cli;

import io.partfs.engine.fuse.Mounts;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
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
                "wait for uploads and unmount, and waits until it has exited. After 3 s it says what it waits",
                "for and shows the mount's log lines as they come (uploads left, files still open there)."})
final class UmountCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Parameters(index = "0", paramLabel = "MOUNTPOINT")
    Path mountPoint;

    @Option(names = "--home", paramLabel = "DIR", description = "Data home the mount was started with (default: $PARTFS_HOME or ~/.partfs).")
    Path home;

    @Option(names = {"-f", "--force"},
            description = {"Detach a busy mount at once (lazily, as umount -l) instead of the mount keeping it attached",
                    "while it waits up to its --unmount-grace for the files open there to close. Open files keep",
                    "working until closed (30 s at most, then they get errors); new opens of paths there no longer",
                    "reach PartFS."})
    boolean force;

    @Option(names = "--timeout", paramLabel = "SECONDS", defaultValue = "300",
            description = {"How long to wait for the mount process to upload and stop (default: ${DEFAULT-VALUE}); after it",
                    "umount exits 1, and the mount goes on stopping."})
    long timeout;

    /** The command that unmounts {@code mp}, to paste into a shell: the path quoted when it needs to be. */
    static String commandFor(Path mp) {
        String p = mp.toString();
        return "partfs umount " + (p.matches("[A-Za-z0-9_@%+=:,./-]+") ? p : "'" + p.replace("'", "'\\''") + "'");
    }

    @Override
    public Integer call() throws Exception {
        if (timeout < 1) { // before anything is asked of the mount: bad input leaves it alone
            throw new IllegalArgumentException("--timeout " + timeout + ": give the seconds to wait for the mount to stop, 1 or more");
        }
        PrintWriter out = spec.commandLine().getOut();
        Path mp = Mounts.resolve(mountPoint); // symlinks resolved without touching a mount: as mountinfo names it
        String type = Mounts.typeAt(mp);
        RunFiles run = new RunFiles(home != null ? home : EmbeddedVolume.defaultHome());
        OptionalLong pid = run.livePid(mp);
        boolean otherHome = false;
        if (pid.isEmpty() && "fuse.partfs".equals(type)) {
            pid = servingProcess(mp); // mounted with another --home (or $PARTFS_HOME): found all the same
            otherHome = pid.isPresent();
        }
        if (type == null && pid.isEmpty()) {
            Path holding = Mounts.partfsMountHolding(mp); // from mountinfo: nothing asked of a mount that may hang
            throw new IllegalArgumentException(mp + " is not mounted" + (holding == null ? ""
                    : ": it is inside the PartFS mount " + holding + " (" + commandFor(holding) + ")"));
        }
        if (type != null && !type.equals("fuse.partfs")) {
            throw new IllegalArgumentException(mp + " is a " + type + " mount, not PartFS: use umount(8)");
        }
        Mounts.Answer answer = pid.isEmpty() ? Mounts.ask(mp, Mounts.ANSWER_TIMEOUT) : Mounts.Answer.SERVES;
        if (answer != Mounts.Answer.SERVES) {
            out.printf("partfs: took down %s, a mount whose process exited without unmounting%s (its buffered writes were "
                    + "lost with it; fsynced ones were not)%n", mp, takeDownUnserved(mp, answer));
            return 0;
        }
        if (pid.isEmpty()) {
            Process p = new ProcessBuilder("fusermount", "-u", mp.toString()).inheritIO().start();
            if (p.waitFor() != 0) {
                throw new IllegalStateException("fusermount -u " + mp + " failed: close the files open there and retry");
            }
            out.printf("partfs: unmounted %s (no mount process was found to flush)%n", mp);
            return 0;
        }
        Path cwd = Path.of("").toAbsolutePath();
        if (!force && cwd.startsWith(mp)) {
            throw new IllegalArgumentException("the working directory " + cwd + " is on the mount, which keeps it busy: "
                    + "cd out of it (cd /) and run partfs umount again");
        }
        run.takeLost(mp); // a line left by an earlier mount is not about this one
        if (force) {
            detach(mp); // before the SIGTERM: the mount process then finds nothing left to wait for in the namespace
        }
        ProcessHandle h = ProcessHandle.of(pid.getAsLong()).orElseThrow();
        MountLog mountLog = MountLog.of(h.pid()); // from here on: what the mount says while it stops
        if (!h.destroy()) { // SIGTERM: the mount flushes, uploads, unmounts and exits
            throw new IllegalStateException("cannot signal mount process " + h.pid() + " (" + h.info().user().orElse("another user")
                    + "'s): run partfs umount as that user or as root");
        }
        long start = System.nanoTime();
        long deadline = start + timeout * 1_000_000_000L;
        boolean told = false;
        while (running(h)) {
            if (!told && System.nanoTime() - start > 3_000_000_000L) {
                told = true;
                List<String> holders = Mounts.isMounted(mp) ? Mounts.holders(mp, 5) : List.of();
                out.printf("partfs: waiting for mount process %d to upload buffered writes and unmount%s%n", pid.getAsLong(),
                        holders.isEmpty() ? "" : "; " + mp + " is in use by " + String.join(", ", holders)
                                + ", which keeps it attached for up to its --unmount-grace (or use --force)");
            }
            if (told) { // a slow stop: show what the mount says about it (uploads left, files still open)
                mountLog.newLines().forEach(out::println);
                out.flush();
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("mount process " + pid.getAsLong() + " still runs after " + timeout
                        + " s (uploads pending?): see its log " + (otherHome ? "in the data home it was started with" : run.logFile(mp)));
            }
            java.util.concurrent.locks.LockSupport.parkNanos(50_000_000L); // poll interval
        }
        if (told) {
            mountLog.newLines().forEach(out::println); // its last lines: uploads done, or what was lost
        }
        if (Mounts.isMounted(mp)) { // its process exited without unmounting: killed meanwhile, or stuck on its own mount
            answer = Mounts.ask(mp, Mounts.ANSWER_TIMEOUT);
            if (answer == Mounts.Answer.SERVES) {
                throw new IllegalStateException(mp + " is still mounted after its process exited: run fusermount -u " + mp);
            }
            out.printf("partfs: took down %s, whose process exited without unmounting%s%n", mp, takeDownUnserved(mp, answer));
        }
        String lost = run.takeLost(mp);
        if (lost != null) {
            throw new IllegalStateException(lost);
        }
        out.printf("partfs: unmounted %s%n", mp);
        return 0;
    }

    /**
     * Takes down a PartFS mount that no running process serves, as {@code answer} found it: a
     * disconnected one at once; a silent one (its process exited while a thread of it waited on
     * its own mount, which holds the FUSE connection open with nobody to answer, and hangs every
     * process that touches the mount) once its connection is aborted. Returns what the user
     * should be told beyond "taken down".
     */
    static String takeDownUnserved(Path mp, Mounts.Answer answer) throws java.io.IOException, InterruptedException {
        String aborted = "";
        if (answer == Mounts.Answer.SILENT) {
            Mounts.abortConnection(mp);
            aborted = ", which answered nothing for " + Mounts.ANSWER_TIMEOUT.toSeconds() + " s: its FUSE connection was aborted,"
                    + " so the processes waiting on it got errors";
        }
        detachDeadMount(mp);
        return aborted;
    }

    /** Detaches the live mount {@code mp} lazily (umount -l): it ends when its last file is closed. */
    private static void detach(Path mp) throws java.io.IOException, InterruptedException {
        String failed = detachLazily(mp);
        if (failed != null) {
            throw new IllegalStateException("cannot detach " + mp + " (" + failed + "): as root, umount -l " + mp);
        }
    }

    /** fusermount -u -z {@code mp}: null once it is gone from the namespace, else what fusermount said. */
    private static String detachLazily(Path mp) throws java.io.IOException, InterruptedException {
        Process p = new ProcessBuilder("fusermount", "-u", "-z", mp.toString()).redirectErrorStream(true).start();
        String said = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8).trim();
        return p.waitFor() != 0 || Mounts.isMounted(mp) ? (said.isEmpty() ? "still mounted" : said) : null;
    }

    /**
     * Takes down a PartFS mount whose process is gone (it answers ENOTCONN): lazily (MNT_DETACH),
     * since ClickHouse may still hold files open there, which a plain unmount refuses as busy.
     * Nothing is left to flush.
     */
    static void detachDeadMount(Path mp) throws java.io.IOException, InterruptedException {
        String said = detachLazily(mp);
        if (said != null) {
            throw new IllegalStateException(mp + " holds a PartFS mount whose process exited, and fusermount -u -z failed ("
                    + said + "): unmount it as root with umount -l " + mp);
        }
    }

    /**
     * What a mount process logs while {@code partfs umount} waits for it: the lines its log file
     * gains from the SIGTERM on, each shortened to its time and message ({@code "  12:01:02
     * write-back: 40 staged block(s), 150 MiB, left to upload"}). The log file is the one its
     * standard error goes to: a background mount's log in the data home it was started with.
     * A mount logging to a terminal or a pipe shows its lines there itself: nothing to follow.
     */
    static final class MountLog {
        private static final java.util.regex.Pattern LINE =
                java.util.regex.Pattern.compile("\\d{4}-\\d\\d-\\d\\d (\\d\\d:\\d\\d:\\d\\d)\\.\\d{3} (\\w+) +\\S+ - (.*)");
        private static final int MOST_READ = 1 << 20; // a poll reads at most this much of a fast-growing log

        private final Path file;
        private long offset;
        private final java.io.ByteArrayOutputStream partial = new java.io.ByteArrayOutputStream();

        MountLog(Path file, long offset) {
            this.file = file;
            this.offset = offset;
        }

        /** The log file of process {@code pid} as it stands now, or one with nothing to follow. */
        static MountLog of(long pid) {
            try {
                Path f = java.nio.file.Files.readSymbolicLink(Path.of("/proc", Long.toString(pid), "fd", "2"));
                if (java.nio.file.Files.isRegularFile(f)) {
                    return new MountLog(f, java.nio.file.Files.size(f));
                }
            } catch (java.io.IOException | UnsupportedOperationException e) {
                // gone meanwhile, or another user's process: nothing to follow
            }
            return new MountLog(null, 0);
        }

        /** The log lines written since the last call, shortened; lines not from the logger are left out. */
        List<String> newLines() {
            if (file == null) {
                return List.of();
            }
            byte[] read;
            try (var ch = java.nio.channels.FileChannel.open(file)) {
                long size = ch.size();
                if (size < offset) {
                    offset = 0; // truncated: read it from its start
                }
                java.nio.ByteBuffer buf = java.nio.ByteBuffer.allocate((int) Math.min(MOST_READ, size - offset));
                while (buf.hasRemaining() && ch.read(buf, offset + buf.position()) > 0) {
                    // until the buffer is full or the file's end is reached
                }
                read = java.util.Arrays.copyOf(buf.array(), buf.position());
            } catch (java.io.IOException e) {
                return List.of(); // removed meanwhile: the mount's own exit status tells the rest
            }
            offset += read.length;
            List<String> lines = new java.util.ArrayList<>();
            int start = 0;
            for (int i = 0; i < read.length; i++) {
                if (read[i] == '\n') {
                    partial.write(read, start, i - start);
                    String line = shorten(partial.toString(java.nio.charset.StandardCharsets.UTF_8));
                    if (line != null) {
                        lines.add(line);
                    }
                    partial.reset();
                    start = i + 1;
                }
            }
            partial.write(read, start, read.length - start); // a line still being written
            return lines;
        }

        /** {@code "  HH:mm:ss message"} (the level before the message unless INFO), or null for a line the logger did not write. */
        static String shorten(String line) {
            java.util.regex.Matcher m = LINE.matcher(line);
            if (!m.matches()) {
                return null; // the mount's own output ("partfs: mounted ..."), said by this command in its own words
            }
            return "  " + m.group(1) + " " + (m.group(2).equals("INFO") ? "" : m.group(2) + " ") + m.group(3);
        }
    }

    /**
     * Whether the mount process still runs. A process that has exited stays a zombie until its
     * parent reaps it, and ProcessHandle counts zombies alive: a background mount's parent is
     * init, which may reap late (seconds on some VMs' and containers' inits).
     */
    static boolean running(ProcessHandle h) {
        if (!h.isAlive()) {
            return false;
        }
        try {
            String stat = java.nio.file.Files.readString(Path.of("/proc", Long.toString(h.pid()), "stat"));
            char state = stat.charAt(stat.lastIndexOf(')') + 2); // "pid (comm) S ...": comm may hold ')'
            return state != 'Z' && state != 'X';
        } catch (java.io.IOException | RuntimeException e) {
            return h.isAlive(); // gone meanwhile, or no /proc to read
        }
    }

    /**
     * The process serving {@code mp}, found by its command line ({@code io.partfs.cli.Main mount
     * ... MOUNTPOINT}, a relative mount point taken from its working directory), for a mount
     * started with another data home, whose run files this command does not see.
     */
    static OptionalLong servingProcess(Path mp) {
        return ProcessHandle.allProcesses()
                .filter(p -> serves(p, mp))
                .mapToLong(ProcessHandle::pid)
                .findFirst();
    }

    private static boolean serves(ProcessHandle p, Path mp) {
        // /proc directly: ProcessHandle.Info has no arguments for a command line as long as ours
        Path proc = Path.of("/proc", Long.toString(p.pid()));
        java.util.List<String> list;
        int main;
        Path cwd;
        try {
            list = java.util.Arrays.asList(new String(java.nio.file.Files.readAllBytes(proc.resolve("cmdline")),
                    java.nio.charset.StandardCharsets.UTF_8).split("\0"));
            main = list.indexOf(Main.class.getName());
            if (main < 0 || !list.subList(main, list.size()).contains("mount")) {
                return false;
            }
            cwd = java.nio.file.Files.readSymbolicLink(proc.resolve("cwd"));
        } catch (java.io.IOException | UnsupportedOperationException e) {
            return false; // gone meanwhile, or not ours to look at
        }
        for (String a : list.subList(main + 1, list.size())) {
            if (!a.startsWith("-") && cwd.resolve(a).normalize().equals(mp)) {
                return true;
            }
        }
        return false;
    }
}
