package io.partfs.engine.data;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The volume check's id table against a HashMap, across growth from its smallest size. */
class IdTableTest {
    @Test
    void holdsWhatAHashMapHoldsAcrossGrowth() {
        IdTable index = new IdTable();
        Map<Long, int[]> expected = new HashMap<>();
        Random r = new Random(7);
        for (int n = 0; n < 200_000; n++) {
            long id = r.nextInt(4) == 0 ? 1 + r.nextInt(1_000_000) : 1_000_000L + n; // sequential, and some repeats
            int size = 1 + r.nextInt(64 << 20);
            boolean added = index.add(id, size);
            assertEquals(!expected.containsKey(id), added, "id " + id);
            expected.putIfAbsent(id, new int[] {size, 0});
            if (r.nextInt(3) == 0) {
                index.count(id);
                expected.get(id)[1]++;
            }
        }
        assertEquals(expected.size(), index.size());
        for (Map.Entry<Long, int[]> e : expected.entrySet()) {
            assertEquals(e.getValue()[0], index.valueOf(e.getKey()));
        }
        assertEquals(-1, index.valueOf(999_999_999L));
        int[] seen = {0};
        index.forEach((id, size, found) -> {
            int[] want = expected.get(id);
            assertEquals(want[0], size, "size of " + id);
            assertEquals(want[1], found, "found blocks of " + id);
            seen[0]++;
        });
        assertEquals(expected.size(), seen[0]);
        index.count(123_456_789_000L); // not referenced: nothing to count, nothing added
        assertEquals(expected.size(), index.size());
    }

    @Test
    void presizedForAnExpectedCountAndRefusesIdZero() {
        IdTable index = new IdTable(10_000);
        for (long id = 1; id <= 10_000; id++) {
            assertTrue(index.add(id, 1));
        }
        assertFalse(index.add(5_000, 2), "an id is added once; its first size stays");
        assertEquals(1, index.valueOf(5_000));
        assertThrows(IllegalArgumentException.class, () -> index.add(0, 1));
    }
}
