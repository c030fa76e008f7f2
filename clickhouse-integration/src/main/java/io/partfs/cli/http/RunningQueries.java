package io.partfs.cli.http;

import io.partfs.cli.clickhouse.ClickHouseClient;
import java.io.IOException;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The filter of the ClickHouse queries reading the system-table view right now, from
 * {@code system.processes}: ClickHouse's {@code url()} sends no WHERE clause, but while it
 * fetches, the query that asked is listed there with its text. The union of their filters
 * (see {@link KeyFilter#fromQuery}) is a superset of what each of them keeps, so concurrent
 * readers are all answered correctly. When ClickHouse cannot be asked, every row is sent.
 */
public final class RunningQueries {
    private static final Logger log = LoggerFactory.getLogger(RunningQueries.class);

    private final ClickHouseClient clickhouse;
    private volatile boolean warned;

    public RunningQueries(ClickHouseClient clickhouse) {
        this.clickhouse = clickhouse;
    }

    /** The union of the filters of running queries that read {@code view} ({@code db.name}). */
    public KeyFilter filterFor(String view) {
        String name = view.substring(view.indexOf('.') + 1);
        int half = name.length() / 2;
        // the pattern is built at run time so that this lookup does not find itself
        String sql = "SELECT query FROM system.processes WHERE like(query, concat('%', '" + name.substring(0, half)
                + "', '" + name.substring(half) + "%'))";
        List<List<String>> rows;
        try {
            rows = clickhouse.query(sql);
        } catch (IOException e) {
            if (!warned) {
                warned = true;
                log.warn("cannot read running queries from {} ({}); the view gets every row of the cache", clickhouse.http(), e.getMessage());
            }
            return KeyFilter.all();
        }
        KeyFilter f = null;
        for (List<String> row : rows) {
            KeyFilter q = KeyFilter.fromQuery(row.get(0), view);
            f = f == null ? q : f.or(q);
        }
        return f == null ? KeyFilter.all() : f;
    }
}
