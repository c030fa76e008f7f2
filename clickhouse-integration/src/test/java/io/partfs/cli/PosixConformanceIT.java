package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.PartFs;
import io.partfs.engine.fuse.FuseOptions;
import io.partfs.engine.fuse.FuseMount;
import io.partfs.engine.testing.TempDirs;
import io.partfs.engine.testing.TestVolume;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * POSIX conformance by comparison: the script posix-conformance.sh (creation, links, symlinks,
 * rename, removal, modes and owners, setgid directories, sticky and permission checks as an
 * unprivileged user, truncate, timestamps) runs on a directory of the kernel's own filesystem
 * and on a PartFS mount; every line of output must be the same.
 */
class PosixConformanceIT {
    private Path dir;

    @BeforeEach
    void setUp() throws Exception {
        dir = Files.createTempDirectory("partfs-posix-");
    }

    @AfterEach
    void tearDown() throws Exception {
        TempDirs.deleteRecursively(dir);
    }

    private List<String> runScript(Path target) throws Exception {
        Path script = Path.of(getClass().getResource("/posix-conformance.sh").toURI());
        Process p = new ProcessBuilder("bash", script.toString(), target.toString()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(300, TimeUnit.SECONDS), "conformance script did not finish");
        return out.replace(target.toString(), "$D").lines().toList();
    }

    @Test
    void partFsAnswersLikeTheKernelsOwnFilesystem() throws Exception {
        List<String> reference = runScript(Files.createDirectory(dir.resolve("local")));
        assertTrue(reference.size() > 100, "the script ran: " + reference);
        Path mnt = Files.createDirectory(dir.resolve("mnt"));
        // the reference directory is on a relatime mount; PartFS mounts noatime unless asked (MountedPosixTest checks that)
        io.partfs.engine.PartFsConfig relatime = TestVolume.defaultConfig(dir.resolve("vol")).toBuilder()
                .atimeMode(io.partfs.engine.PartFsConfig.AtimeMode.RELATIME).build();
        try (PartFs fs = new TestVolume(TestVolume.Meta.ROCKSDB, TestVolume.Store.LOCAL, Files.createDirectory(dir.resolve("vol")),
                null, null, relatime).open()) {
            FuseMount fuse = FuseMount.create(fs, null, FuseOptions.builder().build());
            fuse.mountAndWait(mnt, FuseOptions.builder().build());
            List<String> got;
            try {
                got = runScript(mnt);
            } finally {
                fuse.unmount();
            }
            for (int i = 0; i < Math.min(reference.size(), got.size()); i++) {
                assertEquals(reference.get(i), got.get(i), "line " + (i + 1) + " of the conformance output");
            }
            assertEquals(reference.size(), got.size(), "number of output lines");
        }
    }
}
