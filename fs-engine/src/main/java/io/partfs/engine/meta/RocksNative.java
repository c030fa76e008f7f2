package io.partfs.engine.meta;

import java.io.IOException;
import java.io.InputStream;
import java.net.URISyntaxException;
import java.nio.channels.FileChannel;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Set;
import org.rocksdb.RocksDB;
import org.rocksdb.util.Environment;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Loads RocksDB's native library from one file per RocksDB version and user, unpacked once.
 *
 * <p>{@link RocksDB#loadLibrary()} unpacks the 15 MB library from its jar into a new temp file on
 * every start and only a normal JVM exit deletes it, so every killed sidecar (SIGKILL, the OOM
 * killer) left one in {@code /tmp}. Here it goes to {@code <java.io.tmpdir>/partfs-native-<uid>/
 * <rocksdbjni jar name and size>/}, written under a temporary name and renamed into place, so concurrent
 * starts never load a partial file, and later starts of the same version load it without
 * unpacking. The directory is used only when this user owns it and nobody else can write to it
 * (a library someone else could replace would run with our rights); when anything is off, or
 * {@code ROCKSDB_SHAREDLIB_DIR} is set, RocksDB loads its library its own way.
 */
public final class RocksNative {
    private static final Logger log = LoggerFactory.getLogger(RocksNative.class);
    private static final Set<PosixFilePermission> OWNER_ONLY = PosixFilePermissions.fromString("rwx------");
    private static boolean loaded;

    private RocksNative() {
    }

    /** Loads the library once per JVM; later calls return at once. */
    public static synchronized void load() {
        if (loaded) {
            return;
        }
        Path dir = System.getenv("ROCKSDB_SHAREDLIB_DIR") == null ? unpacked() : null;
        if (dir != null) {
            try {
                RocksDB.loadLibrary(List.of(dir.toString()));
                loaded = true;
                return;
            } catch (UnsatisfiedLinkError e) {
                log.warn("RocksDB's native library in {} did not load ({}): unpacking it the default way", dir, e.toString());
            }
        }
        RocksDB.loadLibrary();
        loaded = true;
    }

    /** The directory holding this RocksDB version's library, unpacked if needed; null to let RocksDB do it. */
    static Path unpacked() {
        return unpacked(Path.of(System.getProperty("java.io.tmpdir")));
    }

    static Path unpacked(Path tmp) {
        String name = Environment.getJniLibraryFileName("rocksdb"); // in the jar: librocksdbjni-linux64.so
        // RocksDB.loadLibrary(paths) looks for getJniLibraryFileName("rocksdbjni") in each path, which
        // is librocksdbjnijni-linux64.so (sic): the copy gets the name it will look for
        String loadName = Environment.getJniLibraryFileName("rocksdbjni");
        try {
            String version = jarName();
            if (version == null) {
                return null; // not loaded from a jar (an IDE's classes directory): RocksDB's own way
            }
            int uid = (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
            Path base = privateDir(tmp.resolve("partfs-native-" + uid), uid);
            if (base == null) {
                return null;
            }
            Path dir = base.resolve(version);
            Files.createDirectories(dir);
            Path lib = dir.resolve(loadName);
            if (!Files.isRegularFile(lib, LinkOption.NOFOLLOW_LINKS)) {
                try (InputStream in = RocksDB.class.getClassLoader().getResourceAsStream(name)) {
                    if (in == null) {
                        return null;
                    }
                    Path part = Files.createTempFile(dir, name, ".part");
                    try {
                        Files.copy(in, part, StandardCopyOption.REPLACE_EXISTING);
                        try (FileChannel ch = FileChannel.open(part, StandardOpenOption.WRITE)) {
                            ch.force(true); // whole on disk before it has the name that says so
                        }
                        Files.move(part, lib, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                    } finally {
                        Files.deleteIfExists(part);
                    }
                }
            }
            return dir;
        } catch (IOException | RuntimeException e) {
            log.warn("RocksDB's native library is unpacked the default way ({}): {}", name, e.toString());
            return null;
        }
    }

    /**
     * {@code dir}, created owner-only if missing; null unless it is a real directory of {@code uid}
     * that no one else can write to.
     */
    private static Path privateDir(Path dir, int uid) throws IOException {
        try {
            Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(OWNER_ONLY));
        } catch (FileAlreadyExistsException e) {
            // checked below like a new one
        }
        PosixFileAttributes a = Files.readAttributes(dir, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        boolean othersWrite = a.permissions().contains(PosixFilePermission.GROUP_WRITE)
                || a.permissions().contains(PosixFilePermission.OTHERS_WRITE);
        Object owner = Files.getAttribute(dir, "unix:uid", LinkOption.NOFOLLOW_LINKS);
        if (!a.isDirectory() || othersWrite || !Integer.valueOf(uid).equals(owner)) {
            log.warn("{} is not a directory of this user that only it can write to: RocksDB's native library is"
                    + " unpacked the default way", dir);
            return null;
        }
        return dir;
    }

    /** The rocksdbjni jar's file name without {@code .jar} (it names the version) and its size, or null. */
    private static String jarName() {
        try {
            var source = RocksDB.class.getProtectionDomain().getCodeSource();
            if (source == null) {
                return null;
            }
            Path jar = Path.of(source.getLocation().toURI());
            String file = jar.getFileName().toString();
            return file.endsWith(".jar") ? file.substring(0, file.length() - 4) + "-" + Files.size(jar) : null;
        } catch (URISyntaxException | IOException | RuntimeException e) {
            return null;
        }
    }
}
