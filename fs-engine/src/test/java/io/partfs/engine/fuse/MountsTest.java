package io.partfs.engine.fuse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class MountsTest {
    @Test
    void unescapeUndoesMountinfoOctalEscapes() {
        assertEquals("/mnt/a b\tc\\d", Mounts.unescape("/mnt/a\\040b\\011c\\134d"));
        assertEquals("/mnt/plain", Mounts.unescape("/mnt/plain"));
        assertEquals("/mnt/x\\9", Mounts.unescape("/mnt/x\\9"), "a backslash without three octal digits stays");
    }

    @Test
    void holdersAreTheProcessesWithFilesOpenUnderAPath() throws Exception {
        Path dir = java.nio.file.Files.createTempDirectory("partfs-holders-");
        Path sibling = java.nio.file.Files.createTempDirectory(dir.getFileName() + "x"); // a name the path starts with
        try {
            assertTrue(Mounts.holders(dir, 10).isEmpty(), "nobody uses a new directory");
            try (var ch = java.nio.channels.FileChannel.open(sibling.resolve("f"), java.nio.file.StandardOpenOption.CREATE_NEW,
                    java.nio.file.StandardOpenOption.WRITE)) {
                assertTrue(Mounts.holders(dir, 10).isEmpty(), "a file in " + sibling + " is not under " + dir);
            }
            try (var ch = java.nio.channels.FileChannel.open(dir.resolve("f"), java.nio.file.StandardOpenOption.CREATE_NEW,
                    java.nio.file.StandardOpenOption.WRITE)) {
                java.nio.file.Files.delete(dir.resolve("f")); // shown as "(deleted)" by /proc: still under the path
                assertEquals(java.util.List.of(ProcessHandle.current().pid() + " (java)"), Mounts.holders(dir, 10));
            }
        } finally {
            io.partfs.engine.testing.TempDirs.deleteRecursively(dir);
            io.partfs.engine.testing.TempDirs.deleteRecursively(sibling);
        }
    }

    @Test
    void aPathOnNoPartFsMountHasNone() throws Exception {
        assertNull(Mounts.partfsMountHolding(Path.of("/proc/self")));
    }

    @Test
    void resolveFollowsSymlinksAsRealpathDoes() throws Exception {
        Path dir = java.nio.file.Files.createTempDirectory("partfs-resolve-").toRealPath();
        try {
            Path data = java.nio.file.Files.createDirectories(dir.resolve("data/clickhouse"));
            java.nio.file.Files.createSymbolicLink(dir.resolve("abs"), data); // absolute target
            java.nio.file.Files.createDirectories(dir.resolve("var/lib"));
            java.nio.file.Files.createSymbolicLink(dir.resolve("var/lib/ch"), Path.of("../../abs")); // relative, through another link
            assertEquals(data, Mounts.resolve(dir.resolve("abs")));
            assertEquals(data, Mounts.resolve(dir.resolve("var/lib/ch")));
            assertEquals(data.resolve("store/x"), Mounts.resolve(dir.resolve("var/lib/ch/store/x")), "names that do not exist are kept");
            assertEquals(dir.resolve("data"), Mounts.resolve(dir.resolve("var/lib/ch/..")), "'..' of a link is the parent of its target");
            assertEquals(data, Mounts.resolve(dir.resolve("./data/./clickhouse/")));

            java.nio.file.Files.createSymbolicLink(dir.resolve("loop"), dir.resolve("loop"));
            var e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> Mounts.resolve(dir.resolve("loop")));
            assertTrue(e.getMessage().endsWith("too many levels of symbolic links"), e.getMessage());
        } finally {
            io.partfs.engine.testing.TempDirs.deleteRecursively(dir);
        }
    }
}
