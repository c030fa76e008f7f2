package io.partfs.bench.jmh;

import io.partfs.engine.data.BlockCache;
import io.partfs.engine.data.Staging;
import io.partfs.engine.object.LocalObjectStore;
import io.partfs.engine.testing.TempDirs;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
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
 * Reads of blocks staged on a write-back mount and not yet uploaded, 128 KiB at a time (a FUSE
 * read) into a direct buffer, as {@code ChunkStore} makes them: through {@link Staging#read},
 * which checks the CRC32C of every piece it touches ({@code checked}), against what it did before
 * the check: open the staged file and read the range ({@code plain}, the floor). 64 blocks of
 * 4 MiB (256 MiB, in the page cache after the first pass), uploads held back an hour. Score:
 * 128 KiB reads a second.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 2, time = 2)
@Measurement(iterations = 3, time = 3)
@Fork(1)
public class StagedReadBench {
    private static final int BLOCK = 4 << 20;
    private static final int BLOCKS = 64;
    private static final int READ = 128 << 10;

    @Param({"checked", "plain"})
    String path;

    private Path dir;
    private LocalObjectStore objects;
    private Staging staging;
    private String[] keys;
    private Path[] files;
    private final ByteBuffer dst = ByteBuffer.allocateDirect(READ);
    private long next;

    @Setup(Level.Trial)
    public void setUp() throws Exception {
        dir = Files.createTempDirectory("partfs-jmh-staged-");
        objects = new LocalObjectStore(dir.resolve("objects"));
        staging = new Staging(dir.resolve("staging"), objects, BlockCache.disabled(), 2, Duration.ofHours(1), Duration.ofSeconds(30));
        byte[] data = new byte[BLOCK];
        new java.util.Random(1).nextBytes(data);
        keys = new String[BLOCKS];
        files = new Path[BLOCKS];
        for (int i = 0; i < BLOCKS; i++) {
            keys[i] = "bench/chunks/0/0/" + (i + 1) + "_0_" + BLOCK;
            staging.stage(keys[i], data, null);
            files[i] = staging.pathIfStaged(keys[i]);
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        staging.close();
        objects.close();
        TempDirs.deleteRecursively(dir);
    }

    @Benchmark
    public int read() throws Exception {
        long n = next++;
        int block = (int) (n / (BLOCK / READ) % BLOCKS);
        int off = (int) (n % (BLOCK / READ)) * READ;
        dst.clear();
        if (path.equals("checked")) {
            if (!staging.read(keys[block], off, READ, dst)) {
                throw new IllegalStateException("block " + keys[block] + " is no longer staged");
            }
        } else {
            try (FileChannel f = FileChannel.open(files[block], StandardOpenOption.READ)) {
                while (dst.hasRemaining()) {
                    if (f.read(dst, off + dst.position()) < 0) {
                        throw new IllegalStateException(files[block] + " is short");
                    }
                }
            }
        }
        return dst.position();
    }
}
