package io.partfs.engine.meta;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * A view of one written slice inside a chunk: bytes {@code [off, off+len)} of slice {@code id}
 * (whose objects hold {@code size} bytes in all) appear at {@code pos} within the chunk. Id 0
 * is a hole: it reads as zeros (left by a truncate). Later slices in a chunk's list cover
 * earlier ones.
 */
public record Slice(long id, int size, int off, int len, int pos) {
    static final int ENCODED_SIZE = 24;

    public static Slice hole(int pos, int len) {
        return new Slice(0, len, 0, len, pos);
    }

    public boolean isHole() {
        return id == 0;
    }

    public int end() {
        return pos + len;
    }

    void encodeTo(ByteBuffer b) {
        b.putLong(id).putInt(size).putInt(off).putInt(len).putInt(pos);
    }

    static byte[] append(byte[] list, Slice s) {
        int n = list == null ? 0 : list.length;
        ByteBuffer b = ByteBuffer.allocate(n + ENCODED_SIZE);
        if (list != null) {
            b.put(list);
        }
        s.encodeTo(b);
        return b.array();
    }

    /** The stored form of a list: what {@link #append} built it into; null for an empty list (no key). */
    static byte[] encodeList(List<Slice> slices) {
        if (slices.isEmpty()) {
            return null;
        }
        ByteBuffer b = ByteBuffer.allocate(slices.size() * ENCODED_SIZE);
        for (Slice s : slices) {
            s.encodeTo(b);
        }
        return b.array();
    }

    static List<Slice> decodeList(byte[] bytes) {
        if (bytes == null) {
            return List.of();
        }
        if (bytes.length % ENCODED_SIZE != 0) {
            throw new IllegalStateException("slice list of " + bytes.length + " bytes is not a whole number of slices");
        }
        ByteBuffer b = ByteBuffer.wrap(bytes);
        List<Slice> out = new ArrayList<>(bytes.length / ENCODED_SIZE);
        while (b.hasRemaining()) {
            out.add(new Slice(b.getLong(), b.getInt(), b.getInt(), b.getInt(), b.getInt()));
        }
        return out;
    }
}
