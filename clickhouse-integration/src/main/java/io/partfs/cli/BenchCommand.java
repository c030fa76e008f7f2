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
 * (big files with 1 MiB IO, small files, stat), on any filesystem, so PartFS, local disk,
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

    @Option(names = "--big-file-size", paramLabel = "SIZE", defaultValue = "1G", description = "Size of each big file (default: ${DEFAULT-VALUE}).")
    String bigFileSize;

    @Option(names = "--small-file-size", paramLabel = "SIZE", defaultValue = "128K", description = "Size of each small file (default: ${DEFAULT-VALUE}).")
    String smallFileSize;

    @Option(names = "--small-file-count", paramLabel = "N", defaultValue = "100", description = "Small files per thread (default: ${DEFAULT-VALUE}).")
    int smallFiles;

    @Option(names = "--block-size", paramLabel = "SIZE", defaultValue = "1M", description = "IO size of big files (default: ${DEFAULT-VALUE}).")
    String blockSize;

    @Option(names = {"-p", "--threads"}, paramLabel = "N", defaultValue = "1", description = "Threads, each on its own files (default: ${DEFAULT-VALUE}).")
    int threads;

    @Override
    public Integer call() throws Exception {
        long big = Sizes.parse(bigFileSize, "big file size");
        long small = Sizes.parse(smallFileSize, "small file size");
        int block = (int) Sizes.parse(blockSize, "block size");
        if (!Files.isDirectory(dir)) {
            throw new IllegalArgumentException(dir + " is not a directory: give an existing directory on the filesystem to test");
        }
        if (smallFiles < 0 || block <= 0 || small > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("sizes and counts must be positive (and a small file at most 2 GiB)");
        }
        BenchTable table = new BenchTable(threads);
        PrintWriter out = spec.commandLine().getOut();
        Path work = Files.createTempDirectory(dir, "__partfs-bench-");
        boolean dropped = true;
        try {
            byte[] data = new byte[block];
            ThreadLocalRandom.current().nextBytes(data);
            if (big > 0) {
                double w = table.time(t -> writeFile(work.resolve("big." + t), big, data, true));
                table.add("Write big file", w, (double) big * threads / (1 << 20), "MiB", Math.max(1, big / block) * threads, "IO");
                dropped &= PageCache.drop();
                double r = table.time(t -> readFile(work.resolve("big." + t), block));
                table.add("Read big file", r, (double) big * threads / (1 << 20), "MiB", Math.max(1, big / block) * threads, "IO");
            }
            if (smallFiles > 0) {
                byte[] smallData = new byte[(int) small];
                ThreadLocalRandom.current().nextBytes(smallData);
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
        } finally {
            deleteTree(work);
        }
        out.printf("partfs bench %s: %d thread(s), big file %s with %s IO, %d small files of %s per thread%s%n", dir, threads,
                bigFileSize, blockSize, smallFiles, smallFileSize, dropped ? "" : " (page cache not dropped: not root)");
        table.print(out);
        return 0;
    }

    static void writeFile(Path f, long size, byte[] data, boolean fsync) throws IOException {
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
            long left = size;
            while (left > 0) {
                ByteBuffer b = ByteBuffer.wrap(data, 0, (int) Math.min(left, data.length));
                while (b.hasRemaining()) {
                    ch.write(b);
                }
                left -= Math.min(left, data.length);
            }
            if (fsync) {
                ch.force(true);
            }
        }
    }

    static void readFile(Path f, int block) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(block);
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ)) {
            while (ch.read(b) >= 0) {
                b.clear();
            }
        }
    }

    private static void deleteTree(Path root) throws IOException {
        try (var s = Files.walk(root)) {
            for (Path p : s.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
