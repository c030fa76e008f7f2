package io.partfs.engine.object;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateException;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.Arrays;
import java.util.Collection;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;

/**
 * Certificate authorities of a PEM file, trusted besides the JVM's own: for S3 endpoints whose
 * TLS certificate a private CA signed (StorageGRID, MinIO on premises), without replacing the
 * JVM's trust store (and the JVM options around it) to add one.
 */
public final class CaBundle {
    private CaBundle() {
    }

    /**
     * Trust managers that accept a server the JVM's default CAs accept, or one the CAs in
     * {@code pem} accept.
     *
     * @throws IOException with a one-line message when the file is missing or holds no certificate
     */
    public static TrustManager[] trustManagers(Path pem) throws IOException {
        Collection<? extends Certificate> certs;
        try (InputStream in = Files.newInputStream(pem)) {
            certs = CertificateFactory.getInstance("X.509").generateCertificates(in);
        } catch (NoSuchFileException e) {
            throw new IOException("CA bundle " + pem + " does not exist: give a PEM file of the CA certificates that sign the server's");
        } catch (CertificateException e) {
            throw new IOException("CA bundle " + pem + " is not a PEM file of certificates (" + e.getMessage() + ")");
        }
        if (certs.isEmpty()) {
            throw new IOException("CA bundle " + pem + " holds no certificate: give a PEM file of the CA certificates");
        }
        try {
            KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
            store.load(null, null);
            int i = 0;
            for (Certificate c : certs) {
                store.setCertificateEntry("ca-" + i++, c);
            }
            return new TrustManager[] {new Either(x509(null), x509(store))};
        } catch (GeneralSecurityException e) {
            throw new IOException("cannot use the CA bundle " + pem + ": " + e.getMessage(), e);
        }
    }

    /** The X.509 trust manager of {@code store}, or of the JVM's default trust store when null. */
    private static X509TrustManager x509(KeyStore store) throws GeneralSecurityException {
        TrustManagerFactory f = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        f.init(store);
        for (TrustManager m : f.getTrustManagers()) {
            if (m instanceof X509TrustManager x) {
                return x;
            }
        }
        throw new GeneralSecurityException("no X.509 trust manager");
    }

    /** Trusts what either of two trust managers trusts; reports the second one's refusal. */
    private record Either(X509TrustManager first, X509TrustManager second) implements X509TrustManager {
        /** One check of a trust manager. */
        private interface Check {
            void run(X509TrustManager m) throws CertificateException;
        }

        private void either(Check check) throws CertificateException {
            try {
                check.run(first);
            } catch (CertificateException e) {
                check.run(second);
            }
        }

        @Override
        public void checkClientTrusted(X509Certificate[] chain, String authType) throws CertificateException {
            either(m -> m.checkClientTrusted(chain, authType));
        }

        @Override
        public void checkServerTrusted(X509Certificate[] chain, String authType) throws CertificateException {
            either(m -> m.checkServerTrusted(chain, authType));
        }

        @Override
        public X509Certificate[] getAcceptedIssuers() {
            X509Certificate[] a = first.getAcceptedIssuers();
            X509Certificate[] b = second.getAcceptedIssuers();
            X509Certificate[] all = Arrays.copyOf(a, a.length + b.length);
            System.arraycopy(b, 0, all, a.length, b.length);
            return all;
        }
    }
}
