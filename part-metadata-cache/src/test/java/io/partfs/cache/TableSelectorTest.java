package io.partfs.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

class TableSelectorTest {
    private static byte[] sql(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void mountOptionNamesTables() {
        TableSelector t = TableSelector.parse("db.events, logs.*");
        assertTrue(t.selected("db", "events"));
        assertTrue(t.selected("logs", "anything"));
        assertFalse(t.selected("db", "other"));
        assertTrue(TableSelector.parse("all").selected("x", "y"));
        assertFalse(TableSelector.parse(null).selected("x", "y"));
        assertThrows(IllegalArgumentException.class, () -> TableSelector.parse("nodot"));
        assertThrows(IllegalArgumentException.class, () -> TableSelector.parse("a.b.c"));
    }

    @Test
    void ddlWithUseMetadataCacheSelectsTheTableAndItsAtomicUuid() {
        TableSelector t = TableSelector.parse("");
        t.learn("metadata/db/hits.sql", sql("ATTACH TABLE _ UUID 'b47ee9c8-afa1-41ac-adfb-2e0dc42de819'\n(`d` Date)\n"
                + "ENGINE = MergeTree ORDER BY d\nSETTINGS index_granularity = 8192, use_metadata_cache = true\n"));
        t.learn("metadata/db/plain.sql", sql("ATTACH TABLE _ (`d` Date) ENGINE = MergeTree ORDER BY d SETTINGS index_granularity = 8192"));
        assertTrue(t.selected("db", "hits"));
        assertFalse(t.selected("db", "plain"));
        assertTrue(t.selected(MergeTreePaths.TableRef.atomic("b47ee9c8-afa1-41ac-adfb-2e0dc42de819")));
        assertEquals(List.of("db.hits"), t.ddlSelected());
        t.learn("metadata/db/hits.sql", sql("ATTACH TABLE _ UUID 'b47ee9c8-afa1-41ac-adfb-2e0dc42de819' (`d` Date) "
                + "ENGINE = MergeTree ORDER BY d SETTINGS use_metadata_cache = 0"));
        assertFalse(t.selected("db", "hits"), "DDL changed by ALTER ... MODIFY SETTING");
        t.learn("metadata/db/hits.sql", sql("ATTACH TABLE _ (`d` Date) ENGINE = MergeTree ORDER BY d SETTINGS use_metadata_cache = 1"));
        t.forget("metadata/db/hits.sql");
        assertFalse(t.selected("db", "hits"), "DROP forgets it");
        assertFalse(TableSelector.isTableDdl("metadata/db/hits.sql.tmp"));
    }

    @Test
    void registeredTablesAndServerDdlSelectAtomicStoreDirectoriesByUuid() {
        TableSelector t = TableSelector.parse("");
        String uuid = "0a3f0c1e-1111-4222-8333-444455556666";
        assertTrue(t.register("db.reg", uuid));
        assertFalse(t.register("db.reg", uuid), "already registered");
        assertTrue(t.selected(MergeTreePaths.TableRef.atomic(uuid)));
        assertEquals(java.util.Optional.of("registered"), t.reason("db", "reg"));
        assertEquals(List.of("db.reg\t" + uuid), t.registered());
        TableSelector restored = TableSelector.parse("");
        t.registered().forEach(restored::registerLine);
        assertTrue(restored.selected(MergeTreePaths.TableRef.atomic(uuid)), "saved lines restore the UUID");
        assertTrue(t.unregister("db.reg"));
        assertFalse(t.selected("db", "reg"));

        String other = "7b3f0c1e-1111-4222-8333-444455556666";
        t.learnDdl("db.srv", other, "CREATE TABLE db.srv (`d` Date) ENGINE = MergeTree ORDER BY d "
                + "SETTINGS storage_policy = 'partfs', use_metadata_cache = 1, index_granularity = 8192");
        assertTrue(t.selected(MergeTreePaths.TableRef.atomic(other)), "create_table_query from system.tables");
        assertEquals(java.util.Optional.of("ddl"), t.reason("db", "srv"));
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> t.register("nodot", null));
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> t.register("db.t", "not-a-uuid"));
    }
}
