package io.partfs.engine.data;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;

/**
 * What each block of a file the kernel writes itself (FUSE passthrough, {@link BackedFile}) held
 * when it was last committed, so that a commit takes only the bytes that changed since: a file
 * fsynced every 2 MiB as it grows commits (and uploads) what each fsync added, not all of it
 * again each time.
 *
 * <p>The kernel says nothing about which bytes it wrote, so a commit reads the file and compares
 * each block's fingerprint (its length, a CRC32C and a CRC32: two different polynomials, 64 bits
 * in all, so a changed block goes unnoticed with odds of 2^-64) with the one recorded when it
 * was last committed. The first commit reads nothing and takes the whole file: a file committed
 * once (a part file: written, fsynced, closed) costs no extra read. The second takes the whole
 * file too, and records the fingerprints; from the third on a commit takes the runs of blocks
 * that changed, each as one slice per chunk it spans. A run starts inside a block when that
 * block only grew: its first bytes still have the fingerprint recorded for them, so the run
 * starts after them.
 *
 * <p>A staged block is uploaded from the file later, so an upload may read bytes written after
 * its commit; those would then be in the object store under that commit. {@link #readChecked}
 * therefore reads, with the bytes to upload, the recorded part of every block they touch (in
 * one read, so both are the same bytes), and where that part no longer has its fingerprint it
 * forgets the fingerprint: the next commit takes the block again. So a block written, uploaded
 * and written back to the bytes of its commit is not left with the bytes in between. The
 * comparison of a commit ({@link #changes}, then {@link #record}) and an upload's read and check
 * run under this object's lock, one after the other: a check that found a difference is seen by
 * every later commit, and an upload that reads after a commit's comparison checks against what
 * that commit recorded.
 *
 * <p>Not thread-safe on its own: callers hold the lock of this object.
 */
final class CommittedBlocks {
    /**
     * What a commit takes: runs of the file, {@code [bounds[2i], bounds[2i+1])} in order, with the
     * fingerprint and length of each block of the file as read (null for a first commit).
     */
    record Changes(long[] bounds, long[] prints, int[] lengths, int blockSize) {
        int runs() {
            return bounds.length / 2;
        }

        long from(int run) {
            return bounds[2 * run];
        }

        long to(int run) {
            return bounds[2 * run + 1];
        }

        /** One run from the start of the first to the end of the last (what lies between is taken as it is now). */
        Changes merged() {
            return runs() < 2 ? this : new Changes(new long[] {bounds[0], bounds[bounds.length - 1]}, prints, lengths, blockSize);
        }
    }

    /** The part of a run in one chunk: a slice of {@code len} bytes at {@code pos} of chunk {@code chunk}. */
    record Span(long chunk, int pos, int len) {
    }

    /** The slices runs {@code bounds} (as {@link Changes#bounds}) are committed as: those of each run, in order. */
    static java.util.List<Span> spans(long[] bounds) {
        java.util.List<Span> out = new java.util.ArrayList<>();
        for (int r = 0; r < bounds.length; r += 2) {
            out.addAll(spans(bounds[r], bounds[r + 1]));
        }
        return out;
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
    /** Fingerprint of each block's first {@link #lengths} bytes when it was last committed; length 0 where none is known. */
    private long[] prints = new long[0];
    private int[] lengths = new int[0];
    /** The block size of the fingerprints; 0 until the first comparison. */
    private int blockSize;
    /** Commits of data seen: the first one reads nothing. */
    private int seen;

    /**
     * What a commit of the file as {@code ch} holds now ({@code size} bytes, blocks of
     * {@code blockSize}) must take: each run of blocks that differ from the record (from the first
     * byte that differs, in a block that only grew), or the whole file when {@code whole} or
     * nothing is recorded. Reads the file unless this is its first commit. When nothing changed
     * (the same bytes written again), the last block, so that the commit still moves the file's
     * times and data version on. Null for an empty file.
     */
    Changes changes(FileChannel ch, long size, int blockSize, boolean whole) throws IOException {
        if (size == 0) {
            return null;
        }
        if (seen++ == 0) {
            return new Changes(new long[] {0, size}, null, null, blockSize);
        }
        if (this.blockSize != 0 && this.blockSize != blockSize) {
            forget();
        }
        this.blockSize = blockSize;
        int n = (int) ((size + blockSize - 1) / blockSize);
        long[] now = new long[n];
        int[] lens = new int[n];
        long[] bounds = new long[8];
        int runs = 0;
        long last = -2;
        ByteBuffer buf = ByteBuffer.allocate(READ);
        for (int k = 0; k < n; k++) {
            long at = (long) k * blockSize;
            int len = (int) Math.min(blockSize, size - at);
            int known = whole || k >= lengths.length ? 0 : lengths[k];
            long[] fp = fingerprint(ch, at, len, known < len ? known : 0, buf);
            now[k] = fp[0];
            lens[k] = len;
            if (known == len && prints[k] == fp[0]) {
                continue;
            }
            if (k != last + 1) { // a new run; in a block that only grew, after its recorded bytes (committed already)
                if (2 * runs + 2 > bounds.length) {
                    bounds = Arrays.copyOf(bounds, 2 * bounds.length);
                }
                bounds[2 * runs] = known > 0 && known < len && prints[k] == fp[1] ? at + known : at;
                runs++;
            }
            bounds[2 * runs - 1] = at + len;
            last = k;
        }
        if (runs == 0) {
            bounds[0] = (long) (n - 1) * blockSize;
            bounds[1] = size;
            runs = 1;
        }
        return new Changes(Arrays.copyOf(bounds, 2 * runs), now, lens, blockSize);
    }

    /** Records the fingerprints of the blocks that {@code c}'s runs touch, as {@link #changes} read them. */
    void record(Changes c) {
        if (c.prints() == null) {
            return; // a first commit: nothing was read
        }
        int n = c.prints().length;
        if (lengths.length < n) {
            prints = Arrays.copyOf(prints, n);
            lengths = Arrays.copyOf(lengths, n);
        }
        for (int r = 0; r < c.runs(); r++) {
            int to = (int) ((c.to(r) + c.blockSize() - 1) / c.blockSize());
            for (int k = (int) (c.from(r) / c.blockSize()); k < to; k++) {
                prints[k] = c.prints()[k];
                lengths[k] = c.lengths()[k];
            }
        }
        // blocks past the end (a truncation) are no longer the file's
        for (int k = n; k < lengths.length; k++) {
            lengths[k] = 0;
        }
    }

    /**
     * Reads {@code len} bytes at {@code offset} of {@code file} for upload, and in the same read
     * the recorded part of every block they touch: where that part reads otherwise than its
     * fingerprint, or the bytes reach past it, the fingerprint is forgotten and the next commit
     * takes the block again. Bytes past the file's end read as zeros.
     */
    byte[] readChecked(Path file, long offset, int len) throws IOException {
        if (blockSize == 0) {
            return read(file, offset, len);
        }
        long end = offset + len;
        int k0 = (int) (offset / blockSize);
        int k1 = (int) ((end - 1) / blockSize);
        long lo = offset;
        long hi = end;
        for (int k = k0; k <= k1 && k < lengths.length; k++) {
            if (lengths[k] > 0) {
                lo = Math.min(lo, (long) k * blockSize);
                hi = Math.max(hi, (long) k * blockSize + lengths[k]);
            }
        }
        byte[] all = read(file, lo, (int) (hi - lo));
        for (int k = k0; k <= k1 && k < lengths.length; k++) {
            long start = (long) k * blockSize;
            if (lengths[k] > 0 && (Math.min(end, start + blockSize) > start + lengths[k]
                    || fingerprint(all, (int) (start - lo), lengths[k]) != prints[k])) {
                lengths[k] = 0;
            }
        }
        return lo == offset && hi == end ? all : Arrays.copyOfRange(all, (int) (offset - lo), (int) (end - lo));
    }

    private static byte[] read(Path file, long offset, int len) throws IOException {
        byte[] data = new byte[len];
        LocalFiles.readRange(file, offset, len, ByteBuffer.wrap(data), true);
        return data;
    }

    /** Whether fingerprints are kept: nothing is recorded before a file's second commit. */
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

    static long fingerprint(byte[] data, int off, int len) {
        CRC32C c = new CRC32C();
        c.update(data, off, len);
        CRC32 d = new CRC32();
        d.update(data, off, len);
        return c.getValue() << 32 | d.getValue();
    }

    /**
     * The fingerprints of {@code len} bytes at {@code at} of {@code ch} and, when {@code prefix}
     * is above 0, of their first {@code prefix} bytes. A short read (the file cut meanwhile)
     * gives a fingerprint no full read has.
     */
    private static long[] fingerprint(FileChannel ch, long at, int len, int prefix, ByteBuffer buf) throws IOException {
        CRC32C c = new CRC32C();
        CRC32 d = new CRC32();
        long start = at;
        long end = at + len;
        long first = 0;
        while (at < end) {
            long stop = prefix > 0 && at < start + prefix ? start + prefix : end;
            buf.clear().limit((int) Math.min(buf.capacity(), stop - at));
            int n = ch.read(buf, at);
            if (n < 0) {
                break;
            }
            buf.flip();
            c.update(buf.duplicate());
            d.update(buf);
            at += n;
            if (prefix > 0 && at == start + prefix) {
                first = c.getValue() << 32 | d.getValue();
            }
        }
        return new long[] {(c.getValue() << 32 | d.getValue()) ^ (end - at), first};
    }
}
