package io.partfs.engine;

import java.nio.ByteBuffer;

/**
 * The attributes of one inode, as stored by the metadata engine. Immutable.
 *
 * @param ino    inode number (root is 1)
 * @param type   file type
 * @param mode   permission bits including setuid, setgid and sticky ({@code 07777})
 * @param nlink  hard links; directories count "." and each subdirectory's ".."
 * @param size   bytes for files, target length for symlinks, 4096 for directories
 * @param parent the parent directory for directories (for ".." and subtree checks), else 0
 * @param dataVersion changes on every change of the file's content (write commit, truncate) and
 *                    on nothing else; with {@code ino} and {@code size} it proves a cached copy current
 */
public record Attr(long ino, FileType type, int mode, int uid, int gid, int nlink, long size,
                   long atimeNs, long mtimeNs, long ctimeNs, int rdev, long parent, long dataVersion) {

    private static final byte VERSION = 1;
    private static final int ENCODED_SIZE = 1 + 1 + 4 * 5 + 8 * 6;

    public boolean isDirectory() {
        return type == FileType.DIRECTORY;
    }

    /** {@code st_mode}: type and permission bits. */
    public int stMode() {
        return type.formatBits() | (mode & 07777);
    }

    public Attr withSize(long newSize) {
        return new Attr(ino, type, mode, uid, gid, nlink, newSize, atimeNs, mtimeNs, ctimeNs, rdev, parent, dataVersion);
    }

    public Attr withNlink(int n) {
        return new Attr(ino, type, mode, uid, gid, n, size, atimeNs, mtimeNs, ctimeNs, rdev, parent, dataVersion);
    }

    public Attr withParent(long p) {
        return new Attr(ino, type, mode, uid, gid, nlink, size, atimeNs, mtimeNs, ctimeNs, rdev, p, dataVersion);
    }

    public Attr withMode(int m) {
        return new Attr(ino, type, m & 07777, uid, gid, nlink, size, atimeNs, mtimeNs, ctimeNs, rdev, parent, dataVersion);
    }

    public Attr withOwner(int u, int g) {
        return new Attr(ino, type, mode, u, g, nlink, size, atimeNs, mtimeNs, ctimeNs, rdev, parent, dataVersion);
    }

    public Attr withTimes(long a, long m, long c) {
        return new Attr(ino, type, mode, uid, gid, nlink, size, a, m, c, rdev, parent, dataVersion);
    }

    /** The attributes after a change of content: size, mtime and ctime, and the next data version. */
    public Attr contentChanged(long newSize, long now) {
        return new Attr(ino, type, mode, uid, gid, nlink, newSize, atimeNs, now, now, rdev, parent, dataVersion + 1);
    }

    /**
     * The attributes after the file's bytes were laid out anew in the store with no change of
     * content (a compaction): the next data version, so nothing cached of the old layout is
     * used; size and times stay.
     */
    public Attr relaid() {
        return new Attr(ino, type, mode, uid, gid, nlink, size, atimeNs, mtimeNs, ctimeNs, rdev, parent, dataVersion + 1);
    }

    /** Same attributes with mtime and ctime set to {@code now} (a content or entry change). */
    public Attr modified(long now) {
        return withTimes(atimeNs, now, now);
    }

    /** Same attributes with ctime set to {@code now} (a metadata change). */
    public Attr changed(long now) {
        return withTimes(atimeNs, mtimeNs, now);
    }

    public byte[] encode() {
        ByteBuffer b = ByteBuffer.allocate(ENCODED_SIZE);
        b.put(VERSION).put((byte) type.ordinal());
        b.putInt(mode).putInt(uid).putInt(gid).putInt(nlink).putInt(rdev);
        b.putLong(size).putLong(atimeNs).putLong(mtimeNs).putLong(ctimeNs).putLong(parent).putLong(dataVersion);
        return b.array();
    }

    public static Attr decode(long ino, byte[] bytes) {
        ByteBuffer b = ByteBuffer.wrap(bytes);
        byte version = b.get();
        if (version != VERSION) {
            throw new IllegalStateException("inode " + ino + " has attribute format " + version + ", this build reads " + VERSION);
        }
        FileType type = FileType.values()[b.get()];
        int mode = b.getInt();
        int uid = b.getInt();
        int gid = b.getInt();
        int nlink = b.getInt();
        int rdev = b.getInt();
        long size = b.getLong();
        long atime = b.getLong();
        long mtime = b.getLong();
        long ctime = b.getLong();
        long parent = b.getLong();
        long dataVersion = b.getLong();
        return new Attr(ino, type, mode, uid, gid, nlink, size, atime, mtime, ctime, rdev, parent, dataVersion);
    }
}
