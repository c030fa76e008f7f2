package io.partfs.cli;

import io.partfs.engine.data.VolumeCheck;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.object.ObjectStore;
import io.partfs.engine.object.StorageUrl;
import java.io.PrintWriter;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code partfs fsck} and {@code partfs gc}: a volume's metadata against its objects ({@link VolumeCheck}). */
final class CheckCommands {
    /** Paths of broken files and dangling entries printed at most. */
    private static final int LISTED = 50;

    private CheckCommands() {
    }

    /** Opens the volume read-only (it may be mounted), runs the check with progress on stderr, and reports. */
    abstract static class Base implements Callable<Integer> {
        @Spec
        CommandSpec spec;

        @Mixin
        VolumeOptions volume;

        @Option(names = {"-p", "--threads"}, paramLabel = "N", defaultValue = "" + VolumeCheck.Options.LIST_THREADS,
                description = {"Object listings at once, each over the blocks of a thousand slices (default: ${DEFAULT-VALUE}).",
                        "An embedded volume's local objects are read in one pass whatever N is."})
        int threads;

        abstract VolumeCheck.Options options(MetaEngine meta) throws Exception;

        /** Work before the check, which reads the metadata as it is once the check opens it. */
        void beforeCheck(PrintWriter out, PrintWriter err) throws Exception {
        }

        /** Progress on stderr at most every 2 s. */
        static VolumeCheck.Progress every2s(PrintWriter err, String name) {
            long[] last = {System.nanoTime()};
            return (phase, n) -> {
                if (System.nanoTime() - last[0] > 2_000_000_000L) {
                    err.printf("partfs %s: %d %s so far%n", name, n, phase);
                    err.flush();
                    last[0] = System.nanoTime();
                }
            };
        }

        abstract int report(PrintWriter out, MetaEngine meta, VolumeCheck check, VolumeCheck.Report r) throws Exception;

        @Override
        public Integer call() throws Exception {
            volume.requireEmbeddedVolume();
            String name = spec.name();
            if (threads < 1 || threads > 256) {
                throw new IllegalArgumentException("--threads must be 1-256, not " + threads);
            }
            PrintWriter err = spec.commandLine().getErr();
            beforeCheck(spec.commandLine().getOut(), err);
            try (MetaEngine meta = volume.openMetaReadOnly();
                 ObjectStore store = StorageUrl.parse(meta.volumeFormat().storage()).open(volume.credentials(), false, volume.ioAttempts, volume.ioTimeout)) {
                store.checkAccess();
                VolumeCheck.Options options = options(meta);
                VolumeCheck check = new VolumeCheck(meta, store, every2s(err, name));
                long started = System.nanoTime();
                long need = check.heapNeeded();
                long heap = Runtime.getRuntime().maxMemory();
                if (need > heap / 2) { // the tables, and room for the rest of the work
                    throw new IllegalStateException(String.format("%s needs about %d MiB of heap for this volume's %d inodes and %d freed"
                            + " slices and has %d MiB: run it with PARTFS_JAVA_EXTRA_OPTS=-Xmx%dm", name, need >> 20, meta.usage().inodes(),
                            meta.trash().slices() + meta.pendingDeletions().slices(), heap >> 20, Math.max(512, (need >> 20) * 3)));
                }
                VolumeCheck.Report r;
                try {
                    r = check.run(options);
                } catch (OutOfMemoryError e) {
                    throw new IllegalStateException(name + " ran out of memory (" + Runtime.getRuntime().maxMemory() / (1 << 20)
                            + " MiB heap; it holds every slice of the volume): run it with a larger heap, e.g. PARTFS_JAVA_EXTRA_OPTS=-Xmx8g");
                }
                PrintWriter out = spec.commandLine().getOut();
                out.printf("%s: %s: %d chunks, %d slices in %d blocks; %d objects listed, in %.1f s%n", name,
                        meta.volumeFormat().name(), r.chunks, r.slices, r.blocks, r.objects, (System.nanoTime() - started) / 1e9);
                return report(out, meta, check, r);
            }
        }
    }

    @Command(name = "fsck", mixinStandardHelpOptions = true,
            description = {"Check a volume: every block its files need is in the object store, every directory entry",
                    "has its inode, every inode's link count is its number of names and every symlink has its target.",
                    "Lists what is wrong and exits 1 if anything is. Read-only; it may run while the volume is mounted",
                    "(what it reports is checked again before it is reported)."})
    static final class Fsck extends Base {
        @Override
        VolumeCheck.Options options(MetaEngine meta) {
            return new VolumeCheck.Options(true, false, java.time.Duration.ofHours(1).toMillis(), threads);
        }

        @Override
        int report(PrintWriter out, MetaEngine meta, VolumeCheck check, VolumeCheck.Report r) throws Exception {
            out.printf("fsck: %d directories, %d files, %d symlinks; %d files unlinked but still open%n",
                    r.directories, r.files, r.symlinks, r.pendingFiles);
            List<Long> broken;
            List<VolumeCheck.Dangling> dangling;
            List<VolumeCheck.LinkMismatch> links;
            List<String> noTarget;
            // the check read the volume over some time: what looks wrong is read again as it is now
            try (MetaEngine current = volume.openMetaReadOnly()) {
                broken = check.stillBroken(current, r.brokenFiles);
                dangling = VolumeCheck.stillDangling(current, r.danglingEntries);
                links = VolumeCheck.stillMismatched(current, r.linkMismatches);
                noTarget = check.stillWithoutTarget(current, r.symlinksWithoutTarget);
            }
            if (r.leaked > 0) {
                out.printf("fsck: %d objects (%s) no file uses, older than 1 hour: 'partfs gc --delete' removes them%n",
                        r.leaked, Sizes.human(r.leakedBytes));
            }
            if (broken.isEmpty() && dangling.isEmpty() && links.isEmpty() && noTarget.isEmpty()) {
                out.println("fsck: OK: every file's blocks are in the object store, every name has its inode and every"
                        + " link count matches its names");
                return 0;
            }
            if (!broken.isEmpty()) {
                out.printf("fsck: %d blocks missing from the object store; %d files read back wrong:%n", r.missingBlocks, broken.size());
                Map<Long, String> paths = check.paths(broken.subList(0, Math.min(LISTED, broken.size())));
                for (Long ino : broken.subList(0, Math.min(LISTED, broken.size()))) {
                    out.printf("  %s (inode %d)%n", paths.getOrDefault(ino, "(no name: unlinked, still open)"), ino);
                }
                if (broken.size() > LISTED) {
                    out.printf("  ... and %d more%n", broken.size() - LISTED);
                }
                if (!meta.liveSessions().isEmpty()) {
                    out.println("fsck: the volume is mounted: a write-back mount uploads blocks after its fsync; run fsck again"
                            + " once its uploads are done (after 'partfs umount') before restoring these files");
                }
            }
            if (!dangling.isEmpty()) {
                out.printf("fsck: %d directory entries name an inode that does not exist:%n", dangling.size());
                for (VolumeCheck.Dangling d : dangling.subList(0, Math.min(LISTED, dangling.size()))) {
                    out.printf("  %s%n", d.path());
                }
            }
            if (!links.isEmpty()) {
                out.printf("fsck: %d inodes have a link count other than their number of names (with too low a count,"
                        + " removing one name deletes the data the others show):%n", links.size());
                for (VolumeCheck.LinkMismatch l : links.subList(0, Math.min(LISTED, links.size()))) {
                    out.printf("  %s (inode %d): %d links, %d names%n", l.path(), l.ino(), l.nlink(), l.names());
                }
            }
            if (!noTarget.isEmpty()) {
                out.printf("fsck: %d symlinks have no target (reading them fails with EIO):%n", noTarget.size());
                for (String p : noTarget.subList(0, Math.min(LISTED, noTarget.size()))) {
                    out.printf("  %s%n", p);
                }
            }
            return 1;
        }
    }

    @Command(name = "gc", mixinStandardHelpOptions = true,
            description = {"Find objects in the volume's store that no file uses (left by a crash between an upload and its",
                    "commit, or by deletions a mount did not finish) and, with --delete, delete them. Objects awaiting",
                    "deletion by a mount are left to it (with --delete and no client mounted, gc finishes those deletions",
                    "itself), and objects younger than --min-age (a write may be about to commit them) are left alone,",
                    "as are those of writes a registered mount noted as uploaded and not committed yet (a mount deletes",
                    "them itself once that session has ended without committing them). Slices are found by key, so",
                    "files renamed or unlinked meanwhile are never taken for leaks.",
                    "With --delete, sessions of crashed mounts (no heartbeat for 5 minutes) are removed first, so the",
                    "unlinked files they held open are deleted too."})
    static final class Gc extends Base {
        @Option(names = "--delete", description = {"Delete the leaked objects (default: only count them); with no client mounted,",
                "also finish the deletions mounts left (files unlinked, objects of freed slices)."})
        boolean delete;

        @Option(names = "--min-age", paramLabel = "DURATION", defaultValue = "1h",
                description = {"Only objects older than this count as leaked: 30s, 10m, 1h, 2d (default: ${DEFAULT-VALUE}).",
                        "At least 10m while a client has the volume mounted."})
        String minAge;

        @Override
        VolumeCheck.Options options(MetaEngine meta) throws Exception {
            long ms = durationMillis(minAge);
            int mounted = meta.liveSessions().size();
            if (mounted > 0 && ms < java.time.Duration.ofMinutes(10).toMillis()) {
                throw new IllegalArgumentException(mounted + " client(s) have the volume mounted: give --min-age 10m or more"
                        + " (a mount uploads a block before it commits the file that uses it), or unmount them first");
            }
            return new VolumeCheck.Options(false, delete, ms, threads);
        }

        /**
         * With --delete and no client mounted, finishes the deletions mounts left (a pod deleted
         * after a DROP leaves them for a mount that may never come): first, so that the check
         * then reads the metadata without them.
         */
        @Override
        void beforeCheck(PrintWriter out, PrintWriter err) throws Exception {
            if (!delete) {
                return;
            }
            MetaEngine.PendingDeletions pending;
            MetaEngine.Trash trash;
            int mounted;
            int stale;
            boolean exclusive;
            try (MetaEngine meta = volume.openMetaReadOnly()) { // an embedded volume may be mounted: no write lock yet
                pending = meta.pendingDeletions();
                trash = meta.trash();
                mounted = meta.liveSessions().size();
                stale = meta.sessions().size() - mounted;
                exclusive = meta.store().exclusive();
            }
            if (stale > 0 && (mounted == 0 || !exclusive)) { // a mounted RocksDB volume is its mount's to clean
                try (MetaEngine meta = volume.openMeta(false)) {
                    for (MetaEngine.Session s : meta.removeStaleSessions()) {
                        out.printf("gc: removed the session of a crashed mount (no heartbeat for %ds): %s%n",
                                MetaEngine.SESSION_TIMEOUT.toSeconds(), s.info());
                    }
                }
            }
            if (pending.files() == 0 && pending.slices() == 0 && trash.slices() == 0) {
                return;
            }
            if (mounted > 0) { // they also empty the trash of what has been there long enough
                if (pending.files() > 0 || pending.slices() > 0) {
                    out.printf("gc: %d files and %d slices await deletion: left to the %d client(s) that have the volume mounted%n",
                            pending.files(), pending.slices(), mounted);
                }
                return;
            }
            try (MetaEngine meta = volume.openMeta(false);
                 ObjectStore store = StorageUrl.parse(meta.volumeFormat().storage()).open(volume.credentials(), false, volume.ioAttempts, volume.ioTimeout)) {
                VolumeCheck.Finished f = new VolumeCheck(meta, store, every2s(err, "gc")).finishDeletions();
                out.printf("gc: finished the deletions mounts left: the data of %d files, %d objects of %d slices%n",
                        f.files(), f.objects(), f.slices());
                MetaEngine.Trash kept = meta.trash();
                if (kept.slices() > 0) {
                    out.printf("gc: %d slices stay in the trash until their %d hours are over ('partfs config"
                            + " --trash-hours 0' empties it)%n", kept.slices(), meta.trashHours());
                }
            }
        }

        @Override
        int report(PrintWriter out, MetaEngine meta, VolumeCheck check, VolumeCheck.Report r) throws Exception {
            out.printf("gc: %d leaked objects (%s) older than %s%s%n", r.leaked, Sizes.human(r.leakedBytes), minAge,
                    delete ? ": deleted " + r.deleted : r.leaked > 0 ? ": run with --delete to remove them" : "");
            out.printf("gc: left alone: %d newer unreferenced objects, %d objects of writes a mount has uploaded and not"
                    + " committed yet, %d objects awaiting deletion by a mount, %d objects (%s) in the trash, %d keys that are not"
                    + " blocks%n", r.young, r.uploadingObjects, r.pendingObjects, r.trashObjects, Sizes.human(r.trashBytes), r.foreign);
            if (!r.brokenFiles.isEmpty()) {
                // a file deleted while gc listed the store looks broken: only files still missing blocks now count
                List<Long> broken;
                try (MetaEngine current = volume.openMetaReadOnly()) {
                    broken = check.stillBroken(current, r.brokenFiles);
                }
                if (!broken.isEmpty()) {
                    out.printf("gc: %d files have blocks missing from the object store: run 'partfs fsck' to list them%n", broken.size());
                }
            }
            return 0;
        }
    }

    /** {@code 90}, {@code 30s}, {@code 10m}, {@code 1h} or {@code 2d}, in milliseconds. */
    static long durationMillis(String s) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("(\\d+)([smhd]?)").matcher(s.trim());
        if (!m.matches()) {
            throw new IllegalArgumentException("invalid duration '" + s + "': use a number of seconds, or 30s, 10m, 1h, 2d");
        }
        long n = Long.parseLong(m.group(1));
        return switch (m.group(2)) {
            case "m" -> n * 60_000;
            case "h" -> n * 3_600_000;
            case "d" -> n * 86_400_000;
            default -> n * 1000;
        };
    }
}
