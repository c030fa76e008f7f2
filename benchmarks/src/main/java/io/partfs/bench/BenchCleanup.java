package io.partfs.bench;

import io.partfs.engine.fuse.Mounts;
import io.partfs.engine.testing.TempDirs;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * What a benchmark started, stopped when it is interrupted (Ctrl-C, kill): a JVM that gets
 * SIGTERM runs its shutdown hooks but not the {@code finally} blocks of its main thread, which
 * would leave a FUSE mount, a sidecar, rclone or s3fs, ClickHouse, redis-server and a temp
 * directory behind. After a normal end the hook finds everything stopped already.
 */
final class BenchCleanup {
    private BenchCleanup() {
    }

    /**
     * Registers the hook: stops ClickHouse (it holds the mount), unmounts PartFS through the
     * stack (its sidecar runs in a session of its own and needs S3 and Redis to flush), then any
     * other mount at {@code mnt}, stops the stack's servers and every process still started by
     * this one, and deletes {@code work} when {@code deleteWork}.
     *
     * @param stack the stack once started, else null
     */
    static void onExit(String name, Supplier<Stack> stack, Path mnt, Path work, boolean deleteWork) {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            ProcessHandle.current().descendants()
                    .filter(p -> p.info().command().map(c -> c.endsWith("clickhouse-server")).orElse(false))
                    .forEach(BenchCleanup::stop);
            Stack s = stack.get();
            try {
                if (s != null && Mounts.isMounted(mnt)) {
                    s.umountPartFs(mnt); // fails harmlessly for an rclone or s3fs mount
                }
            } catch (Exception e) {
                System.err.println(name + ": partfs umount " + mnt + ": " + e.getMessage());
            }
            try {
                Procs.unmount(mnt); // rclone, s3fs or bindfs
                if (s != null) {
                    s.close(); // the proxy, s3proxy and Redis, with their directories
                }
            } catch (Exception e) {
                System.err.println(name + ": cleanup of " + mnt + ": " + e.getMessage());
            }
            ProcessHandle.current().descendants().forEach(BenchCleanup::stop);
            try {
                if (deleteWork) {
                    TempDirs.deleteRecursively(work);
                }
            } catch (Exception e) {
                System.err.println(name + ": could not delete " + work + ": " + e.getMessage());
            }
        }, name + "-cleanup"));
    }

    /** Asks a process to stop, and kills it when it has not within 30 s. */
    static void stop(ProcessHandle p) {
        p.destroy();
        try {
            p.onExit().get(30, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            p.destroyForcibly();
        } catch (Exception e) {
            Thread.currentThread().interrupt();
        }
    }
}
