package io.partfs.engine.testing;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * Ports handed to test servers stay out of the kernel's range for outgoing connections, from
 * which any client socket can take them before the server binds. Twice CI saw ClickHouse exit
 * with "Address already in use" on a port inside that range: the range had been misread.
 */
class FreePortTest {
    @Test
    void portsForServersAreOutsideTheRangeClientSocketsTakeFrom() throws Exception {
        int[] range = RedisServer.ephemeralRange();
        assertTrue(range[0] <= range[1] && range[1] <= 65_535, "a range read whole: " + range[0] + "-" + range[1]);
        java.util.Set<Integer> seen = new java.util.HashSet<>();
        for (int i = 0; i < 100; i++) {
            int port = RedisServer.freePort();
            assertTrue(port < range[0] || port > range[1], port + " is inside " + range[0] + "-" + range[1]);
            assertTrue(seen.add(port), port + " handed out twice");
        }
    }
}
