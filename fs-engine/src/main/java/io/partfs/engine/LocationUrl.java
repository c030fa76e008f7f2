package io.partfs.engine;

import java.nio.file.Path;
import java.util.Locale;
import java.util.Set;

/**
 * The first step of reading a location a user typed as {@code --meta} or {@code --storage}: a
 * URL of one of the schemes the option knows, or a plain directory path. A mistyped URL must
 * not pass for a relative path: {@code s3:/bucket} or {@code rediss:/host} would otherwise
 * become a directory of that name under the working directory, and {@code partfs format}
 * would make a volume in it.
 */
public final class LocationUrl {
    private LocationUrl() {
    }

    /**
     * {@code text} with its scheme in lower case when it is a URL of one of {@code schemes}
     * (RFC 3986: schemes are case-insensitive), or null when it is a path.
     *
     * @param what the option's subject for the message, e.g. "metadata"
     * @param shown {@code text} as an error may show it (passwords removed)
     * @param forms the forms the option takes, for the message
     * @throws IllegalArgumentException for a URL of another scheme, or one of {@code schemes}
     *     not followed by {@code //}
     */
    public static String normalize(String text, Set<String> schemes, String what, String shown, String forms) {
        int colon = text.indexOf(':');
        if (colon < 1 || !text.substring(0, colon).matches("[a-zA-Z][a-zA-Z0-9+.-]*")) {
            return null; // no scheme: a path (relative paths may hold ':' after a '/')
        }
        String scheme = text.substring(0, colon).toLowerCase(Locale.ROOT);
        String rest = text.substring(colon + 1);
        if (schemes.contains(scheme)) {
            if (!rest.startsWith("//")) {
                throw new IllegalArgumentException("malformed " + what + " URL '" + shown + "': write two slashes after '"
                        + scheme + ":'; use " + forms);
            }
            return scheme + ":" + rest;
        }
        if (rest.startsWith("/")) {
            throw new IllegalArgumentException("unsupported " + what + " URL '" + shown + "': use " + forms);
        }
        return null; // "name:thing" with no slash after the colon: a relative path, as the shell would take it
    }

    /**
     * The directory of a {@code file:} or {@code rocksdb:} URL, as {@link #normalize} returned
     * it: the text after the two slashes, taken as it is. No percent-decoding: volumes record
     * their directory that way ({@code file:///srv/my objects}), so a path with a space, a
     * '%' or a '#' reads back as written.
     *
     * @throws IllegalArgumentException when a host stands between the slashes and the path
     */
    public static Path literalPath(String url, String what, String forms) {
        String scheme = url.substring(0, url.indexOf(':'));
        String path = url.substring(scheme.length() + 3);
        if (!path.startsWith("/")) {
            throw new IllegalArgumentException("malformed " + what + " URL '" + url + "': a directory is written " + scheme
                    + ":///dir (three slashes, an absolute path) or as a plain path; use " + forms);
        }
        return Path.of(path).toAbsolutePath().normalize();
    }
}
