package io.partfs.engine.testing;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A self-signed certificate for 127.0.0.1 (RSA 2048, valid two days) made by the JDK's keytool,
 * as a private CA's server certificate looks to a client that does not know the CA: a PKCS12
 * key store for Java servers, and PEM files of the certificate (the "CA bundle" a client is
 * given to trust it) and of its private key (PKCS#8) for servers such as redis-server.
 */
public record TestCertificate(Path keyStore, String password, Path certificatePem, Path privateKeyPem) {
    /** Makes one in {@code dir}. */
    public static TestCertificate create(Path dir) throws Exception {
        String password = "partfs-test-keystore";
        Path keyStore = dir.resolve("server.p12");
        Path cert = dir.resolve("ca.pem");
        Path key = dir.resolve("server.key");
        keytool("-genkeypair", "-alias", "server", "-keyalg", "RSA", "-keysize", "2048", "-validity", "2",
                "-dname", "CN=127.0.0.1", "-ext", "SAN=IP:127.0.0.1", "-storetype", "PKCS12",
                "-keystore", keyStore.toString(), "-storepass", password, "-keypass", password);
        keytool("-exportcert", "-rfc", "-alias", "server", "-keystore", keyStore.toString(), "-storepass", password,
                "-file", cert.toString());
        java.security.KeyStore ks = java.security.KeyStore.getInstance("PKCS12");
        try (var in = Files.newInputStream(keyStore)) {
            ks.load(in, password.toCharArray());
        }
        byte[] pkcs8 = ks.getKey("server", password.toCharArray()).getEncoded(); // keytool exports no private key
        Files.writeString(key, "-----BEGIN PRIVATE KEY-----\n"
                + java.util.Base64.getMimeEncoder(64, "\n".getBytes(java.nio.charset.StandardCharsets.US_ASCII)).encodeToString(pkcs8)
                + "\n-----END PRIVATE KEY-----\n");
        return new TestCertificate(keyStore, password, cert, key);
    }

    private static void keytool(String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "keytool").toString());
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            p.destroyForcibly();
            throw new IOException("keytool " + args[0] + " failed: " + out);
        }
    }
}
