package io.partfs.bench;

import io.partfs.engine.PartFs;
import io.partfs.engine.data.ChunkStore;
import io.partfs.engine.data.VolumeCheck;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.RedisKvStore;
import io.partfs.engine.object.ObjectStore;
import io.partfs.engine.object.S3ObjectStore;
import io.partfs.engine.testing.LatencyProxy;
import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.S3Server;
import io.partfs.engine.testing.StoreFill;
import io.partfs.engine.testing.TempDirs;
import io.partfs.engine.testing.TestVolume;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * What {@code partfs fsck} costs on a shared volume (Redis metadata, s3proxy behind the latency
 * proxy), and how its object listing compares with paging through the whole volume as before
 * round 13: a volume of small files is written through the engine (no FUSE: the files are the
 * point, not the writes), then, at each latency, the block objects are listed by paging through
 * the volume's prefix one page at a time, and by directory ({@link ObjectStore#scan(String, int,
 * int, ObjectStore.IoConsumer)}) with 1, 4 and 16 listings at once, and the whole check runs
 * (chunk scan, tree walk, listing) as fsck does.
 */
@Command(name = "fsck-bench", mixinStandardHelpOptions = true,
        description = "fsck's cost on a Redis + S3 volume of small files, and its object listing by page against by directory.")
public final class FsckBench implements Callable<Integer> {
    @Option(names = "--files", defaultValue = "100000", description = "Files in the volume, a thousand per directory (default: ${DEFAULT-VALUE}).")
    int files;

    @Option(names = "--latency", split = ",", defaultValue = "0,20,100", description = "S3 request latencies in ms (default: ${DEFAULT-VALUE}).")
    List<Double> latencies;

    @Option(names = "--delete-objects", defaultValue = "2000",
            description = "Objects deleted one request each (as before round 13) and a thousand a request, at --delete-latency (default: ${DEFAULT-VALUE}).")
    int deleteObjects;

    @Option(names = "--delete-latency", defaultValue = "20", description = "S3 request latency in ms for the deletions (default: ${DEFAULT-VALUE}).")
    double deleteLatency;

    @Option(names = "--out", defaultValue = "benchmarks/results/fsck-bench.md",
            description = "The markdown report: a file, or a directory to write fsck-bench.md in (default: ${DEFAULT-VALUE}).")
    Path out;

    private static final String VOLUME = "testvol"; // TestVolume's name
    private static final int[] THREADS = {1, 4, 16};

    public static void main(String[] args) {
        Procs.main(new FsckBench(), args);
    }

    @Override
    public Integer call() throws Exception {
        if (files < 1) {
            throw new IllegalArgumentException("--files must be at least 1");
        }
        out = Stack.reportFile(out, "fsck-bench.md");
        Path dir = Files.createTempDirectory("partfs-fsck-bench-");
        StringBuilder md = new StringBuilder();
        try (RedisServer redis = RedisServer.start(); S3Server s3 = S3Server.start()) {
            TestVolume volume = new TestVolume(TestVolume.Meta.REDIS, TestVolume.Store.S3, dir, redis, s3, TestVolume.defaultConfig(dir));
            long t0 = System.nanoTime();
            write(volume);
            Stack.progress("wrote %d files in %.1f s", files, (System.nanoTime() - t0) / 1e9);
            md.append(String.format(Locale.ROOT, "fsck on a Redis + s3proxy volume of %d 64-byte files (%d directories); seconds%n%n",
                    files, directories()));
            md.append("| S3 latency | listing by page (before) |");
            for (int t : THREADS) {
                md.append(" by directory, ").append(t).append(t == 1 ? " listing |" : " at once |");
            }
            md.append(" whole check (fsck, 16 at once) | requests of the check |\n|---|---|");
            md.append("---|".repeat(THREADS.length)).append("---|---|\n");
            for (double latency : latencies) {
                md.append(row(redis, s3, volume, latency)).append('\n');
            }
            if (deleteObjects > 0) {
                md.append(deletions(s3, volume));
            }
        } finally {
            TempDirs.deleteRecursively(dir);
        }
        Stack.report(out, md);
        return 0;
    }

    private int directories() {
        return Math.max(1, files / 1000);
    }

    /** {@link #files} small files, eight writers at once. */
    private void write(TestVolume volume) throws Exception {
        try (PartFs fs = volume.open()) {
            long[] dirs = new long[directories()];
            for (int d = 0; d < dirs.length; d++) {
                dirs[d] = fs.mkdir(1, "d" + d, 0755, 0, 0).ino();
            }
            byte[] data = new byte[64];
            AtomicLong done = new AtomicLong();
            ExecutorService pool = Executors.newFixedThreadPool(8);
            try {
                List<Future<?>> writers = new ArrayList<>();
                for (int w = 0; w < 8; w++) {
                    int first = w;
                    writers.add(pool.submit(() -> {
                        for (int i = first; i < files; i += 8) {
                            PartFs.Created c = fs.create(dirs[i % dirs.length], "f" + i, 0644, PartFs.O_WRONLY | PartFs.O_CREAT, 0, 0);
                            fs.write(c.fh(), 0, data, 0, data.length);
                            fs.release(c.fh());
                            if (done.incrementAndGet() % 10_000 == 0) {
                                Stack.progress("%d files written", done.get());
                            }
                        }
                        return null;
                    }));
                }
                for (Future<?> f : writers) {
                    f.get();
                }
            } finally {
                pool.shutdown();
            }
        }
    }

    private String row(RedisServer redis, S3Server s3, TestVolume volume, double latency) throws Exception {
        StringBuilder r = new StringBuilder(String.format(Locale.ROOT, "| %.0f ms |", latency));
        try (LatencyProxy proxy = new LatencyProxy(s3.endpoint().getPort());
             S3ObjectStore store = new S3ObjectStore(s3.config(volume.bucket()).endpoint(URI.create("http://127.0.0.1:" + proxy.port())).build());
             MetaEngine meta = new MetaEngine(new RedisKvStore(redis.url(volume.db())))) {
            proxy.setDelayMillis(latency);
            meta.load();
            String prefix = VOLUME + "/chunks/";
            r.append(timed(latency, "listing by page", each -> store.scan(prefix, each)));
            for (int t : THREADS) {
                r.append(timed(latency, "listing by directory, " + t + " at once", each -> store.scan(prefix, ChunkStore.KEY_LEVELS, t, each)));
            }
            long before = proxy.requests();
            long s = System.nanoTime();
            VolumeCheck.Report report = new VolumeCheck(meta, store, (phase, n) -> { }).run(
                    new VolumeCheck.Options(true, false, 3_600_000L, VolumeCheck.Options.LIST_THREADS));
            double secs = (System.nanoTime() - s) / 1e9;
            if (report.files != files || report.objects != files || report.missingBlocks != 0) {
                throw new IllegalStateException("the check found " + report.files + " files, " + report.objects + " objects, "
                        + report.missingBlocks + " missing blocks in a volume of " + files + " files");
            }
            Stack.progress("%.0f ms: whole check %.2f s", latency, secs);
            r.append(String.format(Locale.ROOT, " %.2f | %d |", secs, proxy.requests() - before));
        }
        return r.toString();
    }

    /** Deleting objects as gc --delete and a mount's background deletions do: one request each, and in batches. */
    private String deletions(S3Server s3, TestVolume volume) throws Exception {
        try (LatencyProxy proxy = new LatencyProxy(s3.endpoint().getPort());
             S3ObjectStore store = new S3ObjectStore(s3.config(volume.bucket()).endpoint(URI.create("http://127.0.0.1:" + proxy.port())).build())) {
            List<String> keys = new ArrayList<>();
            for (int i = 0; i < deleteObjects; i++) {
                keys.add("doomed/" + (i / 1000) + "/" + i);
            }
            double[] secs = new double[2];
            for (int way = 0; way < 2; way++) {
                proxy.setDelayMillis(0);
                StoreFill.putAll(store, keys, new byte[64]);
                proxy.setDelayMillis(deleteLatency);
                long s = System.nanoTime();
                if (way == 0) {
                    for (String k : keys) {
                        store.delete(k);
                    }
                } else {
                    store.deleteAll(keys);
                }
                secs[way] = (System.nanoTime() - s) / 1e9;
                if (!store.listAll("doomed/").isEmpty()) {
                    throw new IllegalStateException("objects left after deleting them");
                }
                Stack.progress("%.0f ms: deleted %d objects %s in %.2f s", deleteLatency, keys.size(),
                        way == 0 ? "one request each" : "a thousand a request", secs[way]);
            }
            return String.format(Locale.ROOT, "%nDeleting %d objects at %.0f ms (gc --delete, a mount's background deletions):"
                    + " one request each (before) %.2f s, a thousand a request %.2f s%n", keys.size(), deleteLatency, secs[0], secs[1]);
        }
    }

    @FunctionalInterface
    private interface Listing {
        void run(ObjectStore.IoConsumer<ObjectStore.ObjectInfo> each) throws Exception;
    }

    /** Times a listing of every block object; fails unless it found one per file. */
    private String timed(double latency, String what, Listing listing) throws Exception {
        AtomicLong n = new AtomicLong();
        long s = System.nanoTime();
        listing.run(o -> n.incrementAndGet());
        double secs = (System.nanoTime() - s) / 1e9;
        if (n.get() != files) {
            throw new IllegalStateException(what + " found " + n.get() + " objects, not " + files);
        }
        Stack.progress("%.0f ms: %s: %.2f s", latency, what, secs);
        return String.format(Locale.ROOT, " %.2f |", secs);
    }
}
