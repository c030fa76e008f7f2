package io.partfs.engine.fs;

import io.partfs.engine.testing.TestVolume;
import org.junit.jupiter.api.BeforeAll;

/** The differential test on metadata engine REDIS and object store LOCAL. */
class DifferentialRedisLocalTest extends DifferentialContract {
    @BeforeAll
    static void startBackends() throws Exception {
        start(TestVolume.Meta.REDIS, TestVolume.Store.LOCAL);
    }

    @Override
    TestVolume.Meta meta() {
        return TestVolume.Meta.REDIS;
    }

    @Override
    TestVolume.Store store() {
        return TestVolume.Store.LOCAL;
    }
}
