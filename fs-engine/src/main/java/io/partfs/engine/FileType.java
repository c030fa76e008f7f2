package io.partfs.engine;

/** The kinds of inode, with their {@code S_IFMT} bits. */
public enum FileType {
    FILE(0100000),
    DIRECTORY(0040000),
    SYMLINK(0120000),
    FIFO(0010000),
    SOCKET(0140000),
    CHAR_DEVICE(0020000),
    BLOCK_DEVICE(0060000);

    private final int formatBits;

    FileType(int formatBits) {
        this.formatBits = formatBits;
    }

    /** The {@code S_IFMT} part of {@code st_mode}. */
    public int formatBits() {
        return formatBits;
    }

    /** The type named by the {@code S_IFMT} bits of a mode. */
    public static FileType fromMode(int mode) {
        int fmt = mode & 0170000;
        for (FileType t : values()) {
            if (t.formatBits == fmt) {
                return t;
            }
        }
        throw new IllegalArgumentException("unknown file type in mode 0" + Integer.toOctalString(mode));
    }
}
