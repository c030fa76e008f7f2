package io.partfs.cli;

import io.partfs.engine.VolumeFormat;
import io.partfs.engine.meta.MetaEngine;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

/** {@code partfs status}: the volume's settings, usage and mounted clients. */
@Command(name = "status", mixinStandardHelpOptions = true,
        description = {"Show a volume's settings, usage and the clients that have it mounted: of the volume --meta",
                "or --name opens, or of the one mounted at MOUNTPOINT (asked of that mount, which holds it open)."})
final class StatusCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Mixin
    VolumeOptions volume;

    @Parameters(paramLabel = "MOUNTPOINT", arity = "0..1",
            description = {"Ask the mount at this path instead of opening the volume's metadata here: it answers",
                    "through its HTTP endpoint (found from the mount's run files under --home, or --sidecar)."})
    Path mountPoint;

    @Option(names = "--sidecar", paramLabel = "URL",
            description = "With MOUNTPOINT: the mount's HTTP endpoint (its --http-address), if not recorded under --home.")
    String sidecar;

    @Option(names = "--timeout", paramLabel = "SECONDS", defaultValue = "30",
            description = {"With MOUNTPOINT: how long to wait for the mount's answer before saying its process is stopped",
                    "or stuck, exit code 1 (default: ${DEFAULT-VALUE}). A health check wants a few seconds."})
    int timeoutSeconds;

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        if (mountPoint != null) {
            out.print(askMount());
            out.flush();
            return 0;
        }
        if (sidecar != null || spec.commandLine().getParseResult().hasMatchedOption("--timeout")) {
            throw new IllegalArgumentException("--sidecar and --timeout go with a MOUNTPOINT: give the mount point to ask");
        }
        volume.requireEmbeddedVolume();
        try (MetaEngine meta = volume.openMetaReadOnly()) {
            out.print(report(meta, volume.metaUrl().toString()));
        }
        out.flush();
        return 0;
    }

    /** What the mount at {@link #mountPoint} says of its volume. */
    private String askMount() throws IOException {
        var parsed = spec.commandLine().getParseResult();
        if (parsed.hasMatchedOption("--meta") || parsed.hasMatchedOption("--name")) {
            throw new IllegalArgumentException("give a MOUNTPOINT or --meta/--name, not both: the mount knows its volume");
        }
        if (timeoutSeconds < 1) {
            throw new IllegalArgumentException("--timeout must be at least 1 second, not " + timeoutSeconds);
        }
        Path mp = io.partfs.engine.fuse.Mounts.resolve(mountPoint); // never a stat of the mount, which may answer nothing
        SidecarOptions endpoint = new SidecarOptions();
        try {
            if (sidecar != null) {
                SidecarOptions.requireMount(mp);
                endpoint.url = sidecar;
            } else {
                endpoint.url = SidecarOptions.recordedFor(mp, volume.home()); // which requires a mount there too
            }
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(e.getMessage() + ", or use --meta/--name", e);
        }
        return endpoint.call("GET", "/status?mountpoint=" + SidecarOptions.enc(mp.toString()), java.time.Duration.ofSeconds(timeoutSeconds));
    }

    /** The status of the volume {@code meta} holds, as this command prints it. */
    static String report(MetaEngine meta, String metaUrl) throws IOException {
        return report(meta, metaUrl, null, null);
    }

    /** The status of the volume the mount {@code fs} at {@code mountPoint} serves, with what that mount has not yet stored. */
    static String report(io.partfs.engine.PartFs fs, String metaUrl, Path mountPoint) throws IOException {
        return report(fs.meta(), metaUrl, fs, mountPoint);
    }

    private static String report(MetaEngine meta, String metaUrl, io.partfs.engine.PartFs mount, Path mountPoint) throws IOException {
        java.io.StringWriter text = new java.io.StringWriter();
        PrintWriter out = new PrintWriter(text);
        VolumeFormat f = meta.volumeFormat();
        MetaEngine.Usage u = meta.usage();
        out.printf("volume:     %s (uuid %s)%n", f.name(), f.uuid());
        if (mount != null) {
            out.printf("mounted at: %s by pid %d%n", mountPoint, ProcessHandle.current().pid());
            if (meta.fenced() != null) {
                out.printf("REFUSING CHANGES: %s%n", meta.fenced());
            }
            out.printf("writes:     %s%n", unstored(mount, System.currentTimeMillis()));
            out.printf("cache:      %s%n", blockCache(mount.chunks().cache(), f.storage().startsWith("file:")));
        }
        out.printf("metadata:   %s%n", metaUrl);
        if (meta.store().durabilityProblem() != null) {
            out.printf("durability: WARNING: %s%n", meta.store().durabilityProblem());
        }
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
        java.util.OptionalLong skew = meta.clockSkewMillis();
        if (skew.isPresent()) { // a shared store: file times and write-back's backup margin need clocks that agree
            String problem = meta.clockSkewProblem(skew.getAsLong());
            out.printf("clock:      %s%n", problem != null ? "WRONG: " + problem : String.format(java.util.Locale.ROOT,
                    "this machine's is %.1f s off the metadata store's (under %d s: fine)", Math.abs(skew.getAsLong()) / 1000.0,
                    MetaEngine.CLOCK_SKEW_WARN.toSeconds()));
        }
        String notes = uploadNotes(meta.uploadNotes(), sessions);
        if (notes != null) {
            out.printf("uploads:    %s%n", notes);
        }
        out.printf("clients:    %d mounted%n", meta.liveSessions().size());
        long volumeNow = meta.volumeNowMillis(); // heartbeats are the store's clock's, not this machine's
        for (MetaEngine.Session s : sessions.values()) {
            out.printf("  session %d: %s, %s%n", s.id(), s.info(), heartbeat(s, volumeNow));
        }
        out.flush();
        return text.toString();
    }

    /**
     * The slices sessions noted as uploaded before their commit, or null when there are none: a
     * registered session's are writes under way; of an ended session's, a mount deletes those
     * never committed once no commit of theirs can arrive any more.
     */
    static String uploadNotes(List<MetaEngine.UploadNotes> notes, Map<Long, MetaEngine.Session> sessions) {
        long live = 0;
        long ended = 0;
        int endedSessions = 0;
        for (MetaEngine.UploadNotes n : notes) {
            if (sessions.containsKey(n.session())) {
                live += n.slices();
            } else if (n.slices() > 0) {
                ended += n.slices();
                endedSessions++;
            }
        }
        if (live == 0 && ended == 0) {
            return null;
        }
        // a note outlives its slice's commit by a few seconds: said, so that a mount with nothing
        // being written does not look as if it had writes in flight
        String underWay = live + " slice(s) uploaded by mounts before their commit (writes under way, or committed in the"
                + " last seconds: a note is dropped a few seconds after its commit)";
        String left = ended + " slice(s) that " + endedSessions + " ended session(s) uploaded before their commit: a mount deletes"
                + " the objects of those never committed once no commit of theirs can arrive (" + io.partfs.engine.PartFsConfig.SHARED_LIVE_COMMIT_SETTLE.toMinutes()
                + " min after their end on Redis, at once on RocksDB)";
        return ended == 0 ? underWay : live == 0 ? left : underWay + "; " + left;
    }

    /**
     * What the mount holds that is not in the object store yet: with write-back, the blocks
     * staged on this machine's disk (lost with that disk, not with the process); always, what
     * open files buffer in memory until their next fsync or close.
     */
    static String unstored(io.partfs.engine.PartFs mount, long nowMillis) {
        io.partfs.engine.data.Staging staging = mount.chunks().staging();
        String buffered = Sizes.human(mount.chunks().bufferedBytes()) + " buffered in memory";
        String mode = mount.config().writeBack() ? "write-back (fsync stages blocks on this machine's disk; they upload in the"
                + " background)" : "fsync returns once blocks are in the object store";
        if (staging == null || staging.pendingBlocks() == 0) {
            return mode + "; nothing staged, " + buffered;
        }
        long oldest = staging.oldestPendingMillis();
        return mode + "; " + staging.pendingBlocks() + " block(s), " + Sizes.human(staging.pendingBytes())
                + " staged and not yet uploaded (only on this machine's disk until then; "
                + (oldest == Long.MIN_VALUE ? "some staged by an earlier mount" : "the oldest staged "
                + Math.max(0, nowMillis - oldest) / 1000 + " s ago") + ")"
                + (staging.heldBlocks() == 0 ? "" : ", " + staging.heldBlocks() + " of them of writes an earlier mount may not"
                + " have committed: deleted, not uploaded, unless the metadata shows their commit within minutes")
                + ", " + buffered;
    }

    /** The mount's block cache: what it holds, how often it served, and blocks its checksums turned away. */
    static String blockCache(io.partfs.engine.data.BlockCache cache, boolean localObjects) {
        if (!cache.enabled()) {
            return localObjects ? "no block cache (--cache-size 0, the default for a local object directory: its blocks are on local disk already)"
                    : "no block cache (--cache-size 0): every read goes to the object store";
        }
        io.partfs.engine.data.BlockCache.Stats st = cache.stats();
        long lookups = st.hits() + st.misses();
        String text = Sizes.human(st.bytes()) + " in " + st.blocks() + " block(s) of " + Sizes.human(cache.capacity())
                + (lookups == 0 ? "" : String.format(java.util.Locale.ROOT, ", %.0f%% of %d reads served", 100.0 * st.hits() / lookups, lookups));
        long corrupt = cache.corruptBlocks();
        return corrupt == 0 ? text : text + "; " + corrupt + " block(s) did not match their checksums and were read again"
                + " from the object store: CHECK THE CACHE DISK";
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
