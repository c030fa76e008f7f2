package io.partfs.cli;

import io.partfs.cli.clickhouse.ClickHouseClient;
import java.io.IOException;
import java.io.PrintWriter;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code partfs sql "..."}: sends one statement to ClickHouse. A {@code CREATE TABLE} with
 * {@code SETTINGS use_metadata_cache = true} goes as written to a server that knows the setting
 * ({@code system.merge_tree_settings} lists it: 22.2 and later, obsolete but accepted since
 * 23.9); a server that does not (18.16 cannot even parse {@code true}) gets the statement
 * without that setting. Either way the table (with its UUID, for Atomic databases) is then
 * registered with the running sidecar, which caches its part metadata from then on: the DDL
 * file is on the mount only when ClickHouse's whole path is. One code path for all servers.
 */
@Command(name = "sql", mixinStandardHelpOptions = true,
        description = {"Run one ClickHouse statement (through clickhouse-jdbc) and print its rows, tab-separated.",
                "CREATE TABLE ... SETTINGS use_metadata_cache = true works on every server: where ClickHouse",
                "does not know the setting, the table is created without it; either way it is registered",
                "with the running sidecar (--sidecar), which caches its part metadata from then on."})
final class SqlCommand implements Callable<Integer> {
    static final Pattern SETTING = Pattern.compile("(?i)\\buse_metadata_cache\\s*=\\s*(true|false|1|0|'true'|'false'|'1'|'0')");
    private static final Pattern CREATE = Pattern.compile(
            "(?is)^\\s*(?:CREATE|ATTACH)\\s+TABLE\\s+(?:IF\\s+NOT\\s+EXISTS\\s+)?(`[^`]+`|[A-Za-z0-9_]+)(?:\\s*\\.\\s*(`[^`]+`|[A-Za-z0-9_]+))?");
    private static final Pattern EMPTY_SETTINGS_AT_END = Pattern.compile("(?is)\\s*\\bSETTINGS\\s*(?=$|;)");
    private static final Pattern EMPTY_SETTINGS = Pattern.compile("(?is)\\bSETTINGS\\s*(?=\\bFORMAT\\b|\\bAS\\b|\\bCOMMENT\\b)");

    @Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Mixin
    ClickHouseOptions clickhouse;

    @Mixin
    SidecarOptions sidecar;

    @Option(names = "--database", paramLabel = "NAME", defaultValue = "default",
            description = "Database of an unqualified table name in CREATE TABLE (default: ${DEFAULT-VALUE}).")
    String database;

    @Parameters(index = "0", paramLabel = "STATEMENT", description = "The statement, quoted as one argument.")
    String statement;

    @Override
    public Integer call() throws Exception {
        ClickHouseClient ch = clickhouse.client();
        PrintWriter out = spec.commandLine().getOut();
        Optional<Boolean> wantsCache = wantsCache(statement);
        Optional<String> table = createdTable(statement, database);
        if (wantsCache.isEmpty() || table.isEmpty()) {
            run(ch, statement, out);
            return 0;
        }
        String version = ch.version();
        boolean known = ch.hasMergeTreeSetting("use_metadata_cache"); // 22.2 and later; obsolete but accepted since 23.9
        ch.execute(known ? statement : withoutSetting(statement));
        String how = known ? "with use_metadata_cache in its DDL" : "without use_metadata_cache (ClickHouse " + version + " does not know it)";
        if (!wantsCache.get()) {
            out.printf("partfs: created %s %s%n", table.get(), how);
            return 0;
        }
        // Registered in both cases: the DDL file is on the mount only when ClickHouse's whole path is.
        String uuid = uuidOf(ch, table.get());
        sidecar.call("POST", "/tables?name=" + SidecarOptions.enc(table.get()) + (uuid == null ? "" : "&uuid=" + uuid));
        out.printf("partfs: created %s %s and registered it with the sidecar at %s: its part metadata is cached%n",
                table.get(), how, sidecar.base());
        return 0;
    }

    /** The table's UUID on servers that have them (Atomic databases), else null. */
    private static String uuidOf(ClickHouseClient ch, String table) throws IOException {
        if (!ch.hasColumn("tables", "uuid")) {
            return null;
        }
        int dot = table.indexOf('.');
        List<List<String>> rows = ch.query("SELECT toString(uuid) FROM system.tables WHERE database = "
                + ClickHouseCommand.quote(table.substring(0, dot)) + " AND name = " + ClickHouseCommand.quote(table.substring(dot + 1)));
        return rows.isEmpty() ? null : rows.get(0).get(0);
    }

    private static void run(ClickHouseClient ch, String sql, PrintWriter out) throws IOException {
        if (sql.trim().matches("(?is)^(SELECT|SHOW|DESCRIBE|DESC|EXISTS|WITH)\\b.*")) {
            for (List<String> row : ch.query(sql)) {
                out.println(String.join("\t", row.stream().map(v -> v == null ? "\\N" : v).toList()));
            }
        } else {
            ch.execute(sql);
        }
    }

    /** Whether the statement sets use_metadata_cache, and to what. */
    static Optional<Boolean> wantsCache(String sql) {
        Matcher m = SETTING.matcher(sql);
        return m.find() ? Optional.of(m.group(1).replace("'", "").matches("(?i)true|1")) : Optional.empty();
    }

    /** {@code db.table} of a CREATE TABLE statement, with {@code defaultDb} for an unqualified name. */
    static Optional<String> createdTable(String sql, String defaultDb) {
        Matcher m = CREATE.matcher(sql);
        if (!m.find()) {
            return Optional.empty();
        }
        String a = m.group(1).replace("`", "");
        return Optional.of(m.group(2) == null ? defaultDb + "." + a : a + "." + m.group(2).replace("`", ""));
    }

    /** The statement without the use_metadata_cache setting (and without SETTINGS if nothing is left). */
    static String withoutSetting(String sql) {
        Matcher m = SETTING.matcher(sql);
        if (!m.find()) {
            return sql;
        }
        String before = sql.substring(0, m.start());
        String after = sql.substring(m.end());
        if (after.matches("(?s)^\\s*,.*")) {
            after = after.replaceFirst("^\\s*,\\s*", "");
        } else {
            before = before.replaceFirst(",\\s*$", "");
        }
        String out = EMPTY_SETTINGS_AT_END.matcher((before + after).trim()).replaceAll("");
        return EMPTY_SETTINGS.matcher(out).replaceAll("").trim();
    }
}
