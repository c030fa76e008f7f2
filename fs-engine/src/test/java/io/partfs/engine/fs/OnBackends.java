package io.partfs.engine.fs;

import io.partfs.engine.testing.Backends;
import io.partfs.engine.testing.TestVolume;
import java.io.IOException;
import org.junit.jupiter.api.AfterAll;

/**
 * A suite run once per metadata engine and object store: a subclass names the pair and starts
 * its servers in {@code @BeforeAll} with {@link #start}; they are stopped after the class.
 */
abstract class OnBackends {
    static Backends backends;

    abstract TestVolume.Meta meta();

    abstract TestVolume.Store store();

    static void start(TestVolume.Meta meta, TestVolume.Store store) throws Exception {
        backends = Backends.start(meta, store);
    }

    @AfterAll
    static void stopBackends() throws IOException {
        Backends.closeQuietly(backends);
        backends = null;
    }
}
