package io.partfs.engine.testing;

import java.io.IOException;

/**
 * The servers a test class needs for a metadata/object-store pair, started in its
 * {@code @BeforeAll} and stopped in {@code @AfterAll}.
 */
public final class Backends implements AutoCloseable {
    public final RedisServer redis;
    public final S3Server s3;

    private Backends(RedisServer redis, S3Server s3) {
        this.redis = redis;
        this.s3 = s3;
    }

    public static Backends start(TestVolume.Meta meta, TestVolume.Store store) throws Exception {
        return start(meta, store, new String[0]);
    }

    /** As {@link #start(TestVolume.Meta, TestVolume.Store)}, Redis with {@code redisArgs} too (say {@code --appendonly yes}). */
    public static Backends start(TestVolume.Meta meta, TestVolume.Store store, String... redisArgs) throws Exception {
        java.util.List<String> args = new java.util.ArrayList<>(java.util.List.of("--databases", "1000"));
        args.addAll(java.util.List.of(redisArgs));
        RedisServer r = meta == TestVolume.Meta.REDIS ? RedisServer.start(args.toArray(String[]::new)) : null;
        try {
            S3Server s = store == TestVolume.Store.S3 ? S3Server.start() : null;
            return new Backends(r, s);
        } catch (Exception e) {
            if (r != null) {
                r.close();
            }
            throw e;
        }
    }

    @Override
    public void close() throws Exception {
        try {
            if (redis != null) {
                redis.close();
            }
        } finally {
            if (s3 != null) {
                s3.close();
            }
        }
    }

    public static void closeQuietly(Backends b) throws IOException {
        if (b == null) {
            return;
        }
        try {
            b.close();
        } catch (IOException | RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new IOException(e);
        }
    }
}
