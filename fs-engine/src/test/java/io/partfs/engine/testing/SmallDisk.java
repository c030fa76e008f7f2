package io.partfs.engine.testing;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * A real filesystem of a few MiB that fills up: a tmpfs mounted on a new temporary directory,
 * unmounted and removed at close. For what a full disk does (ENOSPC, free-space floors). Needs
 * root, as the FUSE tests do.
 */
public final class SmallDisk implements AutoCloseable {
    private final Path dir;

    public SmallDisk(int mib) throws IOException, InterruptedException {
        dir = Files.createTempDirectory("partfs-small-disk-");
        try {
            run("mount", "-t", "tmpfs", "-o", "size=" + mib + "m", "partfs-small-disk", dir.toString());
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(dir);
            throw e;
        }
    }

    /** Where the small filesystem is mounted. */
    public Path dir() {
        return dir;
    }

    /** Free bytes, as statfs says. */
    public long free() {
        try {
            return Files.getFileStore(dir).getUsableSpace();
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    /** Writes all of {@code data} at {@code ch}'s position, as a writer filling this disk would (ENOSPC throws). */
    public static void writeFully(java.nio.channels.FileChannel ch, byte[] data) throws IOException {
        java.nio.ByteBuffer buf = java.nio.ByteBuffer.wrap(data);
        while (buf.hasRemaining()) {
            ch.write(buf);
        }
    }

    public long total() throws IOException {
        return Files.getFileStore(dir).getTotalSpace();
    }

    /** Writes file {@code name} until the disk is full, as another process filling a shared disk would; returns it. */
    public Path fill(String name) throws IOException {
        Path file = dir.resolve(name);
        byte[] mib = new byte[1 << 20];
        try (java.io.OutputStream out = Files.newOutputStream(file)) {
            while (true) {
                out.write(mib);
            }
        } catch (IOException full) {
            if (!String.valueOf(full.getMessage()).contains("No space left")) {
                throw full;
            }
        }
        return file;
    }

    private static void run(String... cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        if (!p.waitFor(30, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IOException(String.join(" ", cmd) + " did not finish within 30 s");
        }
        String out = new String(p.getInputStream().readAllBytes()).trim();
        if (p.exitValue() != 0) {
            throw new IOException(String.join(" ", cmd) + " failed (" + p.exitValue() + "): " + out);
        }
    }

    /** Unmounts it; lazily if something still uses it (a mount that failed a test), which then lets go of it. */
    @Override
    public void close() throws IOException, InterruptedException {
        try {
            run("umount", dir.toString());
        } catch (IOException busy) {
            run("umount", "-l", dir.toString());
        }
        Files.deleteIfExists(dir);
    }
}
