package io.partfs.engine;

import java.io.IOException;
import java.io.StringReader;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.UUID;

/**
 * What {@code partfs format} fixes for the life of a volume. Stored in the metadata engine;
 * every mount reads it and refuses to run against a volume formatted differently.
 *
 * @param name      volume name: the object key prefix of its data
 * @param uuid      identity of this volume, so two volumes of one name can be told apart
 * @param blockSize largest object of file data, in bytes
 * @param storage   where the objects live, as {@code partfs format --storage} gave it (no secrets)
 */
public record VolumeFormat(String name, String uuid, int blockSize, String storage) {
    public static final int CHUNK_SIZE = 64 << 20;
    public static final int DEFAULT_BLOCK_SIZE = 4 << 20;
    private static final int FORMAT_VERSION = 1;

    public VolumeFormat {
        if (name == null || !name.matches("[a-z0-9][a-z0-9\\-]{1,62}")) {
            throw new IllegalArgumentException("invalid volume name '" + name
                    + "': use 2-63 lowercase letters, digits or '-', starting with a letter or digit");
        }
        if (blockSize < 64 << 10 || blockSize > 16 << 20 || Integer.bitCount(blockSize) != 1) {
            throw new IllegalArgumentException("invalid block size " + blockSize
                    + ": use a power of two from 64K to 16M (default 4M)");
        }
    }

    public static VolumeFormat create(String name, int blockSize, String storage) {
        return new VolumeFormat(name, UUID.randomUUID().toString(), blockSize, storage);
    }

    public byte[] encode() {
        Properties p = new Properties();
        p.setProperty("formatVersion", String.valueOf(FORMAT_VERSION));
        p.setProperty("name", name);
        p.setProperty("uuid", uuid);
        p.setProperty("blockSize", String.valueOf(blockSize));
        p.setProperty("storage", storage);
        StringWriter w = new StringWriter();
        try {
            p.store(w, null);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        return w.toString().getBytes(StandardCharsets.UTF_8);
    }

    /** Whether {@code bytes} are a volume format of any version (and not another program's value). */
    public static boolean looksLikeOne(byte[] bytes) {
        Properties p = new Properties();
        try {
            p.load(new StringReader(new String(bytes, StandardCharsets.UTF_8)));
        } catch (IOException | IllegalArgumentException e) {
            return false;
        }
        return p.getProperty("formatVersion", "").matches("[0-9]{1,9}") && p.getProperty("name") != null
                && p.getProperty("uuid") != null;
    }

    public static VolumeFormat decode(byte[] bytes) throws IOException {
        Properties p = new Properties();
        p.load(new StringReader(new String(bytes, StandardCharsets.UTF_8)));
        int version = Integer.parseInt(p.getProperty("formatVersion", "0"));
        if (version != FORMAT_VERSION) {
            throw new IOException("volume has format version " + version + "; this partfs reads version "
                    + FORMAT_VERSION + ": use a matching partfs release");
        }
        return new VolumeFormat(p.getProperty("name"), p.getProperty("uuid"),
                Integer.parseInt(p.getProperty("blockSize")), p.getProperty("storage"));
    }
}
