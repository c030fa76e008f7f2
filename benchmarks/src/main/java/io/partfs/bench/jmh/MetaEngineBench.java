package io.partfs.bench.jmh;

import io.partfs.engine.FileType;
import io.partfs.engine.VolumeFormat;
import io.partfs.engine.meta.KvStore;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.RedisKvStore;
import io.partfs.engine.meta.RocksKvStore;
import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.TempDirs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The metadata engines (embedded RocksDB, a real local redis-server) under the operations a
 * ClickHouse part load and insert make: lookup and getattr of existing files (Zipf over 10,000),
 * and create + unlink of a file (two write transactions). The in-memory attribute cache is off
 * so every call reaches the store.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 3)
@Fork(1)
public class MetaEngineBench {
    private static final int FILES = 10_000;

    @Param({"rocksdb", "redis"})
    String engine;

    private Path dir;
    private RedisServer redis;
    private MetaEngine meta;
    private long[] inodes;
    private Zipf zipf;
    private final AtomicLong names = new AtomicLong();

    @Setup(Level.Trial)
    public void setUp() throws Exception {
        dir = Files.createTempDirectory("partfs-jmh-meta-");
        KvStore kv;
        if (engine.equals("redis")) {
            redis = RedisServer.start();
            kv = new RedisKvStore(redis.url(1));
        } else {
            kv = new RocksKvStore(dir.resolve("meta"));
        }
        meta = new MetaEngine(kv);
        meta.format(VolumeFormat.create("bench", VolumeFormat.DEFAULT_BLOCK_SIZE, dir.resolve("objects").toString()), 0, 0);
        meta.enableCache(java.time.Duration.ZERO);
        inodes = new long[FILES];
        for (int i = 0; i < FILES; i++) {
            inodes[i] = meta.mknod(MetaEngine.ROOT, "f" + i, FileType.FILE, 0644, 0, 0, 0, null).ino();
        }
        zipf = new Zipf(FILES, 1.0);
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        meta.close();
        if (redis != null) {
            redis.close();
        }
        TempDirs.deleteRecursively(dir);
    }

    @Benchmark
    public Object lookup(ThreadRandom rng) throws Exception {
        return meta.lookup(MetaEngine.ROOT, "f" + zipf.next(rng.random));
    }

    @Benchmark
    public Object getattr(ThreadRandom rng) throws Exception {
        return meta.getattr(inodes[zipf.next(rng.random)]);
    }

    @Benchmark
    public Object createAndUnlink() throws Exception {
        String name = "new" + names.incrementAndGet();
        meta.mknod(MetaEngine.ROOT, name, FileType.FILE, 0644, 0, 0, 0, null);
        return meta.unlink(MetaEngine.ROOT, name);
    }
}
