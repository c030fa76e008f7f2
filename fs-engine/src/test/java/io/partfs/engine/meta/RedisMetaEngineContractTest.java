package io.partfs.engine.meta;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.Attr;
import io.partfs.engine.testing.RedisServer;
import java.io.IOException;
import java.util.List;
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

    /**
     * Mounts on machines whose clocks are two hours off (one ahead, one behind) still see each
     * other alive and agree on the trash: heartbeats are written and judged, and trash hours
     * named and expired, by Redis's clock. Before, each mount used its own: the one ahead
     * removed the others' sessions as crashed (their flock(2) locks, and the unlinked files
     * they held open, with them) and was the others' after its own, the one behind was removed
     * by them, and the one ahead emptied the others' trash hours early.
     */
    @Test
    void mountsWhoseClocksDisagreeAgreeOnWhoIsAliveAndWhatTrashIsDue() throws Exception {
        long twoHours = java.time.Duration.ofHours(2).toNanos();
        meta.setTrashHours(1); // read by the mounts as they load
        // sharing meta's store: not closed
        MetaEngine ahead = new MetaEngine(meta.store(), () -> io.partfs.engine.TimeSource.SYSTEM.nowNanos() + twoHours, true);
        MetaEngine behind = new MetaEngine(meta.store(), () -> io.partfs.engine.TimeSource.SYSTEM.nowNanos() - twoHours, true);
        MetaEngine right = new MetaEngine(meta.store());
        java.util.Set<Long> ids = new java.util.TreeSet<>();
        for (MetaEngine m : List.of(ahead, behind, right)) {
            m.load();
            ids.add(m.registerSession("mount"));
        }
        for (MetaEngine m : List.of(ahead, behind, right)) {
            assertTrue(m.heartbeat());
            assertEquals(List.of(), m.removeStaleSessions(), "no mount is taken for crashed");
            assertEquals(ids, m.liveSessions().keySet());
            long skew = Math.abs(m.volumeNowMillis() - System.currentTimeMillis());
            assertTrue(skew < 5_000, "every mount's volume clock is Redis's (on this machine): " + skew + " ms off");
        }

        long hourMillis = 3_600_000;
        long hourBefore = System.currentTimeMillis() / hourMillis * hourMillis;
        for (MetaEngine m : List.of(ahead, behind)) {
            Attr f = m.mknod(ROOT, "f", io.partfs.engine.FileType.FILE, 0644, 0, 0, 0, null);
            m.commitWrite(f.ino(), List.of(new MetaEngine.ChunkSlice(0, new Slice(m.nextSliceId(), 4096, 0, 4096, 0))));
            m.unlink(ROOT, "f");
            m.deleteFileData(f.ino());
        }
        long hourAfter = System.currentTimeMillis() / hourMillis * hourMillis;
        long freedIn = right.trash().oldestHourStartMillis();
        assertTrue(freedIn == hourBefore || freedIn == hourAfter, "both freed in this hour of Redis's clock, not of theirs: "
                + java.time.Instant.ofEpochMilli(freedIn));
        for (MetaEngine m : List.of(ahead, behind, right)) {
            assertEquals(0, m.expireTrash(), "an hour's trash time is not over for anyone");
        }
        assertEquals(2, right.trash().slices());
    }

    /**
     * A Redis whose ACL (or a renamed command) refuses TIME: heartbeats and the trash fall back to
     * this machine's clock, with a warning, instead of failing every heartbeat (which would have
     * let the session lapse).
     */
    @Test
    void aRedisThatRefusesTimeLeavesHeartbeatsOnThisMachinesClock() throws Exception {
        assertEquals("+OK", redis.command("ACL SETUSER notime on >secret ~* &* +@all -time"));
        try (KvStore kv = new RedisKvStore(redis.url(db).replace("redis://", "redis://notime:secret@"))) {
            MetaEngine m = new MetaEngine(kv);
            m.load();
            long sid = m.registerSession("mount");
            assertTrue(m.heartbeat());
            assertTrue(m.liveSessions().containsKey(sid));
            assertTrue(kv.serverTimeMillis().isEmpty(), "no store clock then");
            assertTrue(Math.abs(m.volumeNowMillis() - System.currentTimeMillis()) < 5_000);
        } finally {
            redis.command("ACL DELUSER notime");
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
