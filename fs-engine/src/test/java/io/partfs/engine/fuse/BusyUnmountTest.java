package io.partfs.engine.fuse;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.PartFs;
import io.partfs.engine.testing.Poll;
import io.partfs.engine.testing.Teardown;
import io.partfs.engine.testing.TempDirs;
import io.partfs.engine.testing.TestVolume;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Unmounting a mount ClickHouse still uses (partfs umount or SIGTERM before ClickHouse stopped),
 * through a real mount with each driver: it stays attached and serving while files are open,
 * for the grace period, and is detached lazily only after it.
 */
class BusyUnmountTest {
    private Path dir;
    private Path mnt;
    private PartFs fs;
    private FuseMount fuse;

    @BeforeEach
    void volume() throws Exception {
        dir = Files.createTempDirectory("partfs-busy-");
        mnt = Files.createDirectory(dir.resolve("mnt"));
        fs = new TestVolume(TestVolume.Meta.ROCKSDB, TestVolume.Store.LOCAL, dir, null, null,
                TestVolume.defaultConfig(dir)).open();
    }

    private void mount(FuseOptions.Driver driver, Duration grace) throws Exception {
        FuseOptions options = FuseOptions.builder().driver(driver).unmountGrace(grace).build();
        fuse = FuseMount.create(fs, null, options);
        fuse.mountAndWait(mnt, options);
    }

    @AfterEach
    void close() throws Exception {
        FuseMount mounted = fuse;
        Teardown.inOrder(mounted == null ? null : mounted::unmount, fs, () -> TempDirs.deleteRecursively(dir));
    }

    @ParameterizedTest
    @EnumSource(FuseOptions.Driver.class)
    void aBusyMountKeepsServingUntilItsFilesClose(FuseOptions.Driver driver) throws Exception {
        mount(driver, Duration.ofSeconds(60));
        FileChannel open = FileChannel.open(mnt.resolve("open.bin"), StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
        open.write(ByteBuffer.wrap("written before".getBytes(StandardCharsets.UTF_8)));
        long refused = BusyUnmount.REFUSED.get();
        CompletableFuture<Boolean> unmounted = unmountInBackground();
        Poll.until(() -> BusyUnmount.REFUSED.get() >= refused + 2, "the plain unmount refused as busy, twice");
        assertFalse(unmounted.isDone(), "waits for the open file");
        assertTrue(Mounts.isMounted(mnt), "still attached while the file is open");
        // new opens by path still reach PartFS, not the directory beneath the mount
        Files.writeString(mnt.resolve("opened-while-waiting"), "by path");
        assertEquals("by path", Files.readString(mnt.resolve("opened-while-waiting")));
        open.write(ByteBuffer.wrap(", and while waiting".getBytes(StandardCharsets.UTF_8)));
        open.close();
        assertTrue(unmounted.get(30, TimeUnit.SECONDS), "ended once the file was closed");
        fuse = null;
        assertFalse(Mounts.isMounted(mnt));
        assertFalse(Files.exists(mnt.resolve("opened-while-waiting")), "nothing written beneath the mount");
        assertEquals("by path", new String(fs.readFile("/opened-while-waiting"), StandardCharsets.UTF_8));
        assertEquals("written before, and while waiting", new String(fs.readFile("/open.bin"), StandardCharsets.UTF_8));
    }

    /**
     * Files still open after the grace: the mount is detached lazily and those files are served
     * for the grace again; then its connection is aborted, so they get errors rather than reach
     * the volume its owner closes next, and the driver stops, closing its /dev/fuse descriptor.
     */
    @ParameterizedTest
    @EnumSource(FuseOptions.Driver.class)
    void aMountStillBusyAfterTheGraceIsDetachedLazilyThenCutOff(FuseOptions.Driver driver) throws Exception {
        long fuseDescriptors = fuseDescriptors();
        mount(driver, Duration.ofMillis(300));
        byte[] data = "kept working".getBytes(StandardCharsets.UTF_8);
        FileChannel open = FileChannel.open(mnt.resolve("held.bin"), StandardOpenOption.CREATE_NEW,
                StandardOpenOption.READ, StandardOpenOption.WRITE);
        try {
            CompletableFuture<Boolean> unmounted = unmountInBackground();
            Poll.until(() -> !isMounted(mnt), "detached once the grace has passed");
            open.write(ByteBuffer.wrap(data)); // the open file keeps working on the detached mount
            ByteBuffer back = ByteBuffer.allocate(data.length);
            open.read(back, 0);
            assertArrayEquals(data, back.array());
            assertFalse(unmounted.get(30, TimeUnit.SECONDS), "the file was still open at the end of the second grace");
            fuse = null;
            java.io.IOException cut = assertThrows(java.io.IOException.class, () -> open.force(true),
                    "the file is cut off from the volume (a read could come from the page cache)");
            assertTrue(String.valueOf(cut.getMessage()).contains("not connected"), cut.toString());
            assertEquals(fuseDescriptors, fuseDescriptors(), "the driver stopped and closed /dev/fuse");
        } finally {
            try {
                open.close();
            } catch (java.io.IOException e) {
                // the connection is gone: its flush fails, the descriptor is closed all the same
            }
        }
        assertEquals("kept working", new String(fs.readFile("/held.bin"), StandardCharsets.UTF_8),
                "what was written while the file was served is on the volume");
    }

    /** This process's open descriptors of /dev/fuse. */
    private static long fuseDescriptors() throws java.io.IOException {
        try (java.util.stream.Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            return fds.filter(fd -> {
                try {
                    return Files.readSymbolicLink(fd).toString().equals("/dev/fuse");
                } catch (java.io.IOException e) {
                    return false; // closed meanwhile (the one Files.list itself used)
                }
            }).count();
        }
    }

    /** {@link FuseMount#unmount()} on another thread, as SIGTERM's handler runs it. */
    private CompletableFuture<Boolean> unmountInBackground() {
        FuseMount mounted = fuse;
        return CompletableFuture.supplyAsync(() -> {
            try {
                return mounted.unmount();
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
    }

    private static boolean isMounted(Path mp) {
        try {
            return Mounts.isMounted(mp);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
