package io.partfs.cli.clickhouse;

import io.partfs.cache.TableSelector;
import java.io.IOException;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Learns which tables ask for the part-metadata cache from the server's {@code system.tables},
 * for tables whose DDL file is not on the mount (a storage-policy disk keeps only data there;
 * the metadata stays on the server's default disk). Run now and then by the mount; a server
 * that cannot be reached is simply asked again later.
 */
public final class ServerTables {
    private static final Logger log = LoggerFactory.getLogger(ServerTables.class);

    private final ClickHouseClient clickhouse;
    private final TableSelector tables;

    public ServerTables(ClickHouseClient clickhouse, TableSelector tables) {
        this.clickhouse = clickhouse;
        this.tables = tables;
    }

    /** Reads the DDL of every table that mentions the setting; returns how many were read. */
    public int sync() {
        try {
            String uuid = clickhouse.hasColumn("tables", "uuid") ? "toString(uuid)" : "''";
            List<List<String>> rows = clickhouse.query("SELECT database, name, " + uuid + ", create_table_query FROM system.tables "
                    + "WHERE create_table_query LIKE '%use_metadata_cache%'");
            for (List<String> r : rows) {
                tables.learnDdl(r.get(0) + "." + r.get(1), r.get(2), r.get(3));
            }
            return rows.size();
        } catch (IOException e) {
            log.debug("table settings not read from ClickHouse: {}", e.getMessage());
            return 0;
        }
    }
}
