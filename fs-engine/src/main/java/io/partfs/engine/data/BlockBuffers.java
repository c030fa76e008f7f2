package io.partfs.engine.data;

import java.util.ArrayDeque;

/**
 * Whole-block write buffers, reused. A big write fills one block-sized array per block; without
 * reuse every one is a new 4 MiB array that the JVM zeroes and its collector then has to reclaim
 * (a 256 MiB write spent ~12% of the sidecar's CPU zeroing them, and as much again in GC).
 * Arrays come back once the blocks they held are stored and committed ({@link FileWriter#flush}).
 *
 * <p>At most {@code max} arrays are kept; {@link #trim} drops them all when none was taken since
 * the last trim, so an idle sidecar does not hold write buffers. Thread-safe.
 */
final class BlockBuffers {
    private final int blockSize;
    private final int max;
    private final ArrayDeque<byte[]> free = new ArrayDeque<>();
    private boolean takenSinceTrim;

    BlockBuffers(int blockSize, int max) {
        this.blockSize = blockSize;
        this.max = max;
    }

    /** A block-sized array with undefined contents: the caller overwrites what it uses. */
    byte[] take() {
        synchronized (this) {
            takenSinceTrim = true;
            byte[] b = free.pollFirst();
            if (b != null) {
                return b;
            }
        }
        return new byte[blockSize];
    }

    /**
     * Gives back an array nobody reads or writes any more; arrays of another size (the exact-size
     * copy of a last partial block) are left to the collector.
     */
    void give(byte[] b) {
        if (b.length != blockSize) {
            return;
        }
        synchronized (this) {
            if (free.size() < max) {
                free.addFirst(b);
            }
        }
    }

    /** Drops the kept arrays if none was taken since the last call; returns how many are kept. */
    synchronized int trim() {
        if (!takenSinceTrim) {
            free.clear();
        }
        takenSinceTrim = false;
        return free.size();
    }

    synchronized int kept() {
        return free.size();
    }
}
