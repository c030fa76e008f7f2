package io.partfs.engine.fuse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class MountsTest {
    @Test
    void unescapeUndoesMountinfoOctalEscapes() {
        assertEquals("/mnt/a b\tc\\d", Mounts.unescape("/mnt/a\\040b\\011c\\134d"));
        assertEquals("/mnt/plain", Mounts.unescape("/mnt/plain"));
        assertEquals("/mnt/x\\9", Mounts.unescape("/mnt/x\\9"), "a backslash without three octal digits stays");
    }

    @Test
    void aPathOnNoPartFsMountHasNone() throws Exception {
        assertNull(Mounts.partfsMountHolding(Path.of("/proc/self")));
    }
}
