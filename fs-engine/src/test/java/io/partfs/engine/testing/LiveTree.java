package io.partfs.engine.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The regular files under a directory that a running mount keeps changing (its block cache,
 * staging or local object directory, where files are renamed, evicted and deleted while a test
 * looks): a file or directory gone before the walk reaches it is left out, where {@code
 * Files.walk} would fail the test.
 */
public final class LiveTree {
    private LiveTree() {
    }

    /** Each regular file under {@code root} with its size; the subtree {@code skip} (may be null) is not walked. */
    public static Map<Path, Long> files(Path root, Path skip) {
        Map<Path, Long> out = new LinkedHashMap<>();
        try {
            Files.walkFileTree(root, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult preVisitDirectory(Path d, BasicFileAttributes a) {
                    return d.equals(skip) ? FileVisitResult.SKIP_SUBTREE : FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult visitFile(Path f, BasicFileAttributes a) {
                    if (a.isRegularFile()) {
                        out.put(f, a.size());
                    }
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult visitFileFailed(Path f, IOException e) throws IOException {
                    if (e instanceof NoSuchFileException) {
                        return FileVisitResult.CONTINUE;
                    }
                    throw e;
                }

                @Override
                public FileVisitResult postVisitDirectory(Path d, IOException e) throws IOException {
                    if (e != null && !(e instanceof NoSuchFileException)) {
                        throw e;
                    }
                    return FileVisitResult.CONTINUE;
                }
            });
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out;
    }
}
