package io.partfs.engine.data;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.UserDefinedFileAttributeView;
import java.util.zip.CRC32C;

/**
 * Checksums of a cached block: a CRC32C of each piece of it, at most {@value #MAX_PIECES}
 * pieces of at least 64 KiB, kept in an extended attribute of the file that holds the block.
 * They are computed from the bytes that went to (or came from) the object store, so a read of
 * the cached copy can tell that the local disk returned other bytes: bit rot, or a block file
 * whose data a power loss did not let reach the disk (the cache does not fsync).
 *
 * <p>Pieces, not one sum a block, so that a read of 64 KiB of a 4 MiB block checks the pieces
 * it reads (plus at most the rest of the first and last) instead of reading the whole block.
 * The bit of each piece checked since the mount lives in the cache's index ({@link BlockCache}),
 * so each piece is checked once a process and reads after that go straight to the file.
 */
final class BlockSums {
    /** Pieces a block is cut into at most: their checked bits fit in the index beside the size. */
    static final int MAX_PIECES = 32;
    static final int MIN_PIECE = 64 << 10;
    /** The attribute of a whole-block file; a linked range at offset N uses {@code partfs.sums@N}. */
    static final String XATTR = "partfs.sums";

    private BlockSums() {
    }

    /** The attribute name for a block at {@code offset} of its file (0 and not linked: the plain name). */
    static String name(boolean linked, long offset) {
        return linked ? XATTR + "@" + offset : XATTR;
    }

    /** The size of each piece of a block of {@code blockLen} bytes (the last may be shorter). */
    static int pieceSize(long blockLen) {
        int p = MIN_PIECE;
        while ((long) p * MAX_PIECES < blockLen) {
            p <<= 1;
        }
        return p;
    }

    static int pieces(long blockLen) {
        int p = pieceSize(blockLen);
        return (int) Math.max(1, (blockLen + p - 1) / p);
    }

    /** The bits of pieces {@code first..last}. */
    static long mask(int first, int last) {
        long upToLast = last >= 63 ? -1L : (1L << (last + 1)) - 1;
        return upToLast & -(1L << first);
    }

    /** The bits of every piece of a block of {@code blockLen} bytes. */
    static long all(long blockLen) {
        return mask(0, pieces(blockLen) - 1);
    }

    /** The sums of block {@code data}: 4 bytes a piece. */
    static byte[] of(byte[] data) {
        int piece = pieceSize(data.length);
        int n = pieces(data.length);
        ByteBuffer out = ByteBuffer.allocate(4 * n);
        CRC32C crc = new CRC32C();
        for (int i = 0; i < n; i++) {
            crc.reset();
            crc.update(data, i * piece, Math.min(piece, data.length - i * piece));
            out.putInt((int) crc.getValue());
        }
        return out.array();
    }

    /**
     * Whether {@code parts} (each from its position to its limit, in order), the bytes of a block
     * of {@code blockLen} bytes from the start of piece {@code first} on, match {@code sums}.
     * Sums of another length are no match.
     */
    static boolean matches(byte[] sums, long blockLen, int first, ByteBuffer... parts) {
        if (sums.length != 4 * pieces(blockLen)) {
            return false;
        }
        int piece = pieceSize(blockLen);
        CRC32C crc = new CRC32C();
        int i = first;
        int inPiece = 0; // bytes of piece i summed so far
        for (ByteBuffer part : parts) {
            ByteBuffer b = part.duplicate();
            int end = b.limit();
            while (b.position() < end) {
                b.limit(Math.min(end, b.position() + piece - inPiece));
                inPiece += b.remaining();
                crc.update(b); // moves the position to the limit
                b.limit(end);
                if (inPiece == piece) {
                    if (!sumIs(sums, i++, crc)) {
                        return false;
                    }
                    crc.reset();
                    inPiece = 0;
                }
            }
        }
        return inPiece == 0 || sumIs(sums, i, crc); // the block's last piece, shorter
    }

    /**
     * Reads bytes {@code [off, off+len)} of a block of {@code blockLen} bytes that file {@code f}
     * holds from offset {@code base} into {@code dst} at its position, which moves past them (null:
     * reads them only to check), and reads aside the rest of the pieces they touch, at most one
     * short of a piece before and after, to check all of those pieces against {@code sums} (null:
     * none known, nothing to check). False on a mismatch, with {@code dst}'s position left where
     * it was: what was read there is no answer.
     */
    static boolean readChecked(Path f, long base, long blockLen, byte[] sums, int off, int len, ByteBuffer dst) throws IOException {
        int start = dst == null ? 0 : dst.position();
        if (sums == null || len <= 0) {
            if (dst != null) {
                LocalFiles.readRange(f, base + off, len, dst);
            }
            return true;
        }
        int piece = pieceSize(blockLen);
        int first = off / piece;
        int last = Math.max(first, (off + len - 1) / piece);
        int from = first * piece;
        int to = (int) Math.min(blockLen, (long) (last + 1) * piece);
        ByteBuffer[] parts;
        if (dst == null) {
            parts = new ByteBuffer[] {ByteBuffer.wrap(LocalFiles.readRange(f, base + from, to - from))};
        } else { // the bytes asked for go straight into dst, with no copy
            ByteBuffer before = aside(f, base + from, off - from);
            ByteBuffer after = aside(f, base + off + len, to - off - len);
            LocalFiles.readRange(f, base + off, len, dst);
            parts = new ByteBuffer[] {before, dst.duplicate().limit(start + len).position(start), after};
        }
        if (matches(sums, blockLen, first, parts)) {
            return true;
        }
        if (dst != null) {
            dst.position(start);
        }
        return false;
    }

    /** Bytes read aside to check with a read's own; a read on a piece boundary opens nothing for them. */
    private static ByteBuffer aside(Path f, long at, int len) throws IOException {
        return ByteBuffer.wrap(len == 0 ? new byte[0] : LocalFiles.readRange(f, at, len));
    }

    private static boolean sumIs(byte[] sums, int piece, CRC32C crc) {
        return 4 * piece + 4 <= sums.length && ByteBuffer.wrap(sums).getInt(4 * piece) == (int) crc.getValue();
    }

    /** Writes {@code sums} into attribute {@code name} of {@code f}. */
    static void write(Path f, String name, byte[] sums) throws IOException {
        UserDefinedFileAttributeView view = Files.getFileAttributeView(f, UserDefinedFileAttributeView.class);
        if (view == null) {
            throw new UnsupportedOperationException("no extended attributes on " + f);
        }
        view.write(name, ByteBuffer.wrap(sums));
    }

    /** The sums in attribute {@code name} of {@code f}, or null when it has none (a block cached before sums were kept). */
    static byte[] read(Path f, String name) throws IOException {
        UserDefinedFileAttributeView view = Files.getFileAttributeView(f, UserDefinedFileAttributeView.class);
        if (view == null) {
            return null;
        }
        ByteBuffer b = ByteBuffer.allocate(4 * MAX_PIECES + 4);
        try {
            int n = view.read(name, b);
            return java.util.Arrays.copyOf(b.array(), n);
        } catch (java.nio.file.FileSystemException e) {
            if (e instanceof java.nio.file.NoSuchFileException) {
                throw e;
            }
            return null; // ENODATA (no such attribute) or ENOTSUP; a too large value (ERANGE) is no sum of ours either
        }
    }
}
