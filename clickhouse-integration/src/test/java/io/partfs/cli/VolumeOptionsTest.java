package io.partfs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

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
}
