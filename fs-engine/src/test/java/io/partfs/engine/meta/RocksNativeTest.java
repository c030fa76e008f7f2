package io.partfs.engine.meta;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.rocksdb.RocksDB;
import org.rocksdb.util.Environment;

/** Where RocksDB's native library is unpacked: once per version, only into a directory of our own. */
class RocksNativeTest {
    @TempDir
    Path tmp;

    private static int uid() throws IOException {
        return (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
    }

    private Path base() throws IOException {
        return tmp.resolve("partfs-native-" + uid());
    }

    @Test
    void unpacksTheLibraryOnceIntoAnOwnerOnlyDirectory() throws Exception {
        Path dir = RocksNative.unpacked(tmp);
        assertNotNull(dir);
        assertEquals(base(), dir.getParent());
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(base())));
        try (var files = Files.list(dir)) {
            List<Path> all = files.toList();
            assertEquals(1, all.size(), "only the library, no partial copy: " + all);
            long jarSize;
            try (InputStream in = RocksDB.class.getClassLoader().getResourceAsStream(Environment.getJniLibraryFileName("rocksdb"))) {
                jarSize = in.transferTo(java.io.OutputStream.nullOutputStream());
            }
            assertEquals(jarSize, Files.size(all.get(0)), "the whole library");
            Object inode = Files.readAttributes(all.get(0), BasicFileAttributes.class).fileKey();
            assertEquals(dir, RocksNative.unpacked(tmp), "the next start finds it");
            assertEquals(inode, Files.readAttributes(all.get(0), BasicFileAttributes.class).fileKey(), "and does not unpack it again");
        }
    }

    @Test
    void aDirectoryOthersCanWriteToIsNotUsed() throws Exception {
        Files.createDirectory(base(), PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        Files.setPosixFilePermissions(base(), PosixFilePermissions.fromString("rwxrwxrwx"));
        assertNull(RocksNative.unpacked(tmp), "someone else could replace the library in it");
        try (var files = Files.list(base())) {
            assertEquals(0, files.count(), "nothing written into it");
        }
    }

    @Test
    void aSymlinkInPlaceOfTheDirectoryIsNotFollowed() throws Exception {
        Path elsewhere = Files.createDirectory(tmp.resolve("elsewhere"),
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        Files.createSymbolicLink(base(), elsewhere);
        assertNull(RocksNative.unpacked(tmp));
        try (var files = Files.list(elsewhere)) {
            assertEquals(0, files.count(), "nothing written where the link points");
        }
    }
}
