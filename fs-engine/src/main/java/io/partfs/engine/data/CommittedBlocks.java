package io.partfs.engine.data;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.Arrays;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;

/**
 * What each block of a file the kernel writes itself (FUSE passthrough, {@link BackedFile}) held
 * when it was last committed, so that a commit takes only the blocks that changed since: a file
 * fsynced every 2 MiB as it grows commits (and uploads) what each fsync added, not all of it
 * again each time.
 *
 * <p>The kernel says nothing about which bytes it wrote, so a commit reads the file and compares
 * each block's fingerprint (its length, a CRC32C and a CRC32: two different polynomials, 64 bits
 * in all, so a changed block goes unnoticed with odds of 2^-64) with the one recorded at the
 * block's last commit. The first commit reads nothing and takes the whole file: a file committed
 * once (a part file: written, fsynced, closed) costs no extra read. The second takes the whole
 * file too, and records the fingerprints; from the third on only the blocks that changed are
 * committed, as one slice per chunk over the run from the first changed block to the end of the
 * last one.
 *
 * <p>A staged block is uploaded from the file later, so an upload may read bytes written after
 * its commit; those are then in the object store under that commit's block. {@link #uploaded}
 * therefore compares what each upload read with what its commit recorded, and on a difference
 * forgets the fingerprint, so the next commit takes the block again. The comparison of a commit
 * ({@link #changes}) and an upload's read and check run under this object's lock, one after the
 * other: a check that found a difference is seen by every later commit, and an upload that reads
 * after a commit's comparison reads what the kernel wrote by then, which the next commit (the
 * file's mtime moved on) compares again. A commit's fingerprints are recorded ({@link #record})
 * under the same lock before its blocks are queued, so their uploads check against them.
 *
 * <p>Not thread-safe on its own: callers hold the lock of this object.
 */
final class CommittedBlocks {
    /** A run of the file to commit: {@code [from, to)}, {@code from} at a block's start. */
    record Run(long from, long to, long[] prints, int[] lengths, int blockSize) {
    }

    /** The part of a run in one chunk: a slice of {@code len} bytes at {@code pos} of chunk {@code chunk}. */
    record Span(long chunk, int pos, int len) {
    }

    /** The slices a run {@code [from, to)} is committed as, one per chunk it spans, in order. */
    static java.util.List<Span> spans(long from, long to) {
        java.util.List<Span> out = new java.util.ArrayList<>();
        for (long c = from / ChunkStore.CHUNK; c * ChunkStore.CHUNK < to; c++) {
            long start = c * ChunkStore.CHUNK;
            int pos = (int) (Math.max(from, start) - start);
            int end = (int) (Math.min(to, start + ChunkStore.CHUNK) - start);
            out.add(new Span(c, pos, end - pos));
        }
        return out;
    }

    private static final int READ = 1 << 20;
    /** Fingerprint of each block at its last commit; {@link #lengths} 0 where none is known. */
    private long[] prints = new long[0];
    private int[] lengths = new int[0];
    /** The commit that recorded each block's fingerprint. */
    private int[] commits = new int[0];
    /** The block size of the fingerprints; 0 until the first comparison. */
    private int blockSize;
    /** Commits of data seen: the first one reads nothing. */
    private int seen;

    /**
     * What a commit of the file as {@code ch} holds now ({@code size} bytes, blocks of
     * {@code blockSize}) must take: every block whose content differs from its last commit's,
     * or the whole file when {@code whole} or nothing is recorded. Reads the file unless this is
     * its first commit. When nothing changed (the same bytes written again), the last block, so
     * that the commit still moves the file's times and data version on. Null for an empty file.
     */
    Run changes(FileChannel ch, long size, int blockSize, boolean whole) throws IOException {
        if (size == 0) {
            return null;
        }
        if (seen++ == 0) {
            return new Run(0, size, null, null, blockSize);
        }
        if (this.blockSize != 0 && this.blockSize != blockSize) {
            forget();
        }
        this.blockSize = blockSize;
        int n = (int) ((size + blockSize - 1) / blockSize);
        long[] now = new long[n];
        int[] lens = new int[n];
        long first = -1;
        long last = -1;
        ByteBuffer buf = ByteBuffer.allocate(READ);
        for (int k = 0; k < n; k++) {
            long at = (long) k * blockSize;
            int len = (int) Math.min(blockSize, size - at);
            now[k] = fingerprint(ch, at, len, buf);
            lens[k] = len;
            if (whole || k >= lengths.length || lengths[k] != len || prints[k] != now[k]) {
                first = first < 0 ? k : first;
                last = k;
            }
        }
        if (first < 0) {
            first = n - 1;
            last = n - 1;
        }
        return new Run(first * blockSize, Math.min(size, (last + 1) * blockSize), now, lens, blockSize);
    }

    /** Records the fingerprints of {@code run}'s blocks as those of commit {@code commit}. */
    void record(Run run, int commit) {
        if (run.prints() == null) {
            return; // a first commit: nothing was read
        }
        int n = run.prints().length;
        if (lengths.length < n) {
            prints = Arrays.copyOf(prints, n);
            lengths = Arrays.copyOf(lengths, n);
            commits = Arrays.copyOf(commits, n);
        }
        int from = (int) (run.from() / run.blockSize());
        int to = (int) ((run.to() + run.blockSize() - 1) / run.blockSize());
        for (int k = from; k < to; k++) {
            prints[k] = run.prints()[k];
            lengths[k] = run.lengths()[k];
            commits[k] = commit;
        }
        // blocks past the end (a truncation) are no longer the file's
        for (int k = n; k < lengths.length; k++) {
            lengths[k] = 0;
        }
    }

    /**
     * An upload of commit {@code commit}'s block at {@code offset} read {@code data}: when the
     * block was last committed by that commit and reads otherwise now, the next commit takes it.
     */
    void uploaded(long offset, int commit, byte[] data) {
        if (blockSize == 0 || offset % blockSize != 0) {
            return; // nothing recorded yet
        }
        long k = offset / blockSize;
        if (k < lengths.length && commits[(int) k] == commit && lengths[(int) k] != 0
                && (lengths[(int) k] != data.length || prints[(int) k] != fingerprint(data))) {
            lengths[(int) k] = 0;
        }
    }

    /** Whether uploads need checking: nothing is recorded before a file's second commit. */
    boolean tracking() {
        return blockSize != 0;
    }

    /** The file is cut (or extended) at {@code length}: the block holding it and all past it are taken again. */
    void truncated(long oldSize, long length) {
        if (blockSize == 0) {
            return;
        }
        long k = Math.min(oldSize, length) / blockSize;
        for (long i = k; i < lengths.length; i++) {
            lengths[(int) i] = 0;
        }
    }

    /** Forgets every fingerprint (a commit failed: the next one takes the whole file). */
    void forget() {
        Arrays.fill(lengths, 0);
    }

    static long fingerprint(byte[] data) {
        CRC32C c = new CRC32C();
        c.update(data);
        CRC32 d = new CRC32();
        d.update(data);
        return c.getValue() << 32 | d.getValue();
    }

    private static long fingerprint(FileChannel ch, long at, int len, ByteBuffer buf) throws IOException {
        CRC32C c = new CRC32C();
        CRC32 d = new CRC32();
        long end = at + len;
        while (at < end) {
            buf.clear().limit((int) Math.min(buf.capacity(), end - at));
            int n = ch.read(buf, at);
            if (n < 0) {
                break; // cut meanwhile: what is missing reads as nothing, which differs from any commit of it
            }
            buf.flip();
            c.update(buf.duplicate());
            d.update(buf);
            at += n;
        }
        return (c.getValue() << 32 | d.getValue()) ^ (end - at); // a short read never matches a full one
    }
}
