package io.partfs.engine.fs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.Attr;
import io.partfs.engine.DirEntry;
import io.partfs.engine.Errno;
import io.partfs.engine.FileType;
import io.partfs.engine.FsException;
import io.partfs.engine.PartFs;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.testing.RandomWrites;
import io.partfs.engine.testing.TestVolume;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Differential test: one seeded random sequence of filesystem operations runs on PartFS and on
 * a local directory (the kernel's own filesystem is the reference); every operation must
 * succeed or fail alike, and the trees (type, size, nlink, mode, bytes, link targets) must be
 * equal along the way, at the end, and after the volume is closed and opened again.
 *
 * <p>Reproduce a failure with {@code -Dpartfs.seed=<seed printed in the message>}; change the
 * length with {@code -Dpartfs.ops=N}.
 */
abstract class DifferentialContract extends OnBackends {
    static final int OPS = Integer.getInteger("partfs.ops", 10_000);
    static final String[] NAMES = {"a", "b", "c", "d", "e", "all_1_1_0", "tmp_insert_2", "checksums.txt"};
    static final int MAX_DEPTH = 2;

    @TempDir
    Path tmp;

    private Path ref;
    private PartFs fs;
    private Random rnd;
    private long seed;
    private int step;
    private String lastOp;

    @Test
    void randomOperationsMatchTheLocalFilesystem() throws Exception {
        seed = Long.getLong("partfs.seed", System.nanoTime());
        rnd = new Random(seed);
        ref = Files.createDirectory(tmp.resolve("ref"));
        // chunks compacted at 3 slices, at once: compactions all the time, racing the writes, truncations and deletions
        TestVolume volume = new TestVolume(meta(), store(), Files.createDirectory(tmp.resolve("vol")),
                backends.redis, backends.s3, TestVolume.defaultConfig(tmp.resolve("vol")).toBuilder().compactAt(3)
                        .compactQuiet(java.time.Duration.ZERO).build());
        fs = volume.open();
        try {
            for (step = 1; step <= OPS; step++) {
                runOne();
                if (step % 2500 == 0) {
                    compareTrees("after step " + step);
                }
            }
            compareTrees("at the end");
            fs.compactor().awaitIdle();
            assertTrue(fs.compactor().compacted() > 0, "compactions ran" + where()); // 50-100 a run here
            compareTrees("after the last compactions");
            fs.close();
            fs = volume.open();
            compareTrees("after close and reopen");
            TestVolume.assertConsistent(volume, fs, where());
        } finally {
            fs.close();
        }
    }

    private String where() {
        return " [seed " + seed + ", step " + step + ": " + lastOp + "]";
    }

    // ---- choosing targets from the reference tree ----

    /** Every path of the reference tree, sorted; walked again only after the namespace changed. */
    private List<String> cachedPaths;
    private List<String> cachedDirs;

    private List<String> all(boolean dirsOnly) throws IOException {
        if (cachedPaths == null) {
            List<String> paths = new ArrayList<>();
            List<String> dirs = new ArrayList<>();
            try (Stream<Path> walk = Files.walk(ref)) {
                walk.forEach(p -> {
                    String s = "/" + ref.relativize(p).toString();
                    paths.add(s);
                    if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
                        dirs.add(s);
                    }
                });
            }
            paths.sort(null);
            dirs.sort(null);
            cachedPaths = paths;
            cachedDirs = dirs;
        }
        return new ArrayList<>(dirsOnly ? cachedDirs : cachedPaths);
    }

    private String pick(List<String> items) {
        return items.get(rnd.nextInt(items.size()));
    }

    private String anyPath() throws IOException {
        List<String> entries = all(false);
        entries.remove("/");
        if (entries.isEmpty() || rnd.nextInt(10) == 0) {
            return newPath();
        }
        return pick(entries);
    }

    /** A path in a directory at most {@link #MAX_DEPTH} deep, so the tree stays a few hundred entries. */
    private String newPath() throws IOException {
        List<String> dirs = all(true);
        dirs.removeIf(d -> d.chars().filter(c -> c == '/').count() > MAX_DEPTH);
        String parent = pick(dirs);
        return (parent.equals("/") ? "" : parent) + "/" + NAMES[rnd.nextInt(NAMES.length)];
    }

    private static String parentOf(String path) {
        int i = path.lastIndexOf('/');
        return i == 0 ? "/" : path.substring(0, i);
    }

    private static String nameOf(String path) {
        return path.substring(path.lastIndexOf('/') + 1);
    }

    private Path local(String path) {
        return path.equals("/") ? ref : ref.resolve(path.substring(1));
    }

    // ---- one operation on both sides ----

    private interface Op {
        void run() throws IOException;
    }

    private void runOne() throws IOException {
        int kind = rnd.nextInt(100);
        if (kind < 20) {
            String p = newPath();
            int mode = rnd.nextBoolean() ? 0644 : 0600;
            byte[] data = randomData();
            int off = rnd.nextInt(4) == 0 ? rnd.nextInt(3 << 20) : 0;
            lastOp = "create " + p + " with " + data.length + " bytes at " + off;
            both(() -> {
                try (FileChannel ch = FileChannel.open(local(p), StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                    writeFully(ch, off, data);
                }
                Files.setPosixFilePermissions(local(p), perms(mode));
            }, () -> {
                PartFs.Created c = fs.create(fs.resolve(parentOf(p)).ino(), nameOf(p), mode,
                        PartFs.O_RDWR | PartFs.O_CREAT | PartFs.O_EXCL, 0, 0);
                try {
                    fs.write(c.fh(), off, data, 0, data.length);
                } finally {
                    fs.release(c.fh());
                }
            });
        } else if (kind < 35) {
            String p = anyPath();
            byte[] data = randomData();
            long off = rnd.nextInt(4 << 20);
            lastOp = "write " + data.length + " bytes at " + off + " of " + p;
            both(() -> {
                requireRegular(p);
                try (FileChannel ch = FileChannel.open(local(p), StandardOpenOption.WRITE)) {
                    writeFully(ch, off, data);
                }
            }, () -> {
                Attr a = fs.resolve(p);
                requireRegular(a);
                long fh = fs.open(a.ino(), PartFs.O_WRONLY);
                try {
                    fs.write(fh, off, data, 0, data.length);
                } finally {
                    fs.release(fh);
                }
            });
        } else if (kind < 42) {
            String p = anyPath();
            long len = rnd.nextBoolean() ? rnd.nextInt(5000) : rnd.nextInt(5 << 20);
            lastOp = "truncate " + p + " to " + len;
            both(() -> {
                requireRegular(p);
                try (RandomAccessFile f = new RandomAccessFile(local(p).toFile(), "rw")) {
                    f.setLength(len);
                }
            }, () -> {
                Attr a = fs.resolve(p);
                requireRegular(a);
                fs.truncate(a.ino(), len);
            });
        } else if (kind < 57) {
            String src = anyPath();
            String dst = rnd.nextInt(3) == 0 ? anyPath() : newPath();
            lastOp = "rename " + src + " to " + dst;
            both(() -> Files.move(local(src), local(dst), StandardCopyOption.ATOMIC_MOVE),
                    () -> fs.rename(fs.resolve(parentOf(src)).ino(), nameOf(src),
                            fs.resolve(parentOf(dst)).ino(), nameOf(dst), 0));
        } else if (kind < 65) {
            String target = anyPath();
            String link = newPath();
            lastOp = "link " + link + " to " + target;
            both(() -> Files.createLink(local(link), local(target)),
                    () -> fs.link(fs.resolve(target).ino(), fs.resolve(parentOf(link)).ino(), nameOf(link)));
        } else if (kind < 75) {
            String p = anyPath();
            lastOp = "unlink " + p;
            both(() -> {
                if (Files.isDirectory(local(p), LinkOption.NOFOLLOW_LINKS)) {
                    throw new FsException.IsDirectory(p); // unlink(2) on Linux; Files.delete would rmdir
                }
                Files.delete(local(p));
            }, () -> fs.unlink(fs.resolve(parentOf(p)).ino(), nameOf(p)));
        } else if (kind < 84) {
            String p = newPath();
            lastOp = "mkdir " + p;
            both(() -> {
                Files.createDirectory(local(p));
                Files.setPosixFilePermissions(local(p), perms(0755));
            }, () -> fs.mkdir(fs.resolve(parentOf(p)).ino(), nameOf(p), 0755, 0, 0));
        } else if (kind < 90) {
            String p = anyPath();
            lastOp = "rmdir " + p;
            both(() -> {
                if (Files.exists(local(p), LinkOption.NOFOLLOW_LINKS) && !Files.isDirectory(local(p), LinkOption.NOFOLLOW_LINKS)) {
                    throw new FsException.NotDirectory(p); // rmdir(2); Files.delete would unlink
                }
                Files.delete(local(p));
            }, () -> fs.rmdir(fs.resolve(parentOf(p)).ino(), nameOf(p)));
        } else if (kind < 94) {
            String p = newPath();
            String target = rnd.nextBoolean() ? "../" + NAMES[rnd.nextInt(NAMES.length)] : "store/abc/" + rnd.nextInt(100);
            lastOp = "symlink " + p + " -> " + target;
            both(() -> Files.createSymbolicLink(local(p), Path.of(target)),
                    () -> fs.symlink(fs.resolve(parentOf(p)).ino(), nameOf(p), target, 0, 0));
        } else if (kind < 97) {
            String p = anyPath();
            int mode = new int[] {0600, 0640, 0755, 0444}[rnd.nextInt(4)];
            lastOp = "chmod " + p + " " + Integer.toOctalString(mode);
            both(() -> {
                if (Files.isSymbolicLink(local(p))) {
                    throw new FsException.NotPermitted("symlink"); // not changed on either side
                }
                Files.setPosixFilePermissions(local(p), perms(mode));
            }, () -> {
                Attr a = fs.resolve(p);
                if (a.type() == FileType.SYMLINK) {
                    throw new FsException.NotPermitted("symlink");
                }
                fs.setattr(a.ino(), MetaEngine.SetAttr.mode(mode));
            });
        } else {
            String p = anyPath();
            lastOp = "read " + p;
            if (Files.isRegularFile(local(p), LinkOption.NOFOLLOW_LINKS)) {
                assertEquals(Files.size(local(p)), fs.resolve(p).size(), "size" + where());
                compareBytes(p);
            }
        }
    }

    private byte[] randomData() {
        return RandomWrites.data(rnd, 2 << 20);
    }

    private static void writeFully(FileChannel ch, long off, byte[] data) throws IOException {
        RandomWrites.writeFully(ch, off, data);
    }

    private void requireRegular(String p) throws IOException {
        Path l = local(p);
        if (!Files.exists(l, LinkOption.NOFOLLOW_LINKS)) {
            throw new NoSuchFileException(p);
        }
        if (!Files.isRegularFile(l, LinkOption.NOFOLLOW_LINKS)) {
            throw new FsException.InvalidArgument("not a regular file (the test only writes regular files)");
        }
    }

    private static void requireRegular(Attr a) throws FsException {
        if (a.type() != FileType.FILE) {
            throw new FsException.InvalidArgument("not a regular file (the test only writes regular files)");
        }
    }

    private static Set<PosixFilePermission> perms(int mode) {
        Set<PosixFilePermission> s = EnumSet.noneOf(PosixFilePermission.class);
        PosixFilePermission[] order = {
            PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
            PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
            PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ};
        for (int i = 0; i < 9; i++) {
            if ((mode & (1 << i)) != 0) {
                s.add(order[i]);
            }
        }
        return s;
    }

    /** Runs an operation on both sides and checks they succeeded or failed with one errno. */
    private void both(Op onLocal, Op onPartFs) throws IOException {
        Errno expected = outcome(onLocal);
        cachedPaths = null;
        Errno actual = outcome(onPartFs);
        assertEquals(expected, actual, "outcome" + where());
    }

    private static Errno outcome(Op op) throws IOException {
        try {
            op.run();
            return null;
        } catch (FsException e) {
            return e.errno();
        } catch (NoSuchFileException e) {
            return Errno.ENOENT;
        } catch (FileAlreadyExistsException e) {
            return Errno.EEXIST;
        } catch (DirectoryNotEmptyException e) {
            return Errno.ENOTEMPTY;
        } catch (NotDirectoryException e) {
            return Errno.ENOTDIR;
        } catch (FileSystemException e) {
            String reason = String.valueOf(e.getReason());
            for (Map.Entry<String, Errno> m : REASONS.entrySet()) {
                if (reason.contains(m.getKey())) {
                    return m.getValue();
                }
            }
            throw e;
        }
    }

    private static final Map<String, Errno> REASONS = Map.of(
            "Directory not empty", Errno.ENOTEMPTY,
            "Is a directory", Errno.EISDIR,
            "Not a directory", Errno.ENOTDIR,
            "Invalid argument", Errno.EINVAL,
            "Operation not permitted", Errno.EPERM,
            "File exists", Errno.EEXIST,
            "No such file", Errno.ENOENT);

    // ---- comparing trees ----

    private record Node(String type, long size, int nlink, int mode, String link) {
    }

    private Map<String, Node> localTree() throws IOException {
        Map<String, Node> out = new TreeMap<>();
        for (String p : all(false)) {
            if (p.equals("/")) {
                continue;
            }
            Path l = local(p);
            Map<String, Object> a = Files.readAttributes(l, "unix:mode,nlink,size", LinkOption.NOFOLLOW_LINKS);
            int mode = (Integer) a.get("mode");
            String type = switch (mode & 0170000) {
                case 0040000 -> "dir";
                case 0120000 -> "symlink";
                default -> "file";
            };
            long size = type.equals("dir") ? 0 : (Long) a.get("size");
            String link = type.equals("symlink") ? Files.readSymbolicLink(l).toString() : null;
            int perm = type.equals("symlink") ? 0 : mode & 07777;
            out.put(p, new Node(type, size, (Integer) a.get("nlink"), perm, link));
        }
        return out;
    }

    private Map<String, Node> partFsTree() throws IOException {
        Map<String, Node> out = new TreeMap<>();
        walk(MetaEngine.ROOT, "", out);
        return out;
    }

    private void walk(long dir, String prefix, Map<String, Node> out) throws IOException {
        for (DirEntry e : fs.readdir(dir)) {
            String p = prefix + "/" + e.name();
            Attr a = fs.getattr(e.ino());
            String type = switch (a.type()) {
                case DIRECTORY -> "dir";
                case SYMLINK -> "symlink";
                default -> "file";
            };
            long size = a.isDirectory() ? 0 : a.size();
            String link = a.type() == FileType.SYMLINK ? fs.readlink(a.ino()) : null;
            int perm = a.type() == FileType.SYMLINK ? 0 : a.mode();
            out.put(p, new Node(type, size, a.nlink(), perm, link));
            if (a.isDirectory()) {
                walk(a.ino(), p, out);
            }
        }
    }

    private void compareTrees(String when) throws IOException {
        Map<String, Node> expected = localTree();
        Map<String, Node> actual = partFsTree();
        assertEquals(expected.keySet(), actual.keySet(), "names " + when + where());
        for (Map.Entry<String, Node> e : expected.entrySet()) {
            assertEquals(e.getValue(), actual.get(e.getKey()), e.getKey() + " " + when + where());
            if (e.getValue().type().equals("file")) {
                compareBytes(e.getKey());
            }
        }
    }

    private void compareBytes(String p) throws IOException {
        byte[] expected = Files.readAllBytes(local(p));
        Attr a = fs.resolve(p);
        long fh = fs.open(a.ino(), PartFs.O_RDONLY);
        try {
            byte[] actual = new byte[expected.length];
            int done = 0;
            while (done < actual.length) {
                int n = fs.read(fh, done, actual, done, Math.min(actual.length - done, 1 << 20));
                if (n <= 0) {
                    break;
                }
                done += n;
            }
            assertEquals(expected.length, done, "bytes read from " + p + where());
            if (!java.util.Arrays.equals(expected, actual)) {
                int i = java.util.Arrays.mismatch(expected, actual);
                throw new AssertionError("content of " + p + " differs at byte " + i + " of " + expected.length + where());
            }
        } finally {
            fs.release(fh);
        }
    }
}
