package io.partfs.engine.meta;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.Attr;
import io.partfs.engine.testing.RedisServer;
import java.io.IOException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The metadata engine contract on a real redis-server, plus what sharing a volume needs. */
class RedisMetaEngineContractTest extends MetaEngineContract {
    private static RedisServer redis;
    private static int nextDb;

    @BeforeAll
    static void startRedis() throws IOException {
        redis = RedisServer.start("--databases", "1000");
    }

    @AfterAll
    static void stopRedis() throws IOException {
        redis.close();
    }

    private int db;

    @Override
    KvStore newStore() throws Exception {
        db = ++nextDb;
        return new RedisKvStore(redis.url(db));
    }

    @Test
    void twoClientsShareOneVolume() throws Exception {
        try (MetaEngine other = new MetaEngine(new RedisKvStore(redis.url(db)), () -> clock.addAndGet(1000))) {
            assertEquals(meta.volumeFormat().uuid(), other.load().uuid());
            Attr f = file(ROOT, "from-first");
            assertEquals(f.ino(), other.lookup(ROOT, "from-first").ino());
            Attr g = other.mknod(ROOT, "from-second", io.partfs.engine.FileType.FILE, 0644, 0, 0, 0, null);
            assertEquals(g.ino(), meta.lookup(ROOT, "from-second").ino());
            assertFalse(f.ino() == g.ino(), "clients allocate distinct inode numbers");
            other.rename(ROOT, "from-first", ROOT, "renamed", 0);
            assertThrows(io.partfs.engine.FsException.NoSuchEntry.class, () -> meta.lookup(ROOT, "from-first"));
        }
    }

    @Test
    void unreachableRedisIsAClearError() throws Exception {
        int port = RedisServer.freePort();
        IOException e = assertThrows(IOException.class, () -> new RedisKvStore("redis://127.0.0.1:" + port + "/0"));
        assertTrue(e.getMessage().contains("cannot reach Redis"), e.getMessage());
    }

    @Test
    void wrongPasswordIsAClearErrorWithoutThePassword() throws Exception {
        try (RedisServer secured = RedisServer.start("--requirepass", "right-password")) {
            IOException e = assertThrows(IOException.class,
                    () -> new RedisKvStore("redis://:wrong-password@127.0.0.1:" + secured.port() + "/0"));
            assertTrue(e.getMessage().contains("refused the login") && e.getMessage().contains("check the user and password"),
                    e.getMessage());
            assertFalse(e.getMessage().contains("wrong-password"), e.getMessage());
            IOException none = assertThrows(IOException.class, () -> new RedisKvStore("redis://127.0.0.1:" + secured.port() + "/0"));
            assertTrue(none.getMessage().contains("refused the login"), none.getMessage());
        }
    }

    @Test
    void malformedUrlIsAClearError() {
        IOException e = assertThrows(IOException.class, () -> new RedisKvStore("redis://user:secret@:notaport/x"));
        assertTrue(e.getMessage().contains("invalid Redis URL"), e.getMessage());
        assertFalse(e.getMessage().contains("secret"), e.getMessage());
    }
}
