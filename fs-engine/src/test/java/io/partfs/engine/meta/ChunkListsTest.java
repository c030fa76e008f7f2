package io.partfs.engine.meta;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

class ChunkListsTest {
    @Test
    void aListIsValidOnlyAtTheDataVersionItWasReadAt() {
        ChunkLists lists = new ChunkLists();
        lists.put(7, 0, 3, List.of());
        assertNotNull(lists.get(7, 0, 3));
        assertNull(lists.get(7, 0, 4), "the file changed since");
        assertNull(lists.get(7, 1, 3), "another chunk");
    }

    @Test
    void pastItsBoundAQuarterIsEvictedNotTheWhole() {
        ChunkLists lists = new ChunkLists(1000);
        for (long ino = 1; ino <= 1000; ino++) {
            lists.put(ino, 0, 1, List.of());
        }
        assertEquals(1000, lists.size());
        lists.put(1001, 0, 1, List.of());
        assertEquals(751, lists.size(), "a quarter dropped, the rest kept (a scan's lists mostly stay)");
        assertNotNull(lists.get(1001, 0, 1), "the list just read is kept");
        for (long ino = 1002; ino <= 20_000; ino++) {
            lists.put(ino, 0, 1, List.of());
            assertTrue(lists.size() <= 1000, "never past the bound: " + lists.size());
        }
        assertTrue(lists.size() >= 750, "and never far below it: " + lists.size());
    }
}
