package io.partfs.engine.data;

import java.nio.file.Files;
import java.nio.file.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Lowers the calling thread's CPU priority to Linux nice 19, for background work that may
 * wait while the machine is busy (indexing the block cache at start, which would otherwise take
 * CPU from ClickHouse loading its tables on the same cores). Elsewhere, or if the call fails,
 * the thread keeps its priority.
 */
final class LowPriority {
    private static final Logger log = LoggerFactory.getLogger(LowPriority.class);
    private static final int PRIO_PROCESS = 0;
    private static final int NICEST = 19;

    private LowPriority() {
    }

    /** setpriority(2); public only because jnr-ffi generates its implementation in another class loader. */
    public interface C {
        int setpriority(int which, int who, int prio);
    }

    /** Makes the calling thread nice 19 (on Linux a thread's priority is its own: the target is its tid). */
    static void thisThread() {
        try {
            String self = Files.readSymbolicLink(Path.of("/proc/thread-self")).toString(); // <pid>/task/<tid>
            int tid = Integer.parseInt(self.substring(self.lastIndexOf('/') + 1));
            if (jnr.ffi.LibraryLoader.create(C.class).load("c").setpriority(PRIO_PROCESS, tid, NICEST) != 0) {
                log.debug("setpriority failed for thread {}", tid);
            }
        } catch (Exception | LinkageError e) {
            log.debug("cannot lower this thread's priority: {}", e.toString());
        }
    }
}
