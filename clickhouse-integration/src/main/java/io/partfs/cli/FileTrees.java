package io.partfs.cli;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Local directory trees the commands remove: a bench's scratch directory, a destroyed volume's. */
final class FileTrees {
    private FileTrees() {
    }

    /** Deletes {@code root} and everything below it, deepest first; what is gone already is skipped. */
    static void delete(Path root) throws IOException {
        try (var s = Files.walk(root)) {
            for (Path p : s.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
