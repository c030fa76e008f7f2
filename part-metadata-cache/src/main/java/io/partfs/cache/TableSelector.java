package io.partfs.cache;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Which tables have their part metadata cached: those named by the mount option
 * ({@code all}, or {@code db.table} and {@code db.*} entries), and those whose DDL in
 * {@code metadata/<db>/<table>.sql} says {@code SETTINGS use_metadata_cache = true} (ClickHouse
 * 23.9+ keeps that obsolete setting there). Atomic tables are matched through the UUID in their
 * DDL. Thread-safe.
 */
public final class TableSelector {
    private static final Pattern USE_CACHE = Pattern.compile("(?i)\\buse_metadata_cache\\s*=\\s*(1|true|'1'|'true')\\b");
    private static final Pattern UUID_CLAUSE = Pattern.compile("(?i)\\bUUID\\s+'([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})'");

    private final boolean all;
    private final Set<String> named;
    /** db.table of tables whose DDL asks for the cache. */
    private final Set<String> byDdl = ConcurrentHashMap.newKeySet();
    /** db.table of tables registered at run time ({@code partfs sql}), to their UUID or "" (Ordinary). */
    private final Map<String, String> registered = new ConcurrentHashMap<>();
    /** UUID of an Atomic table to its db.table. */
    private final Map<String, String> uuids = new ConcurrentHashMap<>();

    private TableSelector(boolean all, Set<String> named) {
        this.all = all;
        this.named = named;
    }

    /**
     * Parses the mount option: {@code all}, empty (only tables whose DDL asks), or a comma list
     * of {@code db.table} / {@code db.*}.
     */
    public static TableSelector parse(String option) {
        if (option == null || option.isBlank()) {
            return new TableSelector(false, Set.of());
        }
        if (option.trim().equalsIgnoreCase("all")) {
            return new TableSelector(true, Set.of());
        }
        Set<String> names = ConcurrentHashMap.newKeySet();
        for (String item : option.split(",")) {
            String t = item.trim();
            if (!t.matches("[^.\\s]+\\.([^.\\s]+|\\*)")) {
                throw new IllegalArgumentException("invalid table '" + t + "' in --metadata-cache-tables: use all, or db.table and db.* separated by commas");
            }
            names.add(t);
        }
        return new TableSelector(false, names);
    }

    public boolean selectsAll() {
        return all;
    }

    public boolean selected(MergeTreePaths.TableRef table) {
        if (all) {
            return true;
        }
        String name = table.isAtomic() ? uuids.get(table.uuid()) : table.database() + "." + table.table();
        if (name == null) {
            return false;
        }
        return byDdl.contains(name) || registered.containsKey(name) || named.contains(name) || named.contains(name.substring(0, name.indexOf('.')) + ".*");
    }

    /** Whether {@code db.table} is selected (for listing tables). */
    public boolean selected(String database, String table) {
        return selected(MergeTreePaths.TableRef.ordinary(database, table));
    }

    /**
     * Why {@code db.table} is cached: "all", "option", "ddl", "registered", or empty when it is
     * not (for {@code partfs clickhouse tables}).
     */
    public Optional<String> reason(String database, String table) {
        String name = database + "." + table;
        if (all) {
            return Optional.of("all");
        }
        if (byDdl.contains(name)) {
            return Optional.of("ddl");
        }
        if (registered.containsKey(name)) {
            return Optional.of("registered");
        }
        if (named.contains(name) || named.contains(database + ".*")) {
            return Optional.of("option");
        }
        return Optional.empty();
    }

    /**
     * Selects {@code db.table} from now on, and its data under {@code store/} when {@code uuid}
     * is given (an Atomic table); returns false when it already was registered so.
     */
    public boolean register(String name, String uuid) {
        checkName(name);
        String u = uuid == null || uuid.isBlank() || uuid.equals(NIL_UUID) ? "" : uuid;
        if (!u.isEmpty()) {
            if (!isTableUuid(u)) {
                throw new IllegalArgumentException("invalid table UUID '" + uuid + "'");
            }
            uuids.put(u, name);
        }
        return !u.equals(registered.put(name, u));
    }

    public boolean unregister(String name) {
        return registered.remove(name) != null;
    }

    /** Registered tables as {@code db.table} or {@code db.table<TAB>uuid} lines, sorted (as saved). */
    public List<String> registered() {
        return registered.entrySet().stream().map(e -> e.getValue().isEmpty() ? e.getKey() : e.getKey() + "\t" + e.getValue())
                .sorted().toList();
    }

    /** Registers a line of {@link #registered()}. */
    public void registerLine(String line) {
        String[] f = line.split("\t", 2);
        register(f[0], f.length > 1 ? f[1] : null);
    }

    private static final String NIL_UUID = "00000000-0000-0000-0000-000000000000";

    /** A UUID as Atomic databases name table directories (Ordinary tables report the nil UUID). */
    private static boolean isTableUuid(String u) {
        return u != null && u.matches("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}") && !u.equals(NIL_UUID);
    }

    private static void checkName(String name) {
        if (name == null || !name.matches("[^.\\s]+\\.[^.\\s]+")) {
            throw new IllegalArgumentException("invalid table '" + name + "': use db.table");
        }
    }

    /** True for paths of table DDL files, which {@link #learn} reads. */
    public static boolean isTableDdl(String relativePath) {
        return MergeTreePaths.ddlTable(relativePath).isPresent();
    }

    /** Reads a table's DDL ({@code metadata/<db>/<table>.sql}): its UUID and whether it asks for the cache. */
    public void learn(String relativePath, byte[] ddl) {
        MergeTreePaths.ddlTable(relativePath).ifPresent(t -> learnDdl(t.toString(), null, new String(ddl, StandardCharsets.UTF_8)));
    }

    /**
     * Reads one table's DDL text (from its file, or {@code create_table_query} of the server's
     * system.tables when the metadata is not on this volume), with its UUID when known.
     */
    public void learnDdl(String name, String uuid, String text) {
        Matcher u = UUID_CLAUSE.matcher(text);
        if (u.find()) {
            uuids.put(u.group(1), name);
        } else if (isTableUuid(uuid)) {
            uuids.put(uuid, name);
        }
        if (USE_CACHE.matcher(text).find()) {
            byDdl.add(name);
        } else {
            byDdl.remove(name);
        }
    }

    /** Forgets a table whose DDL file was removed (DROP moves it to metadata_dropped/). */
    public void forget(String relativePath) {
        MergeTreePaths.ddlTable(relativePath).map(MergeTreePaths.TableRef::toString).ifPresent(name -> {
            byDdl.remove(name);
            uuids.values().removeIf(name::equals);
        });
    }

    /**
     * The db.table a part-metadata or table-metadata file belongs to (an Atomic table's through
     * the UUID its DDL gave), or empty.
     */
    public Optional<String> tableNameOf(String relativePath) {
        return MergeTreePaths.tableOfMetadataFile(relativePath).flatMap(t -> t.isAtomic() ? tableOf(t.uuid()) : Optional.of(t.toString()));
    }

    /** The db.table an Atomic table's UUID belongs to, if its DDL was seen. */
    public Optional<String> tableOf(String uuid) {
        return Optional.ofNullable(uuids.get(uuid));
    }

    /** Tables selected through their DDL so far. */
    public List<String> ddlSelected() {
        return byDdl.stream().sorted().toList();
    }
}
