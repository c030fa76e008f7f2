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
 * {@code SETTINGS use_metadata_cache = true} goes as written first; a server that rejects the
 * setting (18.16 cannot even parse {@code true}; 23.9+ accept it as obsolete) gets it without
 * that setting, and the table is registered with the running sidecar, which caches its part
 * metadata from then on. One code path for old and current servers.
 */
@Command(name = "sql", mixinStandardHelpOptions = true,
        description = {"Run one ClickHouse statement (through clickhouse-jdbc) and print its rows, tab-separated.",
                "CREATE TABLE ... SETTINGS use_metadata_cache = true works on every server: where ClickHouse",
                "rejects the setting, the table is created without it and registered with the sidecar."})
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
        try {
            ch.execute(statement);
            out.printf("partfs: created %s; ClickHouse keeps use_metadata_cache in its DDL, which PartFS reads%n", table.get());
            return 0;
        } catch (IOException e) {
            int code = ClickHouseClient.errorCode(e);
            if (code != 115 && code != 62) { // UNKNOWN_SETTING, SYNTAX_ERROR (18.16 has no true/false literals)
                throw e;
            }
        }
        ch.execute(withoutSetting(statement));
        if (wantsCache.get()) {
            sidecar.call("POST", "/tables?name=" + SidecarOptions.enc(table.get()));
            out.printf("partfs: created %s without use_metadata_cache (ClickHouse %s rejects it) and registered it with "
                    + "the sidecar at %s: its part metadata is cached%n", table.get(), ch.version(), sidecar.base());
        } else {
            out.printf("partfs: created %s without use_metadata_cache (ClickHouse %s rejects it)%n", table.get(), ch.version());
        }
        return 0;
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
