package io.partfs.cli;

import io.partfs.engine.PartFs;
import io.partfs.engine.PartFsConfig;
import io.partfs.engine.VolumeFormat;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.RocksKvStore;
import io.partfs.engine.object.LocalObjectStore;
import java.io.IOException;
import java.nio.file.Path;

/**
 * The embedded default: RocksDB metadata and a local object directory under
 * {@code <home>/<name>/}, formatted on first use. Needs no Redis and no S3.
 */
final class EmbeddedVolume {
    private EmbeddedVolume() {
    }

    /** {@code $PARTFS_HOME}, or {@code ~/.partfs}. */
    static Path defaultHome() {
        String env = System.getenv("PARTFS_HOME");
        return env != null && !env.isBlank() ? Path.of(env) : Path.of(System.getProperty("user.home"), ".partfs");
    }

    static PartFs open(Path home, String name) throws IOException {
        Path dir = home.resolve(name);
        MetaEngine meta = new MetaEngine(new RocksKvStore(dir.resolve("meta")));
        try {
            LocalObjectStore objects = new LocalObjectStore(dir.resolve("objects"));
            meta.format(VolumeFormat.create(name, VolumeFormat.DEFAULT_BLOCK_SIZE, objects.describe()), 0, 0);
            PartFsConfig config = PartFsConfig.builder().blockCache(dir.resolve("cache"), 1L << 30).build();
            return PartFs.open(meta, objects, config);
        } catch (IOException | RuntimeException e) {
            meta.close();
            throw e;
        }
    }
}
