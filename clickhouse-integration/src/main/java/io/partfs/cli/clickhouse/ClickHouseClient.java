package io.partfs.cli.clickhouse;

import java.io.IOException;
import java.net.URI;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

/**
 * A ClickHouse server reached over its HTTP interface with clickhouse-jdbc 0.3.2, the driver
 * that works both with Debian's 18.16 and with current servers. The driver is instantiated
 * directly (not through DriverManager, where newer drivers could claim the URL) and asked for
 * uncompressed answers (18.16's compressed answers arrive empty through it).
 *
 * <p>Each call opens its own connection: the callers are CLI commands and an occasional
 * lookup, not a query stream. Failures are {@link IOException}s whose message names the server
 * and never the password.
 */
public final class ClickHouseClient {
    private final URI http;
    private final String user;
    private final String password;

    /**
     * @param url {@code http://host:port}, {@code host:port} or {@code jdbc:clickhouse://host:port[/db]}
     */
    public ClickHouseClient(String url, String user, String password) {
        this.http = parse(url);
        this.user = user == null || user.isBlank() ? "default" : user;
        this.password = password == null ? "" : password;
    }

    static URI parse(String url) {
        String u = url == null ? "" : url.trim();
        if (u.startsWith("jdbc:clickhouse:")) {
            u = "http:" + u.substring("jdbc:clickhouse:".length());
        } else if (!u.contains("://")) {
            u = "http://" + u;
        }
        URI uri;
        try {
            uri = URI.create(u);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("invalid ClickHouse URL '" + url + "': use http://host:8123");
        }
        if (!"http".equals(uri.getScheme()) || uri.getHost() == null || uri.getUserInfo() != null) {
            throw new IllegalArgumentException("invalid ClickHouse URL '" + url
                    + "': use http://host:8123 (the HTTP interface; the password goes in $PARTFS_CLICKHOUSE_PASSWORD)");
        }
        return URI.create("http://" + uri.getHost() + ":" + (uri.getPort() < 0 ? 8123 : uri.getPort()));
    }

    /** The server's HTTP interface, {@code http://host:port}. */
    public URI http() {
        return http;
    }

    private Connection connect() throws SQLException {
        Properties p = new Properties();
        p.setProperty("user", user);
        p.setProperty("password", password);
        p.setProperty("compress", "false");
        p.setProperty("socket_timeout", "600000");
        Connection c = new ru.yandex.clickhouse.ClickHouseDriver().connect(
                "jdbc:clickhouse://" + http.getHost() + ":" + http.getPort() + "/default", p);
        if (c == null) {
            throw new SQLException("the driver did not accept the URL");
        }
        return c;
    }

    /** Runs a statement that returns no rows (DDL, INSERT). */
    public void execute(String sql) throws IOException {
        try (Connection c = connect(); Statement s = c.createStatement()) {
            s.execute(sql);
        } catch (SQLException e) {
            throw failure(e);
        }
    }

    /** Runs a query and returns its rows, every value as a string (null stays null). */
    public List<List<String>> query(String sql) throws IOException {
        try (Connection c = connect(); Statement s = c.createStatement(); ResultSet rs = s.executeQuery(sql)) {
            ResultSetMetaData md = rs.getMetaData();
            List<List<String>> rows = new ArrayList<>();
            while (rs.next()) {
                List<String> row = new ArrayList<>(md.getColumnCount());
                for (int i = 1; i <= md.getColumnCount(); i++) {
                    row.add(rs.getString(i));
                }
                rows.add(row);
            }
            return rows;
        } catch (SQLException e) {
            throw failure(e);
        }
    }

    /** The server version, e.g. 18.16.1 or 24.8.4.13. */
    public String version() throws IOException {
        return query("SELECT version()").get(0).get(0);
    }

    /** Major and minor version as one comparable number: 18.16 is 1816, 23.9 is 2309. */
    public int versionNumber() throws IOException {
        String[] v = version().split("\\.");
        return Integer.parseInt(v[0]) * 100 + Integer.parseInt(v[1]);
    }

    /** Whether the server knows a MergeTree table setting (asked without provoking an error). */
    public boolean hasMergeTreeSetting(String name) throws IOException {
        return !query("SELECT 1 FROM system.merge_tree_settings WHERE name = '" + name.replace("'", "") + "'").isEmpty();
    }

    /** Whether a system table has a column (to choose between server generations without an error). */
    public boolean hasColumn(String systemTable, String column) throws IOException {
        return !query("SELECT 1 FROM system.columns WHERE database = 'system' AND table = '" + systemTable.replace("'", "")
                + "' AND name = '" + column.replace("'", "") + "'").isEmpty();
    }

    private IOException failure(SQLException e) {
        String msg = String.valueOf(e.getMessage());
        if (!password.isEmpty()) {
            msg = msg.replace(password, "***");
        }
        String first = msg.lines().findFirst().orElse(msg);
        // the driver says "ClickHouse exception, code: 62, host: ..., port: ...; Code: 62, e.displayText() = DB::Exception: ..."
        int detail = first.indexOf("e.displayText() = ");
        String reason = detail >= 0 ? "Code: " + code(first) + ", " + first.substring(detail + "e.displayText() = ".length()) : first;
        reason = reason.replaceAll(",? ?e\\.what\\(\\) = DB::Exception\\s*$", "").trim();
        if (e.getCause() instanceof java.net.ConnectException || msg.contains("Connection refused")) {
            return new IOException("cannot reach ClickHouse at " + http + ": connection refused; start it or pass --clickhouse host:port", e);
        }
        return new IOException("ClickHouse at " + http + ": " + reason, e);
    }

    private static String code(String msg) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("(?i)code: (\\d+)").matcher(msg);
        return m.find() ? m.group(1) : "?";
    }
}
