package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.fuse.Mounts;
import io.partfs.engine.object.S3ObjectStore;
import io.partfs.engine.testing.Poll;
import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.S3Server;
import io.partfs.engine.testing.TempDirs;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.UserDefinedFileAttributeView;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import java.util.zip.GZIPInputStream;
import java.util.zip.GZIPOutputStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The partfs command as users run it: scripts/partfs, real mounts, real Redis and S3. */
class PartfsCommandIT {
    private Path dir;
    private Path mnt;
    private Partfs partfs;

    @BeforeEach
    void setUp() throws Exception {
        dir = Files.createTempDirectory("partfs-cli-");
        mnt = dir.resolve("mnt");
        partfs = new Partfs(dir.resolve("home"));
    }

    @AfterEach
    void tearDown() throws Exception {
        if (Mounts.isMounted(mnt)) {
            partfs.run("umount", mnt.toString());
        }
        Partfs.ensureUnmounted(mnt);
        TempDirs.deleteRecursively(dir);
    }

    @Test
    void backgroundMountOnEmbeddedDefaultsThenStatusAndUmount() throws Exception {
        Partfs.Result r = partfs.run("mount", mnt.toString(), "--background");
        assertEquals(0, r.exit(), r.all());
        assertEquals("fuse.partfs", Mounts.typeAt(mnt), "mounted when --background returns");
        byte[] data = new byte[(5 << 20) + 3];
        new Random(1).nextBytes(data);
        Files.write(mnt.resolve("data.bin"), data);
        Partfs.Result status = partfs.run("status");
        assertEquals(0, status.exit(), status.all());
        assertTrue(status.out().contains("volume:     default"), status.out());
        assertTrue(status.out().contains("clients:    1 mounted"), status.out());
        assertTrue(status.out().contains("deletions:  0 files and 0 slices waiting"), status.out());
        assertTrue(status.out().contains("backup:     none yet"), "the first backup is due a minute after the mount: " + status.out());
        Files.write(mnt.resolve("doomed.bin"), data);
        try (java.nio.channels.FileChannel open = java.nio.channels.FileChannel.open(mnt.resolve("doomed.bin"))) {
            Files.delete(mnt.resolve("doomed.bin"));
            status = partfs.run("status");
            assertTrue(status.out().contains("deletions:  1 files and 0 slices waiting"), "unlinked, still open: " + status.out());
            Partfs.Result gc = partfs.run("gc", "--delete"); // the mount holds the embedded volume's write lock
            assertEquals(0, gc.exit(), gc.all());
            assertTrue(gc.out().contains("gc: 1 files and 0 slices await deletion: left to the 1 client(s)"), gc.out());
        }
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (!(status = partfs.run("status")).out().contains("deletions:  0 files and 0 slices waiting")) {
            assertTrue(System.nanoTime() < deadline, "the mount deletes the data once the file is closed: " + status.out());
        }
        Partfs.Result u = partfs.run("umount", mnt.toString());
        assertEquals(0, u.exit(), u.all());
        assertFalse(Mounts.isMounted(mnt));
        int port = RedisServer.freePort();
        assertEquals(0, partfs.run("mount", mnt.toString(), "--background", "--http-address", "127.0.0.1:" + port).exit());
        assertArrayEquals(data, Files.readAllBytes(mnt.resolve("data.bin")), "data survives unmount and mount");
        Partfs.Result byMount = partfs.run("status", mnt.toString()); // asked of the mount, found through its run files
        assertEquals(0, byMount.exit(), byMount.all());
        assertTrue(byMount.out().contains("volume:     default") && byMount.out().contains("mounted at: " + mnt.toRealPath())
                && byMount.out().contains("clients:    1 mounted"), byMount.out());
        // stats while a writer works: every line after the header shows FUSE operations
        java.util.concurrent.atomic.AtomicBoolean writing = new java.util.concurrent.atomic.AtomicBoolean(true);
        Thread writer = new Thread(() -> {
            for (int i = 0; writing.get(); i++) {
                try {
                    Files.writeString(mnt.resolve("w" + (i % 20)), "x".repeat(i % 5000));
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }
        });
        writer.start();
        Partfs.Result stats;
        Partfs.Result profile;
        try {
            // as juicefs stats: the mount point, whose endpoint the mount recorded in its run files
            stats = partfs.run("stats", mnt.toString(), "--count", "2", "--interval", "0.5");
            profile = partfs.run("profile", "--sidecar", "127.0.0.1:" + port, "--count", "1", "--interval", "0.5");
        } finally {
            writing.set(false);
            writer.join();
        }
        assertEquals(0, stats.exit(), stats.all());
        List<String> lines = stats.out().lines().toList();
        assertEquals(3, lines.size(), stats.out());
        assertTrue(lines.get(0).contains("fuse ops/s"), stats.out());
        for (String l : lines.subList(1, 3)) {
            assertTrue(Double.parseDouble(l.trim().split("\\s+")[0]) > 0, "FUSE operations counted: " + stats.out());
        }
        assertEquals(0, profile.exit(), profile.all());
        assertTrue(profile.out().lines().anyMatch(l -> l.startsWith("fuse   write ")), "the writer's writes profiled: " + profile.out());
        Partfs.Result both = partfs.run("profile", mnt.toString(), "--sidecar", "127.0.0.1:" + port, "--count", "1");
        assertEquals(1, both.exit(), both.all());
        assertTrue(both.err().contains("give a MOUNTPOINT or --sidecar, not both"), both.err());
        assertEquals(0, partfs.run("umount", mnt.toString()).exit());
    }

    /**
     * A JDK from 24 on prints eight WARNING lines at every start of a JVM that loads jnr-fuse's
     * native library, unless the launcher allows that by name; and a class archive made by one
     * JDK serves no other. Runs when such a JDK is installed beside the default one (this
     * workplace's machines have Temurin 25 under /usr/lib/jvm); skipped otherwise.
     */
    @Test
    void aMountOnANewerJdkPrintsNoJvmWarningsAndGetsItsOwnClassArchive() throws Exception {
        Path jdk = newerJdk(24);
        org.junit.jupiter.api.Assumptions.assumeTrue(jdk != null, "no JDK 24 or later under /usr/lib/jvm");
        partfs.env("PATH", jdk.resolve("bin") + ":" + System.getenv("PATH"));
        Partfs.Result r = partfs.run("mount", mnt.toString(), "--background");
        assertEquals(0, r.exit(), r.all());
        assertFalse(r.all().contains("WARNING"), r.all());
        Files.writeString(mnt.resolve("f"), "on a newer JDK");
        assertEquals(0, partfs.run("umount", mnt.toString()).exit());
        try (Stream<Path> logs = Files.list(partfs.home().resolve("logs"))) {
            for (Path log : logs.toList()) {
                String text = Files.readString(log);
                assertFalse(text.contains("WARNING: "), log + ":\n" + text);
            }
        }
        String release = Files.readString(jdk.resolve("release"));
        java.util.regex.Matcher v = java.util.regex.Pattern.compile("JAVA_VERSION=\"([0-9.]+)\"").matcher(release);
        assertTrue(v.find(), release);
        Path archive = Partfs.ROOT.resolve("clickhouse-integration/target/partfs-java" + v.group(1) + ".jsa");
        assertTrue(Files.isRegularFile(archive), "the launcher made " + archive);
        Partfs.Result shared = partfs.env("PARTFS_JAVA_EXTRA_OPTS", "-Xshare:on").run("--version");
        assertEquals(0, shared.exit(), "-Xshare:on fails unless the archive maps: " + shared.all());
    }

    /** A JDK of feature version {@code min} or later under /usr/lib/jvm, or null. */
    private static Path newerJdk(int min) throws IOException {
        Path jvms = Path.of("/usr/lib/jvm");
        if (!Files.isDirectory(jvms)) {
            return null;
        }
        try (Stream<Path> all = Files.list(jvms)) {
            for (Path j : all.sorted().toList()) {
                Path release = j.resolve("release");
                if (Files.isSymbolicLink(j) || !Files.isRegularFile(release) || !Files.isExecutable(j.resolve("bin/java"))) {
                    continue;
                }
                java.util.regex.Matcher v = java.util.regex.Pattern.compile("JAVA_VERSION=\"(\\d+)").matcher(Files.readString(release));
                if (v.find() && Integer.parseInt(v.group(1)) >= min) {
                    return j;
                }
            }
        }
        return null;
    }

    @Test
    void umountFindsAMountStartedWithAnotherDataHome() throws Exception {
        Partfs.Result r = partfs.run("mount", mnt.toString(), "--background");
        assertEquals(0, r.exit(), r.all());
        java.util.regex.Matcher pid = java.util.regex.Pattern.compile("pid (\\d+)").matcher(r.all());
        assertTrue(pid.find(), r.all());
        byte[] data = new byte[100_000];
        new Random(2).nextBytes(data);
        Files.write(mnt.resolve("data.bin"), data);
        // run files live in the data home: a umount with another home finds the process by its command line
        Partfs.Result u = new Partfs(dir.resolve("other-home")).run("umount", mnt.toString());
        assertEquals(0, u.exit(), u.all());
        assertEquals("partfs: unmounted " + mnt, u.out().trim(), "asked the mount process to flush and waited for it");
        assertFalse(ProcessHandle.of(Long.parseLong(pid.group(1))).map(UmountCommand::running).orElse(false),
                "the mount process has exited (it may stay a zombie until init reaps it)");
        assertFalse(Mounts.isMounted(mnt));
        assertEquals(0, partfs.run("mount", mnt.toString(), "--background").exit());
        assertArrayEquals(data, Files.readAllBytes(mnt.resolve("data.bin")));
        assertEquals(0, partfs.run("umount", mnt.toString()).exit());
    }

    @Test
    void sigtermFlushesUnmountsAndExitsZero() throws Exception {
        Process p = partfs.builder("mount", mnt.toString()).redirectErrorStream(true)
                .redirectOutput(dir.resolve("fg.log").toFile()).start();
        Partfs.awaitMounted(mnt, true);
        var ch = java.nio.channels.FileChannel.open(mnt.resolve("open.bin"),
                java.nio.file.StandardOpenOption.CREATE_NEW, java.nio.file.StandardOpenOption.WRITE);
        ch.write(java.nio.ByteBuffer.wrap("still open".getBytes()));
        Process inside = partfs.builder("umount", mnt.toString()).directory(mnt.toFile()).redirectErrorStream(true).start();
        String refused = new String(inside.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(1, inside.waitFor(), refused);
        assertTrue(refused.contains("the working directory " + mnt + " is on the mount") && refused.strip().lines().count() == 1, refused);
        assertTrue(Mounts.isMounted(mnt), "left mounted");
        // SIGTERM (from partfs umount) while a file is open with a buffered write
        Process umount = partfs.builder("umount", mnt.toString()).redirectErrorStream(true)
                .redirectOutput(dir.resolve("umount.out").toFile()).start();
        // the mount flushes, finds itself busy (the open file) and stays attached, serving, until
        // the file is closed (for --unmount-grace at most): new opens still reach PartFS, not the
        // directory beneath the mount
        Poll.until(() -> fileHolds(dir.resolve("fg.log"), "is busy"), "the mount waits for the open file");
        assertTrue(p.isAlive(), "still serves the open file");
        assertTrue(Mounts.isMounted(mnt), "still attached");
        Files.writeString(mnt.resolve("while-stopping"), "by path");
        Poll.until(() -> fileHolds(dir.resolve("umount.out"), "waiting for mount process"), "umount says what it waits for");
        ch.close();
        assertTrue(umount.waitFor(60, TimeUnit.SECONDS), "umount returns once the file is closed");
        String said = Files.readString(dir.resolve("umount.out"));
        assertEquals(0, umount.exitValue(), said);
        assertTrue(said.endsWith("partfs: unmounted " + mnt + "\n"), said);
        assertTrue(said.contains(mnt + " is in use by " + ProcessHandle.current().pid() + " (java)"), "names what holds it: " + said);
        assertTrue(said.contains(" WARN " + mnt + " is busy (") && said.contains("the files open there were closed; unmounted after"),
                "shows the mount's own lines while it waits: " + said);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "mount exits after SIGTERM");
        String log = Files.readString(dir.resolve("fg.log"));
        assertEquals(0, p.exitValue(), log);
        assertTrue(log.contains("kernel caches attributes 60 s, names 60 s, directory names 60 s"),
                "a RocksDB volume's mount is its only writer: " + log);
        assertTrue(log.contains("the files open there were closed; unmounted"), log);
        assertFalse(log.contains("detaching it lazily"), "it ended when the file closed: " + log);
        assertFalse(Files.exists(mnt.resolve("while-stopping")), "nothing written beneath the mount");
        assertEquals(0, partfs.run("mount", mnt.toString(), "--background").exit());
        assertEquals("still open", Files.readString(mnt.resolve("open.bin")), "the buffered write was flushed");
        assertEquals("by path", Files.readString(mnt.resolve("while-stopping")));
    }

    /**
     * Mistakes an operator makes with a mount: a bad --timeout, or a path inside the mount
     * instead of its mount point, get a one-line error naming what to give, and leave the mount
     * serving.
     */
    @Test
    void badUmountInputAndPathsInsideAMountLeaveItAlone() throws Exception {
        Process p = partfs.builder("mount", mnt.toString()).redirectErrorStream(true)
                .redirectOutput(dir.resolve("fg.log").toFile()).start();
        Partfs.awaitMounted(mnt, true);
        Partfs.Result bad = partfs.run("umount", "--timeout", "0", mnt.toString());
        assertEquals(1, bad.exit(), bad.all());
        assertTrue(bad.err().contains("--timeout 0: give the seconds to wait"), bad.all());
        assertTrue(Mounts.isMounted(mnt) && p.isAlive(), "bad input leaves the mount alone");
        Partfs.Result inside = partfs.run("umount", mnt.resolve("data").toString());
        assertEquals(1, inside.exit(), inside.all());
        assertTrue(inside.err().contains("is not mounted: it is inside the PartFS mount " + mnt + " (partfs umount " + mnt + ")"),
                "names the mount it is in: " + inside.all());
        assertTrue(Mounts.isMounted(mnt) && p.isAlive(), "a path inside the mount leaves it alone");
        Partfs.Result stats = partfs.run("stats", mnt.resolve("data").toString(), "--count", "1");
        assertEquals(1, stats.exit(), stats.all());
        assertTrue(stats.err().contains("is not a PartFS mount point (it is inside the one at " + mnt + "): give " + mnt),
                "stats (status, profile) name the mount too: " + stats.all());
        assertTrue(Mounts.isMounted(mnt) && p.isAlive(), "still serving");
        assertEquals(0, partfs.run("umount", mnt.toString()).exit());
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the mount exits once unmounted");
    }

    @Test
    void aMountPointGivenThroughASymlinkIsMountedAndUnmountedThere() throws Exception {
        Files.createDirectories(mnt);
        Path link = Files.createSymbolicLink(dir.resolve("clickhouse-disk"), mnt); // as /var/lib/clickhouse -> /data/ch
        java.util.Set<java.nio.file.attribute.PosixFilePermission> mode = Files.getPosixFilePermissions(mnt);
        Partfs.Result mounted = partfs.run("mount", link.toString(), "--background");
        assertEquals(0, mounted.exit(), mounted.all()); // before: waited for ever for the link's path to show up in mountinfo
        assertTrue(mounted.out().contains("mounted " + mnt + " in the background"), "names the real mount point: " + mounted.all());
        assertTrue(Mounts.isMounted(mnt));
        Files.writeString(link.resolve("through-the-link"), "x");
        Partfs.Result status = partfs.run("status", link.toString());
        assertEquals(0, status.exit(), status.all());
        assertTrue(status.out().contains("mounted at: " + mnt), status.all());
        Partfs.Result umount = partfs.run("umount", link.toString());
        assertEquals(0, umount.exit(), umount.all());
        assertTrue(umount.out().endsWith("partfs: unmounted " + mnt + "\n"), umount.all());
        assertFalse(Mounts.isMounted(mnt));
        assertEquals(mode, Files.getPosixFilePermissions(mnt), "the mount point's mode is given back, not left at 000");
        assertTrue(Files.isSymbolicLink(link));
    }

    @Test
    void umountForceDetachesABusyMountAtOnce() throws Exception {
        Process p = partfs.builder("mount", mnt.toString()).redirectErrorStream(true)
                .redirectOutput(dir.resolve("fg.log").toFile()).start();
        Partfs.awaitMounted(mnt, true);
        Process umount;
        try (var ch = java.nio.channels.FileChannel.open(mnt.resolve("held.bin"), StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            umount = partfs.builder("umount", "--force", mnt.toString()).redirectErrorStream(true)
                    .redirectOutput(dir.resolve("umount.out").toFile()).start();
            Partfs.awaitMounted(mnt, false); // gone from the namespace while the file is still open
            ch.write(ByteBuffer.wrap("written after the detach".getBytes(StandardCharsets.UTF_8)));
            assertTrue(umount.isAlive(), "umount waits for the mount process, which serves the open file");
        }
        assertTrue(umount.waitFor(60, TimeUnit.SECONDS), "umount returns once the file is closed");
        String said = Files.readString(dir.resolve("umount.out"));
        assertEquals(0, umount.exitValue(), said);
        assertTrue(said.endsWith("partfs: unmounted " + mnt + "\n"), said);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the mount process exits once the file is closed");
        String log = Files.readString(dir.resolve("fg.log"));
        assertEquals(0, p.exitValue(), log);
        assertFalse(log.contains("is busy"), "no grace to wait for: " + log);
        assertEquals(0, partfs.run("mount", mnt.toString(), "--background").exit());
        assertEquals("written after the detach", Files.readString(mnt.resolve("held.bin")));
    }

    private static boolean fileHolds(Path file, String text) {
        try {
            return Files.readString(file).contains(text);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Test
    void badInputGetsOneLineAndANonZeroExit() throws Exception {
        Files.writeString(dir.resolve("afile"), "x");
        Files.createDirectories(dir.resolve("full"));
        Files.writeString(dir.resolve("full/x"), "x");
        List<String[]> cases = List.of(
                new String[] {"mount", dir.resolve("afile").toString()},
                new String[] {"mount", dir.resolve("full").toString()},
                new String[] {"mount", mnt.toString(), "--meta", dir.resolve("no-such-meta").toString()},
                new String[] {"mount", mnt.toString(), "--meta", "redis://user:topsecret@127.0.0.1:1/0"},
                new String[] {"mount", mnt.toString(), "--meta", "mysql://x"},
                new String[] {"mount", mnt.toString(), "--name", "typo"},
                new String[] {"mount", mnt.toString(), "--cache-size", "lots"},
                new String[] {"mount", mnt.toString(), "--cache-items", "0"},
                new String[] {"mount", mnt.toString(), "--upload-delay", "5"},
                new String[] {"mount", mnt.toString(), "--io-timeout", "0"},
                new String[] {"mount", mnt.toString(), "--unmount-grace", "-1"},
                new String[] {"mount", mnt.toString(), "--unmount-upload-wait", "-1"},
                new String[] {"mount", mnt.toString(), "--meta-cache-entries", "10"},
                new String[] {"format", "--storage", "s3://bucket?bogus=1", "vol"},
                new String[] {"format", "--storage", "s3://Bad_Bucket", "vol"},
                new String[] {"format", "--storage", "s3:/bucket", "vol"},
                new String[] {"format", "--meta", "rediss:/user:topsecret@127.0.0.1:6379/0", "vol"},
                new String[] {"status", "--meta", "redis://127.0.0.1:abc/0"},
                new String[] {"format", "--block-size", "3M", "vol"},
                new String[] {"format", "Bad Name"},
                new String[] {"format", "--meta", "redis://user:topsecret@127.0.0.1:1/0", "unreached"},
                new String[] {"format", "--storage", "s3://bkt?endpoint=http://127.0.0.1:1", "nocreds"},
                new String[] {"umount", mnt.toString()},
                new String[] {"status", "--name", "never-made"},
                new String[] {"status", dir.resolve("full").toString()},
                new String[] {"status", "--sidecar", "127.0.0.1:1"},
                new String[] {"fsck", "--name", "never-made"},
                new String[] {"stats", "--sidecar", "127.0.0.1:" + RedisServer.freePort(), "--count", "1"},
                new String[] {"stats", dir.resolve("full").toString(), "--count", "1"},
                new String[] {"profile", "--home", dir.toString(), "--count", "1"},
                new String[] {"gc", "--meta", "redis://user:topsecret@127.0.0.1:1/0"});
        for (String[] args : cases) {
            Partfs.Result r = partfs.run(args);
            String cmd = String.join(" ", args);
            assertEquals(1, r.exit(), cmd + ": " + r.all());
            List<String> errors = Partfs.errorLines(r);
            assertEquals(1, errors.size(), cmd + " prints one error line: " + r.err());
            assertEquals("", r.out(), cmd + " prints nothing else (no table header before the error)");
            assertFalse(r.all().contains("\tat "), cmd + " prints no stack trace: " + r.all());
            assertFalse(r.all().contains("topsecret"), cmd + " never prints a password: " + r.all());
        }
        // nothing but the error line either: lettuce's own warning about an unreachable sentinel is not shown
        for (String meta : new String[] {"redis-sentinel://:topsecret@127.0.0.1:1/0#main", "redis-sentinel://127.0.0.1:1/0"}) {
            Partfs.Result r = partfs.run("status", "--meta", meta);
            assertEquals(1, r.exit(), r.all());
            assertEquals(1, r.err().lines().filter(l -> !l.startsWith("partfs: preparing")).count(), r.err());
            assertTrue(r.err().contains(meta.endsWith("#main") ? "cannot reach Redis" : "#master"), r.err());
            assertFalse(r.all().contains("topsecret"), r.all());
        }
        // a login Redis refuses, a database it does not have: the error line alone, not an outage warning before it
        try (RedisServer secured = RedisServer.start("--requirepass", "topsecret")) {
            String at = "@127.0.0.1:" + secured.port();
            for (String meta : new String[] {"redis://:wrong" + at + "/0", "redis://:topsecret" + at + "/99"}) {
                Partfs.Result r = partfs.run("status", "--meta", meta);
                assertEquals(1, r.exit(), r.all());
                List<String> lines = r.err().lines().filter(l -> !l.startsWith("partfs: preparing") && !l.startsWith("partfs: building")).toList();
                assertEquals(1, lines.size(), r.err());
                assertTrue(lines.get(0).contains(meta.endsWith("/0") ? "refused the login" : "has no database 99"), r.err());
                assertFalse(r.all().contains("topsecret"), r.all());
            }
        }
        // an object store that cannot be reached: the error line alone, not the outage tracker's warning before it
        partfs.env("PARTFS_ACCESS_KEY", S3Server.ACCESS_KEY).env("PARTFS_SECRET_KEY", S3Server.SECRET_KEY);
        Partfs.Result unreachable = partfs.run("format", "--meta", dir.resolve("meta-unreached").toString(), "--storage",
                "s3://bkt?endpoint=http://127.0.0.1:1", "unreached");
        assertEquals(1, unreachable.exit(), unreachable.all());
        assertEquals(List.of("cannot reach"), unreachable.err().lines().filter(l -> !l.startsWith("partfs: preparing")
                && !l.startsWith("partfs: building")).map(l -> l.contains("cannot reach s3://bkt/") ? "cannot reach" : l).toList(),
                unreachable.err());
        assertFalse(Files.exists(dir.resolve("meta-unreached")), "a format that cannot reach the store creates no metadata");
        assertFalse(Files.exists(dir.resolve("no-such-meta")), "a mistyped --meta creates nothing");
        assertFalse(Files.exists(Path.of("s3:")) || Files.exists(Path.of("rediss:")), "a URL with one slash is no relative directory");
        assertFalse(Files.exists(partfs.home().resolve("unreached")), "a format that cannot reach Redis leaves no object directory");
        assertFalse(Files.exists(partfs.home().resolve("nocreds")), "a format without S3 credentials leaves no volume directory");
        assertFalse(Files.exists(mnt), "a failed mount leaves no mount point behind");
        assertFalse(Files.exists(partfs.home().resolve("typo")), "a mistyped --name mounts no new empty volume");
    }

    @Test
    void aNamedEmbeddedVolumeIsMountedOnceFormatted() throws Exception {
        Partfs.Result missing = partfs.run("mount", mnt.toString(), "--name", "vol2", "--background");
        assertEquals(1, missing.exit(), missing.all());
        assertTrue(missing.err().contains("partfs format vol2"), "says how to create it: " + missing.err());
        assertEquals(0, partfs.run("format", "vol2").exit());
        Partfs.Result m = partfs.run("mount", mnt.toString(), "--name", "vol2", "--background");
        assertEquals(0, m.exit(), m.all());
        Files.writeString(mnt.resolve("f"), "in vol2");
        assertEquals(0, partfs.run("umount", mnt.toString()).exit());
        Partfs.Result other = partfs.run("mount", mnt.toString(), "--name", "vol3", "--background");
        assertEquals(1, other.exit(), other.all());
        assertTrue(other.err().contains("(there: vol2)"), "names the volumes there are: " + other.err());
        assertEquals(0, partfs.run("mount", mnt.toString(), "--name", "vol2", "--background").exit());
        assertEquals("in vol2", Files.readString(mnt.resolve("f")));
        assertEquals(0, partfs.run("umount", mnt.toString()).exit());
    }

    @Test
    void helpOnEveryCommand() throws Exception {
        for (String c : new String[] {"format", "config", "destroy", "mount", "umount", "status", "fsck", "gc", "dump", "load", "stats", "profile", "warmup", "compact", "info", "demo"}) {
            Partfs.Result r = partfs.run(c, "--help");
            assertEquals(0, r.exit(), c);
            assertTrue(r.out().startsWith("Usage: partfs " + c), c + ": " + r.out());
        }
    }

    @Test
    void formatAndMountOnRedisAndS3() throws Exception {
        try (RedisServer redis = RedisServer.start(); S3Server s3 = S3Server.start()) {
            String meta = redis.url(1);
            String storage = "s3://partfs-cli/vol1?endpoint=" + s3.endpoint() + "&path-style=true";
            partfs.env("PARTFS_ACCESS_KEY", S3Server.ACCESS_KEY).env("PARTFS_SECRET_KEY", "not-the-secret");
            Partfs.Result denied = partfs.run("format", "--meta", meta, "--storage", storage, "vol1");
            assertEquals(1, denied.exit(), denied.all());
            assertTrue(denied.err().contains("denied"), denied.err());
            assertFalse(denied.all().contains("not-the-secret"), denied.all());
            Partfs.Result deniedBench = partfs.run("objbench", "--storage", storage, "--blocks", "1", "--small-objects", "1", "-p", "1");
            assertEquals(1, deniedBench.exit(), deniedBench.all());
            assertEquals(1, Partfs.errorLines(deniedBench).size(), deniedBench.err());
            assertTrue(deniedBench.err().contains("denied"), "refused credentials, not an unreachable endpoint: " + deniedBench.err());
            assertFalse(deniedBench.err().contains("delete"), "the request that failed, not a clean-up after it: " + deniedBench.err());

            partfs.env("PARTFS_SECRET_KEY", S3Server.SECRET_KEY);
            Partfs.Result f = partfs.run("format", "--meta", meta, "--storage", storage, "--block-size", "1M", "vol1");
            assertEquals(0, f.exit(), f.all());
            assertTrue(f.out().contains("formatted volume vol1"), f.out());
            assertFalse(f.all().contains(S3Server.SECRET_KEY), "the secret is never printed");
            Partfs.Result again = partfs.run("format", "--meta", meta, "--storage", storage, "--block-size", "1M", "vol1");
            assertTrue(again.out().contains("already formatted"), again.out());
            Partfs.Result other = partfs.run("format", "--meta", meta, "--storage", storage, "--block-size", "4M", "vol1");
            assertEquals(1, other.exit(), "a volume formatted differently is refused");

            // a Redis database another program uses: refused before anything is created, its data left alone
            try (var theirs = new io.partfs.engine.meta.RedisKvStore(redis.url(2))) {
                theirs.update(tx -> {
                    tx.put("their-key", new byte[] {42});
                    return null;
                });
            }
            Partfs.Result foreign = partfs.run("format", "--meta", redis.url(2), "theirs");
            assertEquals(1, foreign.exit(), foreign.all());
            assertEquals(1, Partfs.errorLines(foreign).size(), foreign.err());
            assertTrue(foreign.err().contains("holds data but no PartFS volume"), foreign.err());
            try (var theirs = new io.partfs.engine.meta.RedisKvStore(redis.url(2))) {
                assertEquals(1, (int) theirs.<Integer>read(r -> {
                    int[] n = {0};
                    r.scanKeys("", page -> n[0] += page.size());
                    return n[0];
                }), "their key alone, nothing added");
            }
            assertFalse(Files.exists(partfs.home().resolve("theirs")), "no object directory made for it");
            Partfs.Result foreignMount = partfs.run("mount", "--meta", redis.url(2), "--name", "theirs",
                    "--storage", dir.resolve("their-objects").toString(), mnt.toString());
            assertEquals(1, foreignMount.exit(), foreignMount.all());
            assertTrue(foreignMount.err().contains("holds data but no PartFS volume"), foreignMount.err());
            assertFalse(Files.exists(dir.resolve("their-objects")), "a mount that formats on first use refuses it too");

            partfs.env("PARTFS_SECRET_KEY", "not-the-secret");
            Partfs.Result deniedMount = partfs.run("mount", "--meta", meta, mnt.toString(), "--background");
            assertEquals(1, deniedMount.exit(), "a wrong secret fails the mount, not the first write: " + deniedMount.all());
            assertEquals(1, Partfs.errorLines(deniedMount).size(), deniedMount.err());
            assertTrue(deniedMount.err().contains("denied"), deniedMount.err());
            assertFalse(deniedMount.all().contains("not-the-secret"), deniedMount.all());
            partfs.env("PARTFS_ACCESS_KEY", "").env("PARTFS_SECRET_KEY", "").env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
                    .env("AWS_CONFIG_FILE", "/nonexistent").env("AWS_EC2_METADATA_DISABLED", "true");
            Partfs.Result noKeys = partfs.run("mount", "--meta", meta, mnt.toString(), "--background");
            assertEquals(1, noKeys.exit(), noKeys.all());
            assertEquals(1, Partfs.errorLines(noKeys).size(), noKeys.err());
            assertTrue(noKeys.err().contains("no S3 credentials"), noKeys.err());
            assertFalse(io.partfs.engine.fuse.Mounts.isMounted(mnt), "nothing is mounted after a refused mount");

            partfs.env("PARTFS_ACCESS_KEY", S3Server.ACCESS_KEY).env("PARTFS_SECRET_KEY", S3Server.SECRET_KEY);
            assertEquals(0, partfs.run("mount", "--meta", meta, mnt.toString(), "--background").exit());
            byte[] data = new byte[(3 << 20) + 5];
            new Random(2).nextBytes(data);
            Files.write(mnt.resolve("f.bin"), data);
            Files.createDirectories(mnt.resolve("d"));
            Files.createLink(mnt.resolve("d/g.bin"), mnt.resolve("f.bin"));
            assertEquals(0, partfs.run("umount", mnt.toString()).exit());
            try (S3ObjectStore store = new S3ObjectStore(s3.config("partfs-cli").prefix("vol1").build())) {
                assertEquals(4, store.listAll("vol1/chunks/").size(), "3 MiB + 5 bytes in 1 MiB blocks");
            }
            Partfs.Result st = partfs.run("status", "--meta", meta);
            assertTrue(st.out().contains("storage:    s3://partfs-cli/vol1/?endpoint="), st.out());
            assertTrue(st.out().matches("(?s).*clock:      this machine's is [0-9.]+ s off the metadata store's.*"), st.out());
            assertTrue(st.out().contains("durability: WARNING: Redis at ") && st.out().contains("appendonly yes"),
                    "the test's Redis keeps no append-only file: " + st.out());
            assertEquals(0, partfs.run("mount", "--meta", meta, mnt.toString(), "--background").exit());
            assertArrayEquals(data, Files.readAllBytes(mnt.resolve("d/g.bin")));
            assertEquals(2, Files.getAttribute(mnt.resolve("f.bin"), "unix:nlink"));
            assertEquals(0, partfs.run("umount", mnt.toString()).exit());

            // Redis restarts empty (no persistence): formatting again would hand out the same
            // object keys over vol1's data, so it is refused and the objects stay
            assertEquals("+OK", redis.command("FLUSHALL"));
            Partfs.Result over = partfs.run("format", "--meta", meta, "--storage", storage, "--block-size", "1M", "vol1");
            assertEquals(1, over.exit(), over.all());
            assertEquals(1, Partfs.errorLines(over).size(), over.err());
            assertTrue(over.err().contains("already holds file data of a volume 'vol1' (vol1/chunks/)")
                    && over.err().contains("no metadata backup"), over.err());
            try (S3ObjectStore store = new S3ObjectStore(s3.config("partfs-cli").prefix("vol1").build())) {
                assertEquals(4, store.listAll("vol1/chunks/").size(), "vol1's objects are left alone");
            }
            try (var flushed = new io.partfs.engine.meta.RedisKvStore(meta)) {
                assertFalse(io.partfs.engine.meta.MetaEngine.isFormatted(flushed), "and no volume was made");
            }
        }
    }

    /**
     * A mount process killed without unmounting (SIGKILL, the out-of-memory killer) leaves a
     * mount that answers ENOTCONN; the next mount at that point, as a restarted sidecar's is,
     * takes it down and mounts, and what was fsynced before the kill is there. A live mount is
     * still refused, and so is a mount that cannot open its volume, which leaves the dead mount
     * as it was: taken down first, the path would show the bare directory beneath, an empty
     * disk to ClickHouse, until a mount that may never come.
     */
    @Test
    void mountTakesDownAMountWhoseProcessWasKilled() throws Exception {
        Partfs.Result m = partfs.run("mount", mnt.toString(), "--background");
        assertEquals(0, m.exit(), m.all());
        Partfs.Result live = partfs.run("mount", mnt.toString(), "--background");
        assertEquals(1, live.exit(), live.all());
        assertTrue(live.err().contains("already mounted (fuse.partfs): unmount it first with partfs umount " + mnt), live.err());
        byte[] data = new byte[100_000];
        new Random(7).nextBytes(data);
        writeFsynced(mnt.resolve("kept"), data);
        java.util.regex.Matcher pid = java.util.regex.Pattern.compile("pid (\\d+)").matcher(m.all());
        assertTrue(pid.find(), m.all());
        ProcessHandle sidecar = ProcessHandle.of(Long.parseLong(pid.group(1))).orElseThrow();
        sidecar.destroyForcibly();
        sidecar.onExit().get(30, TimeUnit.SECONDS);
        assertTrue(Mounts.isMounted(mnt) && Mounts.disconnected(mnt), "a dead mount is left behind");

        Partfs.Result unreachable = partfs.run("mount", mnt.toString(), "--meta", "redis://127.0.0.1:1/0");
        assertEquals(1, unreachable.exit(), unreachable.all());
        assertFalse(unreachable.all().contains("took down"), unreachable.all());
        assertTrue(Mounts.isMounted(mnt) && Mounts.disconnected(mnt), "the dead mount stays until a mount can replace it");

        Partfs.Result again = partfs.run("mount", mnt.toString(), "--background");
        assertEquals(0, again.exit(), again.all());
        assertTrue(again.err().contains("took down the mount at " + mnt), again.err());
        assertFalse(Mounts.disconnected(mnt));
        assertArrayEquals(data, Files.readAllBytes(mnt.resolve("kept")));
        assertEquals(0, partfs.run("umount", mnt.toString()).exit());
        assertFalse(Mounts.isMounted(mnt), "one mount taken down, one unmounted: nothing stacked");
        assertEquals(java.nio.file.attribute.PosixFilePermissions.fromString("rwxr-xr-x"), Files.getPosixFilePermissions(mnt),
                "the mode the first mount found (and the killed mount left at 000 beneath) is given back");
    }

    /**
     * A background mount replacing a killed one returns once its own mount serves the path: a
     * killed sidecar whose process is not reaped yet (a zombie, or an exit still under way,
     * emulated by a live process's pid in its pid file) and the dead mount it left do not pass
     * for the new mount, or ClickHouse started right after would meet the dead one (found by
     * scripts/crash-soak).
     */
    @Test
    void aBackgroundMountReplacingAKilledOneReturnsOnceItsOwnMountServes() throws Exception {
        Partfs.Result m = partfs.run("mount", mnt.toString(), "--background");
        assertEquals(0, m.exit(), m.all());
        Files.writeString(mnt.resolve("kept"), "kept");
        java.util.regex.Matcher pid = java.util.regex.Pattern.compile("pid (\\d+)").matcher(m.all());
        assertTrue(pid.find(), m.all());
        ProcessHandle sidecar = ProcessHandle.of(Long.parseLong(pid.group(1))).orElseThrow();
        sidecar.destroyForcibly();
        sidecar.onExit().get(30, TimeUnit.SECONDS);
        Process notReaped = new ProcessBuilder("sleep", "60").start();
        try {
            Files.writeString(new RunFiles(partfs.home()).pidFile(mnt), String.valueOf(notReaped.pid()));
            Partfs.Result again = partfs.run("mount", mnt.toString(), "--background");
            assertEquals(0, again.exit(), again.all());
            assertFalse(Mounts.disconnected(mnt), "the new mount serves the path when mount returns");
            assertEquals("kept", Files.readString(mnt.resolve("kept")));
        } finally {
            notReaped.destroyForcibly();
            notReaped.waitFor(10, TimeUnit.SECONDS);
        }
        assertEquals(0, partfs.run("umount", mnt.toString()).exit());
    }

    /**
     * A mount whose process was killed while a file was open there (ClickHouse's, say): a plain
     * unmount is refused as busy, so umount takes it down lazily; nothing was left to flush.
     * The directory beneath, which a ClickHouse not running as root could write into (a mount
     * point chowned to it), is left at mode 000 until a mount serves the path again, and a clean
     * unmount gives it its mode back.
     */
    @Test
    void umountTakesDownADeadMountAFileIsStillOpenIn() throws Exception {
        Files.setPosixFilePermissions(dir, java.nio.file.attribute.PosixFilePermissions.fromString("rwx--x--x"));
        Files.createDirectories(mnt);
        var writable = java.nio.file.attribute.PosixFilePermissions.fromString("rwxrwxrwx");
        Files.setPosixFilePermissions(mnt, writable);
        Partfs.Result m = partfs.run("mount", mnt.toString(), "--background");
        assertEquals(0, m.exit(), m.all());
        writeFsynced(mnt.resolve("held"), new byte[4096]);
        try (java.nio.channels.FileChannel held = java.nio.channels.FileChannel.open(mnt.resolve("held"))) {
            java.util.regex.Matcher pid = java.util.regex.Pattern.compile("pid (\\d+)").matcher(m.all());
            assertTrue(pid.find(), m.all());
            ProcessHandle sidecar = ProcessHandle.of(Long.parseLong(pid.group(1))).orElseThrow();
            sidecar.destroyForcibly();
            sidecar.onExit().get(30, TimeUnit.SECONDS);
            assertTrue(Mounts.disconnected(mnt), "a dead mount is left behind");
            assertEquals(1, new ProcessBuilder("fusermount", "-u", mnt.toString()).start().waitFor(),
                    "a plain unmount is refused while the file is open");

            Partfs.Result u = partfs.run("umount", mnt.toString());
            assertEquals(0, u.exit(), u.all());
            assertTrue(u.out().contains("took down " + mnt), u.out());
            assertFalse(Mounts.isMounted(mnt), "the dead mount is gone although a file is still open in it");
        }
        assertEquals(java.util.Set.of(), Files.getPosixFilePermissions(mnt), "the bare directory stays guarded");
        Process nobody = new ProcessBuilder("runuser", "-u", "nobody", "--", "mkdir", mnt.resolve("part").toString())
                .redirectErrorStream(true).start();
        String said = new String(nobody.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(1, nobody.waitFor(), said);
        assertTrue(said.contains("Permission denied"), said);
        assertFalse(Files.exists(mnt.resolve("part")), "nothing written beneath the mount");

        assertEquals(0, partfs.run("mount", mnt.toString(), "--background").exit());
        assertEquals(0, partfs.run("umount", mnt.toString()).exit());
        assertEquals(writable, Files.getPosixFilePermissions(mnt), "a clean unmount gives the directory its mode back");
        assertFalse(Files.getFileAttributeView(mnt, UserDefinedFileAttributeView.class).list().contains("partfs.mode"),
                "and forgets it");
    }

    /**
     * The pod's start in operator-manifests/: one {@code mount --storage} on embedded RocksDB
     * metadata formats the volume on first use, mounts the same volume again later, and refuses
     * metadata that holds another storage, changing nothing.
     */
    @Test
    void mountWithStorageFormatsOnFirstUseAndRefusesAnotherVolume() throws Exception {
        try (S3Server s3 = S3Server.start()) {
            String meta = dir.resolve("meta").toString();
            String storage = "s3://partfs-pod/clickhouse/pod-0?endpoint=" + s3.endpoint() + "&path-style=true";
            String[] mount = {"mount", "--meta", meta, "--storage", storage, "--name", "pod-0", mnt.toString(), "--background"};
            partfs.env("PARTFS_ACCESS_KEY", S3Server.ACCESS_KEY).env("PARTFS_SECRET_KEY", "not-the-secret");
            Partfs.Result denied = partfs.run(mount);
            assertEquals(1, denied.exit(), denied.all());
            assertEquals(1, Partfs.errorLines(denied).size(), denied.err());
            assertTrue(denied.err().contains("denied"), denied.err());
            assertFalse(denied.all().contains("not-the-secret"), denied.all());
            assertFalse(Mounts.isMounted(mnt), "nothing is mounted after a refused mount");
            assertFalse(Files.exists(Path.of(meta)), "nor is an empty metadata database left behind");

            partfs.env("PARTFS_SECRET_KEY", S3Server.SECRET_KEY);
            Partfs.Result first = partfs.run(mount);
            assertEquals(0, first.exit(), first.all());
            Files.writeString(mnt.resolve("format_version.txt"), "1");
            assertEquals(0, partfs.run("umount", mnt.toString()).exit());
            Partfs.Result st = partfs.run("status", "--meta", meta);
            assertTrue(st.out().contains("volume:     pod-0"), st.out());
            assertTrue(st.out().contains("storage:    s3://partfs-pod/clickhouse/pod-0/?endpoint="), st.out());

            Partfs.Result again = partfs.run(mount);
            assertEquals(0, again.exit(), "the same volume mounts again: " + again.all());
            assertEquals("1", Files.readString(mnt.resolve("format_version.txt")));
            assertEquals(0, partfs.run("umount", mnt.toString()).exit());

            Partfs.Result other = partfs.run("mount", "--meta", meta, "--storage", storage.replace("pod-0", "pod-1"),
                    "--name", "pod-0", mnt.toString(), "--background");
            assertEquals(1, other.exit(), other.all());
            assertEquals(1, Partfs.errorLines(other).size(), other.err());
            assertTrue(other.err().contains("holds volume 'pod-0' on s3://partfs-pod/clickhouse/pod-0/"), other.err());
            assertFalse(Mounts.isMounted(mnt));
            assertTrue(partfs.run("status", "--meta", meta).out().contains("clickhouse/pod-0/?endpoint="), "left as it was");
        }
    }

    /**
     * fsck and gc on Redis + S3: a clean volume checks OK (also while mounted), gc refuses a
     * short --min-age while mounted, a block deleted behind PartFS's back makes fsck exit 1 naming
     * the file, and gc counts a stray object, then deletes it and nothing else.
     */
    @Test
    void fsckFindsAMissingBlockAndGcDeletesOnlyALeakedObject() throws Exception {
        try (RedisServer redis = RedisServer.start(); S3Server s3 = S3Server.start()) {
            String meta = redis.url(5);
            formatOnS3(meta, s3, "partfs-check", "checked");
            assertEquals(0, partfs.run("mount", "--meta", meta, mnt.toString(), "--background").exit());
            byte[] data = new byte[(3 << 20) + 5];
            new Random(5).nextBytes(data);
            Files.createDirectories(mnt.resolve("db/t"));
            Files.write(mnt.resolve("db/t/f.bin"), data);
            Files.writeString(mnt.resolve("small.txt"), "small");
            Files.createLink(mnt.resolve("db/small-link"), mnt.resolve("small.txt"));
            long smallIno = (Long) Files.getAttribute(mnt.resolve("small.txt"), "unix:ino");
            Partfs.Result mountedFsck = partfs.run("fsck", "--meta", meta);
            assertEquals(0, mountedFsck.exit(), mountedFsck.all());
            assertTrue(mountedFsck.out().contains("fsck: OK"), mountedFsck.out());
            assertTrue(mountedFsck.out().contains("3 directories, 2 files"), mountedFsck.out());
            Partfs.Result quickGc = partfs.run("gc", "--meta", meta, "--min-age", "0");
            assertEquals(1, quickGc.exit(), quickGc.all());
            assertEquals(1, Partfs.errorLines(quickGc).size(), quickGc.err());
            assertTrue(quickGc.err().contains("--min-age 10m"), quickGc.err());
            assertEquals(0, partfs.run("umount", mnt.toString()).exit());

            try (S3ObjectStore store = new S3ObjectStore(s3.config("partfs-check").prefix("checked").build())) {
                String stray = io.partfs.engine.data.ChunkStore.blockKey("checked", 999_999, 0, 3);
                store.put(stray, new byte[3]);
                String lost = store.listAll("checked/chunks/").stream().map(o -> o.key())
                        .filter(k -> k.endsWith("_1_1048576")).findFirst().orElseThrow();
                store.delete(lost);
                try (var kv = new io.partfs.engine.meta.RedisKvStore(meta)) { // a link count one below its names
                    kv.update(tx -> {
                        tx.put("i" + smallIno, io.partfs.engine.Attr.decode(smallIno, tx.get("i" + smallIno)).withNlink(1).encode());
                        return null;
                    });
                }
                Partfs.Result broken = partfs.run("fsck", "--meta", meta);
                assertEquals(1, broken.exit(), broken.all());
                assertTrue(broken.out().contains("1 blocks missing") && broken.out().contains("/db/t/f.bin"), broken.out());
                assertTrue(broken.out().contains("1 inodes have a link count other than their number of names"), broken.out());
                assertTrue(broken.out().contains("(inode " + smallIno + "): 1 links, 2 names"), broken.out());

                Partfs.Result count = partfs.run("gc", "--meta", meta, "--min-age", "0");
                assertEquals(0, count.exit(), count.all());
                assertTrue(count.out().contains("gc: 1 leaked objects (3 B)"), count.out());
                assertTrue(count.out().contains("gc: 1 files have blocks missing from the object store"), count.out());
                assertTrue(store.head(stray).isPresent(), "gc without --delete deletes nothing");
                int before = store.listAll("checked/chunks/").size();

                Partfs.Result deleted = partfs.run("gc", "--meta", meta, "--min-age", "0", "--delete");
                assertEquals(0, deleted.exit(), deleted.all());
                assertTrue(deleted.out().contains("deleted 1"), deleted.out());
                assertTrue(store.head(stray).isEmpty());
                assertEquals(before - 1, store.listAll("checked/chunks/").size(), "only the stray object went");
                assertFalse(deleted.all().contains(S3Server.SECRET_KEY), "the secret is never printed");

                // a mount that crashed holding a file it had unlinked (its last heartbeat 10 minutes ago; a pod
                // gone after a DROP): no mount will delete that data, and the session blocks nothing; gc --delete does
                long tenMinutesAgo = io.partfs.engine.TimeSource.SYSTEM.nowNanos() - java.time.Duration.ofMinutes(10).toNanos();
                try (var m = new io.partfs.engine.meta.MetaEngine(new io.partfs.engine.meta.RedisKvStore(meta), () -> tenMinutesAgo)) {
                    m.load();
                    m.registerSession("crashed-host pid 1 at /mnt");
                    long t = m.lookup(m.lookup(io.partfs.engine.meta.MetaEngine.ROOT, "db").ino(), "t").ino();
                    m.opened(m.lookup(t, "f.bin").ino());
                    m.unlink(t, "f.bin");
                }
                Partfs.Result crashed = partfs.run("status", "--meta", meta);
                assertTrue(crashed.out().contains("deletions:  1 files"), "waiting: " + crashed.out());
                assertTrue(crashed.out().contains("clients:    0 mounted"), crashed.out());
                assertTrue(crashed.out().contains("crashed-host pid 1 at /mnt, STALE: no heartbeat for 60"), crashed.out());
                int blocks = store.listAll("checked/chunks/").size();
                Partfs.Result finished = partfs.run("gc", "--meta", meta, "--min-age", "0", "--delete");
                assertEquals(0, finished.exit(), finished.all());
                assertTrue(finished.out().contains("gc: removed the session of a crashed mount (no heartbeat for 300s):"
                        + " crashed-host pid 1 at /mnt"), finished.out());
                assertTrue(finished.out().contains("gc: finished the deletions mounts left: the data of 1 files"), finished.out());
                assertTrue(finished.out().contains("gc: 1 slices stay in the trash until their 2 hours are over"), finished.out());
                assertTrue(finished.out().contains(" 3 objects (2.0 MiB) in the trash"), "1 MiB blocks, one deleted: " + finished.out());
                assertEquals(blocks, store.listAll("checked/chunks/").size(), "f.bin's blocks wait in the trash");
                Partfs.Result after = partfs.run("status", "--meta", meta);
                assertTrue(after.out().contains("deletions:  0 files and 0 slices waiting"), after.out());
                assertTrue(after.out().contains("trash:      freed objects are kept 2 hours before they are deleted;"
                        + " 1 slices in it, the oldest freed in the hour from 20"), after.out());
                assertFalse(after.out().contains("session "), after.out());

                Partfs.Result config = partfs.run("config", "--meta", meta, "--trash-hours", "0");
                assertEquals(0, config.exit(), config.all());
                assertTrue(config.out().contains("trash-hours: 0 (was 2)"), config.out());
                Partfs.Result emptied = partfs.run("gc", "--meta", meta, "--min-age", "0", "--delete");
                assertEquals(0, emptied.exit(), emptied.all());
                assertEquals(1, store.listAll("checked/chunks/").size(), "only small.txt's block is left");
                Partfs.Result off = partfs.run("status", "--meta", meta);
                assertTrue(off.out().contains("trash:      off: freed objects are deleted at once; 0 slices in it"), off.out());
                Partfs.Result bad = partfs.run("config", "--meta", meta, "--trash-hours", "-1");
                assertEquals(1, bad.exit(), bad.all());
                assertEquals(1, Partfs.errorLines(bad).size(), bad.err());
                assertTrue(bad.err().contains("use 0 (no trash) to 8784"), bad.err());
            }
        }
    }

    /**
     * partfs warmup through a real mount's sidecar on Redis + s3proxy: after a remount with an
     * empty block cache it fetches each block of a directory once, the files then read without
     * an object GET, a second warmup finds everything local, and bad input gets one line. On the
     * same mount, partfs compact merges a file appended to 12 times into one slice.
     */
    @Test
    void warmupFetchesADirectorysBlocksIntoTheCacheOfARunningMount() throws Exception {
        try (RedisServer redis = RedisServer.start(); S3Server s3 = S3Server.start()) {
            String meta = redis.url(6);
            formatOnS3(meta, s3, "partfs-warm", "warm");
            assertEquals(0, partfs.run("mount", "--meta", meta, mnt.toString(), "--background", "--cache-dir", dir.resolve("cache1").toString()).exit());
            byte[] data = new byte[(3 << 20) + 5];
            new Random(6).nextBytes(data);
            Files.createDirectories(mnt.resolve("db/t/all_1_1_0"));
            Files.write(mnt.resolve("db/t/all_1_1_0/c.bin"), data);
            Files.writeString(mnt.resolve("db/t/all_1_1_0/count.txt"), "3");
            assertEquals(0, partfs.run("umount", mnt.toString()).exit());

            int port = RedisServer.freePort();
            String sidecar = "127.0.0.1:" + port;
            Partfs.Result m = partfs.run("mount", "--meta", meta, mnt.toString(), "--background", "--cache-dir",
                    dir.resolve("cache2").toString(), "--http-address", sidecar);
            assertEquals(0, m.exit(), m.all());
            double before = objectGets(sidecar);
            // no --sidecar: the endpoint the mount holding the path recorded in its run files
            Partfs.Result cold = partfs.run("warmup", "--check", mnt.resolve("db").toString());
            assertEquals(0, cold.exit(), cold.all());
            assertTrue(cold.out().contains("checked " + mnt.resolve("db").toRealPath() + ": 2 files (3.0 MiB), 5 blocks (3.0 MiB):"
                    + " 0 on local disk (0 B, 0.0%), 5 only in the object store"), cold.out());
            assertEquals(before, objectGets(sidecar), "a check fetches nothing");
            String cBin = mnt.resolve("db/t/all_1_1_0/c.bin").toString();
            Partfs.Result stored = partfs.run("info", "--check", cBin);
            assertEquals(0, stored.exit(), stored.all());
            assertTrue(stored.out().contains("data: 1 extent, 4 blocks (3.0 MiB): 4 in the object store (checked)"), stored.out());
            assertTrue(stored.out().lines().anyMatch(l -> l.matches(" +3145728 +5 +\\d+ +in the object store \\(checked\\) +warm/chunks/\\S+_3_5")),
                    "the last block's row: " + stored.out());
            Partfs.Result tree = partfs.run("info", "--sidecar", sidecar, mnt.resolve("db").toString());
            assertTrue(tree.out().contains("under it: 2 directories, 2 files (3.0 MiB), 0 symlinks"), tree.out());
            Partfs.Result w = partfs.run("warmup", "--sidecar", sidecar, "-p", "4", mnt.resolve("db").toString());
            assertEquals(0, w.exit(), w.all());
            assertTrue(w.out().contains("2 files (3.0 MiB), 5 blocks: 5 fetched"), w.out());
            double gets = objectGets(sidecar);
            assertArrayEquals(data, Files.readAllBytes(mnt.resolve("db/t/all_1_1_0/c.bin")));
            assertEquals("3", Files.readString(mnt.resolve("db/t/all_1_1_0/count.txt")));
            assertEquals(gets, objectGets(sidecar), "the warmed files read without a GET");
            Partfs.Result cached = partfs.run("info", "--sidecar", sidecar, "--check", cBin);
            assertTrue(cached.out().contains("4 blocks (3.0 MiB): 4 in the block cache"), cached.out());
            assertEquals(gets, objectGets(sidecar), "info fetches nothing");
            Partfs.Result warm = partfs.run("warmup", "--sidecar", sidecar, "--check", mnt.resolve("db").toString());
            assertTrue(warm.out().contains("5 blocks (3.0 MiB): 5 on local disk (3.0 MiB, 100.0%), 0 only in the object store"),
                    warm.out());
            Partfs.Result again = partfs.run("warmup", "--sidecar", sidecar, "-p", "256", mnt.resolve("db/t/all_1_1_0/c.bin").toString());
            assertEquals(0, again.exit(), again.all());
            assertTrue(again.err().contains("blocks at a time, not 256: a quarter of its heap holds no more"), again.err());
            assertTrue(again.out().contains("1 files (3.0 MiB), 4 blocks: 0 fetched (0 B, 0.0 MiB/s), 4 already local"), again.out());

            // a bit flipped on the cache disk after reads checked the block: only a verify finds it
            Path block = io.partfs.engine.testing.LiveTree.files(dir.resolve("cache2"), null).keySet().stream()
                    .filter(f -> f.getFileName().toString().endsWith("_0_1048576")).findFirst().orElseThrow();
            try (var ch = java.nio.channels.FileChannel.open(block, java.nio.file.StandardOpenOption.WRITE)) {
                ch.write(java.nio.ByteBuffer.wrap(new byte[] {(byte) ~data[77]}), 77);
            }
            Partfs.Result scrub = partfs.run("warmup", "--sidecar", sidecar, "--check", "--verify", mnt.resolve("db").toString());
            assertEquals(1, scrub.exit(), scrub.all());
            assertTrue(scrub.out().contains("4 on local disk (2.0 MiB, 66.7%), 1 only in the object store; checksums: 4 good, 1 damaged,"
                    + " 0 without checksums"), scrub.out());
            assertTrue(scrub.err().contains("1 cached blocks did not match their checksums or could not be read: dropped, to be read"
                    + " from the object store"), scrub.err());
            assertEquals(gets, objectGets(sidecar), "a check fetches nothing");
            Partfs.Result mend = partfs.run("warmup", "--sidecar", sidecar, "--verify", mnt.resolve("db").toString());
            assertEquals(0, mend.exit(), mend.all());
            assertTrue(mend.out().contains("5 blocks: 1 fetched (1.0 MiB"), mend.out());
            assertTrue(mend.out().contains("checksums: 4 good, 0 damaged, 0 without checksums"), mend.out());
            assertArrayEquals(data, Files.readAllBytes(mnt.resolve("db/t/all_1_1_0/c.bin")));

            StringBuilder rows = new StringBuilder();
            for (int i = 0; i < 12; i++) { // a commit each: 12 slices, under the 32 that the background compactor waits for
                String row = "row " + i + "\n";
                Files.writeString(mnt.resolve("db/log.txt"), row, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
                rows.append(row);
            }
            Partfs.Result fragmented = partfs.run("info", "--sidecar", sidecar, mnt.resolve("db/log.txt").toString());
            assertTrue(fragmented.out().contains("data: 12 extents, 12 blocks"), fragmented.out());
            Partfs.Result compacted = partfs.run("compact", "--sidecar", sidecar, mnt.resolve("db").toString());
            assertEquals(0, compacted.exit(), compacted.all());
            assertTrue(compacted.out().contains("compacted " + mnt.resolve("db").toRealPath() + ": 3 files, 3 chunks: 1 fragmented,"
                    + " 1 compacted (12 slices -> 1, 74 B rewritten), 0 failed"), compacted.out());
            Partfs.Result merged = partfs.run("info", "--sidecar", sidecar, "--check", mnt.resolve("db/log.txt").toString());
            assertEquals(0, merged.exit(), merged.all());
            assertTrue(merged.out().contains("data: 1 extent, 1 block (74 B)"), merged.out());
            assertEquals(rows.toString(), Files.readString(mnt.resolve("db/log.txt")));

            Files.createDirectories(dir.resolve("elsewhere"));
            String[][] bad = {
                {"warmup", "--sidecar", sidecar, mnt.resolve("db/nothing").toString()},
                {"warmup", "--sidecar", sidecar, dir.resolve("elsewhere").toString()},
                {"warmup", "--sidecar", sidecar, "-p", "0", mnt.resolve("db").toString()},
                {"warmup", "--sidecar", "127.0.0.1:" + RedisServer.freePort(), mnt.resolve("db").toString()},
                {"info", "--sidecar", sidecar, mnt.resolve("db/nothing").toString()},
                {"info", "--sidecar", sidecar, dir.resolve("elsewhere").toString()},
                {"compact", "--sidecar", sidecar, mnt.resolve("db/nothing").toString()},
                {"compact", "--sidecar", sidecar, dir.resolve("elsewhere").toString()},
            };
            String[] says = {"no such file or directory", "is not under this mount's mount point", "--threads must be 1-256",
                "no PartFS sidecar answers", "no such file or directory", "is not under this mount's mount point",
                "no such file or directory", "is not under this mount's mount point"};
            for (int i = 0; i < bad.length; i++) {
                Partfs.Result r = partfs.run(bad[i]);
                assertEquals(1, r.exit(), r.all());
                assertEquals(1, Partfs.errorLines(r).size(), r.err());
                assertTrue(r.err().contains(says[i]), r.err());
            }
            assertEquals(0, partfs.run("umount", mnt.toString()).exit());
        }
    }

    /** The mount's object GETs so far, from its /metrics. */
    private static double objectGets(String sidecar) throws Exception {
        var c = java.net.http.HttpClient.newHttpClient();
        String body = c.send(java.net.http.HttpRequest.newBuilder(java.net.URI.create("http://" + sidecar + "/metrics")).build(),
                java.net.http.HttpResponse.BodyHandlers.ofString()).body();
        return new StatsCommand.Delta(java.util.Map.of(), StatsCommand.parse(body), 1).now("partfs_object_requests_total", "op=\"get\"");
    }

    @Test
    void writebackFsyncReturnsBeforeTheUploadAndUmountUploadsEverything() throws Exception {
        try (RedisServer redis = RedisServer.start(); S3Server s3 = S3Server.start()) {
            String meta = redis.url(3);
            mountWriteBack(meta, s3, "partfs-wb", "wb");
            byte[] data = new byte[(3 << 20) + 5];
            new Random(3).nextBytes(data);
            writeFsynced(mnt.resolve("part.bin"), data);
            try (S3ObjectStore store = new S3ObjectStore(s3.config("partfs-wb").prefix("wb").build())) {
                assertEquals(0, store.listAll("wb/chunks/").size(), "fsync and close returned with the data staged locally");
                assertArrayEquals(data, Files.readAllBytes(mnt.resolve("part.bin")));
                Partfs.Result u = partfs.run("umount", mnt.toString());
                assertEquals(0, u.exit(), u.all());
                assertEquals(4, store.listAll("wb/chunks/").size(), "umount uploaded every staged block");
            }
            Partfs.Result again = partfs.run("mount", "--meta", meta, mnt.toString(), "--background",
                    "--cache-dir", dir.resolve("other-cache").toString());
            assertEquals(0, again.exit(), again.all());
            assertArrayEquals(data, Files.readAllBytes(mnt.resolve("part.bin")), "another cache dir reads it from S3");
            assertEquals(0, partfs.run("umount", mnt.toString()).exit());
        }
    }

    /** Formats volume {@code name} (1 MiB blocks) in {@code bucket} of {@code s3} with metadata at {@code meta}. */
    private void formatOnS3(String meta, S3Server s3, String bucket, String name) throws Exception {
        String storage = "s3://" + bucket + "/" + name + "?endpoint=" + s3.endpoint() + "&path-style=true";
        partfs.env("PARTFS_ACCESS_KEY", S3Server.ACCESS_KEY).env("PARTFS_SECRET_KEY", S3Server.SECRET_KEY);
        Partfs.Result f = partfs.run("format", "--meta", meta, "--storage", storage, "--block-size", "1M", name);
        assertEquals(0, f.exit(), f.all());
    }

    /**
     * Formats volume {@code name} (1 MiB blocks) in {@code bucket} with metadata at {@code meta}
     * and mounts it in write-back mode with a one-hour upload delay; returns the mount's output.
     */
    private Partfs.Result mountWriteBack(String meta, S3Server s3, String bucket, String name) throws Exception {
        formatOnS3(meta, s3, bucket, name);
        Partfs.Result m = partfs.run("mount", "--meta", meta, mnt.toString(), "--background", "--writeback", "--upload-delay", "3600");
        assertEquals(0, m.exit(), m.all());
        return m;
    }

    /** Creates or overwrites {@code f} with {@code data} and fsyncs it before closing. */
    private static void writeFsynced(Path f, byte[] data) throws IOException {
        try (var ch = java.nio.channels.FileChannel.open(f, java.nio.file.StandardOpenOption.CREATE,
                java.nio.file.StandardOpenOption.WRITE)) {
            ch.write(java.nio.ByteBuffer.wrap(data));
            ch.force(true);
        }
    }

    /**
     * A write-back sidecar killed with SIGKILL after fsyncs returned: the next mount with the
     * same cache directory finds every staged block (written into spare files, see Staging),
     * uploads them, and every file reads back whole, also from S3 alone.
     */
    @Test
    void writebackLosesNothingFsyncedWhenTheSidecarIsKilled() throws Exception {
        try (RedisServer redis = RedisServer.start(); S3Server s3 = S3Server.start()) {
            String meta = redis.url(4);
            // the sidecars' temp directory is this test's, to see what a killed one leaves there
            Path tmp = Files.createDirectories(dir.resolve("tmp"));
            partfs.env("PARTFS_JAVA_EXTRA_OPTS", "-Djava.io.tmpdir=" + tmp);
            Partfs.Result m = mountWriteBack(meta, s3, "partfs-kill", "killed");
            java.util.regex.Matcher pid = java.util.regex.Pattern.compile("pid (\\d+)").matcher(m.all());
            assertTrue(pid.find(), m.all());
            Random random = new Random(4);
            List<byte[]> files = new java.util.ArrayList<>();
            for (int i = 0; i < 20; i++) {
                byte[] data = new byte[i == 0 ? (3 << 20) + 5 : 1000 + 997 * i];
                random.nextBytes(data);
                files.add(data);
                writeFsynced(mnt.resolve("f" + i), data);
            }
            ProcessHandle sidecar = ProcessHandle.of(Long.parseLong(pid.group(1))).orElseThrow();
            sidecar.destroyForcibly();
            sidecar.onExit().get(30, TimeUnit.SECONDS);
            try (var left = Files.walk(tmp)) {
                List<Path> libs = left.filter(f -> f.getFileName().toString().contains("rocksdb") && Files.isRegularFile(f))
                        .map(tmp::relativize).toList();
                assertEquals(1, libs.size(), "the killed sidecar left no library of its own: " + libs);
                assertTrue(libs.get(0).getName(0).toString().startsWith("partfs-native-"), "the one every start loads: " + libs);
            }
            assertEquals(0, partfs.run("umount", mnt.toString()).exit(), "the dead mount is taken down");
            try (S3ObjectStore store = new S3ObjectStore(s3.config("partfs-kill").prefix("killed").build())) {
                assertEquals(0, store.listAll("killed/chunks/").size(), "nothing was uploaded before the kill");
                assertEquals(0, partfs.run("mount", "--meta", meta, mnt.toString(), "--background", "--writeback").exit());
                for (int i = 0; i < files.size(); i++) {
                    assertArrayEquals(files.get(i), Files.readAllBytes(mnt.resolve("f" + i)), "f" + i);
                }
                Partfs.Result u = partfs.run("umount", mnt.toString());
                assertEquals(0, u.exit(), u.all());
                assertEquals(23, store.listAll("killed/chunks/").size(), "4 blocks of the big file and 19 small ones");
            }
            assertEquals(0, partfs.run("mount", "--meta", meta, mnt.toString(), "--background",
                    "--cache-dir", dir.resolve("other-cache").toString()).exit());
            for (int i = 0; i < files.size(); i++) {
                assertArrayEquals(files.get(i), Files.readAllBytes(mnt.resolve("f" + i)), "f" + i + " from S3 alone");
            }
            assertEquals(0, partfs.run("umount", mnt.toString()).exit());
        }
    }

    @Test
    void umountWithTheObjectStoreGoneStillUnmountsAndLogsWhatWasLost() throws Exception {
        try (RedisServer redis = RedisServer.start()) {
            String meta = redis.url(2);
            partfs.env("PARTFS_ACCESS_KEY", S3Server.ACCESS_KEY).env("PARTFS_SECRET_KEY", S3Server.SECRET_KEY);
            java.nio.channels.FileChannel open = runUntilS3IsGone(meta);
            IOException atClose = assertThrows(IOException.class, open::close, "close reports what it could not upload");
            assertTrue(String.valueOf(atClose.getMessage()).contains("Input/output error"), String.valueOf(atClose.getMessage()));
            long started = System.nanoTime();
            Partfs.Result u = partfs.run("umount", mnt.toString());
            assertEquals(1, u.exit(), "umount says the writes are lost: " + u.all());
            assertEquals(1, Partfs.errorLines(u).size(), u.err());
            assertTrue(u.err().contains("1 file(s) not uploaded"), u.err());
            assertFalse(Mounts.isMounted(mnt), "unmounted although its buffered writes could not be uploaded");
            assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(60), "with --io-retries 1 giving up takes seconds");
            Path log;
            try (var logs = Files.list(partfs.home().resolve("logs"))) {
                log = logs.filter(p -> p.getFileName().toString().startsWith("mount-")).findFirst().orElseThrow();
            }
            String text = Files.readString(log);
            assertTrue(text.contains("are lost") && text.contains("1 file(s) not uploaded"), text);
            assertTrue(text.contains("the object store is unreachable; waiting up to 2 s for it to answer"), "waited for it first: " + text);
            assertFalse(text.contains("release inode"), "the release after a failed close does not wait for the store again: " + text);
            assertFalse(text.contains(S3Server.SECRET_KEY), "no secret in the log");
        }
    }

    /** Formats a volume on a fresh S3 server, mounts it, writes into a file left open, stops S3. */
    private java.nio.channels.FileChannel runUntilS3IsGone(String meta) throws Exception {
        try (S3Server s3 = S3Server.start()) {
            String storage = "s3://partfs-gone/gone?endpoint=" + s3.endpoint() + "&path-style=true";
            Partfs.Result f = partfs.run("format", "--meta", meta, "--storage", storage, "gone");
            assertEquals(0, f.exit(), f.all());
            Partfs.Result m = partfs.run("mount", "--meta", meta, "--io-retries", "1", "--unmount-upload-wait", "2", mnt.toString(),
                    "--background");
            assertEquals(0, m.exit(), m.all());
            java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(mnt.resolve("part.bin"),
                    java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.WRITE);
            ch.write(java.nio.ByteBuffer.wrap(new byte[100_000]));
            return ch;
        }
    }

    /** partfs dump and load: an embedded volume's metadata moved into Redis, serving the same files. */
    @Test
    void embeddedVolumeDumpedAndLoadedIntoRedisServesTheSameFiles() throws Exception {
        assertEquals(0, partfs.run("mount", mnt.toString(), "--background").exit());
        byte[] big = new byte[(5 << 20) + 7]; // two blocks
        new Random(3).nextBytes(big);
        Files.createDirectories(mnt.resolve("data/db/t/all_1_1_0"));
        Files.write(mnt.resolve("data/db/t/all_1_1_0/a.bin"), big);
        Files.writeString(mnt.resolve("data/db/t/all_1_1_0/checksums.txt"), "checksums");
        Files.createLink(mnt.resolve("data/db/t/hardlink.bin"), mnt.resolve("data/db/t/all_1_1_0/a.bin"));
        Files.createSymbolicLink(mnt.resolve("data/db/current"), Path.of("t/all_1_1_0"));
        Files.writeString(mnt.resolve("name with\ttab and\nnewline"), "odd");
        Files.getFileAttributeView(mnt.resolve("data/db/t/all_1_1_0/checksums.txt"), UserDefinedFileAttributeView.class)
                .write("k", ByteBuffer.wrap("v1".getBytes(StandardCharsets.UTF_8)));
        Map<String, String> before = tree(mnt);
        Path dump = dir.resolve("backup/meta.gz");
        Files.createDirectories(dump.getParent());

        Partfs.Result mounted = partfs.run("dump", dump.toString());
        assertEquals(1, mounted.exit(), mounted.all());
        assertEquals(1, Partfs.errorLines(mounted).size(), mounted.err());
        assertTrue(mounted.err().contains("is mounted by 1 client(s)") && mounted.err().contains("--force"), mounted.err());
        assertFalse(Files.exists(dump), "a refused dump writes nothing");
        assertEquals(0, partfs.run("umount", mnt.toString()).exit());

        Partfs.Result d = partfs.run("dump", dump.toString());
        assertEquals(0, d.exit(), d.all());
        assertTrue(d.out().contains("volume default") && d.out().contains("9 inodes"), d.out());
        try (Stream<Path> s = Files.list(dump.getParent())) {
            assertEquals(List.of(dump), s.toList(), "no partial file left beside the dump");
        }

        try (RedisServer redis = RedisServer.start()) {
            Partfs.Result l = partfs.run("load", "--meta", redis.url(1), dump.toString());
            assertEquals(0, l.exit(), l.all());
            assertTrue(l.out().contains("9 inodes"), l.out());
            Partfs.Result again = partfs.run("load", "--meta", redis.url(1), dump.toString());
            assertEquals(1, again.exit(), again.all());
            assertTrue(again.err().contains("not empty"), again.err());

            assertEquals(0, partfs.run("mount", "--meta", redis.url(1), mnt.toString(), "--background").exit());
            assertEquals(before, tree(mnt), "the same names, types, sizes, contents, links and attributes");
            assertArrayEquals(big, Files.readAllBytes(mnt.resolve("data/db/current/a.bin")));
            assertEquals(2, Files.getAttribute(mnt.resolve("data/db/t/hardlink.bin"), "unix:nlink"));
            Files.writeString(mnt.resolve("data/db/t/new.txt"), "the loaded volume takes writes");
            assertEquals(0, partfs.run("umount", mnt.toString()).exit());
            String mountLog = Files.readString(new RunFiles(partfs.home()).logFile(mnt.toAbsolutePath().normalize()));
            assertTrue(mountLog.contains("kernel caches attributes 1 s, names 1 s, directory names 1 s"),
                    "a Redis volume may have other writers: other clients' changes show within a second: " + mountLog);
            Partfs.Result fsck = partfs.run("fsck", "--meta", redis.url(1));
            assertEquals(0, fsck.exit(), fsck.all());

            // a dump cut short (a full disk, a copy interrupted) is refused before anything is written
            Path cut = dir.resolve("cut.gz");
            List<String> lines = lines(dump);
            try (GZIPOutputStream out = new GZIPOutputStream(Files.newOutputStream(cut))) {
                out.write(String.join("\n", lines.subList(0, lines.size() / 2)).getBytes(StandardCharsets.UTF_8));
            }
            Partfs.Result c = partfs.run("load", "--meta", redis.url(2), cut.toString());
            assertEquals(1, c.exit(), c.all());
            assertEquals(1, Partfs.errorLines(c).size(), c.err());
            assertTrue(c.err().contains("cut short"), c.err());
            assertEquals(0, partfs.run("load", "--meta", redis.url(2), dump.toString()).exit(),
                    "the refused load left db 2 empty: a load into it is accepted");
        }
    }

    /**
     * An embedded (RocksDB) volume on S3 whose metadata disk is lost: the mount's backups in the
     * object store bring every file back, and the restored volume takes new writes.
     */
    @Test
    void mountBacksUpMetadataToTheObjectStoreAndLoadRestoresItAfterTheDiskIsLost() throws Exception {
        try (S3Server s3 = S3Server.start()) {
            String meta = dir.resolve("meta").toString();
            String storage = "s3://partfs-backup/pod-0?endpoint=" + s3.endpoint() + "&path-style=true";
            partfs.env("PARTFS_ACCESS_KEY", S3Server.ACCESS_KEY).env("PARTFS_SECRET_KEY", S3Server.SECRET_KEY);
            Partfs.Result m = partfs.run("mount", "--meta", meta, "--storage", storage, "--name", "pod-0", "--backup-meta", "1",
                    mnt.toString(), "--background");
            assertEquals(0, m.exit(), m.all());
            byte[] big = new byte[(5 << 20) + 3];
            new Random(5).nextBytes(big);
            Files.createDirectories(mnt.resolve("data/db/t/all_1_1_0"));
            Files.write(mnt.resolve("data/db/t/all_1_1_0/a.bin"), big);
            Files.writeString(mnt.resolve("data/db/t/all_1_1_0/checksums.txt"), "checksums");
            Files.createSymbolicLink(mnt.resolve("data/db/current"), Path.of("t/all_1_1_0"));
            Map<String, String> before = tree(mnt);
            String writtenBy = java.time.format.DateTimeFormatter.ofPattern("'dump-'yyyyMMdd-HHmmss-SSS")
                    .withZone(java.time.ZoneOffset.UTC).format(java.time.Instant.now());

            String[] list = {"load", "--storage", storage, "--name", "pod-0", "--list-backups"};
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            String taken;
            while ((taken = partfs.run(list).out().lines().filter(l -> l.endsWith(" complete") && l.compareTo(writtenBy) > 0)
                    .map(l -> l.split("\\s+")[0]).findFirst().orElse(null)) == null) {
                assertTrue(System.nanoTime() < deadline, "a backup taken after the files were written, within 60 s");
                java.util.concurrent.locks.LockSupport.parkNanos(200_000_000L); // poll interval
            }
            Partfs.Result st = partfs.run("status", "--meta", meta);
            assertTrue(st.out().contains("backup:     last begun 20") && st.out().contains("min ago"), st.out());
            assertTrue(st.out().contains("trash:      freed objects are kept 2 hours"), st.out());
            // after the backup, as a merge does: the part's data file deleted, its checksums rewritten
            Files.delete(mnt.resolve("data/db/t/all_1_1_0/a.bin"));
            Files.writeString(mnt.resolve("data/db/t/all_1_1_0/checksums.txt"), "rewritten after the backup");
            assertEquals(0, partfs.run("umount", mnt.toString()).exit());
            Partfs.Result trashed = partfs.run("status", "--meta", meta);
            assertTrue(trashed.out().matches("(?s).*trash: .*; [1-9][0-9]* slices in it, the oldest freed in the hour from 20.*"),
                    "a.bin's and the old checksums' slices: " + trashed.out());
            TempDirs.deleteRecursively(Path.of(meta)); // the disk holding the metadata is lost
            assertEquals(1, partfs.run("status", "--meta", meta).exit());

            // the pod starts again on an empty disk: its mount (and a format) must not make a new
            // volume over the old one's objects, which would overwrite them and take them for leaks
            for (String[] again : new String[][] {
                    {"mount", "--meta", meta, "--storage", storage, "--name", "pod-0", mnt.toString(), "--background"},
                    {"format", "--meta", meta, "--storage", storage, "pod-0"}}) {
                Partfs.Result refused = partfs.run(again);
                assertEquals(1, refused.exit(), refused.all());
                assertEquals(1, Partfs.errorLines(refused).size(), refused.err());
                assertTrue(refused.err().contains("already holds a volume 'pod-0' whose metadata is not at")
                        && refused.err().contains("--from-backup latest"), refused.err());
                assertFalse(refused.all().contains(S3Server.SECRET_KEY), "no secret in the output");
                assertFalse(Files.exists(Path.of(meta)), again[0] + " refused creates no metadata");
            }

            Partfs.Result noStorage = partfs.run("load", "--meta", meta, "--name", "pod-0", "--from-backup", "latest");
            assertEquals(1, noStorage.exit(), noStorage.all());
            assertEquals(1, Partfs.errorLines(noStorage).size(), noStorage.err());
            assertTrue(noStorage.err().contains("--storage"), noStorage.err());
            Partfs.Result unknown = partfs.run("load", "--meta", meta, "--storage", storage, "--name", "pod-0", "--from-backup", "dump-1");
            assertEquals(1, unknown.exit(), unknown.all());
            assertTrue(unknown.err().contains("--list-backups"), unknown.err());
            assertFalse(Files.exists(Path.of(meta)), "a refused load creates no metadata");

            Partfs.Result l = partfs.run("load", "--meta", meta, "--storage", storage, "--name", "pod-0", "--from-backup", taken);
            assertEquals(0, l.exit(), l.all());
            assertTrue(l.out().contains("volume pod-0") && l.out().contains("8 inodes"), l.out()); // root, 4 directories, 2 files, 1 symlink
            assertFalse(l.all().contains(S3Server.SECRET_KEY), "no secret in the output");
            assertEquals(0, partfs.run("mount", "--meta", meta, "--backup-meta", "0", mnt.toString(), "--background").exit());
            assertEquals(before, tree(mnt), "every file as it was at the backup, deleted and rewritten ones too");
            assertArrayEquals(big, Files.readAllBytes(mnt.resolve("data/db/current/a.bin")), "its objects waited in the trash");
            Files.write(mnt.resolve("data/db/t/all_1_1_0/new.bin"), big);
            assertEquals(0, partfs.run("umount", mnt.toString()).exit());
            Partfs.Result fsck = partfs.run("fsck", "--meta", meta);
            assertEquals(0, fsck.exit(), fsck.all());
        }
    }

    /**
     * Redis killed and restarted without persistence under a mount: it comes back empty. The
     * mount finds its volume gone at its next heartbeat, logs it once and refuses changes; a
     * format is refused; the metadata backup the mount made restores the volume, and its file
     * reads back whole on a new mount.
     */
    @Test
    void aRedisThatRestartsEmptyUnderAMountIsRestoredFromTheMountsBackup() throws Exception {
        try (RedisServer redis = RedisServer.start()) { // no append-only file, no snapshots
            String meta = redis.url(1);
            String storage = dir.resolve("objects").toString();
            partfs.ok("format", "--meta", meta, "--storage", storage, "vol");
            partfs.ok("mount", "--meta", meta, mnt.toString(), "--background", "--http-address", "none", "--backup-meta", "1");
            byte[] data = new byte[(2 << 20) + 11];
            new Random(11).nextBytes(data);
            writeFsynced(mnt.resolve("f.bin"), data);
            String[] list = {"load", "--storage", storage, "--name", "vol", "--list-backups"};
            String writtenBy = java.time.format.DateTimeFormatter.ofPattern("'dump-'yyyyMMdd-HHmmss-SSS")
                    .withZone(java.time.ZoneOffset.UTC).format(java.time.Instant.now());
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (partfs.run(list).out().lines().noneMatch(l -> l.endsWith(" complete") && l.compareTo(writtenBy) > 0)) {
                assertTrue(System.nanoTime() < deadline, "a backup taken after the file was written, within 60 s");
                java.util.concurrent.locks.LockSupport.parkNanos(200_000_000L); // poll interval
            }

            redis.kill();
            redis.restart(); // with nothing to load
            deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (!partfs.mountLogs().contains("is gone from")) {
                assertTrue(System.nanoTime() < deadline, "the next heartbeat (20 s) finds the volume gone:\n" + partfs.mountLogs());
                java.util.concurrent.locks.LockSupport.parkNanos(200_000_000L); // poll interval
            }
            String log = partfs.mountLogs();
            assertTrue(log.contains("ERROR") && log.contains("--from-backup latest"), log);
            assertFalse(log.contains("had been removed by another client"), "no session registered in the empty database: " + log);
            assertThrows(IOException.class, () -> Files.writeString(mnt.resolve("new"), "x"), "no change is taken");
            partfs.ok("umount", mnt.toString());

            Partfs.Result format = partfs.run("format", "--meta", meta, "--storage", storage, "vol");
            assertEquals(1, format.exit(), format.all());
            assertTrue(format.err().contains("--from-backup latest"), format.err());
            partfs.ok("load", "--meta", meta, "--storage", storage, "--name", "vol", "--from-backup", "latest");
            partfs.ok("mount", "--meta", meta, mnt.toString(), "--background", "--http-address", "none");
            assertArrayEquals(data, Files.readAllBytes(mnt.resolve("f.bin")));
            partfs.ok("umount", mnt.toString());
            Partfs.Result fsck = partfs.run("fsck", "--meta", meta);
            assertEquals(0, fsck.exit(), fsck.all());
            assertTrue(fsck.out().contains("fsck: OK"), fsck.out());
        }
    }

    /**
     * A volume whose metadata is a Redis master with a replica under Sentinel: the master is
     * killed under a mounted volume, Sentinel promotes the replica, and writes made through the
     * mount during the failover wait for it and succeed; nothing is lost that was replicated.
     */
    @Test
    void aMountOnRedisSentinelCarriesOnThroughAFailover() throws Exception {
        try (RedisServer master = RedisServer.start();
             RedisServer replica = RedisServer.start("--replicaof", "127.0.0.1", String.valueOf(master.port()));
             RedisServer sentinel = RedisServer.startSentinel("partfs", master.port())) {
            String meta = "redis-sentinel://127.0.0.1:" + sentinel.port() + "/1#partfs";
            Partfs.Result f = partfs.run("format", "--meta", meta, "--storage", dir.resolve("objects").toString(), "ha");
            assertEquals(0, f.exit(), f.all());
            assertEquals(0, partfs.run("mount", "--meta", meta, mnt.toString(), "--background").exit());
            Map<String, byte[]> files = new TreeMap<>();
            Random random = new Random(9);
            for (int i = 0; i < 10; i++) {
                byte[] b = new byte[1000 + i * 50_000];
                random.nextBytes(b);
                files.put("before-" + i, b);
                writeFsynced(mnt.resolve("before-" + i), b);
            }
            assertEquals(":1", master.command("WAIT 1 10000"), "the replica has every change");
            master.kill();
            for (int i = 0; i < 10; i++) { // the first waits for Sentinel to promote the replica
                byte[] b = new byte[1000 + i * 50_000];
                random.nextBytes(b);
                files.put("after-" + i, b);
                writeFsynced(mnt.resolve("after-" + i), b);
            }
            for (Map.Entry<String, byte[]> e : files.entrySet()) {
                assertArrayEquals(e.getValue(), Files.readAllBytes(mnt.resolve(e.getKey())), e.getKey());
            }
            assertEquals(0, partfs.run("umount", mnt.toString()).exit());
            Partfs.Result fsck = partfs.run("fsck", "--meta", meta);
            assertEquals(0, fsck.exit(), fsck.all()); // on the replica Sentinel promoted: the only Redis left
        }
    }

    /** For dump and load: path to type, size, content digest, link target and extended attributes, for every file under {@code root}. */
    private static Map<String, String> tree(Path root) throws Exception {
        Map<String, String> m = new TreeMap<>();
        try (Stream<Path> s = Files.walk(root)) {
            for (Path p : s.toList()) {
                String rel = root.relativize(p).toString();
                if (Files.isSymbolicLink(p)) {
                    m.put(rel, "link " + Files.readSymbolicLink(p));
                } else if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
                    m.put(rel, "dir " + Files.getAttribute(p, "unix:mode"));
                } else {
                    UserDefinedFileAttributeView x = Files.getFileAttributeView(p, UserDefinedFileAttributeView.class);
                    m.put(rel, "file " + Files.size(p) + " " + java.util.Arrays.hashCode(Files.readAllBytes(p)) + " nlink "
                            + Files.getAttribute(p, "unix:nlink") + " xattrs " + x.list());
                }
            }
        }
        return m;
    }

    private static List<String> lines(Path gz) throws Exception {
        try (GZIPInputStream in = new GZIPInputStream(Files.newInputStream(gz))) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8).lines().toList();
        }
    }
}
