package io.partfs.cli;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A test's temporary directory holding a mount point ({@code mnt}) and a partfs home: declared
 * first among a test's resources, it is closed last, after the servers, unmounting whatever is
 * still mounted and deleting the directory.
 */
final class Workdir implements AutoCloseable {
    final Path dir;
    final Path mnt;
    final Partfs partfs;

    private Workdir(Path dir) {
        this.dir = dir;
        this.mnt = dir.resolve("mnt");
        this.partfs = new Partfs(dir.resolve("home"));
    }

    static Workdir create(String prefix) throws IOException {
        return new Workdir(Files.createTempDirectory(prefix));
    }

    @Override
    public void close() throws Exception {
        partfs.unmountAndDelete(mnt, dir);
    }
}
