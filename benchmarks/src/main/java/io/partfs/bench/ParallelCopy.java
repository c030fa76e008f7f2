package io.partfs.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;

/**
 * cp -a with several files in flight: directories first, then files (and symlinks) in parallel,
 * with a progress line every {@value #PROGRESS_EVERY_SECONDS} s (copying the target profile's
 * 154,000 files onto PartFS takes minutes).
 */
final class ParallelCopy {
    private ParallelCopy() {
    }

    private static final int PROGRESS_EVERY_SECONDS = 30;

    static void copy(Path from, Path to, int threads) throws Exception {
        List<Path> files = new ArrayList<>();
        try (Stream<Path> s = Files.walk(from)) {
            for (Path p : s.toList()) {
                Path target = to.resolve(from.relativize(p).toString());
                if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
                    Files.createDirectories(target);
                } else {
                    files.add(p);
                }
            }
        }
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> done = new ArrayList<>();
            for (Path f : files) {
                done.add(pool.submit(() -> {
                    Files.copy(f, to.resolve(from.relativize(f).toString()), StandardCopyOption.COPY_ATTRIBUTES, LinkOption.NOFOLLOW_LINKS);
                    return null;
                }));
            }
            long start = System.nanoTime();
            long next = start + PROGRESS_EVERY_SECONDS * 1_000_000_000L;
            for (int i = 0; i < done.size(); i++) {
                done.get(i).get();
                if (System.nanoTime() > next) {
                    Stack.progress("  copied %,d of %,d files (%.0f s)", i + 1, done.size(), (System.nanoTime() - start) / 1e9);
                    next += PROGRESS_EVERY_SECONDS * 1_000_000_000L;
                }
            }
        } finally {
            pool.shutdownNow();
        }
        // directory times last, as cp -a leaves them
        try (Stream<Path> s = Files.walk(from)) {
            for (Path p : s.filter(Files::isDirectory).toList()) {
                try {
                    Files.setLastModifiedTime(to.resolve(from.relativize(p).toString()), Files.getLastModifiedTime(p));
                } catch (IOException e) {
                    // times of directories are cosmetic here
                }
            }
        }
    }
}
