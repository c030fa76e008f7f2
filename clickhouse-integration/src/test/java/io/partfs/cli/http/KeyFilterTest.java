package io.partfs.cli.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class KeyFilterTest {
    private static final String VIEW = "partfs.merge_tree_metadata_cache";

    private static KeyFilter of(String sql) {
        return KeyFilter.fromQuery(sql, VIEW);
    }

    @Test
    void pointLookupSendsOneKey() {
        KeyFilter f = of("SELECT value FROM partfs.merge_tree_metadata_cache WHERE key = 'default:data/db/t/1_1_1_0/primary.idx'");
        assertFalse(f.isAll());
        assertEquals(List.of("default:data/db/t/1_1_1_0/primary.idx"), f.keys());
        assertTrue(f.values());
    }

    @Test
    void likeAndStartsWithSendAPrefixUpToTheFirstWildcard() {
        KeyFilter f = of("SELECT key FROM partfs.merge_tree_metadata_cache WHERE key LIKE 'default:%' LIMIT 10");
        assertEquals(List.of("default:"), f.prefixes());
        assertFalse(f.values(), "key only: values need not travel");
        assertEquals(List.of("default:data/db/t/1"), of("SELECT key FROM partfs.merge_tree_metadata_cache "
                + "WHERE key LIKE 'default:data/db/t/1_1%'").prefixes());
        assertEquals(List.of("d:x_y"), of("SELECT key FROM partfs.merge_tree_metadata_cache WHERE key LIKE 'd:x\\\\_y%'").prefixes());
        assertEquals(List.of("default:data"), of("select * from `partfs`.`merge_tree_metadata_cache` as m "
                + "where startsWith(m.key, 'default:data') and size > 10 order by key").prefixes());
    }

    @Test
    void inListAndOtherConjunctsAndEscapes() {
        KeyFilter f = of("SELECT hex(value) FROM partfs.merge_tree_metadata_cache WHERE size > 0 AND key IN ('a:b', 'c:it''s', 'd:\\t') FORMAT TSV");
        assertEquals(List.of("a:b", "c:it's", "d:\t"), f.keys());
    }

    @Test
    void anythingThatIsNotAConjunctionOfKeyConditionsSendsEverything() {
        assertTrue(of("SELECT key FROM partfs.merge_tree_metadata_cache WHERE key = 'a' OR size > 1").isAll());
        assertTrue(of("SELECT key FROM partfs.merge_tree_metadata_cache WHERE NOT key = 'a'").isAll());
        assertTrue(of("SELECT key FROM partfs.merge_tree_metadata_cache WHERE size > 1").isAll());
        assertTrue(of("SELECT key FROM partfs.merge_tree_metadata_cache").isAll());
        assertTrue(of("SELECT key FROM partfs.merge_tree_metadata_cache WHERE key = 'a' UNION ALL "
                + "SELECT key FROM partfs.merge_tree_metadata_cache WHERE key = 'b'").isAll(), "read twice");
        assertTrue(of("SELECT key FROM partfs.merge_tree_metadata_cache AS m JOIN other USING key WHERE key = 'a'").isAll());
        assertTrue(of("SELECT key FROM partfs.merge_tree_metadata_cache PREWHERE key = 'a'").isAll());
        assertTrue(of("SELECT key FROM partfs.merge_tree_metadata_cache WHERE key != 'a'").isAll());
        assertTrue(of("SELECT key FROM partfs.merge_tree_metadata_cache WHERE key = concat('a', 'b')").isAll());
    }

    @Test
    void aSubqueryFilterIsTheOneNextToTheView() {
        KeyFilter f = of("SELECT count() FROM (SELECT key FROM partfs.merge_tree_metadata_cache WHERE key = 'x') WHERE key = 'y'");
        assertEquals(List.of("x"), f.keys());
        assertTrue(of("SELECT * FROM (SELECT key FROM partfs.merge_tree_metadata_cache) WHERE key = 'y'").isAll());
    }

    @Test
    void unionOfFiltersIsASupersetOfEach() {
        KeyFilter a = of("SELECT key FROM partfs.merge_tree_metadata_cache WHERE key = 'a:1'");
        KeyFilter b = of("SELECT value FROM partfs.merge_tree_metadata_cache WHERE key LIKE 'b:%'");
        KeyFilter ab = a.or(b);
        assertEquals(List.of("a:1"), ab.keys());
        assertEquals(List.of("b:"), ab.prefixes());
        assertTrue(ab.values());
        assertTrue(ab.or(KeyFilter.all()).isAll());
        assertEquals(List.of("a"), KeyFilter.of(List.of(), List.of("ab", "a", "abc"), true).prefixes(), "nested prefixes collapse");
    }

    @Test
    void literals() {
        assertEquals(Optional.of("a'b\\c\n"), KeyFilter.literal("'a\\'b\\\\c\\n'"));
        assertEquals(Optional.of("A"), KeyFilter.literal("'\\x41'"));
        assertEquals(Optional.empty(), KeyFilter.literal("'a' || 'b'"));
        assertEquals(Optional.empty(), KeyFilter.literal("key"));
        assertEquals("abc", KeyFilter.likePrefix("abc%def"));
    }
}
