package io.partfs.engine.object;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.testing.FaultyProxy;
import io.partfs.engine.testing.S3Server;
import java.util.List;
import java.util.Locale;
import org.junit.jupiter.api.Test;

/**
 * Server-side encryption named in the storage URL ({@code sse=AES256}, or {@code sse=aws:kms}
 * with {@code sse-kms-key-id}), for buckets whose policy refuses uploads that do not ask for it:
 * every upload, single and multipart, carries the headers (seen by a proxy in front of s3proxy,
 * which checks them: aws:kms without a key id is refused there) and reads back; the URL keeps
 * them, so every later mount of the volume asks for the same; bad values fail in one line.
 */
class S3ServerSideEncryptionTest {
    private static final String KEY_ID = "arn:aws:kms:us-east-1:123456789012:key/partfs-test";

    @Test
    void everyUploadAsksForTheEncryptionTheUrlNames() throws Exception {
        try (S3Server server = S3Server.start(); FaultyProxy proxy = new FaultyProxy(server.endpoint())) {
            String url = "s3://sse-kms/vol?endpoint=" + proxy.endpoint() + "&path-style=true&sse=aws:kms&sse-kms-key-id=" + KEY_ID;
            StorageUrl parsed = StorageUrl.parse(url);
            assertEquals(parsed.url(), StorageUrl.parse(parsed.url()).url(), "as the volume's format records it, read back the same");
            S3Config kms = server.config("sse-kms").endpoint(proxy.endpoint()).serverSideEncryption("aws:kms", KEY_ID)
                    .multipart(5 << 20, 5 << 20).build();
            try (S3ObjectStore direct = new S3ObjectStore(server.config("sse-kms").build())) {
                direct.ensureBucket();
            }
            byte[] small = new byte[] {1, 2, 3};
            byte[] large = new byte[(6 << 20) + 1]; // past the threshold: a multipart upload
            new java.util.Random(3).nextBytes(large);
            for (byte[] data : List.of(small, large)) {
                try (S3ObjectStore s3 = new S3ObjectStore(kms)) { // a new client: the upload opens the connection the proxy sees first
                    s3.put("o" + data.length, data);
                    assertArrayEquals(data, s3.get("o" + data.length, 0, -1));
                }
            }
            List<String> heads = proxy.requestHeads().stream().map(h -> h.toLowerCase(Locale.ROOT)).toList();
            assertEquals(2, heads.size(), heads.toString());
            assertTrue(heads.get(0).startsWith("put ") && heads.get(1).startsWith("post "), "a PUT, then a multipart upload's start: " + heads);
            for (String head : heads) {
                assertTrue(head.contains("\nx-amz-server-side-encryption: aws:kms"), head);
                assertTrue(head.contains("\nx-amz-server-side-encryption-aws-kms-key-id: " + KEY_ID.toLowerCase(Locale.ROOT)), head);
            }
            S3Config noKey = server.config("sse-kms").serverSideEncryption("aws:kms", null).build();
            try (S3ObjectStore s3 = new S3ObjectStore(noKey)) {
                ObjectStoreException refused = assertThrows(ObjectStoreException.class, () -> s3.put("nokey", small));
                assertTrue(refused.getMessage().contains("requires x-amz-server-side-encryption-aws-kms-key-id"), refused.getMessage());
            }
            try (S3ObjectStore s3 = new S3ObjectStore(server.config("sse-kms").serverSideEncryption("AES256", null).build())) {
                s3.put("aes", small);
                assertArrayEquals(small, s3.get("aes", 0, -1));
            }
        }
    }

    @Test
    void badEncryptionSettingsFailInOneLine() {
        IllegalArgumentException des = assertThrows(IllegalArgumentException.class, () -> StorageUrl.parse("s3://bkt/p?sse=des"));
        assertEquals("sse must be AES256 (keys S3 manages) or aws:kms (keys KMS manages), not 'des'", des.getMessage());
        IllegalArgumentException key = assertThrows(IllegalArgumentException.class,
                () -> StorageUrl.parse("s3://bkt/p?sse=AES256&sse-kms-key-id=k"));
        assertEquals("sse-kms-key-id goes with sse=aws:kms: add it, or leave the key id out", key.getMessage());
    }
}
