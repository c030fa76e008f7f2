package io.partfs.engine.fs;

import io.partfs.engine.testing.TestVolume;
import org.junit.jupiter.api.BeforeAll;

/** The filesystem contract on metadata engine REDIS and object store S3. */
class PartFsRedisS3Test extends PartFsContract {
    @BeforeAll
    static void startBackends() throws Exception {
        start(TestVolume.Meta.REDIS, TestVolume.Store.S3);
    }

    @Override
    TestVolume.Meta meta() {
        return TestVolume.Meta.REDIS;
    }

    @Override
    TestVolume.Store store() {
        return TestVolume.Store.S3;
    }
}
