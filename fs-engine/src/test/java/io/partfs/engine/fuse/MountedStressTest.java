package io.partfs.engine.fuse;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.PartFs;
import io.partfs.engine.testing.Teardown;
import io.partfs.engine.testing.TempDirs;
import io.partfs.engine.testing.TestVolume;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * stress-ng's filesystem stressors, with their own verification, on a real mount of an
 * embedded volume (kernel driver). Run by hand they found a write failing with EIO (4 MiB
 * direct buffers kept per thread), names that were not UTF-8 merged into one, and a truncate
 * of a huge sparse file running the mount out of heap; each has its own unit test, and this
 * keeps the whole set running. scripts/test installs stress-ng.
 */
class MountedStressTest {
    @Test
    void stressNgFilesystemStressorsPassOnAMount() throws Exception {
        Path dir = Files.createTempDirectory("partfs-stress-");
        PartFs fs = null;
        FuseMount fuse = null;
        try {
            Path mnt = Files.createDirectory(dir.resolve("mnt"));
            fs = new TestVolume(TestVolume.Meta.ROCKSDB, TestVolume.Store.LOCAL, dir, null, null, TestVolume.defaultConfig(dir)).open();
            FuseOptions options = FuseOptions.builder().driver(FuseOptions.Driver.KERNEL).build();
            fuse = FuseMount.create(fs, null, options);
            fuse.mountAndWait(mnt, options);
            List<String> cmd = new ArrayList<>(List.of("stress-ng", "--temp-path", mnt.toString(), "--verify", "--timeout", "4s",
                    "--metrics-brief",
                    "--hdd", "2", "--hdd-bytes", "16m", // writes and reads back, 1 byte to 4 MiB at a time
                    "--filename", "1", // names of every byte but '/' and NUL
                    "--fsize", "1", // writes and truncates at the file size limit
                    "--rename", "1", "--fallocate", "1", "--fpunch", "1", "--seek", "1", "--sync-file", "1",
                    "--flock", "1", "--lockf", "1", "--fcntl", "1", "--chmod", "1", "--utime", "1", "--dentry", "1"));
            Process p = new ProcessBuilder(cmd).directory(mnt.toFile()).redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(p.waitFor(5, TimeUnit.MINUTES), "stress-ng did not finish:\n" + out);
            // 7: a stressor was stopped at the timeout while it counted its bogo ops, so the
            // metrics are untrustworthy (CI saw it for flock under load); verification failures are 2
            assertTrue(p.exitValue() == 0 || p.exitValue() == 7, "stress-ng failed (exit " + p.exitValue() + "):\n" + out);
            assertTrue(out.contains("successful run completed"), out);
            try (var left = Files.list(mnt)) {
                assertEquals(0, left.count(), "stress-ng removes what it made");
            }
        } finally {
            FuseMount mounted = fuse;
            Teardown.inOrder(mounted == null ? null : mounted::unmount, fs, () -> TempDirs.deleteRecursively(dir));
        }
    }
}
