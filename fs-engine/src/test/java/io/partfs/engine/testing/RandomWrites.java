package io.partfs.engine.testing;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.Random;

/** What the differential tests write: random sizes and bytes, written whole at an offset. */
public final class RandomWrites {
    private RandomWrites() {
    }

    /**
     * Random bytes: none in a tenth of the calls, 1 MiB up to {@code maxLarge} in a fifth
     * (across block boundaries), else under 20,000.
     */
    public static byte[] data(Random rnd, int maxLarge) {
        int n = switch (rnd.nextInt(10)) {
            case 0 -> 0;
            case 1, 2 -> (1 << 20) + rnd.nextInt(maxLarge - (1 << 20));
            default -> rnd.nextInt(20_000);
        };
        byte[] b = new byte[n];
        rnd.nextBytes(b);
        return b;
    }

    /** Writes all of {@code data} at {@code off}. */
    public static void writeFully(FileChannel ch, long off, byte[] data) throws IOException {
        ByteBuffer buf = ByteBuffer.wrap(data);
        while (buf.hasRemaining()) {
            ch.write(buf, off + buf.position());
        }
    }
}
