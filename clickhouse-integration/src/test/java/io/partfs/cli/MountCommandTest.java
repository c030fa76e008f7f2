package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** How {@code partfs mount} reads its command line. */
class MountCommandTest {
    @Test
    void fuseOptionsComeOnePerDashOOrSeveralInOneAsMountTakesThem() {
        MountCommand m = new MountCommand();
        new CommandLine(m).parseArgs("-o", "allow_other,nonempty", "-o", "ro", "/mnt/x");
        assertEquals(List.of("allow_other", "nonempty", "ro"), m.fuseOptions);
    }
}
