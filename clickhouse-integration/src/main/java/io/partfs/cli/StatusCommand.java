package io.partfs.cli;

import io.partfs.engine.VolumeFormat;
import io.partfs.engine.meta.MetaEngine;
import java.io.PrintWriter;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

/** {@code partfs status}: the volume's settings, usage and mounted clients. */
@Command(name = "status", mixinStandardHelpOptions = true,
        description = "Show a volume's settings, usage and the clients that have it mounted.")
final class StatusCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Mixin
    VolumeOptions volume;

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        volume.requireEmbeddedVolume();
        try (MetaEngine meta = volume.openMetaReadOnly()) {
            VolumeFormat f = meta.volumeFormat();
            MetaEngine.Usage u = meta.usage();
            out.printf("volume:     %s (uuid %s)%n", f.name(), f.uuid());
            out.printf("metadata:   %s%n", volume.metaUrl());
            out.printf("storage:    %s%n", f.storage());
            out.printf("block size: %s, chunk size: %s%n", Sizes.human(f.blockSize()), Sizes.human(VolumeFormat.CHUNK_SIZE));
            out.printf("usage:      %s in files, %d inodes%n", Sizes.human(u.usedBytes()), u.inodes());
            MetaEngine.PendingDeletions d = meta.pendingDeletions();
            out.printf("deletions:  %d files and %d slices waiting (mounts delete them in the background)%n", d.files(), d.slices());
            MetaEngine.Trash t = meta.trash();
            out.printf("trash:      %s; %d slices in it%s%n", FormatCommand.trashText(meta.trashHours()), t.slices(),
                    t.slices() == 0 ? "" : ", the oldest freed in the hour from "
                    + java.time.Instant.ofEpochMilli(t.oldestHourStartMillis()) + " ('partfs gc' counts their bytes)");
            Map<Long, MetaEngine.Session> sessions = meta.sessions();
            long now = System.currentTimeMillis();
            java.time.Instant backup = io.partfs.engine.data.MetaBackup.lastStarted(meta.store());
            out.printf("backup:     %s%n", backup == null ? "none yet (a mount backs the metadata up into the object store"
                    + " every --backup-meta seconds)" : "last begun " + backup.truncatedTo(java.time.temporal.ChronoUnit.SECONDS)
                    + " (" + Math.max(0, now - backup.toEpochMilli()) / 60_000 + " min ago); 'partfs load --list-backups' lists them");
            out.printf("clients:    %d mounted%n", meta.liveSessions().size());
            for (MetaEngine.Session s : sessions.values()) {
                out.printf("  session %d: %s, %s%n", s.id(), s.info(), heartbeat(s, now));
            }
        }
        return 0;
    }

    private static String heartbeat(MetaEngine.Session s, long now) {
        if (s.lastBeatMillis() < 0) {
            return "STALE: no heartbeat recorded (mounted by a build without heartbeats: the next mount or"
                    + " 'partfs gc --delete' removes it)";
        }
        long ago = Math.max(0, now - s.lastBeatMillis()) / 1000;
        if (s.live(now)) {
            return "last heartbeat " + ago + "s ago";
        }
        return "STALE: no heartbeat for " + ago + "s (a crashed mount: the next mount or 'partfs gc --delete' removes it"
                + " and deletes the unlinked files it held open)";
    }
}
