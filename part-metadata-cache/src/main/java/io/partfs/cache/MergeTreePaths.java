package io.partfs.cache;

import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What a path relative to a ClickHouse disk root means to MergeTree: which table it belongs to,
 * which part, and whether it is one of the small metadata files ClickHouse reads when it loads
 * a part or attaches a table. Pure functions of the path; no I/O.
 *
 * <p>Layouts: Ordinary databases keep a table in {@code data/<db>/<table>/}; Atomic databases in
 * {@code store/<3 hex>/<uuid>/} (with {@code data/<db>/<table>} a symlink to it). A part is a
 * directory directly in the table directory, or in its {@code detached/}; projections are
 * {@code <name>.proj/} directories inside a part. A table's DDL is {@code metadata/<db>/<table>.sql}.
 * ClickHouse escapes file names ({@code my-table} is {@code my%2Dtable}); table names here are
 * the unescaped ones, as SQL and {@code system.tables} show them.
 */
public final class MergeTreePaths {
    private MergeTreePaths() {
    }

    private static final Pattern ORDINARY = Pattern.compile("^data/([^/]+)/([^/]+)/(.+)$");
    private static final Pattern DDL = Pattern.compile("^metadata/([^/]+)/([^/]+)\\.sql$");
    private static final Pattern ATOMIC = Pattern.compile("^store/([0-9a-f]{3})/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/(.+)$");
    private static final Pattern METADATA_FILE = Pattern.compile(
            "^(checksums\\.txt|columns\\.txt|count\\.txt|primary\\.idx|primary\\.cidx|partition\\.dat|minmax_[^/]+\\.idx"
                    + "|default_compression_codec\\.txt|uuid\\.txt|ttl\\.txt|serialization\\.json|metadata_version\\.txt)$");

    /** Where a table's data lives: by database and table name, or by UUID for Atomic databases. */
    public record TableRef(String database, String table, String uuid) {
        public static TableRef ordinary(String db, String table) {
            return new TableRef(db, table, null);
        }

        public static TableRef atomic(String uuid) {
            return new TableRef(null, null, uuid);
        }

        public boolean isAtomic() {
            return uuid != null;
        }

        @Override
        public String toString() {
            return isAtomic() ? "uuid " + uuid : database + "." + table;
        }
    }

    /**
     * A path inside a table's data directory: the table, the directory holding it (relative to
     * the disk root), and the rest of the path below the table directory.
     */
    public record TablePath(TableRef table, String tableDir, String rest) {
        /** The part directory this path is in (relative to the table directory), or empty. */
        public Optional<String> partDir() {
            String[] parts = rest.split("/");
            if (parts.length >= 2 && !parts[0].equals("detached") && isPartName(parts[0])) {
                return Optional.of(parts[0]);
            }
            if (parts.length >= 3 && parts[0].equals("detached")) {
                return Optional.of("detached/" + parts[1]);
            }
            return Optional.empty();
        }

        /** The file name below the part directory, including any projection directory. */
        public Optional<String> fileInPart() {
            return partDir().map(p -> rest.substring(p.length() + 1));
        }
    }

    /** The table a path belongs to, or empty when it is not inside a table directory. */
    public static Optional<TablePath> parse(String relativePath) {
        String p = normalize(relativePath);
        Matcher m = ORDINARY.matcher(p);
        if (m.matches()) {
            return Optional.of(new TablePath(TableRef.ordinary(unescape(m.group(1)), unescape(m.group(2))),
                    "data/" + m.group(1) + "/" + m.group(2), m.group(3)));
        }
        m = ATOMIC.matcher(p);
        if (m.matches() && m.group(2).startsWith(m.group(1))) {
            return Optional.of(new TablePath(TableRef.atomic(m.group(2)), "store/" + m.group(1) + "/" + m.group(2), m.group(3)));
        }
        return Optional.empty();
    }

    /**
     * True for the part-metadata files ClickHouse reads when it loads a part (also inside a
     * projection directory of a part), in a part directory or a temporary one about to be renamed.
     */
    public static boolean isPartMetadataFile(String relativePath) {
        if (!hasMetadataSuffix(relativePath)) {
            return false; // column data and marks, most of a part: no pattern matching for them
        }
        return parse(relativePath).map(MergeTreePaths::isPartMetadataFile).orElse(false);
    }

    private static boolean isPartMetadataFile(TablePath t) {
        Optional<String> file = t.fileInPart();
        if (file.isEmpty()) {
            return false;
        }
        String f = file.get();
        int slash = f.indexOf('/');
        if (slash >= 0) {
            String dir = f.substring(0, slash);
            f = f.substring(slash + 1);
            if (!dir.endsWith(".proj") || f.contains("/")) {
                return false;
            }
        }
        return METADATA_FILE.matcher(f).matches();
    }

    /**
     * True for the small files ClickHouse reads once per table when it attaches the table: its
     * {@code format_version.txt}, and its DDL ({@code metadata/<db>/<table>.sql}).
     */
    public static boolean isTableMetadataFile(String relativePath) {
        if (relativePath.endsWith(".sql")) {
            return ddlTable(relativePath).isPresent();
        }
        return relativePath.endsWith("/format_version.txt")
                && parse(relativePath).map(t -> t.rest().equals("format_version.txt")).orElse(false);
    }

    /**
     * The table whose DDL file this is ({@code metadata/<db>/<table>.sql}), or empty. An Atomic
     * database's metadata directory is a symlink into {@code store/}, so paths there are not
     * DDL paths to this class.
     */
    public static Optional<TableRef> ddlTable(String relativePath) {
        Matcher m = DDL.matcher(normalize(relativePath));
        return m.matches() ? Optional.of(TableRef.ordinary(unescape(m.group(1)), unescape(m.group(2)))) : Optional.empty();
    }

    /** The table a part-metadata or table-metadata file belongs to, or empty for other paths. */
    public static Optional<TableRef> tableOfMetadataFile(String relativePath) {
        if (relativePath.endsWith(".sql")) {
            return ddlTable(relativePath);
        }
        if (!hasMetadataSuffix(relativePath)) {
            return Optional.empty(); // column data and marks: every FUSE open asks, so no pattern matching for them
        }
        return parse(relativePath) // once: a part's file or the table's format_version.txt
                .filter(t -> isPartMetadataFile(t) || t.rest().equals("format_version.txt"))
                .map(TablePath::table);
    }

    /** ClickHouse's file-name escaping undone: {@code %XX} is the byte XX. */
    static String unescape(String s) {
        if (s.indexOf('%') < 0) {
            return s;
        }
        try {
            return java.net.URLDecoder.decode(s.replace("+", "%2B"), java.nio.charset.StandardCharsets.UTF_8);
        } catch (IllegalArgumentException notEscaped) {
            return s; // a name ClickHouse did not write ("50%off")
        }
    }

    /** Whether a path ends as every name {@link #METADATA_FILE} matches does. */
    private static boolean hasMetadataSuffix(String p) {
        return p.endsWith(".txt") || p.endsWith(".idx") || p.endsWith(".dat") || p.endsWith(".json") || p.endsWith(".cidx");
    }

    /**
     * True for a directory name that can hold a part: a part name ({@code <partition>_<min>_<max>_<level>[_<mutation>]}),
     * or a temporary name ClickHouse renames into one or out of one ({@code tmp_*}, {@code tmp-fetch_*},
     * {@code delete_tmp_*}, {@code attaching_*}, ...).
     */
    public static boolean isPartName(String name) {
        if (name.equals("detached") || name.equals("format_version.txt") || name.endsWith(".txt") || name.endsWith(".sql")) {
            return false;
        }
        return name.matches("^[^/]+_-?\\d+_-?\\d+_\\d+(_\\d+)?$") || name.startsWith("tmp") || name.startsWith("delete_tmp_")
                || name.startsWith("attaching_") || name.startsWith("deleting_") || name.startsWith("ignored_")
                || name.startsWith("broken");
    }

    private static String normalize(String p) {
        String s = p.startsWith("/") ? p.substring(1) : p;
        while (s.contains("//")) {
            s = s.replace("//", "/");
        }
        return s.endsWith("/") ? s.substring(0, s.length() - 1) : s;
    }

    /** The cache key of a path on a disk: {@code disk:relative_path}. */
    public static String key(String disk, String relativePath) {
        return disk + ":" + normalize(relativePath);
    }
}
