package io.partfs.bench.jmh;

import io.partfs.cache.PartMetadataStore;
import io.partfs.engine.testing.TempDirs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
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
 * The part-metadata cache's RocksDB store: get and put by {@code disk:relative_path} key, keys
 * drawn Zipf-distributed over a cache filled like a server's (6 metadata files per part, values
 * of the sizes ClickHouse writes), with the default 256 MiB LRU; and deletes of keys it does not hold.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 3)
@Fork(1)
public class PartMetadataCacheBench {
    private static final String[] FILES = {"checksums.txt", "columns.txt", "count.txt", "primary.idx", "partition.dat", "minmax_day.idx"};
    private static final int[] SIZES = {2600, 1400, 3, 64, 4, 4};

    @Param({"100000"})
    int parts;

    @Param({"1.0"})
    double zipfExponent;

    private Path dir;
    private PartMetadataStore store;
    private String[] keys;
    /** Keys of files next to the cached ones that the cache never holds (column files). */
    private String[] absent;
    private byte[][] values;
    private Zipf zipf;

    @Setup(Level.Trial)
    public void fill() throws Exception {
        dir = Files.createTempDirectory("partfs-jmh-cache-");
        store = PartMetadataStore.open(dir.resolve("cache"), 256L << 20, false);
        keys = new String[parts * FILES.length];
        absent = new String[keys.length];
        values = new byte[FILES.length][];
        SplittableRandom r = new SplittableRandom(1);
        for (int f = 0; f < FILES.length; f++) {
            values[f] = new byte[SIZES[f]];
            for (int i = 0; i < SIZES[f]; i++) {
                values[f][i] = (byte) r.nextInt(32, 127);
            }
        }
        for (int p = 0; p < parts; p++) {
            for (int f = 0; f < FILES.length; f++) {
                int k = p * FILES.length + f;
                keys[k] = "default:data/db/t" + (p % 200) + "/" + (20000101 + p / 200) + "_" + p + "_" + p + "_0/" + FILES[f];
                store.put(keys[k], new PartMetadataStore.Entry(k, SIZES[f], 1, values[f]));
                absent[k] = keys[k].substring(0, keys[k].lastIndexOf('/') + 1) + "c" + f + ".bin";
            }
        }
        zipf = new Zipf(keys.length, zipfExponent);
    }

    @TearDown(Level.Trial)
    public void close() throws Exception {
        store.close();
        TempDirs.deleteRecursively(dir);
    }

    @Benchmark
    public Object get(ThreadRandom rng) throws Exception {
        return store.get(keys[zipf.next(rng.random)]);
    }

    /**
     * The removal of a file the cache never held, as every column file of a merged or dropped
     * part is: a lookup that finds nothing, and no write.
     */
    @Benchmark
    public void deleteAbsent(ThreadRandom rng) throws Exception {
        store.delete(absent[zipf.next(rng.random)]);
    }

    @Benchmark
    public void put(ThreadRandom rng) throws Exception {
        int k = zipf.next(rng.random);
        int f = k % FILES.length;
        store.put(keys[k], new PartMetadataStore.Entry(k, SIZES[f], 2, values[f]));
    }
}
