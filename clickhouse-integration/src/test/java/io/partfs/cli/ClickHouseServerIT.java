package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Files;
import org.junit.jupiter.api.Test;

/**
 * The test servers' own harness: a ClickHouse whose HTTP port another socket took between the
 * choice of the port and the server's bind (CI saw a client socket do so, "Address already in
 * use") is started again on another port instead of failing the test that needed it.
 */
class ClickHouseServerIT {
    @Test
    void aPortTakenBeforeTheServerBindsItIsReplaced() throws Exception {
        try (Workdir w = Workdir.create("partfs-chports-");
             ClickHouseServer ch = new ClickHouseServer(w.dir.resolve("ch"), Files.createDirectories(w.dir.resolve("data")))) {
            int chosen = ch.httpPort();
            try (Socket thief = new Socket()) { // a client socket, bound but not listening, as CI's was
                thief.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), chosen));
                ch.start();
            }
            assertNotEquals(chosen, ch.httpPort(), "the server moved off the taken port");
            assertEquals("1", ch.query("SELECT 1").trim());
            assertTrue(ch.errors().isEmpty(), "the failed start's errors are kept aside: " + ch.errors());
            assertTrue(Files.exists(w.dir.resolve("ch/log/server.err.log.port-taken-1")), "and kept");
        }
    }
}
