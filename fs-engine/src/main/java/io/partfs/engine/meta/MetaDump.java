package io.partfs.engine.meta;

import io.partfs.engine.Attr;
import io.partfs.engine.NameCodec;
import io.partfs.engine.VolumeFormat;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.Writer;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.function.LongConsumer;
import java.util.regex.Pattern;

/**
 * A volume's metadata as a text file, to back it up or to move it to another metadata engine
 * (embedded RocksDB to Redis, one Redis to another). The file holds the engine's records as
 * they are, whichever engine they come from, one per line, tab-separated, names and values in
 * base64:
 *
 * <pre>
 * partfs-metadata-dump  1  NAME  UUID      header: format version, the volume's name and uuid
 * C  COUNTER  VALUE                        a counter (nextInode, usedSpace, ...)
 * P  KEY  VALUE                            a plain key: the volume format, an inode, a chunk's
 *                                          slices, a symlink's target
 * H  HASH  FIELD  VALUE                    a field of a hash: a directory entry, an extended
 *                                          attribute, a pending deletion, a slice in the trash
 * end  RECORDS                             the number of records above: a cut file is refused
 * </pre>
 *
 * <p>Mount sessions are not dumped: a loaded volume has no mounts. The records are those of
 * this version of PartFS (inodes in its binary encoding), so a dump is loaded by the same
 * version. A dump reads the volume in one read of the engine: on embedded RocksDB that is one
 * snapshot, a consistent copy even of a mounted volume; Redis has no snapshot, so a dump of a
 * Redis volume is a consistent copy only while nothing changes the volume (no mount).
 */
public final class MetaDump {
    static final String MAGIC = "partfs-metadata-dump";
    static final int VERSION = 1;
    private static final Pattern INODE = Pattern.compile("i[0-9]+");
    private static final Pattern CHUNK = Pattern.compile("c[0-9]+_[0-9]+");
    private static final Pattern SYMLINK = Pattern.compile("s[0-9]+");
    /** Records written to the target per transaction of a load. */
    private static final int LOAD_BATCH = 1000;

    private MetaDump() {
    }

    /** What a dump wrote, or a load read. */
    public record Counts(long records, long inodes, long chunks, VolumeFormat format) {
    }

    /**
     * Writes every record of the volume in {@code kv} to {@code out}; {@code progress} is told the
     * records written so far, now and then.
     */
    public static Counts dump(KvStore kv, Writer out, LongConsumer progress) throws IOException {
        // one read: on RocksDB one snapshot, so a dump of a mounted volume is a point in time
        return kv.read(r -> dump(r, out, progress));
    }

    private static Counts dump(KvStore.Reader r, Writer out, LongConsumer progress) throws IOException {
        byte[] setting = r.get(MetaEngine.SETTING);
        if (setting == null) {
            throw new IOException("no volume in this metadata: nothing to dump");
        }
        VolumeFormat format = VolumeFormat.decode(setting);
        Sink sink = new Sink(out, progress);
        out.write(MAGIC + "\t" + VERSION + "\t" + format.name() + "\t" + format.uuid() + "\n");
        for (String c : MetaEngine.COUNTERS) {
            sink.counter(c, r.counter(c));
        }
        sink.plain(MetaEngine.SETTING, setting);
        long[] inodes = {0};
        r.scanKeys("i", page -> {
            List<String> keys = page.stream().filter(k -> INODE.matcher(k).matches()).toList();
            if (keys.isEmpty()) {
                return;
            }
            List<byte[]> values = r.getAll(keys);
            List<String> xattrs = new ArrayList<>();
            List<String> dirs = new ArrayList<>();
            for (int i = 0; i < keys.size(); i++) {
                if (values.get(i) == null) {
                    continue; // deleted since the scan saw it
                }
                String k = keys.get(i);
                long ino = Long.parseLong(k, 1, k.length(), 10);
                sink.plain(k, values.get(i));
                inodes[0]++;
                xattrs.add(MetaEngine.xattrKey(ino));
                if (Attr.decode(ino, values.get(i)).isDirectory()) {
                    dirs.add(MetaEngine.dirKey(ino));
                }
            }
            hashes(r, xattrs, sink);
            hashes(r, dirs, sink);
        });
        long chunks = plainKeys(r, "c", CHUNK, sink);
        plainKeys(r, "s", SYMLINK, sink);
        byte[] trashHours = r.get(TrashBuckets.TRASH_HOURS);
        if (trashHours != null) {
            sink.plain(TrashBuckets.TRASH_HOURS, trashHours);
        }
        List<String> deletions = new ArrayList<>(List.of(MetaEngine.DELFILES, MetaEngine.DELSLICES, TrashBuckets.TRASH));
        for (String hour : r.hgetAll(TrashBuckets.TRASH).keySet()) {
            deletions.add(TrashBuckets.key(Long.parseLong(hour)));
        }
        for (String list : deletions) { // a page at a time: a busy volume's trash holds millions of slices
            r.scanHash(list, page -> {
                for (Map.Entry<String, byte[]> e : page.entrySet()) {
                    sink.field(list, e.getKey(), e.getValue());
                }
            });
        }
        out.write("end\t" + sink.records + "\n");
        out.flush();
        return new Counts(sink.records, inodes[0], chunks, format);
    }

    private static long plainKeys(KvStore.Reader r, String prefix, Pattern form, Sink sink) throws IOException {
        long[] n = {0};
        r.scanKeys(prefix, page -> {
            List<String> keys = page.stream().filter(k -> form.matcher(k).matches()).toList();
            if (keys.isEmpty()) {
                return;
            }
            List<byte[]> values = r.getAll(keys);
            for (int i = 0; i < keys.size(); i++) {
                if (values.get(i) != null) {
                    sink.plain(keys.get(i), values.get(i));
                    n[0]++;
                }
            }
        });
        return n[0];
    }

    private static void hashes(KvStore.Reader r, List<String> names, Sink sink) throws IOException {
        if (names.isEmpty()) {
            return;
        }
        r.scanHashes(names, (hash, page) -> { // a page at a time: a directory may hold a million entries
            for (Map.Entry<String, byte[]> e : page.entrySet()) {
                sink.field(hash, e.getKey(), e.getValue());
            }
        });
    }

    /** Writes records and counts them. */
    private static final class Sink {
        private static final Base64.Encoder B64 = Base64.getEncoder();
        private final Writer out;
        private final LongConsumer progress;
        long records;

        Sink(Writer out, LongConsumer progress) {
            this.out = out;
            this.progress = progress;
        }

        void counter(String name, long value) throws IOException {
            out.write("C\t" + name + "\t" + value + "\n");
            counted();
        }

        void plain(String key, byte[] value) throws IOException {
            out.write("P\t" + key + "\t" + B64.encodeToString(value) + "\n");
            counted();
        }

        void field(String hash, String field, byte[] value) throws IOException {
            out.write("H\t" + hash + "\t" + B64.encodeToString(NameCodec.encode(field)) + "\t"
                    + B64.encodeToString(value) + "\n");
            counted();
        }

        private void counted() {
            if (++records % 10_000 == 0) {
                progress.accept(records);
            }
        }
    }

    /** One record of a dump file. */
    private record Rec(char kind, String key, String field, byte[] value, long number) {
    }

    /** Opens the dump file again for each pass of {@link #load}. */
    @FunctionalInterface
    public interface Source {
        BufferedReader open() throws IOException;
    }

    /**
     * Writes the records of a dump {@link #check} passed into {@code kv}, once it has checked
     * that {@code kv} holds no volume and no inode; the volume format goes last, so metadata a
     * load stopped in the middle of is never taken for a volume. {@code sliceGap} is added to the
     * slice counter with it: a volume restored from a backup must not give new data the ids, and
     * so the object keys, of slices written after the backup was taken. {@code progress} is told
     * the records written so far, now and then.
     */
    public static Counts load(Source source, Counts checked, KvStore kv, long sliceGap, LongConsumer progress)
            throws IOException {
        boolean[] empty = {true};
        kv.read(r -> {
            if (r.get(MetaEngine.SETTING) != null) {
                empty[0] = false;
                return null;
            }
            for (String c : MetaEngine.COUNTERS) {
                empty[0] &= r.counter(c) == 0;
            }
            r.scanKeys("i", page -> empty[0] &= page.stream().noneMatch(k -> INODE.matcher(k).matches()));
            return null;
        });
        if (!empty[0]) {
            throw new IllegalStateException("the target metadata is not empty (it holds a volume, or part of one): "
                    + "load into an empty Redis database or a new RocksDB directory");
        }
        byte[][] setting = {null};
        long written = 0;
        try (BufferedReader in = source.open()) {
            in.readLine(); // the header, checked
            List<Rec> batch = new ArrayList<>(LOAD_BATCH);
            for (String line = in.readLine(); line != null && !line.startsWith("end\t"); line = in.readLine()) {
                Rec rec = parse(line);
                if (rec.kind() == 'P' && rec.key().equals(MetaEngine.SETTING)) {
                    setting[0] = rec.value();
                    continue;
                }
                batch.add(rec);
                if (batch.size() == LOAD_BATCH) {
                    written += apply(kv, batch);
                    batch.clear();
                    progress.accept(written);
                }
            }
            written += apply(kv, batch);
        }
        kv.update(tx -> {
            if (sliceGap > 0) {
                tx.add(MetaEngine.NEXT_SLICE, sliceGap);
            }
            tx.put(MetaEngine.SETTING, setting[0]);
            return null;
        });
        kv.sync();
        return new Counts(written + 1, checked.inodes(), checked.chunks(), checked.format());
    }

    private static int apply(KvStore kv, List<Rec> batch) throws IOException {
        kv.update(tx -> {
            for (Rec r : batch) {
                switch (r.kind()) {
                    case 'C' -> tx.add(r.key(), r.number());
                    case 'P' -> tx.put(r.key(), r.value());
                    default -> tx.hset(r.key(), r.field(), r.value());
                }
            }
            return null;
        });
        return batch.size();
    }

    /**
     * Reads the whole dump once: its header and every record must parse, and the count at its
     * end match. A cut or damaged file fails here, before a load writes anything.
     */
    public static Counts check(Source source) throws IOException {
        try (BufferedReader in = source.open()) {
            String header = in.readLine();
            String[] h = header == null ? new String[0] : header.split("\t", -1);
            if (h.length < 2 || !h[0].equals(MAGIC)) {
                throw new IOException("not a PartFS metadata dump (it does not start with '" + MAGIC + "')");
            }
            if (!h[1].equals(String.valueOf(VERSION))) {
                throw new IOException("metadata dump format " + h[1] + " is not this version's (" + VERSION
                        + "): load it with the PartFS version that wrote it");
            }
            long records = 0;
            long inodes = 0;
            long chunks = 0;
            VolumeFormat format = null;
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                if (line.startsWith("end\t")) {
                    long said;
                    try {
                        said = Long.parseLong(line.substring(4).trim());
                    } catch (NumberFormatException e) {
                        throw new IOException("metadata dump is damaged: its end line is '" + line + "'");
                    }
                    if (said != records || in.readLine() != null) {
                        throw new IOException("metadata dump is damaged: it says " + said + " records and holds " + records);
                    }
                    if (format == null) {
                        throw new IOException("metadata dump holds no volume format: it was not written by partfs dump");
                    }
                    return new Counts(records, inodes, chunks, format);
                }
                Rec r;
                try {
                    r = parse(line);
                } catch (RuntimeException e) {
                    throw new IOException("metadata dump is damaged at record " + (records + 1) + ": " + e.getMessage());
                }
                records++;
                if (r.kind() == 'P') {
                    if (r.key().equals(MetaEngine.SETTING)) {
                        format = VolumeFormat.decode(r.value());
                    } else if (INODE.matcher(r.key()).matches()) {
                        inodes++;
                    } else if (CHUNK.matcher(r.key()).matches()) {
                        chunks++;
                    }
                }
            }
            throw new IOException("metadata dump is cut short after " + records
                    + " records (no end line): it was not written to the end; use a complete dump");
        }
    }

    private static Rec parse(String line) {
        String[] f = line.split("\t", -1);
        Base64.Decoder b64 = Base64.getDecoder();
        if (f.length == 3 && f[0].equals("C")) {
            return new Rec('C', key(f[1]), null, null, Long.parseLong(f[2]));
        }
        if (f.length == 3 && f[0].equals("P")) {
            return new Rec('P', key(f[1]), null, b64.decode(f[2]), 0);
        }
        if (f.length == 4 && f[0].equals("H")) {
            return new Rec('H', key(f[1]), NameCodec.decode(b64.decode(f[2])), b64.decode(f[3]), 0);
        }
        throw new IllegalArgumentException("unknown record '" + (line.length() > 40 ? line.substring(0, 40) + "..." : line) + "'");
    }

    private static String key(String k) {
        if (k.isEmpty()) {
            throw new IllegalArgumentException("empty key");
        }
        return k;
    }
}
