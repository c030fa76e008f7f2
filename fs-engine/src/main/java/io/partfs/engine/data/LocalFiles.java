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
 * the Redis client needs too. Used by the block cache, the staging area and the local object
 * store.
 */
public final class LocalFiles {
    static final int PIECE = 256 << 10;

    private LocalFiles() {
    }

    /** Reads {@code len} bytes at {@code off} of {@code f}; fails if the file is shorter. */
    public static byte[] readRange(Path f, long off, int len) throws IOException {
        byte[] out = new byte[len];
        readRange(f, off, len, ByteBuffer.wrap(out), false);
        return out;
    }

    /**
     * Reads {@code len} bytes at {@code off} of {@code f} into {@code dst} at its position, which
     * then moves past them; fails, with the position unmoved, if the file is shorter. A direct
     * {@code dst} is read into in one piece, with no copy on the way.
     */
    static void readRange(Path f, long off, int len, ByteBuffer dst) throws IOException {
        readRange(f, off, len, dst, false);
    }

    /**
     * As {@link #readRange(Path, long, int, ByteBuffer)}; with {@code zeroPastEnd} the bytes past
     * the file's end read as zeros (a file truncated after its blocks were committed) instead of
     * failing.
     */
    static void readRange(Path f, long off, int len, ByteBuffer dst, boolean zeroPastEnd) throws IOException {
        int start = dst.position();
        if (dst.remaining() < len) {
            throw new IllegalArgumentException(len + " bytes do not fit in " + dst.remaining());
        }
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ)) {
            ByteBuffer w = dst.duplicate();
            int done = 0;
            while (done < len) {
                w.limit(start + done + (dst.isDirect() ? len - done : Math.min(PIECE, len - done))).position(start + done);
                int n = ch.read(w, off + done);
                if (n < 0 && zeroPastEnd) {
                    for (int i = start + done; i < start + len; i++) {
                        dst.put(i, (byte) 0);
                    }
                    break;
                }
                if (n < 0) {
                    throw new IOException(f + " is shorter than " + (off + (long) len) + " bytes");
                }
                done += n;
            }
        }
        dst.position(start + len);
    }

    /** The alignment direct I/O asks of offsets, lengths and memory here (ext4 and XFS on 4 KiB sectors or less). */
    private static final int DIRECT_ALIGN = 4096;
    /** Each thread's aligned buffer for direct reads: a piece at a time, so a block never takes direct memory of its size. */
    private static final ThreadLocal<ByteBuffer> DIRECT_PIECE =
            ThreadLocal.withInitial(() -> ByteBuffer.allocateDirect(PIECE + DIRECT_ALIGN).alignedSlice(DIRECT_ALIGN));

    /**
     * Reads {@code out.length} bytes at {@code off} of {@code f} into {@code out} from the disk
     * itself (O_DIRECT): neither served from the page cache, where a damaged sector's bytes may
     * still sit as they were written, nor left in it. False, with nothing read, when {@code f}'s
     * filesystem refuses direct I/O (some FUSE filesystems, tmpfs before Linux 6.6) or wants
     * another alignment; fails if the file is shorter, is gone, or the disk cannot read it.
     */
    static boolean readDirect(Path f, long off, byte[] out) throws IOException {
        FileChannel ch;
        try {
            ch = FileChannel.open(f, StandardOpenOption.READ, com.sun.nio.file.ExtendedOpenOption.DIRECT);
        } catch (UnsupportedOperationException e) {
            return false;
        } catch (java.nio.file.FileSystemException e) {
            if (e instanceof java.nio.file.NoSuchFileException || !"Invalid argument".equals(e.getReason())) {
                throw e;
            }
            return false; // EINVAL: this filesystem does no direct I/O
        }
        try (ch) {
            ByteBuffer piece = DIRECT_PIECE.get();
            long end = off + out.length;
            for (long at = off & -DIRECT_ALIGN; at < end; ) {
                piece.clear();
                int n;
                try {
                    n = ch.read(piece, at);
                } catch (IOException e) {
                    if (String.valueOf(e.getMessage()).contains("block size")) {
                        return false; // the channel wants a larger alignment than ours
                    }
                    throw e;
                }
                long from = Math.max(at, off);
                long to = Math.min(at + Math.max(n, 0), end);
                if (to > from) {
                    piece.get((int) (from - at), out, (int) (from - off), (int) (to - from));
                }
                if (n < piece.capacity() && at + Math.max(n, 0) < end) {
                    throw new IOException(f + " is shorter than " + end + " bytes");
                }
                at += n;
            }
        }
        return true;
    }

    /** Writes all of {@code data} at the channel's position. */
    public static void writeAll(FileChannel ch, byte[] data) throws IOException {
        for (int off = 0; off < data.length; off += PIECE) {
            ByteBuffer b = ByteBuffer.wrap(data, off, Math.min(PIECE, data.length - off));
            while (b.hasRemaining()) {
                ch.write(b);
            }
        }
    }
}
