package io.partfs.cli;

import io.partfs.engine.meta.MetaEngine;
import java.io.PrintWriter;
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
                "  partfs config --meta redis://127.0.0.1:6379/1 --trash-hours 48"})
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

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        volume.requireEmbeddedVolume();
        if (trashHours == null) {
            try (MetaEngine meta = volume.openMetaReadOnly()) {
                out.printf("volume %s%n  trash-hours: %d%n", meta.volumeFormat().name(), meta.trashHours());
            }
            return 0;
        }
        try (MetaEngine meta = volume.openMeta(false)) {
            int before = meta.trashHours();
            meta.setTrashHours(trashHours);
            out.printf("volume %s%n  trash-hours: %d (was %d)%n", meta.volumeFormat().name(), trashHours, before);
        }
        return 0;
    }
}
