package io.partfs.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.meta.MetaUrl;
import io.partfs.engine.meta.RedisKvStore;
import io.partfs.engine.object.StorageUrl;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** What {@code --meta} and {@code --storage} accept, and that a mistyped URL never passes for a directory. */
class LocationUrlTest {
    @Test
    void aMistypedMetadataUrlIsAnErrorNotARelativeDirectory() {
        for (String url : new String[] {"rediss:/host:6379/1", "redis:localhost", "redis:/:topsecret@host/0", "rocksdb:/var/meta",
                "redis-sentinel:/h:26379/0#m"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> MetaUrl.parse(url), url);
            assertTrue(e.getMessage().startsWith("malformed metadata URL"), e.getMessage());
            assertTrue(e.getMessage().contains("write two slashes after"), e.getMessage());
            assertFalse(e.getMessage().contains("secret"), e.getMessage());
        }
        IllegalArgumentException other = assertThrows(IllegalArgumentException.class, () -> MetaUrl.parse("mysql:/db"));
        assertTrue(other.getMessage().startsWith("unsupported metadata URL 'mysql:/db'"), other.getMessage());
        IllegalArgumentException host = assertThrows(IllegalArgumentException.class, () -> MetaUrl.parse("rocksdb://meta/dir"));
        assertTrue(host.getMessage().contains("rocksdb:///dir (three slashes"), host.getMessage());
    }

    @Test
    void aRedisPortMustBeANumber() {
        for (String url : new String[] {"redis://localhost:abc/1", "redis://:topsecret@localhost:99999/1", "redis://",
                "redis://:top:secret/x@localhost:abc/1",
                "redis-sentinel://h1:26379,h2:x/0#m", "redis://:6379/0"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> MetaUrl.parse(url), url);
            assertTrue(e.getMessage().startsWith("invalid metadata URL"), e.getMessage());
            assertFalse(e.getMessage().contains("secret"), e.getMessage());
        }
        for (String url : new String[] {"redis://localhost/1", "redis://u:p@10.0.0.1:6379/0", "redis://[::1]:6379/0",
                "rediss://h:6380/0?timeout=90s", "redis-sentinel://:pw@h1:26379,h2:26379/0#main", "rediss-sentinel://h1:26379/0#main",
                "redis://:p@ss@h:1/0"}) {
            assertTrue(MetaUrl.parse(url).isRedis(), url);
        }
    }

    @Test
    void schemesAreCaseInsensitiveAndPathsStayPaths() {
        assertEquals("redis://127.0.0.1:6379/0", MetaUrl.parse("REDIS://127.0.0.1:6379/0").toString());
        assertEquals(Path.of("/var/meta"), MetaUrl.parse("RocksDB:///var/meta").rocksDir());
        assertEquals(Path.of("/var/meta"), MetaUrl.parse("/var/meta").rocksDir());
        assertEquals(Path.of("vol:1").toAbsolutePath(), MetaUrl.parse("vol:1").rocksDir(), "no slash after the colon: a path");
        assertEquals(Path.of("a/redis:/b").toAbsolutePath().normalize(), MetaUrl.parse("a/redis:/b").rocksDir());
        assertEquals("file:///srv/objects", StorageUrl.parse("FILE:///srv/objects").url());
        assertTrue(StorageUrl.parse("S3://bucket/prefix?endpoint=http://127.0.0.1:9000").isS3());
        assertEquals("file:///srv/objects", StorageUrl.parse("/srv/objects").url());
    }

    @Test
    void aMistypedStorageUrlIsAnErrorNotARelativeDirectory() {
        for (String url : new String[] {"s3:/bucket", "s3:bucket", "file:/srv/objects", "file:srv"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> StorageUrl.parse(url), url);
            assertTrue(e.getMessage().startsWith("malformed storage URL '" + url + "': write two slashes after"), e.getMessage());
        }
        IllegalArgumentException host = assertThrows(IllegalArgumentException.class, () -> StorageUrl.parse("file://srv/objects"));
        assertTrue(host.getMessage().contains("file:///dir (three slashes"), host.getMessage());
        IllegalArgumentException region = assertThrows(IllegalArgumentException.class, () -> StorageUrl.parse("s3://b?region="));
        assertTrue(region.getMessage().startsWith("empty region in storage URL"), region.getMessage());
        IllegalArgumentException http = assertThrows(IllegalArgumentException.class, () -> StorageUrl.parse("http://h:1/b"));
        assertTrue(http.getMessage().startsWith("unsupported storage URL"), http.getMessage());
    }

    /**
     * AWS S3 itself (no endpoint) in a URL without a region takes the environment's, as the AWS
     * SDKs do; an endpoint of its own never does, and a region in the URL always wins.
     */
    @Test
    void awsS3WithoutARegionTakesTheEnvironmentsOthersDoNot() {
        java.util.Map<String, String> env = java.util.Map.of("AWS_REGION", "eu-west-3", "AWS_DEFAULT_REGION", "ap-south-1");
        assertEquals("s3://bkt/p/?region=eu-west-3", StorageUrl.parse("s3://bkt/p", env::get).url());
        assertEquals("s3://bkt/p/?region=ap-south-1", StorageUrl.parse("s3://bkt/p", java.util.Map.of("AWS_DEFAULT_REGION", "ap-south-1")::get).url());
        assertEquals("s3://bkt/p/?region=us-east-1", StorageUrl.parse("s3://bkt/p", java.util.Map.of("AWS_REGION", " ")::get).url());
        assertEquals("s3://bkt/p/?region=sa-east-1", StorageUrl.parse("s3://bkt/p?region=sa-east-1", env::get).url());
        assertEquals("s3://bkt/p/?endpoint=http://minio:9000&region=us-east-1&path-style=true",
                StorageUrl.parse("s3://bkt/p?endpoint=http://minio:9000&path-style=true", env::get).url());
    }

    /** A volume records its directory unencoded: the recorded URL must read back to the same directory. */
    @Test
    void aDirectoryWithASpaceOrAPercentSignReadsBackAsRecorded() {
        StorageUrl first = StorageUrl.parse("/srv/my objects/a%20b#1");
        assertEquals("file:///srv/my objects/a%20b#1", first.url());
        assertEquals(first.url(), StorageUrl.parse(first.url()).url());
        assertEquals(Path.of("/var/my meta/a%20b"), MetaUrl.parse("rocksdb:///var/my meta/a%20b").rocksDir());
        assertEquals(Path.of("/var/my meta"), MetaUrl.parse(MetaUrl.parse("/var/my meta").toString()).rocksDir());
    }

    @Test
    void redactionHidesAPasswordHoweverManySlashesTheUrlHas() {
        assertEquals("redis://user:***@h:1/0", RedisKvStore.redact("redis://user:pw@h:1/0"));
        assertEquals("redis://:***@h:1/0", RedisKvStore.redact("redis://:pw@h:1/0"));
        assertEquals("redis://***@h:1/0", RedisKvStore.redact("redis://pw@h:1/0"));
        assertEquals("rediss:/:***@h:1/0", RedisKvStore.redact("rediss:/:pw@h:1/0"));
        assertEquals("redis:***@h", RedisKvStore.redact("redis:pw@h"));
        assertEquals("redis-sentinel://:***@h1:1,h2:2/0#m", RedisKvStore.redact("redis-sentinel://:pw@h1:1,h2:2/0#m"));
        assertEquals("redis://h:1/0", RedisKvStore.redact("redis://h:1/0"));
        // a password with '@', '/' or '#' not percent-encoded: lettuce refuses the URL, and the message shows none of it
        assertEquals("redis://:***@127.0.0.1:1/2", RedisKvStore.redact("redis://:p@s/s#1@127.0.0.1:1/2"));
        assertEquals("redis://u:***@h:1/0", RedisKvStore.redact("redis://u:a/b@c@h:1/0"));
    }
}
