package io.partfs.cli;

import io.partfs.engine.VolumeFormat;
import io.partfs.engine.data.ChunkStore;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.Slice;
import io.partfs.engine.object.ObjectStore;
import io.partfs.engine.object.StorageUrl;
import java.io.IOException;
import java.io.PrintWriter;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code partfs config}: shows or changes the settings of a volume that may change after format. */
@Command(name = "config", mixinStandardHelpOptions = true,
        description = {"Show or change a volume's changeable settings. Clients that have a shared (Redis) volume mounted",
                "pick a change up within minutes; an embedded volume is changed while unmounted.",
                "",
                "Examples:",
                "  partfs config --meta redis://127.0.0.1:6379/1",
                "  partfs config --meta redis://127.0.0.1:6379/1 --trash-hours 48",
                "  partfs config --meta redis://127.0.0.1:6379/1 \\",
                "      --storage 's3://partfs/vol1?endpoint=http://minio-2:9000&path-style=true'"})
final class ConfigCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Mixin
    VolumeOptions volume;

    @Option(names = "--trash-hours", paramLabel = "HOURS",
            description = {"Keep the objects of deleted, truncated or overwritten data this many hours before deleting",
                    "them, so metadata restored from a backup of that time finds its files whole. 0 turns the trash",
                    "off and empties it (mounts delete its contents within minutes, or 'partfs gc --delete' at once).",
                    "It costs storage: ClickHouse frees data all the time as it merges parts."})
    Integer trashHours;

    @Option(names = "--storage", paramLabel = "URL",
            description = {"Point the volume at another object store URL that holds its objects: after the bucket was",
                    "copied (its '<name>/' prefix, e.g. with rclone copy or mc mirror), an endpoint was renamed, or to",
                    "add an option such as sse=AES256 (new uploads only). Refused while any client has the volume",
                    "mounted (a mount keeps the store it opened), and unless the store takes a write and holds a",
                    "sample of the volume's objects; 'partfs fsck' then checks every one. Mounts give the new URL",
                    "to --storage from then on."})
    String storage;

    /** Slices whose first and last block {@code --storage} looks for in the new store. */
    static final int SAMPLE_SLICES = 32;

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        volume.requireEmbeddedVolume();
        if (trashHours == null && storage == null) {
            try (MetaEngine meta = volume.openMetaReadOnly()) {
                out.printf("volume %s%n  storage: %s%n  trash-hours: %d%n", meta.volumeFormat().name(), meta.volumeFormat().storage(),
                        meta.trashHours());
            }
            return 0;
        }
        StorageUrl to = storage == null ? null : StorageUrl.parse(storage);
        try (MetaEngine meta = volume.openMeta(false)) {
            out.printf("volume %s%n", meta.volumeFormat().name());
            if (to != null) {
                out.printf("  storage: %s%n", changeStorage(meta, to));
            }
            if (trashHours != null) {
                int before = meta.trashHours();
                meta.setTrashHours(trashHours);
                out.printf("  trash-hours: %d (was %d)%n", trashHours, before);
            }
        }
        return 0;
    }

    /** Records {@code to} as the volume's storage once it is checked; says what was done. */
    private String changeStorage(MetaEngine meta, StorageUrl to) throws Exception {
        VolumeFormat f = meta.volumeFormat();
        if (to.url().equals(f.storage())) {
            return to.url() + " (unchanged)";
        }
        VolumeOptions.refuseWhileMounted(meta, " (a mount keeps the storage it opened); the storage is still " + f.storage());
        String checked;
        try (ObjectStore objects = to.open(volume.credentials(), true)) {
            FormatCommand.probe(objects);
            checked = holdsVolume(meta, objects, f, to.url());
        }
        meta.changeStorage(f.storage(), to.url());
        try {
            VolumeOptions.refuseWhileMounted(meta, ""); // one that began during the check opened the old storage
        } catch (IllegalStateException mountedMeanwhile) {
            meta.changeStorage(to.url(), f.storage());
            throw new IllegalStateException(mountedMeanwhile.getMessage() + "; it mounted while the new storage was checked, so the"
                    + " storage is still " + f.storage());
        }
        return to.url() + " (was " + f.storage() + "; " + checked + ")";
    }

    /**
     * Checks that {@code objects} holds the first and last block of a sample of the volume's
     * slices, of the size their keys name, or no file data at all when the volume has none
     * (else another volume's objects there would be overwritten and taken for leaks); says how
     * much it checked.
     */
    static String holdsVolume(MetaEngine meta, ObjectStore objects, VolumeFormat f, String url) throws IOException {
        List<Slice> sample = meta.someSlices(SAMPLE_SLICES);
        String copy = ": copy the objects under '" + f.name() + "/' from " + f.storage() + " there first, or give the URL where"
                + " they are; the storage is still " + f.storage();
        if (sample.isEmpty()) {
            if (!objects.list(f.name() + "/chunks/", null, 1).isEmpty()) {
                throw new IllegalStateException("storage " + url + " holds file data under '" + f.name() + "/chunks/' while volume '"
                        + f.name() + "' has none: it is another volume's; delete it there first, or use another prefix");
            }
            return "the volume holds no file data yet";
        }
        int blocks = 0;
        for (Slice s : sample) {
            List<String> keys = ChunkStore.blockKeys(f.name(), f.blockSize(), s.id(), s.size());
            for (String key : keys.size() > 1 ? List.of(keys.get(0), keys.get(keys.size() - 1)) : keys) {
                Optional<ObjectStore.ObjectInfo> o = objects.head(key);
                long want = Long.parseLong(key.substring(key.lastIndexOf('_') + 1));
                if (o.isEmpty() || o.get().size() != want) {
                    throw new IllegalStateException("storage " + url + " does not hold volume '" + f.name() + "': object " + key
                            + (o.isEmpty() ? " is missing" : " has " + o.get().size() + " bytes, not " + want) + copy);
                }
                blocks++;
            }
        }
        return blocks + " objects of " + sample.size() + " slices found there; 'partfs fsck' checks every one";
    }
}
