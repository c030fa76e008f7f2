package io.partfs.engine.object;

import io.partfs.engine.data.LocalFiles;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.TreeSet;
import java.util.concurrent.ThreadLocalRandom;
import java.util.stream.Stream;

/**
 * Objects as files under a local directory: the embedded default, and a stand-in for S3 where
 * none is wanted. A key {@code a/b/c} is the file {@code root/a/b/c}. Writes go to a temporary
 * file that is fsynced and renamed into place, so a reader sees the whole object or none.
 * Thread-safe: each call works on its own files.
 *
 * <p>A put that would leave less than the disk's reserve free on the directory's filesystem fails
 * with ENOSPC, as one that finds the disk full does: the rest is kept for the metadata, which on
 * an embedded volume (RocksDB) shares the disk, so that files can still be deleted to make room.
 * A RocksDB whose log write once failed for want of space refuses every write until reopened.
 */
public final class LocalObjectStore implements ObjectStore {
    private static final String TMP_SUFFIX = ".partfs-tmp";

    private final Path root;
    /** The disk, and what a put leaves free on it: 2% of it, at most 1 GiB. */
    private final io.partfs.engine.data.DiskSpace disk;

    public LocalObjectStore(Path root) throws IOException {
        this.root = root.toAbsolutePath().normalize();
        if (Files.exists(this.root) && !Files.isDirectory(this.root)) {
            throw new ObjectStoreException(ObjectStoreException.Kind.OTHER,
                    "object directory " + this.root + " is not a directory: choose another --storage path", null);
        }
        Files.createDirectories(this.root);
        this.disk = io.partfs.engine.data.DiskSpace.keepFree(this.root, 0.02, 1L << 30);
    }

    /** The disk holding the objects, and what puts may still use of it (its free space less the reserve). */
    @Override
    public Optional<LocalSpace> localSpace() {
        long total = disk.total();
        long room = disk.room();
        return total < 0 || room < 0 ? Optional.empty() : Optional.of(new LocalSpace(total, room));
    }

    private io.partfs.engine.FsException noSpace(String key) {
        return new io.partfs.engine.FsException.NoSpace("no room for object " + key + " in " + root + " ("
                + (Math.max(0, disk.usable()) >> 20) + " MiB free, " + (disk.minFree() >> 20)
                + " MiB of it kept for the metadata): free space on that disk");
    }

    /** Objects are whole files, written aside and renamed in, never rewritten. */
    @Override
    public Path localFile(String key) {
        return file(key);
    }

    public Path root() {
        return root;
    }

    private Path file(String key) {
        return root.resolve(ObjectStore.checkKey(key));
    }

    @Override
    public void put(String key, byte[] data) throws IOException {
        if (disk.shortfall(data.length) > 0) {
            throw noSpace(key);
        }
        Path target = file(key);
        Path tmp = target.resolveSibling(target.getFileName() + "." + Long.toHexString(ThreadLocalRandom.current().nextLong()) + TMP_SUFFIX);
        try (FileChannel ch = createNew(tmp)) {
            LocalFiles.writeAll(ch, data);
            ch.force(false);
        } catch (IOException e) {
            Files.deleteIfExists(tmp);
            if (io.partfs.engine.data.DiskSpace.full(e)) {
                throw noSpace(key);
            }
            throw e;
        }
        Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }

    /**
     * Creates {@code f}, and its directory first when that is missing. Creating the directory
     * only then spares each put the exception {@link Files#createDirectories} makes (with its
     * stack trace) when the directory exists. A {@link #delete} removes directories it leaves
     * empty, including ones a put has just created and not yet written into: then the steps are
     * tried again.
     */
    private static FileChannel createNew(Path f) throws IOException {
        for (int attempt = 1; ; attempt++) {
            try {
                if (attempt > 1) {
                    Files.createDirectories(f.getParent());
                }
                return FileChannel.open(f, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
            } catch (NoSuchFileException | FileAlreadyExistsException e) {
                // FileAlreadyExists: createDirectories found the directory, and a delete removed
                // it before createDirectories could check that it is one
                // each attempt takes microseconds; ten were lost in a row on a loaded CI host
                if (attempt == 200) {
                    throw e;
                }
            }
        }
    }

    @Override
    public byte[] get(String key, long offset, int length) throws IOException {
        if (offset < 0) {
            throw new IllegalArgumentException("negative offset " + offset);
        }
        Path f = file(key);
        try {
            long size = Files.size(f);
            long end = length < 0 ? size : Math.min(size, offset + length);
            int n = (int) Math.max(0, end - offset);
            return n == 0 ? new byte[0] : LocalFiles.readRange(f, offset, n);
        } catch (NoSuchFileException e) {
            throw new ObjectNotFoundException(key);
        }
    }

    @Override
    public Optional<ObjectInfo> head(String key) throws IOException {
        Path f = file(key);
        try {
            var a = Files.readAttributes(f, java.nio.file.attribute.BasicFileAttributes.class);
            return Optional.of(new ObjectInfo(key, a.size(), a.lastModifiedTime().toMillis()));
        } catch (NoSuchFileException e) {
            return Optional.empty();
        }
    }

    @Override
    public void delete(String key) throws IOException {
        Path f = file(key);
        Files.deleteIfExists(f);
        // Remove directories left empty, so the tree does not grow without bound.
        for (Path dir = f.getParent(); dir != null && !dir.equals(root); dir = dir.getParent()) {
            try {
                Files.delete(dir);
            } catch (DirectoryNotEmptyException | NoSuchFileException | FileAlreadyExistsException e) {
                break;
            }
        }
    }

    @Override
    public List<ObjectInfo> list(String prefix, String startAfter, int limit) throws IOException {
        // Walk only the deepest directory that can hold keys with this prefix.
        int slash = prefix.lastIndexOf('/');
        Path base = slash < 0 ? root : root.resolve(prefix.substring(0, slash));
        if (!Files.isDirectory(base)) {
            return List.of();
        }
        TreeSet<String> keys = new TreeSet<>(LocalObjectStore::compareUtf8);
        try (Stream<Path> walk = Files.walk(base)) {
            walk.filter(Files::isRegularFile).forEach(p -> {
                String key = root.relativize(p).toString();
                if (key.startsWith(prefix) && !key.endsWith(TMP_SUFFIX)
                        && (startAfter == null || compareUtf8(key, startAfter) > 0)) {
                    keys.add(key);
                    if (keys.size() > limit) {
                        keys.pollLast();
                    }
                }
            });
        } catch (UncheckedIOException e) {
            if (!(e.getCause() instanceof NoSuchFileException)) {
                throw e.getCause();
            }
            // A concurrent delete removed a directory while we walked; list what is left.
            return list(prefix, startAfter, limit);
        }
        List<ObjectInfo> out = new ArrayList<>(keys.size());
        for (String key : keys) {
            Optional<ObjectInfo> info = head(key);
            info.ifPresent(out::add);
        }
        return out;
    }

    /**
     * One walk of the tree (paging through {@link #list} would walk it once per page). Files and
     * directories deleted meanwhile (by a mount's deletions, or by {@code each}) are skipped.
     */
    @Override
    public void scan(String prefix, IoConsumer<ObjectInfo> each) throws IOException {
        int slash = prefix.lastIndexOf('/');
        Path base = slash < 0 ? root : root.resolve(prefix.substring(0, slash));
        if (!Files.isDirectory(base)) {
            return;
        }
        Files.walkFileTree(base, new java.nio.file.SimpleFileVisitor<>() {
            @Override
            public java.nio.file.FileVisitResult visitFile(Path p, java.nio.file.attribute.BasicFileAttributes a) throws IOException {
                String key = root.relativize(p).toString();
                if (a.isRegularFile() && key.startsWith(prefix) && !key.endsWith(TMP_SUFFIX)) {
                    each.accept(new ObjectInfo(key, a.size(), a.lastModifiedTime().toMillis()));
                }
                return java.nio.file.FileVisitResult.CONTINUE;
            }

            @Override
            public java.nio.file.FileVisitResult visitFileFailed(Path p, IOException e) throws IOException {
                if (e instanceof NoSuchFileException) {
                    return java.nio.file.FileVisitResult.CONTINUE;
                }
                throw e;
            }
        });
    }

    /** S3 orders keys by their UTF-8 bytes; for the BMP without surrogates this equals String order. */
    private static int compareUtf8(String a, String b) {
        return java.util.Arrays.compareUnsigned(a.getBytes(java.nio.charset.StandardCharsets.UTF_8),
                b.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    }

    @Override
    public String describe() {
        return "file://" + root;
    }

    @Override
    public void close() {
    }
}
