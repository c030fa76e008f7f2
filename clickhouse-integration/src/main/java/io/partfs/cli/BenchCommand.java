package io.partfs.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.Callable;
import java.util.concurrent.ThreadLocalRandom;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code partfs bench DIR}: the filesystem under DIR measured as {@code juicefs bench} does
 * (big files with 1 MiB IO, small files, stat; optionally a large directory listed), on any filesystem, so PartFS, local disk,
 * rclone and s3fs can be compared with one tool.
 */
@Command(name = "bench", mixinStandardHelpOptions = true,
        description = {"Measure a filesystem under DIR (any filesystem, PartFS or not): big file write and read with",
                "1 MiB IO (fsync before close), small files write and read, stat; -p threads at once.",
                "As root the page cache is dropped before each read step, so reads come from the filesystem."})
final class BenchCommand implements Callable<Integer> {
    @Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Parameters(index = "0", paramLabel = "DIR", description = "Directory to test in (a temporary subdirectory is made and removed).")
    Path dir;

    @Option(names = "--big-file-size", paramLabel = "SIZE", defaultValue = "1G", description = "Size of each big file (default: ${DEFAULT-VALUE}; 0 skips the big-file steps).")
    String bigFileSize;

    @Option(names = "--small-file-size", paramLabel = "SIZE", defaultValue = "128K", description = "Size of each small file (default: ${DEFAULT-VALUE}).")
    String smallFileSize;

    @Option(names = "--small-file-count", paramLabel = "N", defaultValue = "100", description = "Small files per thread (default: ${DEFAULT-VALUE}; 0 skips the small-file and stat steps).")
    int smallFiles;

    @Option(names = "--block-size", paramLabel = "SIZE", defaultValue = "1M", description = "IO size of big files (default: ${DEFAULT-VALUE}).")
    String blockSize;

    @Option(names = {"-p", "--threads"}, paramLabel = "N", defaultValue = "1", description = "Threads, each on its own files (default: ${DEFAULT-VALUE}).")
    int threads;

    @Option(names = "--list-entries", paramLabel = "N", defaultValue = "0",
            description = {"Also list a directory of N empty files per thread, with every entry's attributes, as",
                    "'ls -l' and ClickHouse (a table's parts) do, page cache dropped first (default: ${DEFAULT-VALUE}, not run)."})
    int listEntries;

    @Option(names = "--no-warmup", description = {"Do not run the bench's own code on a scratch directory of the local temp",
            "directory first. Without that warm-up the first hundred calls run in the JVM's interpreter, adding",
            "tens of microseconds per call to every filesystem's numbers."})
    boolean noWarmup;

    @Override
    public Integer call() throws Exception {
        long big = Sizes.parse(bigFileSize, "big file size");
        long small = Sizes.parse(smallFileSize, "small file size");
        int block = (int) Sizes.parse(blockSize, "block size");
        if (!Files.isDirectory(dir)) {
            throw new IllegalArgumentException(dir + " is not a directory: give an existing directory on the filesystem to test");
        }
        if (smallFiles < 0 || listEntries < 0 || block <= 0 || small > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("counts must be 0 or more, the block size above 0, a small file at most 2 GiB");
        }
        if (big == 0 && smallFiles == 0 && listEntries == 0) {
            throw new IllegalArgumentException("nothing to measure: give --big-file-size, --small-file-count or --list-entries above 0");
        }
        BenchTable table = new BenchTable(threads);
        PrintWriter out = spec.commandLine().getOut();
        if (!noWarmup) {
            warmUp(block);
        }
        Path work = Files.createTempDirectory(dir, "__partfs-bench-");
        boolean dropped = true;
        try {
            ByteBuffer data = randomBuffer(block);
            if (big > 0) {
                double w = table.time(t -> writeFile(work.resolve("big." + t), big, data, true));
                table.add("Write big file", w, (double) big * threads / (1 << 20), "MiB", Math.max(1, big / block) * threads, "IO");
                dropped &= PageCache.drop();
                double r = table.time(t -> readFile(work.resolve("big." + t), block));
                table.add("Read big file", r, (double) big * threads / (1 << 20), "MiB", Math.max(1, big / block) * threads, "IO");
            }
            if (smallFiles > 0) {
                ByteBuffer smallData = randomBuffer((int) small);
                double w = table.time(t -> {
                    for (int i = 0; i < smallFiles; i++) {
                        writeFile(work.resolve("small." + t + "." + i), small, smallData, true);
                    }
                });
                table.add("Write small file", w, (double) smallFiles * threads, "files", (long) smallFiles * threads, "file");
                dropped &= PageCache.drop();
                double r = table.time(t -> {
                    for (int i = 0; i < smallFiles; i++) {
                        readFile(work.resolve("small." + t + "." + i), (int) Math.max(1, small));
                    }
                });
                table.add("Read small file", r, (double) smallFiles * threads, "files", (long) smallFiles * threads, "file");
                dropped &= PageCache.drop();
                double s = table.time(t -> {
                    for (int i = 0; i < smallFiles; i++) {
                        Files.readAttributes(work.resolve("small." + t + "." + i), java.nio.file.attribute.PosixFileAttributes.class);
                    }
                });
                table.add("Stat file", s, (double) smallFiles * threads, "files", (long) smallFiles * threads, "file");
            }
            if (listEntries > 0) {
                table.time(t -> {
                    Path d = Files.createDirectory(work.resolve("list." + t));
                    for (int i = 0; i < listEntries; i++) {
                        Files.createFile(d.resolve(String.format("%d_%d_%d_0", 20200101 + i % 28, i, i)));
                    }
                });
                dropped &= PageCache.drop();
                double l = table.time(t -> {
                    int n = 0;
                    try (var entries = Files.newDirectoryStream(work.resolve("list." + t))) {
                        for (Path e : entries) {
                            Files.readAttributes(e, java.nio.file.attribute.PosixFileAttributes.class,
                                    java.nio.file.LinkOption.NOFOLLOW_LINKS);
                            n++;
                        }
                    }
                    if (n != listEntries) {
                        throw new IOException("listed " + n + " entries of " + listEntries + " in " + work.resolve("list." + t));
                    }
                });
                table.add("List directory", l, (double) listEntries * threads, "entries", threads, "listing");
            }
        } finally {
            FileTrees.delete(work);
        }
        out.printf("partfs bench %s: %d thread(s), %s, %d small files of %s per thread%s%s%n", dir, threads,
                big == 0 ? "no big file" : "big file " + bigFileSize + " with " + blockSize + " IO", smallFiles, smallFileSize,
                listEntries > 0 ? ", a directory of " + listEntries + " entries per thread" : "",
                dropped ? "" : " (page cache not dropped: not root)");
        table.print(out);
        return 0;
    }

    /**
     * Runs every timed operation a few hundred times on a scratch directory of the local temp
     * directory (never on DIR), so the timed runs measure the filesystem rather than the JVM
     * compiling this code.
     */
    private static void warmUp(int block) throws IOException {
        Path scratch = Files.createTempDirectory("partfs-bench-warmup-");
        try {
            ByteBuffer data = randomBuffer(Math.min(block, 64 << 10));
            for (int i = 0; i < 300; i++) {
                Path f = scratch.resolve("f" + (i % 10));
                writeFile(f, data.capacity(), data, i % 10 == 0);
                readFile(f, data.capacity());
                Files.readAttributes(f, java.nio.file.attribute.PosixFileAttributes.class);
            }
        } finally {
            FileTrees.delete(scratch);
        }
    }

    /** Random bytes in a direct buffer: the JDK copies a heap buffer through a direct one first. */
    private static ByteBuffer randomBuffer(int size) {
        byte[] b = new byte[size];
        ThreadLocalRandom.current().nextBytes(b);
        return ByteBuffer.allocateDirect(size).put(b).flip();
    }

    static void writeFile(Path f, long size, ByteBuffer data, boolean fsync) throws IOException {
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
            long left = size;
            while (left > 0) {
                ByteBuffer b = data.duplicate().limit((int) Math.min(left, data.capacity()));
                while (b.hasRemaining()) {
                    ch.write(b);
                }
                left -= Math.min(left, data.capacity());
            }
            if (fsync) {
                ch.force(true);
            }
        }
    }

    static void readFile(Path f, int block) throws IOException {
        ByteBuffer b = READ_BUFFERS.get();
        if (b == null || b.capacity() < block) {
            b = ByteBuffer.allocateDirect(block);
            READ_BUFFERS.set(b);
        }
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ)) {
            b.clear().limit(block);
            while (ch.read(b) >= 0) {
                b.clear().limit(block);
            }
        }
    }

    private static final ThreadLocal<ByteBuffer> READ_BUFFERS = new ThreadLocal<>();
}
