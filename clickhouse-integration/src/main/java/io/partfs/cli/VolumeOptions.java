package io.partfs.cli;

import io.partfs.engine.PartFs;
import io.partfs.engine.PartFsConfig;
import io.partfs.engine.VolumeFormat;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.MetaUrl;
import io.partfs.engine.object.ObjectStore;
import io.partfs.engine.object.StorageUrl;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import picocli.CommandLine.Option;

/**
 * Options shared by the commands that open a volume: where its metadata is, the embedded
 * default, and the object store's credentials (never printed).
 */
final class VolumeOptions {
    @Option(names = "--meta", paramLabel = "URL",
            description = {"Metadata engine: redis://[user:password@]host:port/db (shared by several machines; rediss://",
                    "for TLS, with ?tls-ca-cert-file=FILE for a certificate a private CA signed and",
                    "&tls-cert-file=FILE&tls-key-file=FILE for a client certificate;",
                    "redis-sentinel://[password@]host:port[,host:port]/db#master to follow Sentinel failovers",
                    "(rediss-sentinel:// when Sentinel and Redis speak TLS);",
                    "?timeout=90s: how long operations wait for an unreachable Redis before failing, default 30s),",
                    "or a directory for embedded RocksDB. Default: the embedded volume <home>/<name>/meta."})
    String meta;

    @Option(names = "--name", paramLabel = "NAME", defaultValue = DEFAULT_NAME,
            description = {"Name of the embedded volume used without --meta (default: ${DEFAULT-VALUE}; mount formats",
                    "only that one on first use, other names need 'partfs format NAME' or mount --storage)."})
    String name;

    @Option(names = "--home", paramLabel = "DIR",
            description = "Data home of embedded volumes (default: $PARTFS_HOME or ~/.partfs).")
    Path home;

    @Option(names = "--access-key", paramLabel = "KEY", defaultValue = "${env:PARTFS_ACCESS_KEY}",
            description = "S3 access key (or $PARTFS_ACCESS_KEY; without one, the AWS default credential chain).")
    String accessKey;

    @Option(names = "--secret-key", paramLabel = "SECRET", defaultValue = "${env:PARTFS_SECRET_KEY}", arity = "0..1",
            interactive = false, description = "S3 secret key (better: $PARTFS_SECRET_KEY, so it stays out of the process list).")
    String secretKey;

    @Option(names = "--ca-bundle", paramLabel = "FILE", defaultValue = "${env:AWS_CA_BUNDLE}",
            description = {"PEM file of CA certificates to trust, besides the JVM's, for an https S3 endpoint whose",
                    "certificate a private CA signed (or $AWS_CA_BUNDLE; ignored for http endpoints)."})
    Path caBundle;

    /** Attempts per S3 request of a filesystem this opens (mount's --io-retries). */
    int ioAttempts = 10;

    /** Longest wait for one S3 request, all its attempts (mount's --io-timeout). */
    java.time.Duration ioTimeout = java.time.Duration.ofSeconds(60);

    Path home() {
        return home != null ? home : EmbeddedVolume.defaultHome();
    }

    boolean embedded() {
        return meta == null;
    }

    /** The embedded volume's directory. */
    Path embeddedDir() {
        return home().resolve(name);
    }

    /** Without --meta, refuses to go on unless the embedded volume exists (a read-only command would not create it). */
    void requireEmbeddedVolume() {
        if (embedded() && !Files.isDirectory(embeddedDir().resolve("meta"))) {
            throw new IllegalArgumentException("no embedded volume '" + name + "' under " + home()
                    + ": give --meta URL, or --name of an existing volume");
        }
    }

    /**
     * A mount without --meta or --storage formats only the default embedded volume on first use:
     * any other name must exist already, so that a mistyped --name is refused rather than
     * mounting a new empty volume (ClickHouse would then start with no tables).
     */
    void requireEmbeddedVolumeUnlessDefault() throws IOException {
        if (!embedded() || formatStorage != null || name.equals(DEFAULT_NAME) || Files.isDirectory(embeddedDir().resolve("meta"))) {
            return;
        }
        java.util.List<String> have = new java.util.ArrayList<>();
        if (Files.isDirectory(home())) {
            try (java.util.stream.Stream<Path> s = Files.list(home())) {
                s.filter(p -> Files.isDirectory(p.resolve("meta"))).map(p -> p.getFileName().toString()).sorted().forEach(have::add);
            }
        }
        throw new IllegalArgumentException("no embedded volume '" + name + "' under " + home()
                + (have.isEmpty() ? "" : " (there: " + String.join(", ", have) + ")")
                + ": create it with 'partfs format " + name + "', or give --name of an existing volume");
    }

    static final String DEFAULT_NAME = "default";

    MetaUrl metaUrl() {
        return embedded() ? MetaUrl.parse(embeddedDir().resolve("meta").toString()) : MetaUrl.parse(meta);
    }

    StorageUrl.Credentials credentials() {
        boolean hasKey = accessKey != null && !accessKey.isBlank();
        boolean hasSecret = secretKey != null && !secretKey.isBlank();
        if (hasKey != hasSecret) {
            throw new IllegalArgumentException("give both the S3 access key and the secret key (--access-key and "
                    + "$PARTFS_SECRET_KEY), or neither to use the AWS default credential chain");
        }
        // $AWS_CA_BUNDLE set but empty means none, as for the keys (it would otherwise read as the current directory)
        Path ca = caBundle == null || caBundle.toString().isBlank() ? null : caBundle;
        return (hasKey ? new StorageUrl.Credentials(accessKey, secretKey) : StorageUrl.Credentials.DEFAULT_CHAIN).withCaBundle(ca);
    }

    /** Opens the metadata read-only (works while the volume is mounted) and checks it is formatted. */
    MetaEngine openMetaReadOnly() throws IOException {
        return loaded(metaUrl().openReadOnly());
    }

    /**
     * Refuses to go on while any client has the volume mounted (a heartbeat within the session
     * timeout), naming the first; {@code rest} follows "unmount every client first".
     */
    static void refuseWhileMounted(MetaEngine meta, String rest) throws IOException {
        java.util.List<MetaEngine.Session> mounted = java.util.List.copyOf(meta.liveSessions().values());
        if (!mounted.isEmpty()) {
            throw new IllegalStateException("volume '" + meta.volumeFormat().name() + "' is mounted by " + mounted.size() + " client(s) ("
                    + mounted.get(0).info() + (mounted.size() > 1 ? ", ..." : "") + "): unmount every client first" + rest);
        }
    }

    /** Opens the metadata for {@code partfs destroy}: a volume a destroy began to delete opens too. */
    MetaEngine openMetaForDestroy() throws IOException {
        MetaEngine m = new MetaEngine(metaUrl().open());
        try {
            m.loadForDestroy();
            return m;
        } catch (IOException | RuntimeException e) {
            m.close();
            throw e;
        }
    }

    /** An engine on {@code kv} whose volume format is loaded; closes {@code kv} on failure. */
    private static MetaEngine loaded(io.partfs.engine.meta.KvStore kv) throws IOException {
        MetaEngine m = new MetaEngine(kv);
        try {
            m.load();
            return m;
        } catch (IOException | RuntimeException e) {
            m.close();
            throw e;
        }
    }

    /** Where a mount records metadata transactions; null for commands that do not serve metrics. */
    io.partfs.engine.metrics.Metrics metrics;

    private io.partfs.engine.meta.KvStore metered(io.partfs.engine.meta.KvStore kv) {
        return metrics == null ? kv : new io.partfs.engine.metrics.MeteredKvStore(kv, metrics);
    }

    /**
     * The object storage a mount was told its volume has ({@code mount --storage}): the metadata
     * is formatted with it on first use and must name it afterwards. Null otherwise.
     */
    String formatStorage;

    /** Opens the metadata engine and checks the volume is formatted (formatting the embedded one on first use). */
    MetaEngine openMeta(boolean formatEmbedded) throws IOException {
        if (formatStorage != null) {
            return openFormatted(StorageUrl.parse(formatStorage));
        }
        if (!embedded()) {
            return loaded(metered(metaUrl().open()));
        }
        Files.createDirectories(embeddedDir());
        MetaEngine m = new MetaEngine(metered(formatEmbedded ? metaUrl().openOrCreate() : metaUrl().open()));
        try {
            if (formatEmbedded && !MetaEngine.isFormatted(m.store())) {
                // (a formatted one is loaded as it is: 'partfs config --storage' may have moved its objects)
                String storage = StorageUrl.parse(embeddedDir().resolve("objects").toString()).url();
                probe(StorageUrl.parse(storage)); // objects left by a volume whose metadata directory was deleted
                m.format(VolumeFormat.create(name, VolumeFormat.DEFAULT_BLOCK_SIZE, storage), Ids.uid(), Ids.gid(),
                        FormatCommand.DEFAULT_TRASH_HOURS);
            } else {
                m.load();
            }
            return m;
        } catch (IOException | RuntimeException e) {
            m.close();
            throw e;
        }
    }

    /**
     * Opens the metadata engine, formatting it as {@code partfs format --storage} would when it
     * holds no volume yet (the object store checked first); metadata that holds another volume,
     * or this one with another storage, is refused and left as it is.
     */
    private MetaEngine openFormatted(StorageUrl storage) throws IOException {
        java.nio.file.Path rocks = metaUrl().rocksDir();
        boolean probed = false;
        if (rocks != null && !Files.exists(rocks)) {
            probe(storage); // no metadata there yet: a refused object store leaves no empty database behind
            probed = true;
        }
        if (embedded()) {
            Files.createDirectories(embeddedDir());
        }
        MetaEngine m = new MetaEngine(metered(metaUrl().openOrCreate()));
        try {
            VolumeFormat have = m.loadIfFormatted();
            if (have == null) {
                VolumeFormat wanted = VolumeFormat.create(name, VolumeFormat.DEFAULT_BLOCK_SIZE, storage.url());
                if (!probed) {
                    MetaEngine.checkFormattable(m.store(), wanted); // another program's Redis database: before the probe
                    probe(storage);
                }
                VolumeFormat f = m.format(wanted, Ids.uid(), Ids.gid(), FormatCommand.DEFAULT_TRASH_HOURS);
                org.slf4j.LoggerFactory.getLogger(VolumeOptions.class).info("formatted volume {} (uuid {}) at {}, storage {}",
                        f.name(), f.uuid(), metaUrl(), f.storage());
            } else if (!have.name().equals(name) || !sameStorage(have.storage(), formatStorage, System::getenv)) {
                throw new IllegalArgumentException("metadata at " + metaUrl() + " holds volume '" + have.name() + "' on "
                        + have.storage() + ", not '" + name + "' on " + storage.url()
                        + ": give that volume's --name and --storage, or mount without --storage");
            }
            return m;
        } catch (IOException | RuntimeException e) {
            m.close();
            throw e;
        }
    }

    /**
     * Whether {@code given} ({@code mount --storage}) names the storage a volume recorded: the
     * same URL as read with {@code env}, or, for AWS S3 named without {@code region=}, as read
     * without the environment's region. A volume formatted before $AWS_REGION was read recorded
     * us-east-1 (where its bucket then had to be), and a pod whose AWS_REGION names another
     * region still mounts it with the same --storage.
     */
    static boolean sameStorage(String recorded, String given, java.util.function.UnaryOperator<String> env) {
        return recorded.equals(StorageUrl.parse(given, env).url()) || recorded.equals(StorageUrl.parse(given, k -> null).url());
    }

    /**
     * Checks the object store takes a write, a read and a delete, and holds no volume of this
     * name already, as {@code partfs format} does before it makes a new volume: a pod whose
     * metadata disk was lost must not format a new volume over the old one's objects.
     */
    private void probe(StorageUrl storage) throws IOException {
        try (ObjectStore objects = storage.open(credentials(), true)) {
            FormatCommand.probe(objects);
            FormatCommand.checkNoVolumeThere(objects, name, metaUrl().toString(), storage.url());
        } catch (IOException | RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IOException(e.getMessage(), e);
        }
    }

    /**
     * Opens the volume's filesystem: metadata, then the object store its format names, with the
     * configuration {@code config} makes from the opened metadata (the block cache's place
     * depends on the volume's uuid): one connection to the metadata engine, not one to look
     * and another to open.
     */
    PartFs openFs(java.util.function.Function<MetaEngine, PartFsConfig> config, boolean formatEmbedded) throws IOException {
        MetaEngine m = openMeta(formatEmbedded);
        try {
            PartFsConfig c = config.apply(m);
            ObjectStore objects = StorageUrl.parse(m.volumeFormat().storage()).open(credentials(), false, ioAttempts, ioTimeout);
            try {
                objects.checkAccess();
            } catch (IOException | RuntimeException e) {
                objects.close();
                throw e;
            }
            return PartFs.open(m, objects, c);
        } catch (IOException | RuntimeException e) {
            m.close();
            throw e;
        }
    }
}
