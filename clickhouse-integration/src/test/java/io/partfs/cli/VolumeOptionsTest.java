package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.object.StorageUrl;
import java.util.function.UnaryOperator;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class VolumeOptionsTest {
    @Test
    void anEmptyCaBundleVariableMeansNoBundle() {
        VolumeOptions v = new VolumeOptions();
        v.caBundle = Path.of(""); // what picocli makes of AWS_CA_BUNDLE= (set, empty)
        assertNull(v.credentials().caBundle(), "an empty $AWS_CA_BUNDLE is not the current directory");
        v.caBundle = Path.of("/etc/ssl/private-ca.pem");
        assertEquals(Path.of("/etc/ssl/private-ca.pem"), v.credentials().caBundle());
    }

    /**
     * mount --storage against the URL a volume on AWS S3 recorded: without region= in it, the
     * URL takes $AWS_REGION; a volume recorded with us-east-1 (formatted before that, or where no
     * region was set) still matches, one recorded in another region only with that region.
     */
    @Test
    void anAwsUrlWithoutRegionMatchesTheVolumesRecordedRegionOrUsEast1() {
        UnaryOperator<String> euWest1 = k -> k.equals("AWS_REGION") ? "eu-west-1" : null;
        UnaryOperator<String> none = k -> null;
        String usEast1 = StorageUrl.parse("s3://bucket/vol?region=us-east-1", none).url();
        String inEuWest1 = StorageUrl.parse("s3://bucket/vol?region=eu-west-1", none).url();
        String inEuCentral1 = StorageUrl.parse("s3://bucket/vol?region=eu-central-1", none).url();
        assertTrue(VolumeOptions.sameStorage(usEast1, "s3://bucket/vol", euWest1), "formatted before $AWS_REGION was read");
        assertTrue(VolumeOptions.sameStorage(inEuWest1, "s3://bucket/vol", euWest1));
        assertTrue(VolumeOptions.sameStorage(usEast1, "s3://bucket/vol", none));
        assertFalse(VolumeOptions.sameStorage(inEuCentral1, "s3://bucket/vol", euWest1), "another region: give region=");
        assertTrue(VolumeOptions.sameStorage(inEuCentral1, "s3://bucket/vol?region=eu-central-1", euWest1));
        assertFalse(VolumeOptions.sameStorage(usEast1, "s3://other/vol", euWest1), "another bucket");
        String minio = StorageUrl.parse("s3://bucket/vol?endpoint=http://minio:9000&path-style=true", none).url();
        assertTrue(VolumeOptions.sameStorage(minio, "s3://bucket/vol?endpoint=http://minio:9000&path-style=true", euWest1),
                "an endpoint of its own never takes $AWS_REGION");
    }
}
