package io.partfs.engine.data;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

class LowPriorityTest {
    /** Field 19 of /proc/thread-self/stat: the calling thread's nice value. */
    private static int niceOfThisThread() throws Exception {
        String stat = Files.readString(Path.of("/proc/thread-self/stat"));
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" "); // after "pid (comm) "
        return Integer.parseInt(f[16]);
    }

    @Test
    void makesOnlyTheCallingThreadNice19() throws Exception {
        int before = niceOfThisThread();
        int lowered = CompletableFuture.supplyAsync(() -> {
            try {
                LowPriority.thisThread();
                return niceOfThisThread();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }, r -> new Thread(r).start()).get();
        assertEquals(19, lowered);
        assertEquals(before, niceOfThisThread(), "other threads keep their priority");
    }
}
