package io.partfs.cli;

import io.partfs.engine.data.MetaBackup;
import io.partfs.engine.meta.KvStore;
import io.partfs.engine.meta.MetaDump;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.object.ObjectStore;
import io.partfs.engine.object.StorageUrl;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.function.LongConsumer;
import java.util.zip.GZIPInputStream;
import java.util.zip.GZIPOutputStream;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code partfs dump} and {@code partfs load}: a volume's metadata to a file and back, to back it
 * up or to move it to another metadata engine ({@link MetaDump}). The file data stays where it
 * is: the object store the volume's format names.
 */
final class MetaDumpCommands {
    private MetaDumpCommands() {
    }

    /** Tells stderr how many records are done, at most every 2 s. */
    private static LongConsumer progress(PrintWriter err, String name, String what) {
        long[] last = {System.nanoTime()};
        return n -> {
            if (System.nanoTime() - last[0] > 2_000_000_000L) {
                err.printf("partfs %s: %,d records %s so far%n", name, n, what);
                err.flush();
                last[0] = System.nanoTime();
            }
        };
    }

    private static boolean gzip(Path file) {
        return file.getFileName().toString().endsWith(".gz");
    }

    @Command(name = "dump", mixinStandardHelpOptions = true,
            description = {"Write a volume's metadata (names, inodes, the slices of every file, symlinks, extended",
                    "attributes, pending deletions) to FILE, to back it up or to load it into another metadata engine",
                    "with 'partfs load'. The file data is not copied: it stays in the volume's object store. The file",
                    "is written beside FILE and renamed into place when complete; a name ending in .gz is compressed.",
                    "A consistent copy needs the volume unmounted: a mounted volume is refused unless --force."})
    static final class Dump implements Callable<Integer> {
        @Spec
        CommandSpec spec;

        @Mixin
        VolumeOptions volume;

        @Parameters(index = "0", paramLabel = "FILE", description = "Where to write the dump (.gz: compressed).")
        Path file;

        @Option(names = "--force",
                description = {"Dump while clients have the volume mounted. Files they change during the dump may be",
                        "copied half old, half new; unmount first for a backup to restore from."})
        boolean force;

        @Override
        public Integer call() throws Exception {
            volume.requireEmbeddedVolume();
            Path target = file.toAbsolutePath().normalize();
            if (!Files.isDirectory(target.getParent())) {
                throw new IllegalArgumentException("directory " + target.getParent() + " does not exist: create it or choose another FILE");
            }
            if (Files.isDirectory(target)) {
                throw new IllegalArgumentException(target + " is a directory: give a file name");
            }
            PrintWriter err = spec.commandLine().getErr();
            try (MetaEngine meta = volume.openMetaReadOnly()) {
                Map<Long, MetaEngine.Session> live = meta.liveSessions();
                if (!live.isEmpty() && !force) {
                    throw new IllegalStateException("volume '" + meta.volumeFormat().name() + "' is mounted by " + live.size()
                            + " client(s) (" + live.values().iterator().next().info() + "): unmount it for a consistent dump,"
                            + " or pass --force");
                }
                Path tmp = target.resolveSibling(target.getFileName() + ".partial-" + ProcessHandle.current().pid());
                long started = System.nanoTime();
                try {
                    MetaDump.Counts c;
                    try (FileOutputStream fos = new FileOutputStream(tmp.toFile())) {
                        OutputStream os = gzip(target) ? new GZIPOutputStream(fos, 1 << 16) : fos;
                        BufferedWriter w = new BufferedWriter(new OutputStreamWriter(os, StandardCharsets.UTF_8), 1 << 16);
                        c = MetaDump.dump(meta.store(), w, progress(err, "dump", "written"));
                        w.flush();
                        if (os instanceof GZIPOutputStream gz) {
                            gz.finish();
                        }
                        fos.getFD().sync(); // complete on disk before it takes FILE's name
                    }
                    Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                    try (java.nio.channels.FileChannel d = java.nio.channels.FileChannel.open(target.getParent())) {
                        d.force(true); // and the name too
                    }
                    spec.commandLine().getOut().printf("partfs dump: volume %s (uuid %s): %,d inodes, %,d chunks, %,d records"
                            + " (%s) to %s in %.1f s%n", c.format().name(), c.format().uuid(), c.inodes(), c.chunks(), c.records(),
                            Sizes.human(Files.size(target)), target, (System.nanoTime() - started) / 1e9);
                    return 0;
                } finally {
                    Files.deleteIfExists(tmp);
                }
            }
        }
    }

    @Command(name = "load", mixinStandardHelpOptions = true,
            description = {"Load a metadata dump written by 'partfs dump', or a backup a mount made in the object store",
                    "(--from-backup), into empty metadata: a Redis database with no volume in it (--meta redis://...), a",
                    "new RocksDB directory (--meta DIR), or a new embedded volume (--name). The whole dump is checked",
                    "first (a cut or damaged one changes nothing); the volume format is written last, so a load that",
                    "stops midway never leaves a usable-looking volume. The loaded volume uses the object store its",
                    "format names: mount it with the same credentials."})
    static final class Load implements Callable<Integer> {
        /** Added to the slice counter of a volume restored from a backup (see {@link MetaDump#load}). */
        static final long BACKUP_SLICE_GAP = 1L << 40;

        @Spec
        CommandSpec spec;

        @Mixin
        VolumeOptions volume;

        @Parameters(index = "0", arity = "0..1", paramLabel = "FILE", description = "A dump from 'partfs dump' (.gz: compressed).")
        Path file;

        @Option(names = "--storage", paramLabel = "URL",
                description = {"With --from-backup or --list-backups: the volume's object storage, as given to 'partfs",
                        "format' (s3://bucket[/prefix]?endpoint=... or a directory); the volume is --name."})
        String storage;

        @Option(names = "--from-backup", paramLabel = "NAME|latest",
                description = {"Load the metadata backup NAME (or the newest) a mount made in the object store (mount",
                        "--backup-meta) instead of FILE. Files changed after it was taken are as they were then; the",
                        "data of files deleted since may be gone ('partfs fsck' lists them). New data gets slice numbers",
                        "2^40 above the backup's, so it never takes the object names of data written after it."})
        String fromBackup;

        @Option(names = "--list-backups", description = "List the volume's metadata backups in the object store and exit.")
        boolean listBackups;

        @Override
        public Integer call() throws Exception {
            if (fromBackup != null || listBackups) {
                if (storage == null) {
                    throw new IllegalArgumentException("--from-backup and --list-backups need the volume's --storage URL (and its --name)");
                }
                if (file != null) {
                    throw new IllegalArgumentException("give FILE or --from-backup, not both");
                }
                try (ObjectStore objects = StorageUrl.parse(storage).open(volume.credentials(), false)) {
                    MetaBackup backups = new MetaBackup(null, objects, volume.name);
                    if (listBackups) {
                        return list(backups);
                    }
                    MetaBackup.Backup b = backups.find(fromBackup);
                    spec.commandLine().getErr().printf("partfs load: backup %s of volume %s (%s, %d piece(s))%n", b.name(),
                            volume.name, Sizes.human(b.bytes()), b.pieces().size());
                    return load(() -> reader(backups.open(b), true, b.name()), b.name(), BACKUP_SLICE_GAP);
                }
            }
            if (file == null) {
                throw new IllegalArgumentException("give the FILE 'partfs dump' wrote, or --from-backup with --storage");
            }
            Path source = file.toAbsolutePath().normalize();
            if (!Files.isRegularFile(source)) {
                throw new IllegalArgumentException("no dump at " + source + ": give the file 'partfs dump' wrote");
            }
            return load(() -> reader(Files.newInputStream(source), gzip(source), source.toString()), source.toString(), 0);
        }

        private static BufferedReader reader(InputStream in, boolean gzip, String what) throws IOException {
            try {
                return new BufferedReader(new InputStreamReader(gzip ? new GZIPInputStream(in, 1 << 16) : in,
                        StandardCharsets.UTF_8), 1 << 16);
            } catch (IOException e) {
                in.close();
                throw new IOException(what + " is not gzip-compressed (" + e.getMessage() + "): rename it without .gz", e);
            }
        }

        private int load(MetaDump.Source open, String what, long sliceGap) throws IOException {
            MetaDump.Counts checked = MetaDump.check(open); // before anything is created
            long started = System.nanoTime();
            if (volume.embedded()) {
                Files.createDirectories(volume.embeddedDir());
            }
            MetaDump.Counts c;
            try (KvStore kv = volume.metaUrl().openOrCreate()) {
                c = MetaDump.load(open, checked, kv, sliceGap, progress(spec.commandLine().getErr(), "load", "loaded"));
            }
            spec.commandLine().getOut().printf("partfs load: volume %s (uuid %s, storage %s): %,d inodes, %,d chunks, %,d records"
                    + " from %s into %s in %.1f s%n", c.format().name(), c.format().uuid(), c.format().storage(), c.inodes(),
                    c.chunks(), c.records(), what, volume.metaUrl(), (System.nanoTime() - started) / 1e9);
            return 0;
        }

        private int list(MetaBackup backups) throws IOException {
            PrintWriter out = spec.commandLine().getOut();
            java.util.List<MetaBackup.Backup> all = backups.list();
            if (all.isEmpty()) {
                out.printf("no metadata backups of volume '%s' in %s%n", volume.name, storage);
                return 0;
            }
            out.printf("%-28s %-20s %10s %s%n", "NAME", "TAKEN (UTC)", "SIZE", "STATE");
            for (MetaBackup.Backup b : all) {
                out.printf("%-28s %-20s %10s %s%n", b.name(), b.taken().toString().substring(0, 19).replace('T', ' '),
                        Sizes.human(b.bytes()), b.complete() ? "complete" : "incomplete (being written, or cut short)");
            }
            return 0;
        }
    }
}
