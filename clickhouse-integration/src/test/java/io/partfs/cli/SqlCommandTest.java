package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Optional;
import org.junit.jupiter.api.Test;

class SqlCommandTest {
    @Test
    void findsTheSettingAndTheTable() {
        String sql = "CREATE TABLE IF NOT EXISTS db.hits (d Date) ENGINE = MergeTree ORDER BY d SETTINGS use_metadata_cache = true";
        assertEquals(Optional.of(true), SqlCommand.wantsCache(sql));
        assertEquals(Optional.of(false), SqlCommand.wantsCache("... SETTINGS use_metadata_cache=0"));
        assertEquals(Optional.empty(), SqlCommand.wantsCache("CREATE TABLE t (d Date) ENGINE = Log"));
        assertEquals(Optional.of("db.hits"), SqlCommand.createdTable(sql, "default"));
        assertEquals(Optional.of("default.t"), SqlCommand.createdTable("create table `t` (d Date) ENGINE = Log", "default"));
        assertEquals(Optional.of("my db.t"), SqlCommand.createdTable("CREATE TABLE `my db`.t (d Date) ENGINE = Log", "default"));
        assertEquals(Optional.empty(), SqlCommand.createdTable("SELECT 1", "default"));
    }

    @Test
    void removesOnlyTheSetting() {
        String head = "CREATE TABLE t (d Date) ENGINE = MergeTree ORDER BY d";
        assertEquals(head, SqlCommand.withoutSetting(head + " SETTINGS use_metadata_cache = true"));
        assertEquals(head + " SETTINGS index_granularity = 8192",
                SqlCommand.withoutSetting(head + " SETTINGS index_granularity = 8192, use_metadata_cache = true"));
        assertEquals(head + " SETTINGS index_granularity = 8192",
                SqlCommand.withoutSetting(head + " SETTINGS use_metadata_cache = 1, index_granularity = 8192"));
        assertEquals(head + " SETTINGS a = 1, b = 2", SqlCommand.withoutSetting(head + " SETTINGS a = 1, use_metadata_cache='true', b = 2"));
        assertEquals(head + ";", SqlCommand.withoutSetting(head + " SETTINGS use_metadata_cache = true;"));
    }
}
