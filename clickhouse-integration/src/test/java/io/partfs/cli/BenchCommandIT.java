package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** partfs bench on a real mount and on local disk, partfs objbench on a local object directory. */
class BenchCommandIT {
    private Path dir;
    private Path mnt;
    private Partfs partfs;

    @BeforeEach
    void setUp() throws Exception {
        dir = Files.createTempDirectory("partfs-bench-");
        mnt = dir.resolve("mnt");
        partfs = new Partfs(dir.resolve("home"));
    }

    @AfterEach
    void tearDown() throws Exception {
        partfs.unmountAndDelete(mnt, dir);
    }

    private static void assertTable(Partfs.Result r) {
        for (String item : List.of("Write big file", "Read big file", "Write small file", "Read small file", "Stat file")) {
            assertTrue(r.out().lines().anyMatch(l -> l.startsWith("| " + item) && l.matches(".*\\d+\\.\\d\\d MiB/s.*|.*\\d+\\.\\d\\d files/s.*")),
                    item + " in\n" + r.out());
        }
    }

    @Test
    void benchOnPartFsAndLocalDiskLeavesNothingBehind() throws Exception {
        partfs.ok("mount", mnt.toString(), "--background");
        Partfs.Result onMount = partfs.ok("bench", mnt.toString(), "--big-file-size", "8M", "--small-file-count", "20", "-p", "2",
                "--list-entries", "600");
        assertTable(onMount);
        assertTrue(onMount.out().lines().anyMatch(l -> l.startsWith("| List directory") && l.matches(".*\\d+\\.\\d\\d entries/s.*")),
                onMount.out());
        Path local = Files.createDirectories(dir.resolve("local"));
        assertTable(partfs.ok("bench", local.toString(), "--big-file-size", "8M", "--small-file-count", "20"));
        for (Path p : List.of(mnt, local)) {
            try (Stream<Path> s = Files.list(p)) {
                assertEquals(List.of(), s.toList(), "bench removes its files");
            }
        }
        for (String[] args : new String[][] {{"bench", dir.resolve("missing").toString()},
                {"bench", local.toString(), "--big-file-size", "0", "--small-file-count", "0"}}) {
            Partfs.Result bad = partfs.run(args);
            assertEquals(1, bad.exit(), bad.all());
            assertEquals(1, Partfs.errorLines(bad).size(), bad.err());
            assertEquals("", bad.out(), "no table for " + String.join(" ", args));
        }
        Partfs.Result smallOnly = partfs.ok("bench", local.toString(), "--big-file-size", "0", "--small-file-count", "5");
        assertFalse(smallOnly.out().contains("Write big file"), "0 skips the big-file steps: " + smallOnly.out());
        assertTrue(smallOnly.out().contains("| Write small file"), smallOnly.out());
    }

    @Test
    void objbenchOnALocalObjectDirectory() throws Exception {
        Path objects = Files.createDirectories(dir.resolve("objects"));
        Partfs.Result r = partfs.ok("objbench", "--storage", objects.toString(), "--blocks", "3", "--small-objects", "10", "-p", "2");
        for (String item : List.of("Put 4M objects", "Get 4M objects", "Put 128K objects", "Get 4 KiB ranges", "Head objects", "List 10 keys", "Delete objects")) {
            assertTrue(r.out().contains("| " + item), item + " in\n" + r.out());
        }
        try (Stream<Path> s = Files.walk(objects)) {
            assertEquals(0, s.filter(Files::isRegularFile).count(), "objbench deletes its objects");
        }
    }
}
