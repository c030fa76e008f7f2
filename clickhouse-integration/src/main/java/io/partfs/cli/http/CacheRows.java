package io.partfs.cli.http;

import io.partfs.cache.MergeTreePaths;
import io.partfs.cache.PartMetadataStore;
import io.partfs.cache.TableSelector;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Optional;

/**
 * The part-metadata cache as rows of {@code key, value, table, part, file, size}, written in
 * ClickHouse's TabSeparated or JSONEachRow format so that its {@code url()} table function reads
 * them back exactly: values are bytes (primary.idx is binary) and come back byte-identical.
 */
public final class CacheRows {
    /** The structure to give ClickHouse's url() for these rows. */
    public static final String STRUCTURE = "key String, value String, table String, part String, file String, size UInt64";

    public enum Format {
        TAB_SEPARATED("TabSeparated", "text/tab-separated-values; charset=UTF-8"),
        JSON_EACH_ROW("JSONEachRow", "application/x-ndjson; charset=UTF-8");

        final String clickHouseName;
        final String contentType;

        Format(String name, String contentType) {
            this.clickHouseName = name;
            this.contentType = contentType;
        }

        public String contentType() {
            return contentType;
        }

        /** TabSeparated (also TSV) or JSONEachRow, case-insensitive. */
        public static Format parse(String s) {
            if (s == null || s.equalsIgnoreCase("TabSeparated") || s.equalsIgnoreCase("TSV")) {
                return TAB_SEPARATED;
            }
            if (s.equalsIgnoreCase("JSONEachRow")) {
                return JSON_EACH_ROW;
            }
            throw new IllegalArgumentException("unknown format '" + s + "': use TabSeparated or JSONEachRow");
        }
    }

    private final PartMetadataStore store;
    private final TableSelector tables;

    public CacheRows(PartMetadataStore store, TableSelector tables) {
        this.store = store;
        this.tables = tables;
    }

    /** Writes the rows {@code filter} selects, at most {@code limit}; returns how many. */
    public long write(KeyFilter filter, long limit, Format format, OutputStream out) throws IOException {
        long[] n = {0};
        PartMetadataStore.EntryVisitor emit = (key, e) -> {
            if (n[0] >= limit) {
                return false;
            }
            writeRow(key, filter.values() ? e.bytes() : new byte[0], e.size(), format, out);
            n[0]++;
            return true;
        };
        if (filter.isAll()) {
            store.forEachEntry("", emit);
            return n[0];
        }
        for (String key : filter.keys()) {
            Optional<PartMetadataStore.Entry> e = store.peek(key);
            if (e.isPresent() && !emit.visit(key, e.get())) {
                return n[0];
            }
        }
        for (String prefix : filter.prefixes()) {
            store.forEachEntry(prefix, (key, e) -> filter.keys().contains(key) || emit.visit(key, e));
        }
        return n[0];
    }

    private void writeRow(String key, byte[] value, long size, Format format, OutputStream out) throws IOException {
        String path = key.substring(key.indexOf(':') + 1);
        Optional<MergeTreePaths.TableRef> t = MergeTreePaths.tableOfMetadataFile(path);
        String table = t.map(r -> r.isAtomic() ? tables.tableOf(r.uuid()).orElse(r.toString()) : r.toString()).orElse("");
        Optional<MergeTreePaths.TablePath> tp = MergeTreePaths.parse(path);
        String part = tp.flatMap(MergeTreePaths.TablePath::partDir).orElse("");
        String file = tp.flatMap(MergeTreePaths.TablePath::fileInPart)
                .orElse(t.isPresent() ? path.substring(path.lastIndexOf('/') + 1) : ""); // a table's own file: format_version.txt, <table>.sql
        byte[][] strings = {utf8(key), value, utf8(table), utf8(part), utf8(file)};
        String[] names = {"key", "value", "table", "part", "file"};
        if (format == Format.TAB_SEPARATED) {
            for (byte[] s : strings) {
                tsv(s, out);
                out.write('\t');
            }
            out.write(utf8(Long.toString(size)));
            out.write('\n');
        } else {
            out.write('{');
            for (int i = 0; i < strings.length; i++) {
                out.write(utf8("\"" + names[i] + "\":"));
                json(strings[i], out);
                out.write(',');
            }
            out.write(utf8("\"size\":" + size + "}\n"));
        }
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** ClickHouse's TabSeparated escaping: backslash, tab, newline and other control bytes. */
    static void tsv(byte[] s, OutputStream out) throws IOException {
        for (byte b : s) {
            switch (b) {
                case '\\' -> out.write(new byte[] {'\\', '\\'});
                case '\t' -> out.write(new byte[] {'\\', 't'});
                case '\n' -> out.write(new byte[] {'\\', 'n'});
                case '\r' -> out.write(new byte[] {'\\', 'r'});
                case '\b' -> out.write(new byte[] {'\\', 'b'});
                case '\f' -> out.write(new byte[] {'\\', 'f'});
                case 0 -> out.write(new byte[] {'\\', '0'});
                default -> out.write(b);
            }
        }
    }

    /**
     * A JSON string as ClickHouse writes and reads it: quote, backslash and control bytes
     * escaped, other bytes (binary included) written as they are, so values stay byte-exact.
     */
    static void json(byte[] s, OutputStream out) throws IOException {
        out.write('"');
        for (byte b : s) {
            if (b == '"' || b == '\\') {
                out.write('\\');
                out.write(b);
            } else if (b >= 0 && b < 0x20) {
                out.write(utf8(String.format("\\u%04x", b)));
            } else {
                out.write(b);
            }
        }
        out.write('"');
    }
}
