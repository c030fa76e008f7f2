package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DemoCommandTest {
    @TempDir
    Path home;

    private record Result(int exit, String out, String err) {
    }

    private static Result run(String... args) {
        PrintStream oldOut = System.out;
        PrintStream oldErr = System.err;
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(out, true));
            System.setErr(new PrintStream(err, true));
            int exit = Main.run(args);
            return new Result(exit, out.toString(), err.toString());
        } finally {
            System.setOut(oldOut);
            System.setErr(oldErr);
        }
    }

    @Test
    void demoRunsTwiceOnTheEmbeddedDefaults() {
        Result first = run("demo", "--home", home.toString());
        assertEquals(0, first.exit(), first.err());
        assertTrue(first.out().contains("demo OK"), first.out());
        assertTrue(Files.isDirectory(home.resolve("demo/meta")));
        Result second = run("demo", "--home", home.toString());
        assertEquals(0, second.exit(), second.err());
        assertTrue(second.out().contains("verified every byte"), second.out());
    }

    @Test
    void unusableHomeIsOneLineAndNonZero() throws Exception {
        Path file = Files.writeString(home.resolve("a-file"), "x");
        Result r = run("demo", "--home", file.toString());
        assertEquals(1, r.exit());
        assertTrue(r.err().startsWith("partfs: "), r.err());
        assertEquals(1, r.err().strip().lines().count(), r.err());
        assertFalse(r.err().contains("\tat "), "no stack trace without --verbose");
    }

    @Test
    void mountTakesOptionDefaultsFromAConfigFile() throws Exception {
        Path conf = Files.writeString(home.resolve("partfs.properties"), "cache-size=lots\n");
        Result r = run("mount", "--home", home.toString(), "--config", conf.toString(), home.resolve("mnt").toString());
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("invalid cache size 'lots'"), "the file was read: " + r.err());
        Result missing = run("mount", "--home", home.toString(), "--config", home.resolve("nope").toString(), home.resolve("mnt").toString());
        assertEquals(1, missing.exit());
        assertTrue(missing.err().contains("config file"), missing.err());
    }

    @Test
    void helpExplainsEveryCommand() {
        Result r = run("--help");
        assertEquals(0, r.exit());
        assertTrue(r.out().contains("demo"), r.out());
        Result d = run("demo", "--help");
        assertTrue(d.out().contains("--home"), d.out());
    }
}
