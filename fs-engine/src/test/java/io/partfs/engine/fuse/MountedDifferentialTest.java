package io.partfs.engine.fuse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.PartFs;
import io.partfs.engine.PartFsConfig;
import io.partfs.engine.testing.Backends;
import io.partfs.engine.testing.Teardown;
import io.partfs.engine.testing.TempDirs;
import io.partfs.engine.testing.RandomWrites;
import io.partfs.engine.testing.TestVolume;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Differential test through the kernel: one seeded random sequence of system calls (java.nio)
 * runs on a real FUSE mount of PartFS and on a local directory, and every call must succeed or
 * fail alike (the same exception and errno text) and return the same: bytes read, lstat's type,
 * size, link count and permissions, directory listings. Files are also held open across other
 * calls, written, read and fsynced through those handles while their names are renamed,
 * linked and unlinked. The trees are compared along the way, at the end, and after an unmount
 * and a new mount of the reopened volume. Where {@link io.partfs.engine.fs.DifferentialContract}
 * calls PartFS directly, this one goes through what only a mount has: the kernel's attribute,
 * entry and page caches (dropped now and then, as root, so that calls reach PartFS again), the
 * FUSE driver, write-back passthrough of new files, handles.
 *
 * <p>Reproduce a failure with {@code -Dpartfs.seed=<seed in the message>}; change the length
 * with {@code -Dpartfs.mountedOps=N}.
 */
class MountedDifferentialTest {
    private static final int OPS = Integer.getInteger("partfs.mountedOps", 3_000);
    private static final String[] NAMES = {"a", "b", "c", "d", "all_1_1_0", "tmp_insert_2", "checksums.txt", "k.bin"};
    private static final int MAX_DEPTH = 2;
    private static final int MAX_HELD = 4;
    private static final java.io.File DROP_CACHES = new java.io.File("/proc/sys/vm/drop_caches");

    private Path dir;
    private Path ref;
    private Path mnt;
    private Random rnd;
    private long seed;
    private int step;
    private String lastOp;
    /** Files held open on both sides, each pair the same file. */
    private final List<FileChannel[]> held = new ArrayList<>();

    /**
     * {@code plain}: RocksDB metadata, uploads at close; {@code writeback}: new files staged on
     * local disk and written by the kernel itself; {@code redis-writeback}: the same on Redis
     * metadata, whose in-memory copy a mount keeps for a second (a shared volume).
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"plain", "writeback", "redis-writeback"})
    void randomSystemCallsMatchTheLocalFilesystem(String mode) throws Exception {
        seed = Long.getLong("partfs.seed", System.nanoTime());
        rnd = new Random(seed);
        dir = Files.createTempDirectory("partfs-mdiff-");
        ref = Files.createDirectory(dir.resolve("ref"));
        mnt = Files.createDirectory(dir.resolve("mnt"));
        Path volDir = Files.createDirectory(dir.resolve("vol"));
        // chunks compacted at 3 slices, at once: compactions all the time, racing the kernel's writes (passthrough too)
        PartFsConfig config = TestVolume.defaultConfig(volDir).toBuilder().writeBack(mode.endsWith("writeback")).compactAt(3)
                .compactQuiet(java.time.Duration.ZERO).build();
        TestVolume.Meta meta = mode.startsWith("redis") ? TestVolume.Meta.REDIS : TestVolume.Meta.ROCKSDB;
        Backends servers = null;
        PartFs fs = null;
        FuseMount fuse = null;
        try {
            servers = Backends.start(meta, TestVolume.Store.LOCAL);
            TestVolume volume = new TestVolume(meta, TestVolume.Store.LOCAL, volDir, servers.redis, null, config);
            fs = volume.open();
            fuse = mount(fs);
            for (step = 1; step <= OPS; step++) {
                runOne();
                if (step % 1000 == 0) {
                    compareTrees("after step " + step);
                }
            }
            closeHeld();
            compareTrees("at the end");
            fs.compactor().awaitIdle();
            assertTrue(fs.compactor().compacted() > 0, "compactions ran [seed " + seed + "]"); // 80-110 a run here
            compareTrees("after the last compactions");
            fuse.unmount();
            fuse = null;
            fs.close();
            fs = volume.open();
            fuse = mount(fs);
            compareTrees("after unmount, close, open and mount");
            TestVolume.assertConsistent(volume, fs, where());
        } finally {
            closeHeld();
            FuseMount mounted = fuse;
            Backends started = servers;
            Teardown.inOrder(mounted == null ? null : mounted::unmount, fs, () -> Backends.closeQuietly(started),
                    () -> TempDirs.deleteRecursively(dir));
        }
    }

    private FuseMount mount(PartFs fs) throws Exception {
        FuseOptions options = FuseOptions.builder().driver(FuseOptions.Driver.KERNEL).build();
        FuseMount fuse = FuseMount.create(fs, null, options);
        fuse.mountAndWait(mnt, options);
        return fuse;
    }

    private String where() {
        return " [seed " + seed + ", step " + step + ": " + lastOp + "]";
    }

    // ---- choosing targets from the reference tree ----

    private List<String> all(boolean dirsOnly) throws IOException {
        List<String> out = new ArrayList<>();
        try (Stream<Path> walk = Files.walk(ref)) {
            walk.forEach(p -> {
                if (!dirsOnly || Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
                    out.add("/" + ref.relativize(p));
                }
            });
        }
        out.sort(null);
        return out;
    }

    private String pick(List<String> items) {
        return items.get(rnd.nextInt(items.size()));
    }

    private String anyPath() throws IOException {
        List<String> entries = all(false);
        entries.remove("/");
        return entries.isEmpty() || rnd.nextInt(10) == 0 ? newPath() : pick(entries);
    }

    private String newPath() throws IOException {
        List<String> dirs = all(true);
        dirs.removeIf(d -> d.chars().filter(c -> c == '/').count() > MAX_DEPTH);
        String parent = pick(dirs);
        return (parent.equals("/") ? "" : parent) + "/" + NAMES[rnd.nextInt(NAMES.length)];
    }

    private static Path at(Path root, String path) {
        return path.equals("/") ? root : root.resolve(path.substring(1));
    }

    // ---- one call on both sides ----

    private interface Call {
        /** Runs on the tree at {@code root}; returns what it saw (compared between the sides). */
        String run(Path root) throws IOException;
    }

    /** What a call did: its result, or its exception's class and errno text. */
    private static String outcome(Call call, Path root) {
        try {
            return "ok " + call.run(root);
        } catch (FileSystemException e) {
            return e.getClass().getSimpleName() + " (" + e.getReason() + ")";
        } catch (IOException e) {
            return e.getClass().getSimpleName() + " (" + e.getMessage() + ")";
        }
    }

    private void both(Call call) {
        String expected = outcome(call, ref);
        String actual = outcome(call, mnt);
        assertEquals(expected, actual, where());
    }

    private void runOne() throws IOException {
        if (rnd.nextInt(200) == 0 && DROP_CACHES.canWrite()) {
            lastOp = "drop the kernel's caches";
            // dentries, inodes and pages: the next calls reach PartFS instead of what the kernel kept
            Files.writeString(DROP_CACHES.toPath(), "3");
        }
        int kind = rnd.nextInt(100);
        if (kind < 14) {
            String p = newPath();
            byte[] data = randomData();
            int off = rnd.nextInt(4) == 0 ? rnd.nextInt(3 << 20) : 0;
            lastOp = "create " + p + " with " + data.length + " bytes at " + off;
            both(root -> {
                try (FileChannel ch = FileChannel.open(at(root, p), StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                    writeFully(ch, off, data);
                    if (rnd(p, 3) == 0) {
                        ch.force(true);
                    }
                }
                return "";
            });
        } else if (kind < 22) {
            String p = anyPath();
            byte[] data = randomData();
            long off = rnd.nextInt(4 << 20);
            lastOp = "write " + data.length + " bytes at " + off + " of " + p;
            both(root -> {
                try (FileChannel ch = FileChannel.open(at(root, p), StandardOpenOption.WRITE)) {
                    writeFully(ch, off, data);
                }
                return "";
            });
        } else if (kind < 26) {
            String p = anyPath();
            byte[] data = randomData();
            lastOp = "append " + data.length + " bytes to " + p;
            both(root -> {
                Files.write(at(root, p), data, StandardOpenOption.APPEND);
                return "";
            });
        } else if (kind < 30) {
            String p = anyPath();
            long len = rnd.nextBoolean() ? rnd.nextInt(5000) : rnd.nextInt(5 << 20);
            lastOp = "truncate " + p + " to " + len;
            both(root -> {
                if (!Files.isRegularFile(at(root, p), LinkOption.NOFOLLOW_LINKS)) {
                    return "not a regular file"; // RandomAccessFile would create it, or follow a symlink
                }
                try (RandomAccessFile f = new RandomAccessFile(at(root, p).toFile(), "rw")) {
                    f.setLength(len);
                }
                return "";
            });
        } else if (kind < 38) {
            String p = anyPath();
            lastOp = "read " + p;
            both(root -> digest(Files.readAllBytes(at(root, p))));
        } else if (kind < 48) {
            String p = anyPath();
            lastOp = "lstat " + p;
            both(root -> stat(at(root, p)));
        } else if (kind < 52) {
            String p = rnd.nextBoolean() ? pick(all(true)) : anyPath();
            lastOp = "list " + p;
            both(root -> {
                try (Stream<Path> s = Files.list(at(root, p))) {
                    return s.map(e -> e.getFileName().toString()).sorted().toList().toString();
                }
            });
        } else if (kind < 58) {
            String src = anyPath();
            String dst = rnd.nextInt(3) == 0 ? anyPath() : newPath();
            lastOp = "rename " + src + " to " + dst;
            both(root -> {
                Files.move(at(root, src), at(root, dst), StandardCopyOption.ATOMIC_MOVE); // rename(2)
                return "";
            });
        } else if (kind < 62) {
            String target = anyPath();
            String link = newPath();
            lastOp = "link " + link + " to " + target;
            both(root -> {
                Files.createLink(at(root, link), at(root, target));
                return "";
            });
        } else if (kind < 68) {
            String p = anyPath();
            lastOp = "unlink " + p;
            both(root -> {
                if (Files.isDirectory(at(root, p), LinkOption.NOFOLLOW_LINKS)) {
                    return "a directory"; // Files.delete would rmdir it
                }
                Files.delete(at(root, p));
                return "";
            });
        } else if (kind < 73) {
            String p = newPath();
            lastOp = "mkdir " + p;
            both(root -> {
                Files.createDirectory(at(root, p));
                return "";
            });
        } else if (kind < 77) {
            String p = anyPath();
            lastOp = "rmdir " + p;
            both(root -> {
                if (Files.exists(at(root, p), LinkOption.NOFOLLOW_LINKS) && !Files.isDirectory(at(root, p), LinkOption.NOFOLLOW_LINKS)) {
                    return "not a directory"; // Files.delete would unlink it
                }
                Files.delete(at(root, p));
                return "";
            });
        } else if (kind < 79) {
            String p = newPath();
            String target = rnd.nextBoolean() ? "../" + NAMES[rnd.nextInt(NAMES.length)] : NAMES[rnd.nextInt(NAMES.length)];
            lastOp = "symlink " + p + " -> " + target;
            both(root -> {
                Files.createSymbolicLink(at(root, p), Path.of(target));
                return "";
            });
        } else if (kind < 81) {
            String p = anyPath();
            String perms = new String[] {"rw-------", "rw-r-----", "rwxr-xr-x", "r--r--r--"}[rnd.nextInt(4)];
            lastOp = "chmod " + p + " " + perms;
            both(root -> {
                if (Files.isSymbolicLink(at(root, p))) {
                    return "a symlink"; // chmod would follow it
                }
                Files.setPosixFilePermissions(at(root, p), PosixFilePermissions.fromString(perms));
                return "";
            });
        } else {
            onHeld(kind);
        }
    }

    /** Calls on files held open across other calls: open, write, read, fsync, close. */
    private void onHeld(int kind) throws IOException {
        if (held.isEmpty() || (kind < 85 && held.size() < MAX_HELD)) {
            String p = anyPath();
            lastOp = "open read-write " + p;
            FileChannel[] pair = new FileChannel[2];
            String expected = openHeld(ref, p, pair, 0);
            String actual = openHeld(mnt, p, pair, 1);
            if (pair[0] != null && pair[1] != null) {
                held.add(pair);
            } else {
                closeQuietly(pair);
            }
            assertEquals(expected, actual, where());
            return;
        }
        int i = rnd.nextInt(held.size());
        FileChannel[] pair = held.get(i);
        if (kind < 90) {
            byte[] data = randomData();
            long off = rnd.nextInt(3 << 20);
            lastOp = "write " + data.length + " bytes at " + off + " through held file " + i;
            for (FileChannel ch : pair) {
                writeFully(ch, off, data);
            }
        } else if (kind < 95) {
            lastOp = "read through held file " + i + " and its size";
            String[] seen = new String[2];
            for (int s = 0; s < 2; s++) {
                FileChannel ch = pair[s];
                ByteBuffer b = ByteBuffer.allocate((int) ch.size());
                while (b.hasRemaining() && ch.read(b, b.position()) > 0) {
                    // read on
                }
                seen[s] = ch.size() + " " + digest(Arrays.copyOf(b.array(), b.position()));
            }
            assertEquals(seen[0], seen[1], where());
        } else if (kind < 97) {
            lastOp = "fsync held file " + i;
            for (FileChannel ch : pair) {
                ch.force(true);
            }
        } else {
            lastOp = "close held file " + i;
            held.remove(i);
            for (FileChannel ch : pair) {
                ch.close();
            }
        }
    }

    private static String openHeld(Path root, String p, FileChannel[] pair, int side) {
        try {
            if (!Files.isRegularFile(at(root, p), LinkOption.NOFOLLOW_LINKS)) {
                return "not a regular file";
            }
            pair[side] = FileChannel.open(at(root, p), StandardOpenOption.READ, StandardOpenOption.WRITE);
            return "ok";
        } catch (IOException e) {
            return e.getClass().getSimpleName() + " " + (e instanceof FileSystemException f ? f.getReason() : e.getMessage());
        }
    }

    private void closeHeld() {
        for (FileChannel[] pair : held) {
            closeQuietly(pair);
        }
        held.clear();
    }

    private static void closeQuietly(FileChannel[] pair) {
        for (FileChannel ch : pair) {
            if (ch != null) {
                try {
                    ch.close();
                } catch (IOException ignored) {
                    // the test fails on its own comparisons, not here
                }
            }
        }
    }

    /** The same choice on both sides of one call (the random sequence must not depend on the side). */
    private final Map<String, Integer> choices = new java.util.HashMap<>();

    private int rnd(String key, int n) {
        return choices.computeIfAbsent(key + "@" + step, k -> rnd.nextInt(n));
    }

    private byte[] randomData() {
        return RandomWrites.data(rnd, 5 << 20);
    }

    private static void writeFully(FileChannel ch, long off, byte[] data) throws IOException {
        RandomWrites.writeFully(ch, off, data);
    }

    private static String digest(byte[] b) {
        return b.length + ":" + Arrays.hashCode(b);
    }

    /** What lstat says that both sides must agree on (directory sizes differ by filesystem: left out). */
    private static String stat(Path p) throws IOException {
        PosixFileAttributes a = Files.readAttributes(p, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        String type = a.isDirectory() ? "dir" : a.isSymbolicLink() ? "symlink" : a.isRegularFile() ? "file" : "other";
        long size = a.isDirectory() ? -1 : a.size();
        Object nlink = Files.getAttribute(p, "unix:nlink", LinkOption.NOFOLLOW_LINKS);
        String target = a.isSymbolicLink() ? " -> " + Files.readSymbolicLink(p) : "";
        return type + " " + size + " nlink " + nlink + " " + PosixFilePermissions.toString(a.permissions()) + target;
    }

    private Map<String, String> tree(Path root) throws IOException {
        Map<String, String> out = new TreeMap<>();
        try (Stream<Path> walk = Files.walk(root)) {
            for (Path p : walk.toList()) {
                String s = stat(p);
                if (Files.isRegularFile(p, LinkOption.NOFOLLOW_LINKS)) {
                    s += " " + digest(Files.readAllBytes(p));
                }
                out.put("/" + root.relativize(p), s);
            }
        }
        return out;
    }

    private void compareTrees(String when) throws IOException {
        lastOp = "compare the trees " + when;
        assertEquals(tree(ref), tree(mnt), where());
    }
}
