package io.partfs.cli;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** The kernel's page cache, dropped between benchmark steps so that reads reach the filesystem. */
public final class PageCache {
    private PageCache() {
    }

    /** Syncs and drops the page, dentry and inode caches; false where not allowed (not root, a container). */
    public static boolean drop() {
        try {
            new ProcessBuilder("sync").start().waitFor();
            Files.writeString(Path.of("/proc/sys/vm/drop_caches"), "3\n");
            return true;
        } catch (IOException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }
}
