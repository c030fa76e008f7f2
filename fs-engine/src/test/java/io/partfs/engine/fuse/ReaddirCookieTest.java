package io.partfs.engine.fuse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.DirEntry;
import io.partfs.engine.FileType;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The kernel driver's readdir cookies: ordered, past "." and "..", and stable under change. */
class ReaddirCookieTest {
    private static List<DirEntry> entries(int from, int to) {
        List<DirEntry> list = new ArrayList<>();
        for (int i = from; i < to; i++) {
            list.add(new DirEntry("f" + i, 100 + i, FileType.FILE));
        }
        return list;
    }

    private static Map<String, Long> cookies(List<DirEntry> list) {
        Map<String, Long> m = new HashMap<>();
        long last = 2;
        for (KernelFuse.Cookie c : KernelFuse.Cookie.sorted(list)) {
            assertTrue(c.cookie() > last, "cookies must increase past . and ..");
            last = c.cookie();
            m.put(c.entry().name(), c.cookie());
        }
        return m;
    }

    @Test
    void anEntryKeepsItsCookieWhateverElseComesAndGoes() {
        Map<String, Long> before = cookies(entries(0, 1000));
        List<DirEntry> changed = new ArrayList<>(entries(500, 1500)); // half removed, 500 added
        Map<String, Long> after = cookies(changed);
        for (int i = 500; i < 1000; i++) {
            assertEquals(before.get("f" + i), after.get("f" + i), "f" + i);
        }
    }

    @Test
    void equalHashesGetConsecutiveCookiesInNameOrder() {
        // two entries of one name hash alike: the second must still get a cookie of its own
        List<DirEntry> list = List.of(new DirEntry("same", 7, FileType.FILE), new DirEntry("same", 8, FileType.FILE));
        KernelFuse.Cookie[] sorted = KernelFuse.Cookie.sorted(list);
        assertEquals(KernelFuse.Cookie.hash("same"), sorted[0].cookie());
        assertEquals(sorted[0].cookie() + 1, sorted[1].cookie());
    }
}
