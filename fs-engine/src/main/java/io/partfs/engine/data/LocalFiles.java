package io.partfs.engine.data;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * Reads and writes of whole blocks in local files, in pieces. The JDK copies a heap buffer
 * through a temporary direct buffer of the same size and keeps one per thread: whole 4 MiB
 * blocks on two dozen I/O threads would use up the sidecar's direct memory (128 MiB), which
 * the Redis client needs too.
 */
final class LocalFiles {
    static final int PIECE = 256 << 10;

    private LocalFiles() {
    }

    /** Reads {@code len} bytes at {@code off} of {@code f}; fails if the file is shorter. */
    static byte[] readRange(Path f, int off, int len) throws IOException {
        byte[] out = new byte[len];
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ)) {
            int done = 0;
            while (done < len) {
                int n = ch.read(ByteBuffer.wrap(out, done, Math.min(PIECE, len - done)), off + (long) done);
                if (n < 0) {
                    throw new IOException(f + " is shorter than " + (off + (long) len) + " bytes");
                }
                done += n;
            }
        }
        return out;
    }

    /** Writes all of {@code data} at the channel's position. */
    static void writeAll(FileChannel ch, byte[] data) throws IOException {
        for (int off = 0; off < data.length; off += PIECE) {
            ByteBuffer b = ByteBuffer.wrap(data, off, Math.min(PIECE, data.length - off));
            while (b.hasRemaining()) {
                ch.write(b);
            }
        }
    }
}
