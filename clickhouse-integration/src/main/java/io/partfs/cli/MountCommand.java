package io.partfs.cli;

import io.partfs.engine.PartFs;
import io.partfs.engine.PartFsConfig;
import io.partfs.engine.fuse.FuseOptions;
import io.partfs.engine.fuse.Mounts;
import io.partfs.engine.fuse.FuseMount;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code partfs mount}: serves a volume at a mount point until unmounted or signalled. On
 * SIGTERM or SIGINT it flushes every buffered write, waits for uploads, unmounts and exits 0.
 */
@Command(name = "mount", mixinStandardHelpOptions = true,
        description = {"Mount a volume with FUSE. Runs in the foreground until 'partfs umount',",
                "SIGTERM or SIGINT (which flush, upload, unmount and exit 0); --background",
                "returns once mounted. Without --meta it mounts the embedded volume",
                "<home>/<name> (RocksDB metadata, local objects), formatting it on first use:",
                "'partfs mount /mnt/partfs --background' is enough.",
                "",
                "FUSE: as root PartFS serves the kernel's FUSE protocol itself (--fuse-driver",
                "kernel: READDIRPLUS, one kernel inode per file); other users go through",
                "libfuse 2. Kernel caching: attributes, names and missing names are cached",
                "for 1 s on a Redis volume, so other clients' changes show within a second;",
                "a volume's only writer may raise --attr-cache, --entry-cache and",
                "--dir-entry-cache (every change then passes through this kernel), as a",
                "RocksDB volume's mount does by default (60 s, kernel driver)."})
final class MountCommand implements Callable<Integer> {
    private static final Logger log = LoggerFactory.getLogger(MountCommand.class);

    @Spec
    CommandSpec spec;

    @Mixin
    VolumeOptions volume;

    @Parameters(index = "0", paramLabel = "MOUNTPOINT", description = "Directory to mount at (created if missing; must be empty).")
    Path mountPoint;

    @Option(names = {"-d", "--background"}, description = "Start in the background and return once the mount is ready.")
    boolean background;

    @Option(names = "--storage", paramLabel = "URL",
            description = {"The volume's object storage, as 'partfs format --storage' takes it: metadata that holds no",
                    "volume yet is formatted with it (volume --name, block size 4M, the store checked first, as",
                    "'partfs format' does), and metadata that holds another volume or storage is refused. Lets a",
                    "pod's start be one process, not a format and then a mount (operator-manifests/)."})
    String storage;

    @Option(names = "--cache-dir", paramLabel = "DIR", description = "Local block cache (default: <home>/<name>/cache, or <home>/cache/<uuid>).")
    Path cacheDir;

    @Option(names = "--cache-size", paramLabel = "SIZE",
            description = {"Block cache size on disk; 0 disables it (default: 10G for S3 storage, 0 for a local",
                    "object directory, whose blocks are already on local disk)."})
    String cacheSize;

    @Option(names = "--cache-items", paramLabel = "N", defaultValue = "500000",
            description = {"Most blocks the block cache holds, whatever their size (default: ${DEFAULT-VALUE}). Its index",
                    "is on the sidecar's heap, ~150 bytes a block: small parts' files are blocks of a few hundred",
                    "bytes, so --cache-size alone would let millions of them fill the heap."})
    long cacheItems;

    @Option(names = "--free-space-ratio", paramLabel = "RATIO", defaultValue = "0.1",
            description = {"Share of the cache directory's disk to leave free (default: ${DEFAULT-VALUE}): the block cache",
                    "evicts to keep it, and with --writeback a block that would go under it is uploaded before fsync",
                    "returns instead of staged, so a full disk slows writes down and fails none."})
    double freeSpaceRatio;

    @Option(names = "--fuse-driver", paramLabel = "kernel|libfuse",
            description = "FUSE implementation: 'kernel' (PartFS on /dev/fuse; needs root, the default for root) "
                    + "or 'libfuse' (libfuse 2 through jnr-fuse and fusermount; the default for other users).")
    String fuseDriver;

    @Option(names = "--no-prefetch-parts",
            description = "Do not list MergeTree part directories ahead when a table directory is listed "
                    + "(kernel driver; the kernel then learns each file of a part from a stat of its own).")
    boolean noPrefetchParts;

    @Option(names = "--no-passthrough",
            description = {"Do not hand reads of files held whole in one locally cached block to the kernel (FUSE",
                    "passthrough, Linux 6.9+, kernel driver). With it the kernel reads such files from local disk",
                    "without asking PartFS; a reader then does not see writes made while it keeps the file open."})
    boolean noPassthrough;

    @Option(names = "--no-write-passthrough",
            description = {"With --writeback, write new files through PartFS instead of letting the kernel write them",
                    "into local staging files itself (FUSE passthrough, Linux 6.13+ for the staging filesystem's",
                    "fine-grained times). --no-passthrough turns this off too."})
    boolean noWritePassthrough;

    @Option(names = "--readahead", paramLabel = "SIZE", defaultValue = "16M",
            description = {"How far the kernel reads ahead of a sequential reader (default: ${DEFAULT-VALUE}; 0 keeps the",
                    "kernel's 128K). The kernel then asks PartFS for several 1 MiB pieces at once; random reads are",
                    "not affected. Set as root only (read_ahead_kb of the mount in /sys/class/bdi)."})
    String readahead;

    @Option(names = "--unmount-grace", paramLabel = "SECONDS", defaultValue = "30",
            description = {"How long a mount still in use when stopped (partfs umount, SIGTERM) stays attached and serving",
                    "while it waits for the files open there to close (default: ${DEFAULT-VALUE}). After it the mount is",
                    "detached lazily: open files keep working as long again at most, then get errors; new opens no longer",
                    "reach PartFS."})
    long unmountGrace;

    @Option(names = "--unmount-upload-wait", paramLabel = "SECONDS", defaultValue = "60",
            description = {"How long a stopping mount waits for an unreachable object store (default: ${DEFAULT-VALUE}; 0: not",
                    "at all): the writes buffered for files still open are lost when it has been unreachable that long",
                    "in all; with --writeback, staged blocks are left for the next mount after that long without an upload."})
    long unmountUploadWait;

    @Option(names = "--attr-cache", paramLabel = "SECONDS",
            description = {"Kernel attribute cache timeout (default: " + SOLE_WRITER_CACHE + " for a RocksDB volume with the kernel",
                    "driver, 1 for a Redis one; 0 with libfuse, whose path API gives each hard link its own kernel",
                    "inode, so nlink would drift after ln)."})
    Double attrCache;

    @Option(names = "--entry-cache", paramLabel = "SECONDS",
            description = {"Kernel file entry cache timeout (default: " + SOLE_WRITER_CACHE + " for a RocksDB volume with the kernel",
                    "driver: its mount is its only writer, RocksDB lets one process open it; else 1)."})
    Double entryCache;

    @Option(names = "--dir-entry-cache", paramLabel = "SECONDS",
            description = {"Kernel directory entry cache timeout (default: as for --entry-cache). With --fuse-driver libfuse,",
                    "which has one entry timeout for all names, the smaller of --entry-cache and this one applies."})
    Double dirEntryCache;

    /**
     * Seconds the kernel caches names and attributes by default when this mount is the volume's
     * only writer: every change then passes through this kernel, which keeps its caches right.
     */
    static final int SOLE_WRITER_CACHE = 60;

    @Option(names = "--meta-cache-entries", paramLabel = "N", defaultValue = "500000",
            description = {"File attributes and directory listings the sidecar keeps in memory (default: ${DEFAULT-VALUE},",
                    "~300 bytes of heap each, ~150 MB in all). A server loading parts looks each of their files up",
                    "here instead of asking the metadata engine; past the bound the entries read longest ago are",
                    "evicted (partfs_meta_cache_evictions_total). Not the part-metadata cache (--metadata-cache-*)."})
    int metaCacheEntries;

    @Option(names = "--atime-mode", paramLabel = "noatime|relatime", defaultValue = "noatime",
            description = {"When reads update access times (default: ${DEFAULT-VALUE}, as with JuiceFS: ClickHouse never",
                    "reads atime, and under relatime the first read of each new file costs a metadata transaction)."})
    String atimeMode;

    @Option(names = "--writeback",
            description = {"Write-back: fsync and close return once the data is durable on local disk (in",
                    "<cache-dir>/staging); it is uploaded in the background, and at unmount or the next mount",
                    "with this cache dir. Faster writes; until uploaded, other machines of a shared volume",
                    "cannot read it, and losing the local disk loses it. Off by default."})
    boolean writeBack;

    @Option(names = "--defer-part-close", negatable = true, defaultValue = "true", fallbackValue = "true",
            description = {"A close of a file in a directory named tmp_* that this mount made (ClickHouse writing a",
                    "part) starts the upload and returns; the directory's rename waits for all of them and fails",
                    "if one failed, so a part exists only once its files are committed. An INSERT's files then",
                    "upload side by side instead of one after another. On by default; --no-defer-part-close",
                    "makes every close wait for its own upload."})
    boolean deferPartClose;

    @Option(names = "--backup-meta", paramLabel = "SECONDS", defaultValue = "3600",
            description = {"Back the volume's metadata up into its object store this often (default: ${DEFAULT-VALUE}; 0: never),",
                    "under <volume>/meta/, thinned to all of two days, one a day for two weeks, one a week for two",
                    "months. Of several mounts of a shared volume one makes each backup. 'partfs load --from-backup'",
                    "restores one, e.g. after losing the disk of an embedded volume's metadata. A backup reads the",
                    "whole metadata: about 13 s of one core and 23 MiB in the store per million files (RocksDB)."})
    double backupMeta;

    @Option(names = "--upload-delay", paramLabel = "SECONDS", defaultValue = "0",
            description = {"With --writeback: upload a block this long after it was written (default: ${DEFAULT-VALUE});",
                    "a file deleted sooner, like a temporary part of a merge, is never uploaded."})
    double uploadDelay;

    @Option(names = "--io-retries", paramLabel = "N", defaultValue = "10",
            description = {"Attempts per object request before it fails, with exponential backoff (default:",
                    "${DEFAULT-VALUE}; a write is then tried twice more before fsync or close reports EIO). Once one",
                    "request has failed all its attempts for want of a connection, requests are tried once each,",
                    "and only after a short probe got an answer, until the store answers again, so an outage",
                    "fails callers in one round of retries."})
    int ioRetries;

    @Option(names = "--io-timeout", paramLabel = "SECONDS", defaultValue = "60",
            description = {"Longest wait for one object request, all its attempts together (default: ${DEFAULT-VALUE}).",
                    "A request that gets no answer in time marks the store unreachable: then requests are sent",
                    "only after a short probe got an answer, and fail at once (EIO) otherwise, so a store that",
                    "hangs costs callers one timeout, not one per request. Raise it for a slow link."})
    int ioTimeout;

    @Option(names = "--io-threads", paramLabel = "N", defaultValue = "16", description = "Parallel object uploads and downloads (default: ${DEFAULT-VALUE}).")
    int ioThreads;

    @Option(names = "--write-buffer", paramLabel = "SIZE", defaultValue = "64M", description = "Buffered writes per file before an upload is forced (default: ${DEFAULT-VALUE}).")
    String writeBuffer;

    @Option(names = "--write-buffer-total", paramLabel = "SIZE", defaultValue = "256M",
            description = {"Buffered writes of all files together before the writing file is flushed (default:",
                    "${DEFAULT-VALUE}); with the JVM heap (-Xmx512m in scripts/partfs) it bounds the sidecar's memory."})
    String writeBufferTotal;

    @Option(names = "--metadata-cache-dir", paramLabel = "DIR",
            description = "Part-metadata cache (RocksDB) directory (default: <home>/<name>/metadata-cache, or <home>/metadata-cache/<uuid>).")
    Path metadataCacheDir;

    @Option(names = "--metadata-cache-lru-size", paramLabel = "SIZE", defaultValue = "256M",
            description = {"RocksDB block cache of the part-metadata cache, ClickHouse's lru_cache_size (default:",
                    "${DEFAULT-VALUE}); 0 keeps no blocks in memory, every read then goes to RocksDB's files."})
    String metadataCacheLruSize;

    @Option(names = "--continue-if-corrupted",
            description = "If the part-metadata cache cannot be opened, move it aside and start empty instead of refusing to mount.")
    boolean continueIfCorrupted;

    @Option(names = "--metadata-cache-tables", paramLabel = "TABLES",
            description = {"Tables whose part metadata is cached besides those whose DDL says",
                    "SETTINGS use_metadata_cache = true: 'all', or db.table and db.* separated by commas."})
    String metadataCacheTables;

    @Option(names = "--no-metadata-cache", description = "Do not open the part-metadata cache at all.")
    boolean noMetadataCache;

    @Option(names = "--disk-name", paramLabel = "NAME", defaultValue = "default",
            description = "ClickHouse disk name of this mount: the prefix of cache keys disk:relative_path (default: ${DEFAULT-VALUE}).")
    String diskName;

    @Option(names = "--http-address", paramLabel = "HOST:PORT", defaultValue = "127.0.0.1:9569",
            description = {"Serve /metrics (Prometheus), the part-metadata cache rows behind the ClickHouse view, and",
                    "table registration here (default: ${DEFAULT-VALUE}; 'none' turns it off). Any address",
                    "other than loopback needs a bearer token in $" + HTTP_TOKEN_ENV + "."})
    String httpAddress;

    /** The server whose running queries tell which rows a read of the view needs. */
    @Mixin
    ClickHouseOptions clickhouse;

    static final String HTTP_TOKEN_ENV = "PARTFS_HTTP_TOKEN";

    @Option(names = "--config", paramLabel = "FILE",
            description = {"Properties file of option defaults by long name, e.g. metadata-cache-tables=all;",
                    "options given on the command line win."})
    Path config;

    @Option(names = "-o", paramLabel = "OPTION", split = ",",
            description = "Extra FUSE mount options, as mount(8) takes them: -o nonempty, or several in one -o a,b.")
    List<String> fuseOptions = new ArrayList<>();

    @Override
    public Integer call() throws Exception {
        if (config != null && !Files.isReadable(config)) {
            throw new IllegalArgumentException("cannot read the config file " + config + ": check the path");
        }
        Path mp = Mounts.resolve(mountPoint); // as mountinfo will name it, also when given through a symlink
        boolean deadMount = checkMountPoint(mp);
        FuseOptions fuse = fuseOptions();
        if (metaCacheEntries < 1_000) {
            throw new IllegalArgumentException("--meta-cache-entries must be at least 1000 (a part's files and listing take ~100), not "
                    + metaCacheEntries);
        }
        config(null, false); // checks the sizes before anything starts
        if (ioRetries < 1 || ioRetries > 100) {
            throw new IllegalArgumentException("--io-retries must be between 1 and 100, not " + ioRetries);
        }
        volume.ioAttempts = ioRetries;
        if (ioTimeout < 1 || ioTimeout > 3600) {
            throw new IllegalArgumentException("--io-timeout must be between 1 and 3600 seconds, not " + ioTimeout);
        }
        volume.ioTimeout = java.time.Duration.ofSeconds(ioTimeout);
        if (unmountUploadWait < 0 || unmountUploadWait > 3600) {
            throw new IllegalArgumentException("--unmount-upload-wait must be between 0 and 3600 seconds, not " + unmountUploadWait);
        }
        if (storage != null) {
            io.partfs.engine.object.StorageUrl.parse(storage); // a malformed URL fails before anything starts
            volume.formatStorage = storage;
        }
        volume.requireEmbeddedVolumeUnlessDefault();
        if (!httpAddress.equals("none")) {
            io.partfs.cli.http.SidecarHttpServer.checkAddress(httpAddress, System.getenv(HTTP_TOKEN_ENV));
        }
        clickhouse.client(); // checks the URL
        io.partfs.cache.TableSelector.parse(metadataCacheTables);
        Sizes.parse(metadataCacheLruSize, "metadata cache LRU size");
        return background ? startInBackground(mp) : serve(mp, fuse, deadMount);
    }

    /**
     * Refuses a mount point that is mounted, not a directory or not empty; returns true if it
     * holds a dead PartFS mount, which {@link #serve} takes down just before it mounts.
     */
    private boolean checkMountPoint(Path mp) throws IOException, InterruptedException {
        String type = Mounts.typeAt(mp);
        Mounts.Answer answer = "fuse.partfs".equals(type) ? Mounts.ask(mp, Mounts.ANSWER_TIMEOUT) : Mounts.Answer.SERVES;
        if (answer == Mounts.Answer.SILENT) {
            abortSilentMount(mp);
            return true;
        } else if (answer == Mounts.Answer.DISCONNECTED) {
            return true; // its directory can only be checked once it is taken down
        } else if (type != null) {
            throw new IllegalArgumentException(mp + " is already mounted (" + type + "): unmount it first"
                    + ("fuse.partfs".equals(type) ? " with " + UmountCommand.commandFor(mp) : ""));
        }
        checkDirectory(mp);
        return false;
    }

    private void checkDirectory(Path mp) throws IOException {
        if (Files.exists(mp) && !Files.isDirectory(mp)) {
            throw new IllegalArgumentException("mount point " + mp + " is not a directory: choose a directory");
        }
        if (Files.isDirectory(mp) && !fuseOptions.contains("nonempty")) {
            try (Stream<Path> s = Files.list(mp)) {
                if (s.findAny().isPresent()) {
                    throw new IllegalArgumentException("mount point " + mp + " is not empty: use an empty directory (or -o nonempty)");
                }
            }
        }
    }

    /**
     * Deals with a PartFS mount at {@code mp} that answered nothing. While a PartFS process
     * still runs for it (stopped, or stuck), refuses: that process holds its writes. Otherwise
     * its process exited while a thread of it waited on its own mount, which keeps the FUSE
     * connection open with nobody to answer, and every process touching the mount (ClickHouse)
     * hangs: aborts the connection, which fails their calls and leaves a dead mount, taken down
     * as any other.
     */
    private void abortSilentMount(Path mp) throws IOException {
        OptionalLong pid = new RunFiles(volume.home()).livePid(mp);
        if (pid.isEmpty() || pid.getAsLong() == ProcessHandle.current().pid()) {
            pid = UmountCommand.servingProcess(mp);
        }
        if (pid.isPresent() && pid.getAsLong() != ProcessHandle.current().pid()
                && ProcessHandle.of(pid.getAsLong()).map(UmountCommand::running).orElse(false)) {
            throw new IllegalStateException("the PartFS mount at " + mp + " answers nothing, and its process " + pid.getAsLong()
                    + " still runs (stopped or stuck): see its log, end it (kill -9 " + pid.getAsLong() + "), then mount again");
        }
        Mounts.abortConnection(mp);
        spec.commandLine().getErr().printf("partfs: the mount at %s answered nothing for %d s and no PartFS process serves it:"
                + " aborted its FUSE connection, so the processes waiting on it got errors%n", mp, Mounts.ANSWER_TIMEOUT.toSeconds());
    }

    /**
     * Takes down a PartFS mount whose process exited without unmounting (SIGKILL, out of memory):
     * it only answers ENOTCONN, so a restarted sidecar would otherwise fail on it for ever. Lazily
     * (MNT_DETACH), since ClickHouse may still hold files open there; nothing can be flushed.
     * Only once the volume is open: until the new mount shows, the path leads to the bare
     * directory beneath, where a process (ClickHouse) sees an empty disk instead of ENOTCONN,
     * and a mount that cannot open its volume leaves the dead mount as it found it.
     */
    private void takeDownDeadMount(Path mp) throws IOException, InterruptedException {
        if (!Mounts.disconnected(mp)) { // since the check: taken down by another, or mounted by another
            checkMountPoint(mp);
            return;
        }
        UmountCommand.detachDeadMount(mp);
        spec.commandLine().getErr().printf("partfs: took down the mount at %s left by a PartFS process that exited "
                + "without unmounting (its buffered writes were lost with it; fsynced ones were not)%n", mp);
    }

    private FuseOptions fuseOptions() {
        FuseOptions.Driver driver = fuseDriver != null ? FuseOptions.Driver.parse(fuseDriver) : FuseOptions.Driver.preferred();
        // a RocksDB volume is open in one process only: its mount is its only writer (fsck, gc, status read it read-only)
        boolean soleWriter = driver == FuseOptions.Driver.KERNEL && !volume.metaUrl().isRedis();
        double fallback = soleWriter ? SOLE_WRITER_CACHE : 1;
        double entry = entryCache != null ? entryCache : fallback;
        double dirEntry = dirEntryCache != null ? dirEntryCache : fallback;
        FuseOptions.Builder b = FuseOptions.builder().driver(driver).entryTimeout(entry).dirEntryTimeout(dirEntry)
                .negativeTimeout(Math.min(entry, dirEntry)).allowOther(Ids.uid() == 0)
                .prefetchParts(!noPrefetchParts).passthrough(!noPassthrough).writePassthrough(!noWritePassthrough)
                .readahead(Sizes.parse(readahead, "readahead")).unmountGrace(java.time.Duration.ofSeconds(unmountGrace));
        if (attrCache != null) {
            b.attrTimeout(attrCache);
        } else if (soleWriter) {
            b.attrTimeout(SOLE_WRITER_CACHE);
        }
        fuseOptions.stream().filter(o -> !o.equals("nonempty")).forEach(b::option);
        if (fuseOptions.contains("nonempty")) {
            b.option("nonempty");
        }
        return b.build();
    }

    private final io.partfs.engine.metrics.Metrics metrics = new io.partfs.engine.metrics.Metrics();

    private PartFsConfig config(String uuid, boolean s3) {
        long cache = cacheSize != null ? Sizes.parse(cacheSize, "cache size") : s3 ? 10L << 30 : 0;
        Path dir = cacheDir != null ? cacheDir
                : volume.embedded() ? volume.embeddedDir().resolve("cache") : volume.home().resolve("cache").resolve(uuid == null ? "pending" : uuid);
        return PartFsConfig.builder().metrics(metrics).blockCache(dir, cache).blockCacheBlocks(cacheItems).freeSpaceRatio(freeSpaceRatio).ioThreads(ioThreads)
                .atimeMode(PartFsConfig.AtimeMode.parse(atimeMode)).metaCacheEntries(metaCacheEntries).writeBack(writeBack).deferPartFlushes(deferPartClose)
                .uploadDelay(java.time.Duration.ofMillis(Math.round(uploadDelay * 1000)))
                .writeBackUploadWait(java.time.Duration.ofSeconds(unmountUploadWait))
                .metaBackupInterval(java.time.Duration.ofMillis(Math.round(backupMeta * 1000)))
                .writeBufferPerFile(Sizes.parse(writeBuffer, "write buffer"))
                .writeBufferTotal(Sizes.parse(writeBufferTotal, "total write buffer")).build();
    }

    /**
     * {@code fs.syncAll()}, logging every 5 s what is left of the buffered writes: a full write
     * buffer (256 MiB by default) takes minutes to upload to a distant store, and
     * {@code partfs umount} shows the mount's log lines while it waits. A store found unreachable
     * is waited for ({@code storeWait}, probing it every second), then the writes are tried
     * again: an outage of a few seconds must not cost the writes of files still open.
     */
    private static void syncShowingProgress(PartFs fs, Path mp, java.time.Duration storeWait) throws IOException {
        java.util.concurrent.ScheduledExecutorService ticker = daemonTicker("partfs-unmount-progress");
        ticker.scheduleAtFixedRate(() -> log.info("unmounting {}: {} KiB of buffered writes left to upload", mp,
                fs.chunks().bufferedBytes() >> 10), 5, 5, java.util.concurrent.TimeUnit.SECONDS);
        io.partfs.engine.object.ObjectStore store = fs.chunks().objects();
        long giveUp = 0;
        try {
            while (true) {
                try {
                    fs.syncAll();
                    return;
                } catch (IOException e) {
                    if (!store.unreachable() || storeWait.isZero()) {
                        throw e; // refused, or the metadata failed: waiting would not help
                    }
                    if (giveUp == 0) {
                        giveUp = System.nanoTime() + storeWait.toNanos();
                        log.warn("unmounting {}: the object store is unreachable; waiting up to {} s for it to answer, to upload "
                                + "{} KiB of buffered writes (--unmount-upload-wait)", mp, storeWait.toSeconds(),
                                fs.chunks().bufferedBytes() >> 10);
                    }
                    while (!store.answers()) {
                        if (System.nanoTime() - giveUp > 0) {
                            throw e;
                        }
                        java.util.concurrent.locks.LockSupport.parkNanos(1_000_000_000L); // between probes
                    }
                    log.info("unmounting {}: the object store answers again; uploading the buffered writes", mp);
                    // giveUp stays: a store whose probes get answers while its uploads keep failing must not hold the stop forever
                }
            }
        } finally {
            ticker.shutdownNow();
        }
    }

    /** A single daemon thread named {@code name} for periodic work. */
    private static java.util.concurrent.ScheduledExecutorService daemonTicker(String name) {
        return java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
            Thread th = new Thread(r, name);
            th.setDaemon(true);
            return th;
        });
    }

    /** Runs the mount in this process until unmounted or signalled. */
    private int serve(Path mp, FuseOptions fuseOpts, boolean deadMount) throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        volume.metrics = metrics;
        io.partfs.engine.metrics.ProcessMetrics.register(metrics);
        PartFs fs = volume.openFs(meta -> config(meta.volumeFormat().uuid(),
                io.partfs.engine.object.StorageUrl.parse(meta.volumeFormat().storage()).isS3()), volume.embedded());
        RunFiles run = new RunFiles(volume.home());
        io.partfs.cache.PartMetadataCache cache;
        try {
            cache = noMetadataCache ? null : openCache(fs);
        } catch (IOException | RuntimeException e) {
            fs.close();
            throw e;
        }
        FuseMount fuse = FuseMount.create(fs, cache, fuseOpts);
        MountPointGuard guard = null;
        try {
            if (deadMount) {
                takeDownDeadMount(mp);
                checkDirectory(mp);
            }
            Files.createDirectories(mp); // only now that the volume opened, so a bad --meta leaves nothing behind
            guard = MountPointGuard.apply(mp, Ids.uid() == 0, fuseOptions.contains("nonempty"));
        } catch (Exception e) {
            try {
                fs.close();
            } finally {
                if (cache != null) {
                    cache.store().close();
                }
            }
            throw e;
        }
        IOException lost = null;
        CountDownLatch stop = new CountDownLatch(1);
        io.partfs.cli.http.SidecarHttpServer http = null;
        try {
            // before mounting: a SIGTERM as soon as the mount shows must still flush and unmount
            Signals.onTermination(stop::countDown);
            http = startHttp(cache, new io.partfs.cli.http.SidecarHttpServer.Volume(fs, mp,
                    () -> StatusCommand.report(fs, volume.metaUrl().toString(), mp)));
            endDeadPredecessorSession(run, mp, fs);
            // the session first: a file opened and unlinked as soon as the mount shows is held for it
            fs.startSession(String.format("%s pid %d at %s since %s",
                    hostname(), ProcessHandle.current().pid(), mp, Instant.now()));
            run.writeSession(mp, fs.format().uuid(), fs.meta().session());
            fuse.mountAndWait(mp, fuseOpts);
            if (http != null) {
                run.writeHttp(mp, http.host() + ":" + http.port());
            }
            run.writePid(mp); // last: 'mount --background' returns when it shows, so all else is ready by then
            Thread watcher = new Thread(() -> {
                try {
                    fuse.awaitUnmounted();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                stop.countDown();
            }, "partfs-unmount-watch");
            watcher.setDaemon(true);
            watcher.start();
            out.printf("partfs: mounted volume %s at %s (metadata %s, storage %s)%n", fs.format().name(), mp,
                    volume.metaUrl(), fs.format().storage());
            out.flush();
            java.util.concurrent.ScheduledExecutorService saver = daemonTicker("partfs-cache-counters");
            if (cache != null) {
                var serverTables = new io.partfs.cli.clickhouse.ServerTables(clickhouse.client(), cache.tables());
                saver.scheduleWithFixedDelay(serverTables::sync, 0, 30, java.util.concurrent.TimeUnit.SECONDS);
                saver.scheduleAtFixedRate(() -> {
                    try {
                        cache.store().saveCounters(); // for 'partfs cache stats' while mounted
                    } catch (IOException e) {
                        log.debug("cache counters not saved: {}", e.toString());
                    }
                }, 10, 10, java.util.concurrent.TimeUnit.SECONDS);
            }
            stop.await();
            saver.shutdownNow();
            log.info("unmounting {}: uploading {} KiB of buffered writes", mp, fs.chunks().bufferedBytes() >> 10);
        } finally {
            try {
                if (http != null) {
                    http.close();
                }
                try {
                    syncShowingProgress(fs, mp, java.time.Duration.ofSeconds(unmountUploadWait));
                } catch (IOException e) {
                    // unmount all the same: a mount left behind by an exited process only answers ENOTCONN
                    lost = e;
                    long dropped = fs.chunks().discardAll(); // closing would only wait for the store again
                    log.error("unmounting {}: {}; those writes ({} KiB) are lost (the writer never saw them durable: "
                            + "ClickHouse re-fetches or re-merges such parts)", mp, e.getMessage(), dropped >> 10);
                }
                boolean ended = fuse.unmount();
                if (guard != null && ended && !Mounts.isMounted(mp)) {
                    guard.lift();
                } else if (guard != null) {
                    log.warn("{} keeps mode 000 beneath the mount: files were still open on it, so ClickHouse may still run", mp);
                }
                fs.endSession();
            } finally {
                try {
                    fs.close(); // after a failed sync this tries the uploads once more
                } finally {
                    if (cache != null) {
                        cache.store().close();
                    }
                    run.removePid(mp);
                }
            }
        }
        if (lost != null) {
            String line = "unmounted " + mp + " but " + lost.getMessage() + " (details in " + run.logFile(mp) + ")";
            run.writeLost(mp, line); // for partfs umount, which waited for this process
            throw new IOException(line, lost);
        }
        out.printf("partfs: unmounted %s%n", mp);
        return 0;
    }

    /**
     * Ends the session of the mount this one replaces at {@code mp}, if it exited without
     * unmounting: its flock(2) locks (the status file of the ClickHouse that ran on it) would
     * otherwise keep a restarted ClickHouse out for {@link io.partfs.engine.meta.MetaEngine#SESSION_TIMEOUT},
     * and the unlinked files it held open would wait as long to be deleted.
     */
    private void endDeadPredecessorSession(RunFiles run, Path mp, PartFs fs) throws IOException {
        long sid = run.deadPredecessorSession(mp, fs.format().uuid());
        if (sid != 0 && fs.meta().removeSession(sid)) {
            spec.commandLine().getErr().printf("partfs: ended session %d of the mount that served %s before and exited "
                    + "without unmounting (its file locks released)%n", sid, mp);
        }
    }

    /**
     * This machine's name for the session's description, as hostname(1) prints it: the kernel's,
     * not looked up. InetAddress.getLocalHost() resolves it, and failed the mount ("vm: Unable to
     * resolve host vm") where the name is in no hosts file or DNS, as in some containers.
     */
    static String hostname() {
        try {
            String name = Files.readString(Path.of("/proc/sys/kernel/hostname")).trim();
            if (!name.isEmpty()) {
                return name;
            }
        } catch (IOException e) {
            // not Linux's /proc: the description says so instead
        }
        return "unknown-host";
    }

    /** Starts the HTTP endpoint unless turned off; its failure stops the mount before it starts. */
    private io.partfs.cli.http.SidecarHttpServer startHttp(io.partfs.cache.PartMetadataCache cache,
            io.partfs.cli.http.SidecarHttpServer.Volume volume) throws IOException {
        if (httpAddress.equals("none")) {
            return null;
        }
        if (cache != null) {
            metrics.counterFrom("partfs_metadata_cache_hits_total", "Part-metadata files served from the part-metadata cache.", cache::served);
            metrics.counterFrom("partfs_metadata_cache_misses_total", "Part-metadata file reads of cached tables the cache could not serve.",
                    () -> cache.lookups() - cache.served());
            metrics.counterFrom("partfs_metadata_cache_fills_total", "Part-metadata files stored into the cache.", cache::filled);
            metrics.gauge("partfs_metadata_cache_entries", "Entries in the part-metadata cache (counted at most a minute ago).",
                    () -> cache.store().approximate().entries());
            metrics.gauge("partfs_metadata_cache_bytes", "Bytes of the part-metadata cache (counted at most a minute ago).",
                    () -> cache.store().approximate().bytes());
        }
        var sources = new io.partfs.cli.http.SidecarHttpServer.Sources(metrics, cache,
                new io.partfs.cli.http.RunningQueries(clickhouse.client()), ClickHouseCommand.VIEW, volume);
        io.partfs.cli.http.SidecarHttpServer http;
        try {
            http = io.partfs.cli.http.SidecarHttpServer.start(httpAddress, System.getenv(HTTP_TOKEN_ENV), sources);
        } catch (IllegalArgumentException e) {
            if (spec.commandLine().getParseResult().hasMatchedOption("--http-address") || !e.getMessage().startsWith("cannot listen")) {
                throw e;
            }
            // the default port is taken (another mount on this machine): serve the files anyway
            log.warn("HTTP endpoint not started: {} is in use (another mount?); give this mount its own --http-address "
                    + "for /metrics and the ClickHouse view", httpAddress);
            return null;
        }
        log.info("HTTP endpoint on {}:{} (/metrics, /metadata-cache, /tables, /warmup)", http.host(), http.port());
        return http;
    }

    /** Opens the part-metadata cache and learns from the table DDL already on the volume. */
    private io.partfs.cache.PartMetadataCache openCache(PartFs fs) throws IOException {
        Path dir = metadataCacheDir != null ? metadataCacheDir
                : volume.embedded() ? volume.embeddedDir().resolve("metadata-cache")
                : volume.home().resolve("metadata-cache").resolve(fs.format().uuid());
        io.partfs.cache.PartMetadataStore store = io.partfs.cache.PartMetadataStore.open(dir,
                Sizes.parse(metadataCacheLruSize, "metadata cache LRU size"), continueIfCorrupted);
        try {
            io.partfs.cache.TableSelector tables = io.partfs.cache.TableSelector.parse(metadataCacheTables);
            io.partfs.cache.PartMetadataCache cache = new io.partfs.cache.PartMetadataCache(store, diskName, tables,
                    io.partfs.cache.PartMetadataCache.reader(fs));
            TableDdl.learnAll(fs, tables);
            store.registeredTables().forEach(tables::registerLine);
            log.info("part-metadata cache {}: disk '{}', tables: {}{}{}", dir, diskName,
                    tables.selectsAll() ? "all" : metadataCacheTables == null ? "" : metadataCacheTables + " ",
                    tables.ddlSelected().isEmpty() ? "" : " and by DDL " + tables.ddlSelected(),
                    tables.registered().isEmpty() ? "" : ", registered " + tables.registered());
            return cache;
        } catch (IOException | RuntimeException e) {
            store.close();
            throw e;
        }
    }

    /** Starts this command again without --background in a new session, and waits for the mount. */
    private int startInBackground(Path mp) throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        List<String> args = new ArrayList<>(spec.commandLine().getParseResult().originalArgs());
        args.removeIf(a -> a.equals("--background") || a.equals("-d"));
        List<String> cmd = new ArrayList<>();
        cmd.add("setsid");
        cmd.add(ProcessHandle.current().info().command().orElse("java"));
        cmd.addAll(java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments());
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(Main.class.getName());
        cmd.addAll(args);
        RunFiles run = new RunFiles(volume.home());
        Path logFile = run.rotateLog(mp);
        Process child = new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.to(logFile.toFile()))
                .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null"))).start();
        long deadline = System.nanoTime() + 120_000_000_000L;
        // the child's own pid in the pid file, not any live one: a killed mount's process not reaped
        // yet, with its dead mount still at the path, would pass for the new mount
        while (!"fuse.partfs".equals(Mounts.typeAt(mp)) || run.livePid(mp).orElse(-1) != child.pid()) {
            if (!child.isAlive()) {
                throw new IllegalStateException("mount failed: " + lastLine(logFile) + " (log: " + logFile + ")");
            }
            if (System.nanoTime() > deadline) {
                child.destroy();
                throw new IllegalStateException("mount did not become ready within 120 s (log: " + logFile + ")");
            }
            java.util.concurrent.locks.LockSupport.parkNanos(50_000_000L); // poll interval
        }
        for (String line : Files.readAllLines(logFile)) { // what the mount took down, said here too
            if (line.startsWith("partfs: took down ")) {
                spec.commandLine().getErr().println(line);
            }
        }
        out.printf("partfs: mounted %s in the background (pid %d, log %s); stop it with: %s%n",
                mp, child.pid(), logFile, UmountCommand.commandFor(mp));
        return 0;
    }

    private static String lastLine(Path logFile) throws IOException {
        List<String> lines = Files.readAllLines(logFile);
        for (int i = lines.size() - 1; i >= 0; i--) {
            if (lines.get(i).startsWith("partfs: ")) {
                return lines.get(i).substring("partfs: ".length());
            }
        }
        return lines.isEmpty() ? "the mount process exited" : lines.get(lines.size() - 1);
    }
}
