package io.partfs.engine.data;

import io.partfs.engine.Attr;
import io.partfs.engine.FileType;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.TreeWalk;
import io.partfs.engine.object.ObjectStore;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * How a file's bytes are stored, for {@code partfs info}: its extents (runs of the file that
 * one slice holds, or holes that read as zeros), the blocks of each, and where this mount reads
 * each block from. With {@code check}, every block not on local disk is asked of the object
 * store (a HEAD), and one that is absent or of another size than its key says is reported so.
 * Only committed data: what a writer still buffers is in no block yet.
 */
public final class FileLayout {
    /** Where a block is read from, or what a check found of it. */
    public enum Where {
        /** In this mount's block cache. */
        BLOCK_CACHE("in the block cache"),
        /** Written in write-back mode and not uploaded yet: only this machine has it. */
        STAGED("staged (not uploaded yet)"),
        /** An object of a store on this machine's disk ({@code file://}). */
        LOCAL_OBJECT("in a local object directory"),
        /** In the object store (not asked: no check). */
        OBJECT_STORE("in the object store"),
        /** In the object store, of the right size: a check asked. */
        CHECKED("in the object store (checked)"),
        /** Not in the object store: the file cannot be read whole. */
        MISSING("MISSING from the object store"),
        /** In the object store with another size than its key says. */
        WRONG_SIZE("WRONG SIZE in the object store");

        private final String text;

        Where(String text) {
            this.text = text;
        }

        /** How {@code partfs info} says it. */
        public String text() {
            return text;
        }

        /** Whether the block cannot be read as committed. */
        public boolean bad() {
            return this == MISSING || this == WRONG_SIZE;
        }
    }

    /** A block: its object key, its size and where it is. {@code storedSize} is what a check found, else -1. */
    public record Block(String key, int size, Where where, long storedSize) {
    }

    /** {@code length} bytes of the file at {@code offset}, held in {@code block}. */
    public record Piece(long offset, int length, Block block) {
    }

    /**
     * {@code length} bytes of the file at {@code offset}, held from byte {@code sliceOffset} of
     * slice {@code slice}, a piece in each of its blocks; slice 0 and no pieces for a hole.
     */
    public record Extent(long offset, int length, long slice, int sliceOffset, List<Piece> pieces) {
        public boolean hole() {
            return slice == 0;
        }

        /** The blocks of its pieces, in file order. */
        public List<Block> blocks() {
            return pieces.stream().map(Piece::block).toList();
        }
    }

    private FileLayout() {
    }

    /**
     * The extents of regular file {@code file} (its attributes as just read: a layout is of one
     * data version), in file order. A block two extents share (a slice an overwrite split) is
     * listed in each, and asked of the store once.
     */
    public static List<Extent> of(ChunkStore chunks, Attr file, boolean check) throws IOException {
        if (file.type() != FileType.FILE) {
            throw new IllegalArgumentException("inode " + file.ino() + " is a " + file.type().name().toLowerCase(java.util.Locale.ROOT)
                    + ", not a regular file: it has no data blocks");
        }
        List<Extent> out = new ArrayList<>();
        java.util.Map<String, Block> seen = new java.util.HashMap<>();
        int bs = chunks.blockSize();
        chunks.forEachSegment(file, 0, file.size(), (at, seg) -> {
            List<Piece> pieces = new ArrayList<>();
            int sliceEnd = seg.sliceOff() + seg.len();
            chunks.segmentBlocks(seg, (key, len) -> {
                Block b = seen.get(key);
                if (b == null) {
                    b = locate(chunks, key, len, check);
                    seen.put(key, b);
                }
                // the block's bytes in the slice, cut to the segment's: blocks are visited from the one holding its first byte
                long blockStart = (long) (seg.sliceOff() / bs + pieces.size()) * bs;
                long from = Math.max(blockStart, seg.sliceOff());
                long to = Math.min(blockStart + len, sliceEnd);
                pieces.add(new Piece(at + (from - seg.sliceOff()), (int) (to - from), b));
            });
            out.add(new Extent(at, seg.len(), seg.isZero() ? 0 : seg.slice().id(), seg.isZero() ? 0 : seg.sliceOff(), List.copyOf(pieces)));
        });
        return out;
    }

    private static Block locate(ChunkStore chunks, String key, int len, boolean check) throws IOException {
        Where local = chunks.cache().contains(key) ? Where.BLOCK_CACHE
                : chunks.staging() != null && chunks.staging().contains(key) ? Where.STAGED
                : chunks.objects().localFile(key) != null ? Where.LOCAL_OBJECT : null;
        if (local == Where.BLOCK_CACHE || local == Where.STAGED || (!check && local != null)) {
            return new Block(key, len, local, -1);
        }
        if (!check) {
            return new Block(key, len, Where.OBJECT_STORE, -1);
        }
        Optional<ObjectStore.ObjectInfo> head = chunks.objects().head(key);
        if (head.isEmpty()) {
            return new Block(key, len, Where.MISSING, -1);
        }
        long stored = head.get().size();
        Where found = stored != len ? Where.WRONG_SIZE : local != null ? Where.LOCAL_OBJECT : Where.CHECKED;
        return new Block(key, len, found, stored);
    }

    /**
     * What a directory tree holds: {@code directories} under it (itself not counted), regular
     * {@code files} (one with several links under it counted once) and their {@code bytes},
     * {@code symlinks}, and {@code others} (devices, FIFOs, sockets).
     */
    public record Tree(long directories, long files, long bytes, long symlinks, long others) {
    }

    /** Counts what the tree under directory {@code dir} holds (symlinks are not followed). */
    public static Tree tree(MetaEngine meta, Attr dir) throws IOException {
        if (dir.type() != FileType.DIRECTORY) {
            throw new IllegalArgumentException("inode " + dir.ino() + " is not a directory");
        }
        long[] n = new long[5]; // directories, files, bytes, symlinks, others
        java.util.Set<Long> linked = new java.util.HashSet<>();
        TreeWalk.breadthFirst(meta, dir.ino(), "", (ino, path, others, subdirectories) -> {
            n[0] += subdirectories;
            for (io.partfs.engine.DirEntry e : others) {
                if (e.type() == FileType.SYMLINK) {
                    n[3]++;
                } else if (e.type() != FileType.FILE) {
                    n[4]++;
                }
            }
            TreeWalk.regularFiles(meta, others, linked, a -> {
                n[1]++;
                n[2] += a.size();
            });
            return true;
        });
        return new Tree(n[0], n[1], n[2], n[3], n[4]);
    }
}
