package io.partfs.cli;

import io.partfs.engine.VolumeFormat;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.object.ObjectStore;
import io.partfs.engine.object.StorageUrl;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code partfs destroy}: deletes a volume for good, as {@code juicefs destroy} does: every
 * object under its name in the object store, then its metadata. The volume is marked first, so
 * that no mount opens it while its objects go; a destroy that stops half-way (a crash, an
 * outage) leaves the mark, and running it again finishes the work.
 */
@Command(name = "destroy", mixinStandardHelpOptions = true,
        description = {"Delete a volume for good: every object under its name in the object store (file data, the",
                "trash, metadata backups), then its metadata (the Redis database's keys; an embedded volume's",
                "directory). It cannot be undone. Give the volume's uuid, as 'partfs status' shows it, so that",
                "only the volume meant is destroyed. Refused while any client has the volume mounted. Asks",
                "before it deletes anything, unless --yes. A destroy that stopped half-way is finished by",
                "running it again; mounts refuse the volume meanwhile.",
                "",
                "Examples:",
                "  partfs destroy --name vol2 3f2b6c1e-0d5a-4f0e-9a57-2c1d8e6b7a90",
                "  partfs destroy --meta redis://127.0.0.1:6379/1 3f2b6c1e-0d5a-4f0e-9a57-2c1d8e6b7a90 --yes"})
final class DestroyCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Mixin
    VolumeOptions volume;

    @Parameters(index = "0", paramLabel = "UUID", description = "The uuid of the volume to destroy ('partfs status' shows it).")
    String uuid;

    @Option(names = "--yes", description = "Do not ask before deleting (needed where there is no terminal to ask on).")
    boolean yes;

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        volume.requireEmbeddedVolume();
        boolean embeddedStore;
        VolumeFormat f;
        long keys = 0;
        long[] objects;
        try (MetaEngine meta = volume.openMetaForDestroy()) {
            f = meta.volumeFormat();
            if (!f.uuid().equals(uuid)) {
                throw new IllegalArgumentException("metadata at " + volume.metaUrl() + " holds volume '" + f.name() + "' with uuid " + f.uuid()
                        + ", not " + uuid + ": nothing was deleted; give the uuid 'partfs status' shows for the volume to destroy");
            }
            VolumeOptions.refuseWhileMounted(meta, "; nothing was deleted");
            out.printf("volume %s (uuid %s)%n  metadata: %s%n  storage:  %s%n", f.name(), f.uuid(), volume.metaUrl(), f.storage());
            out.flush();
            if (!yes && !confirmed(f)) {
                out.println("nothing was deleted");
                return 1;
            }
            try (ObjectStore store = StorageUrl.parse(f.storage()).open(volume.credentials(), false, volume.ioAttempts, volume.ioTimeout)) {
                store.checkAccess(); // wrong credentials fail here, the volume untouched
                meta.beginDestroy(uuid);
                try {
                    VolumeOptions.refuseWhileMounted(meta, "; nothing was deleted"); // one that began before the mark was set
                } catch (IllegalStateException mounted) {
                    meta.cancelDestroy();
                    throw mounted;
                }
                objects = deleteObjects(store, f.name() + "/", err);
            }
            embeddedStore = meta.store().exclusive();
            if (!embeddedStore) {
                keys = meta.deleteAllMetadata(progress(err, "metadata keys"));
            }
        }
        if (embeddedStore) { // closed: its directory goes, renamed first so that no half-deleted database is ever opened
            Path dir = volume.embedded() ? volume.embeddedDir() : volume.metaUrl().rocksDir();
            Path doomed = dir.resolveSibling(dir.getFileName() + ".destroyed-" + System.currentTimeMillis());
            Files.move(dir, doomed, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
            FileTrees.delete(doomed);
        }
        Path cache = volume.home().resolve("cache").resolve(f.uuid());
        if (Files.isDirectory(cache)) {
            FileTrees.delete(cache);
        }
        out.printf("destroyed volume %s: %d objects (%s) deleted from %s; %s%n", f.name(), objects[0], Sizes.human(objects[1]), f.storage(),
                embeddedStore ? "its metadata directory deleted" : keys + " metadata keys deleted");
        out.println("  block caches that mounts on other machines, or with --cache-dir, kept for it (in a directory named by its uuid) are left there");
        return 0;
    }

    private boolean confirmed(VolumeFormat f) {
        java.io.Console console = System.console();
        if (console == null) {
            throw new IllegalArgumentException("no terminal to ask on: add --yes to destroy volume '" + f.name() + "'; nothing was deleted");
        }
        String answer = console.readLine("Delete every object and all the metadata of volume '%s'? This cannot be undone [y/N] ", f.name());
        return answer != null && (answer.trim().equalsIgnoreCase("y") || answer.trim().equalsIgnoreCase("yes"));
    }

    /** Deletes every object under {@code prefix}, a thousand at a time; returns how many and their bytes. */
    private static long[] deleteObjects(ObjectStore store, String prefix, PrintWriter err) throws IOException {
        long[] done = {0, 0};
        java.util.function.LongConsumer progress = progress(err, "objects");
        List<String> batch = new ArrayList<>();
        store.scan(prefix, io.partfs.engine.data.ChunkStore.KEY_LEVELS + 1, io.partfs.engine.data.VolumeCheck.Options.LIST_THREADS, o -> {
            batch.add(o.key());
            done[1] += o.size();
            if (batch.size() == 1000) {
                store.deleteAll(batch);
                done[0] += batch.size();
                batch.clear();
                progress.accept(done[0]);
            }
        });
        store.deleteAll(batch);
        done[0] += batch.size();
        return done;
    }

    /** Tells {@code err} how many {@code what} were deleted so far, at most every 2 s. */
    private static java.util.function.LongConsumer progress(PrintWriter err, String what) {
        long[] last = {System.nanoTime()};
        return n -> {
            if (System.nanoTime() - last[0] > 2_000_000_000L) {
                err.printf("partfs destroy: %d %s deleted so far%n", n, what);
                err.flush();
                last[0] = System.nanoTime();
            }
        };
    }
}
