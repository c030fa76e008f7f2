package io.partfs.engine.fuse;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.PartFs;
import io.partfs.engine.testing.Teardown;
import io.partfs.engine.testing.TempDirs;
import io.partfs.engine.testing.TestVolume;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * POSIX behaviour that ClickHouse and everyday tools rely on, through a real FUSE mount of an
 * embedded volume (RocksDB metadata, local objects), using java.nio and shell tools; here through
 * the kernel driver, in {@link LibfuseMountedPosixTest} through libfuse.
 */
@org.junit.jupiter.api.TestInstance(org.junit.jupiter.api.TestInstance.Lifecycle.PER_CLASS)
class MountedPosixTest {
    private Path dir;
    private Path mnt;
    private PartFs fs;
    private FuseMount fuse;

    /** The FUSE driver under test; {@link LibfuseMountedPosixTest} runs the same tests on the other one. */
    FuseOptions.Driver driver() {
        return FuseOptions.Driver.KERNEL;
    }

    @BeforeAll
    void mount() throws Exception {
        dir = Files.createTempDirectory("partfs-mount-");
        mnt = Files.createDirectory(dir.resolve("mnt"));
        fs = new TestVolume(TestVolume.Meta.ROCKSDB, TestVolume.Store.LOCAL, dir, null, null,
                TestVolume.defaultConfig(dir)).open();
        FuseOptions options = FuseOptions.builder().driver(driver()).build();
        fuse = FuseMount.create(fs, null, options);
        fuse.mountAndWait(mnt, options);
    }

    @AfterAll
    void unmount() throws Exception {
        FuseMount mounted = fuse;
        Teardown.inOrder(mounted == null ? null : mounted::unmount, fs, () -> TempDirs.deleteRecursively(dir));
    }

    private static byte[] randomBytes(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    /** Directory listings the kernel driver took for READDIR(PLUS) so far (0 with libfuse). */
    private long listingsTaken() {
        return fuse instanceof KernelFuse k ? k.listingsTaken() : 0;
    }

    /** Opens the kernel driver handed to FUSE passthrough so far (0 with libfuse). */
    private long passthroughOpens() {
        return fuse instanceof KernelFuse k ? k.passthroughOpens() : 0;
    }

    @Test
    void partFilesInOneCachedBlockAreReadByTheKernelAndWritesWaitForTheirReaders() throws Exception {
        boolean kernel = driver() == FuseOptions.Driver.KERNEL;
        Path part = Files.createDirectories(fresh("passthrough").resolve("202001_1_1_0"));
        Path f = part.resolve("checksums.txt");
        byte[] v1 = randomBytes(10_000, 1);
        Files.write(f, v1);
        readUntilPassedThrough(f, v1, "read by the kernel from the locally cached block");

        byte[] v2 = randomBytes(20_000, 2);
        try (FileChannel reader = FileChannel.open(f, StandardOpenOption.READ)) {
            assertArrayEquals(v1, Files.readAllBytes(f), "a second reader");
            if (kernel) {
                // the kernel would fail any non-passthrough open now (EIO): PartFS says why instead
                java.nio.file.FileSystemException busy = assertThrows(java.nio.file.FileSystemException.class,
                        () -> FileChannel.open(f, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING).close());
                assertTrue(String.valueOf(busy.getMessage()).contains("Text file busy"), busy.getMessage());
                IOException rw = assertThrows(IOException.class, () -> new RandomAccessFile(f.toFile(), "rw").close());
                assertTrue(String.valueOf(rw.getMessage()).contains("Text file busy"), rw.getMessage());
                // truncate(2) by path, no open: perl calls it directly (perl-base is in every Debian)
                Process t = new ProcessBuilder("perl", "-e", "truncate($ARGV[0], 0) or die \"$!\\n\"", f.toString())
                        .redirectErrorStream(true).start();
                String err = new String(t.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                assertTrue(t.waitFor(60, TimeUnit.SECONDS));
                assertTrue(t.exitValue() != 0 && err.contains("Text file busy"), "truncate by path: " + err);
            }
            assertTrue(reader.read(ByteBuffer.allocate(100)) > 0);
        }
        assertArrayEquals(v1, Files.readAllBytes(f), "nothing was changed by the refused opens");
        try (FileChannel w = FileChannel.open(f, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
            w.write(ByteBuffer.wrap(v2));
            long during = passthroughOpens();
            assertArrayEquals(v2, Files.readAllBytes(f), "a reader while a writer is open reads through PartFS");
            assertEquals(during, passthroughOpens());
        }
        readUntilPassedThrough(f, v2, "the new content, once nothing else is open");

        Path big = part.resolve("data.bin");
        byte[] b = randomBytes(fs.format().blockSize() + 10, 3);
        Files.write(big, b);
        Path other = Files.createDirectories(part.getParent().resolve("tmp_insert_202001_2_2_0")).resolve("checksums.txt");
        Files.write(other, v1);
        long beforeOthers = passthroughOpens();
        assertArrayEquals(b, Files.readAllBytes(big));
        assertArrayEquals(v1, Files.readAllBytes(other));
        assertEquals(beforeOthers, passthroughOpens(), "more than one block, or not in a committed part: read through PartFS");
        try (FileChannel reader = FileChannel.open(other, StandardOpenOption.READ);
             FileChannel w = FileChannel.open(other, StandardOpenOption.WRITE)) {
            w.write(ByteBuffer.wrap(v2), 0);
            assertTrue(reader.read(ByteBuffer.allocate(10)) > 0, "other files take writers while read, as before");
        }
    }

    @Test
    void anOpenForWritingRightAfterTheLastPassthroughReaderClosedSucceeds() throws Exception {
        Path f = Files.createDirectories(fresh("released").resolve("202001_1_1_0")).resolve("primary.idx");
        byte[] v = randomBytes(5_000, 4);
        Files.write(f, v);
        readUntilPassedThrough(f, v, "read by the kernel from the locally cached block");
        long before = passthroughOpens();
        for (int i = 0; i < 300; i++) {
            assertArrayEquals(v, Files.readAllBytes(f));
            // close(2) of the reader has returned; its RELEASE reaches PartFS a moment later
            FileChannel.open(f, StandardOpenOption.WRITE).close();
        }
        if (driver() == FuseOptions.Driver.KERNEL) {
            assertTrue(passthroughOpens() > before, "some of those reads were passed through");
        }
    }

    /**
     * Reads {@code f} (checking its content) until an open of it is passed through, 10 s at most:
     * close(2) of a writer returns before PartFS has its RELEASE (the kernel sends it in the
     * background), and until then the file counts as open for writing. With libfuse nothing is.
     */
    private void readUntilPassedThrough(Path f, byte[] expected, String why) throws IOException {
        long before = passthroughOpens();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        assertArrayEquals(expected, Files.readAllBytes(f), why);
        while (driver() == FuseOptions.Driver.KERNEL && passthroughOpens() == before && System.nanoTime() < deadline) {
            java.util.concurrent.locks.LockSupport.parkNanos(1_000_000L); // poll interval
            assertArrayEquals(expected, Files.readAllBytes(f), why);
        }
        if (driver() == FuseOptions.Driver.KERNEL) {
            assertTrue(passthroughOpens() > before, why + ": no open was passed through within 10 s");
        } else {
            assertEquals(0, passthroughOpens(), why);
        }
    }

    private Path fresh(String name) throws IOException {
        return Files.createDirectory(mnt.resolve(name));
    }

    private static String sh(Path cwd, String... cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).directory(cwd.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), String.join(" ", cmd) + " did not finish");
        assertEquals(0, p.exitValue(), String.join(" ", cmd) + " failed: " + out);
        return out;
    }

    /** Runs a shell command as root without CAP_FSETID, as an unprivileged writer (ClickHouse) is. */
    private static void withoutFsetid(Path cwd, String command) throws Exception {
        sh(cwd, "setpriv", "--inh-caps=-fsetid", "--bounding-set=-fsetid", "sh", "-c", command);
    }

    private static int mode(Path f) throws IOException {
        return (Integer) Files.getAttribute(f, "unix:mode") & 07777;
    }

    /**
     * Linux clears set-user-ID, set-group-ID on a group-executable file and file capabilities
     * when a process without CAP_FSETID writes or truncates a file, and on any chown; the kernel
     * driver leaves that to PartFS (FUSE_HANDLE_KILLPRIV_V2, so the kernel stops asking for
     * security.capability before every write), libfuse's leaves it to the kernel: the same
     * outcome either way. Root (CAP_FSETID) writes without clearing them.
     */
    @Test
    void writesWithoutCapFsetidClearSetuidSetgidAndCapabilities() throws Exception {
        Path d = fresh("killpriv");
        Path f = d.resolve("tool");
        Files.write(f, new byte[10]);
        long ino = (Long) Files.getAttribute(f, "unix:ino");
        sh(d, "chmod", "6755", "tool");
        sh(d, "sh", "-c", "printf x >> tool");
        assertEquals(06755, mode(f), "root keeps the bits");
        fs.setxattr(ino, io.partfs.engine.meta.MetaEngine.CAPABILITY_XATTR, new byte[] {1, 2, 3}, 0);

        withoutFsetid(d, "printf x >> tool");
        assertEquals(00755, mode(f), "set-user-ID and set-group-ID (group-executable) cleared");
        assertThrows(io.partfs.engine.FsException.NoAttribute.class,
                () -> fs.getxattr(ino, io.partfs.engine.meta.MetaEngine.CAPABILITY_XATTR), "capabilities removed");
        assertEquals(12, Files.size(f));

        sh(d, "chmod", "2745", "tool"); // set-group-ID without group execute: a locking mark, not a privilege
        withoutFsetid(d, "printf x >> tool");
        assertEquals(02745, mode(f));

        sh(d, "chmod", "4755", "tool");
        withoutFsetid(d, "truncate -s 5 tool");
        assertEquals(00755, mode(f), "a truncate clears set-user-ID too");
        assertEquals(5, Files.size(f));

        sh(d, "chmod", "4755", "tool");
        sh(d, "chown", "1:1", "tool");
        assertEquals(00755, mode(f), "chown clears set-user-ID even for root");
        assertArrayEquals(new byte[5], Files.readAllBytes(f));
    }

    @Test
    void mountIsAPartFsFuseMount() throws IOException {
        assertEquals("fuse.partfs", Mounts.typeAt(mnt));
    }

    @Test
    void mountReadsAheadSixteenMebibytesNotTheKernelsDefault() throws IOException {
        // the kernel's window for FUSE is 128 KiB, and INIT can only lower it: set after INIT, as root
        Path f = KernelReadahead.sysfsFile(mnt);
        long want = FuseOptions.DEFAULT_READAHEAD >> 10;
        assertEquals(String.valueOf(want), Files.readString(f).trim(), f.toString());
    }

    @Test
    void mountedNoatimeAndReadsLeaveAtimeAlone() throws Exception {
        String options = null;
        for (String line : Files.readAllLines(Path.of("/proc/self/mounts"))) {
            String[] f = line.split(" ");
            if (f.length > 3 && f[1].equals(mnt.toString())) {
                options = f[3];
            }
        }
        assertTrue(options != null && List.of(options.split(",")).contains("noatime"), "mount options: " + options);
        Path f = Files.writeString(fresh("atime").resolve("count.txt"), "350");
        long ino = (long) Files.getAttribute(f, "unix:ino");
        long before = fs.getattr(ino).atimeNs();
        assertEquals("350", Files.readString(f));
        assertEquals(before, fs.getattr(ino).atimeNs(), "a read through a noatime mount writes no metadata");
    }

    @Test
    void hardLinksShareInodeNumberAndNlink() throws Exception {
        Path d = fresh("links");
        Path a = Files.writeString(d.resolve("a.bin"), "data");
        Path b = Files.createLink(d.resolve("b.bin"), a);
        assertEquals(Files.getAttribute(a, "unix:ino"), Files.getAttribute(b, "unix:ino"));
        assertEquals(2, Files.getAttribute(a, "unix:nlink"), "nlink is right right after ln");
        assertEquals(2, Files.getAttribute(b, "unix:nlink"));
        Files.delete(a);
        assertEquals(1, Files.getAttribute(b, "unix:nlink"));
        assertEquals("data", Files.readString(b));
        String ls = sh(d, "stat", "-c", "%h %i", "b.bin").trim();
        assertEquals("1 " + Files.getAttribute(b, "unix:ino"), ls);
    }

    @Test
    void namesThatAreNotUtf8KeepTheirBytes() throws Exception {
        // Linux names are bytes; Java's file API cannot make these, perl can. Each file holds
        // its own name; two names once decoded to the same U+FFFD string and shared one file.
        // libfuse: jnr-fuse hands paths over as strings it decoded itself, so only the kernel driver.
        org.junit.jupiter.api.Assumptions.assumeTrue(driver() == FuseOptions.Driver.KERNEL);
        Path d = fresh("bytes");
        String script = """
                my @names = ("\\xff\\xfe", "\\xfe\\xff", "a\\x80b", "caf\\xc3\\xa9", "\\xef\\xbf\\xbd", "\\xed\\xa0\\x80");
                for my $n (@names) { open(my $f, ">", $n) or die "create: $!\\n"; print $f $n; close $f; }
                rename("\\xfe\\xff", "\\xfe\\xfe") or die "rename: $!\\n";
                symlink("\\xff\\xfe", "link") or die "symlink: $!\\n";
                readlink("link") eq "\\xff\\xfe" or die "readlink\\n";
                for my $n (grep { $_ ne "\\xfe\\xff" } @names) {
                    open(my $f, "<", $n) or die "open: $!\\n";
                }
                open(my $f, "<", "link") or die "open link: $!\\n"; my $c = <$f>; $c eq "\\xff\\xfe" or die "link content\\n";
                opendir(my $dh, ".") or die; print join(" ", sort map { unpack("H*", $_) } grep { !/^\\.\\.?$/ } readdir $dh), "\\n";
                """;
        String listed = sh(d, "perl", "-e", script).trim();
        assertEquals(String.join(" ", new java.util.TreeSet<>(List.of("fffe", "fefe", "618062", "636166c3a9", "efbfbd", "eda080",
                hex("link")))), listed);
        String contents = sh(d, "perl", "-e", "for (qw(fefe efbfbd)) { open(my $f, '<', pack('H*', $_)) or die; print unpack('H*', <$f>), ' '; }").trim();
        assertEquals("feff efbfbd", contents, "each file keeps its own bytes");
    }

    private static String hex(String ascii) {
        return java.util.HexFormat.of().formatHex(ascii.getBytes(StandardCharsets.US_ASCII));
    }

    @Test
    void renameOfNonEmptyDirectory() throws Exception {
        Path d = fresh("renamedir");
        Path tmp = Files.createDirectory(d.resolve("tmp_insert_1_1_0"));
        for (int i = 0; i < 20; i++) {
            Files.writeString(tmp.resolve("c" + i + ".bin"), "col " + i);
        }
        Path part = d.resolve("1_1_0");
        Files.move(tmp, part, StandardCopyOption.ATOMIC_MOVE);
        assertFalse(Files.exists(tmp));
        try (Stream<Path> s = Files.list(part)) {
            assertEquals(20, s.count());
        }
        assertEquals("col 7", Files.readString(part.resolve("c7.bin")));
        Path other = Files.createDirectory(d.resolve("other"));
        Files.writeString(other.resolve("x"), "x");
        java.nio.file.FileSystemException e = assertThrows(java.nio.file.FileSystemException.class,
                () -> Files.move(part, other, StandardCopyOption.ATOMIC_MOVE));
        assertEquals("Directory not empty", e.getReason());
    }

    @Test
    void renameOverAnExistingFileReplacesIt() throws Exception {
        Path d = fresh("renamefile");
        Path tmp = Files.writeString(d.resolve("checksums.txt.tmp"), "new");
        Path target = Files.writeString(d.resolve("checksums.txt"), "old contents");
        Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE);
        assertEquals("new", Files.readString(target));
        assertEquals(3, Files.size(target));
    }

    @Test
    void symlinkToADirectory() throws Exception {
        Path d = fresh("symlinks");
        Path store = Files.createDirectories(d.resolve("store/b47/b47ee9c8"));
        Files.writeString(store.resolve("f"), "through the link");
        Path link = Files.createSymbolicLink(d.resolve("table"), Path.of("store/b47/b47ee9c8"));
        assertTrue(Files.isSymbolicLink(link));
        assertEquals("store/b47/b47ee9c8", Files.readSymbolicLink(link).toString());
        assertEquals("through the link", Files.readString(link.resolve("f")));
        assertTrue(Files.isDirectory(link));
        assertFalse(Files.isDirectory(link, LinkOption.NOFOLLOW_LINKS));
        // Mounts.resolve follows a link outside the mount into it, and none on it: it asks the mount nothing
        Path outside = Files.createTempDirectory("partfs-resolve-");
        try {
            Path toMount = Files.createSymbolicLink(outside.resolve("disk"), d);
            assertEquals(d.resolve("table/f"), Mounts.resolve(toMount.resolve("table/f")));
        } finally {
            io.partfs.engine.testing.TempDirs.deleteRecursively(outside);
        }
    }

    @Test
    void fsyncAndReadBack() throws Exception {
        Path f = fresh("fsync").resolve("table.sql.tmp");
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            ch.write(ByteBuffer.wrap("ATTACH TABLE t".getBytes(StandardCharsets.UTF_8)));
            ch.force(true);
        }
        assertEquals("ATTACH TABLE t", Files.readString(f));
    }

    @Test
    void flockIsExclusiveAcrossProcesses() throws Exception {
        Path status = Files.writeString(fresh("flock").resolve("status"), "pid");
        try (FileChannel ch = FileChannel.open(status, StandardOpenOption.WRITE);
             FileLock lock = ch.lock()) {
            assertTrue(lock.isValid());
            assertThrows(OverlappingFileLockException.class, () -> ch.tryLock());
        }
        // flock(2), which ClickHouse takes on its status file, from other processes: the holder
        // keeps the lock until its stdin closes.
        Process holder = new ProcessBuilder("flock", "-x", status.toString(), "cat").start();
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            int code;
            do {
                Process probe = new ProcessBuilder("flock", "-n", "-x", status.toString(), "true").start();
                assertTrue(probe.waitFor(10, TimeUnit.SECONDS));
                code = probe.exitValue();
            } while (code == 0 && System.nanoTime() < deadline); // until the holder has the lock
            assertEquals(1, code, "a second flock -n fails while another process holds it");
        } finally {
            holder.getOutputStream().close();
            assertTrue(holder.waitFor(10, TimeUnit.SECONDS));
        }
        Process again = new ProcessBuilder("flock", "-n", "-x", status.toString(), "true").start();
        assertTrue(again.waitFor(10, TimeUnit.SECONDS));
        assertEquals(0, again.exitValue(), "the lock is free once its holder exited");
    }

    @Test
    void truncateAndSparseFiles() throws Exception {
        Path f = fresh("sparse").resolve("s.bin");
        try (RandomAccessFile raf = new RandomAccessFile(f.toFile(), "rw")) {
            raf.seek(5 << 20);
            raf.write(new byte[] {7});
            assertEquals((5 << 20) + 1, raf.length());
            raf.setLength(100);
            raf.setLength(1000);
        }
        byte[] all = Files.readAllBytes(f);
        assertEquals(1000, all.length);
        for (byte b : all) {
            assertEquals(0, b);
        }
    }

    @Test
    void readdirOfTenThousandEntries() throws Exception {
        Path d = fresh("many");
        for (int i = 0; i < 10_000; i++) {
            Files.createFile(d.resolve("f" + i));
        }
        long before = listingsTaken();
        try (Stream<Path> s = Files.list(d)) {
            assertEquals(10_000, s.count());
        }
        if (fuse instanceof KernelFuse) { // ~60 requests of a page each: one listing, not one per page
            assertEquals(before + 1, listingsTaken(), "listings taken to read the directory once");
        }
        assertEquals("10000", sh(d, "sh", "-c", "ls | wc -l").trim());
    }

    @Test
    void entriesRenamedWhileADirectoryIsReadDoNotShowUnderTheirOldNames() throws Exception {
        // libfuse lists a directory once per opendir and answers from that copy (as POSIX allows;
        // it gives the kernel no attributes with the names, so nothing stale is believed)
        org.junit.jupiter.api.Assumptions.assumeTrue(driver() == FuseOptions.Driver.KERNEL);
        Path d = fresh("renamed-while-read");
        List<String> names = new ArrayList<>();
        for (int i = 0; i < 5_000; i++) {
            names.add("part_" + i);
            Files.createFile(d.resolve("part_" + i));
        }
        // the last 200 in readdir order: far past what the first getdents(2) of the reading fetches
        names.sort(java.util.Comparator.comparingLong(KernelFuse.Cookie::hash));
        List<String> moved = names.subList(names.size() - 200, names.size());
        java.util.Map<String, Integer> seen = new java.util.HashMap<>();
        try (java.nio.file.DirectoryStream<Path> s = Files.newDirectoryStream(d)) {
            java.util.Iterator<Path> it = s.iterator();
            seen.merge(it.next().getFileName().toString(), 1, Integer::sum);
            for (String n : moved) {
                Files.move(d.resolve(n), d.resolve("renamed_" + n));
            }
            it.forEachRemaining(p -> seen.merge(p.getFileName().toString(), 1, Integer::sum));
        }
        for (String n : moved) {
            assertFalse(seen.containsKey(n), n + " was renamed before the reading got to it");
        }
        for (String n : names.subList(0, names.size() - 200)) {
            assertEquals(1, seen.get(n), n + " stayed: listed once");
        }
        for (java.util.Map.Entry<String, Integer> e : seen.entrySet()) {
            assertTrue(e.getValue() == 1, e.getKey() + " listed " + e.getValue() + " times");
        }
    }

    @Test
    void concurrentWritersOnDifferentFiles() throws Exception {
        Path d = fresh("concurrent");
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                int thread = t;
                fs.add(pool.submit(() -> {
                    byte[] data = new byte[3 << 20];
                    new Random(thread).nextBytes(data);
                    Files.write(d.resolve("w" + thread), data);
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
        for (int t = 0; t < 4; t++) {
            byte[] expected = new byte[3 << 20];
            new Random(t).nextBytes(expected);
            assertArrayEquals(expected, Files.readAllBytes(d.resolve("w" + t)));
        }
    }

    @Test
    void writesOfEverySizeKeepTheirBytes() throws Exception {
        // each write(2) is one WRITE request of its size (up to 1 MiB); a worker's scratch array
        // grows with the largest it served, so small, odd and largest sizes alternate here
        int[] sizes = {1, 4095, 65536, 65537, 300_000, 1 << 20, 7, (1 << 20) - 1, 200_000, 1 << 20};
        Path f = fresh("sizes").resolve("f");
        java.io.ByteArrayOutputStream expected = new java.io.ByteArrayOutputStream();
        Random random = new Random(42);
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            for (int size : sizes) {
                byte[] data = new byte[size];
                random.nextBytes(data);
                ByteBuffer b = ByteBuffer.wrap(data);
                while (b.hasRemaining()) {
                    ch.write(b);
                }
                expected.write(data);
            }
            ch.force(true);
        }
        assertArrayEquals(expected.toByteArray(), Files.readAllBytes(f));
    }

    @Test
    void sizeIsRightAfterAWriteFromAnotherHandle() throws Exception {
        Path f = fresh("handles").resolve("f");
        try (FileChannel w = FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
             FileChannel r = FileChannel.open(f, StandardOpenOption.READ)) {
            w.write(ByteBuffer.wrap(new byte[12345]));
            assertEquals(12345, r.size());
            assertEquals(12345, Files.size(f));
        }
    }

    @Test
    void cpTarAndGitWorkInsideTheMount() throws Exception {
        Path d = fresh("tools");
        Path src = Files.createDirectories(d.resolve("src/sub"));
        Files.writeString(src.resolve("a.txt"), "alpha");
        Files.createSymbolicLink(d.resolve("src/link"), Path.of("sub/a.txt"));
        sh(d, "cp", "-a", "src", "copy");
        assertEquals("alpha", Files.readString(d.resolve("copy/sub/a.txt")));
        assertEquals("sub/a.txt", Files.readSymbolicLink(d.resolve("copy/link")).toString());
        sh(d, "tar", "cf", "src.tar", "src");
        Files.createDirectory(d.resolve("untar"));
        sh(d.resolve("untar"), "tar", "xf", "../src.tar");
        assertEquals("alpha", Files.readString(d.resolve("untar/src/sub/a.txt")));
        Path repo = Files.createDirectory(d.resolve("repo"));
        Files.writeString(repo.resolve("README"), "hello");
        sh(repo, "git", "init", "-q");
        sh(repo, "git", "add", "README");
        sh(repo, "git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first");
        assertTrue(sh(repo, "git", "log", "--oneline").contains("first"));
        sh(repo, "git", "fsck", "--strict");
    }
}
