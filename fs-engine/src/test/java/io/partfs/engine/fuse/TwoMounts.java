package io.partfs.engine.fuse;

import io.partfs.engine.PartFs;
import io.partfs.engine.testing.RedisServer;
import io.partfs.engine.testing.TempDirs;
import io.partfs.engine.testing.TestVolume;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Two mounts of one Redis volume, as two machines would have them: two FUSE mounts in this
 * process, each with its own in-memory metadata, block cache and kernel caches, on a
 * redis-server of their own. {@link #close} unmounts both, stops the server and removes the
 * directory.
 */
final class TwoMounts implements AutoCloseable {
    final Path dir;
    final Path a;
    final Path b;
    final PartFs fsA;
    final PartFs fsB;
    private final RedisServer redis;
    private final List<FuseMount> mounts = new ArrayList<>();

    /** With {@code sessions}, each mount registers its session, as {@code partfs mount} does. */
    TwoMounts(boolean sessions) throws Exception {
        this(sessions, TestVolume::defaultConfig);
    }

    /** B's configuration made of the directory it may keep things in (its block cache, say). */
    TwoMounts(boolean sessions, java.util.function.Function<Path, io.partfs.engine.PartFsConfig> configOfB) throws Exception {
        dir = Files.createTempDirectory("partfs-shared-");
        redis = RedisServer.start("--databases", "1000"); // TestVolume numbers databases across tests
        try {
            TestVolume volume = new TestVolume(TestVolume.Meta.REDIS, TestVolume.Store.LOCAL, dir, redis, null,
                    TestVolume.defaultConfig(dir.resolve("a")));
            fsA = volume.open();
            a = mount(fsA, "mnt-a", sessions);
            fsB = volume.openAs(configOfB.apply(dir.resolve("b")));
            b = mount(fsB, "mnt-b", sessions);
        } catch (Exception | Error e) {
            close();
            throw e;
        }
    }

    private Path mount(PartFs fs, String name, boolean session) throws Exception {
        if (session) {
            fs.startSession(name);
        }
        Path mnt = Files.createDirectory(dir.resolve(name));
        FuseOptions options = FuseOptions.builder().driver(FuseOptions.Driver.KERNEL).build();
        FuseMount fuse = FuseMount.create(fs, null, options);
        fuse.mountAndWait(mnt, options);
        mounts.add(fuse);
        return mnt;
    }

    /** Unmounts B and closes its client (its write-back uploads done); A stays mounted. */
    void unmountB() throws Exception {
        FuseMount fuse = mounts.remove(1);
        fuse.unmount();
        fsB.close();
    }

    @Override
    public void close() throws Exception {
        try {
            for (FuseMount m : mounts) {
                m.unmount();
            }
            for (PartFs fs : new PartFs[] {fsA, fsB}) {
                if (fs != null) {
                    fs.close();
                }
            }
        } finally {
            redis.close();
            TempDirs.deleteRecursively(dir);
        }
    }
}
