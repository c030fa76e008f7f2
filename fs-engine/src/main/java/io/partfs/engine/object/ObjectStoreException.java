package io.partfs.engine.object;

import java.io.IOException;

/** The object store failed or refused a request. The message says what to check; it never holds secrets. */
public class ObjectStoreException extends IOException {
    private static final long serialVersionUID = 1L;

    /** Why the request failed, so callers can tell a user what to do. */
    public enum Kind {
        /** Credentials are wrong or lack permission: retrying will not help. */
        ACCESS_DENIED,
        /** The bucket does not exist. */
        NO_SUCH_BUCKET,
        /** The service could not be reached or kept failing after retries. */
        UNAVAILABLE,
        /** Anything else the service rejected. */
        OTHER
    }

    private final Kind kind;

    public ObjectStoreException(Kind kind, String message, Throwable cause) {
        super(message, cause);
        this.kind = kind;
    }

    public Kind kind() {
        return kind;
    }
}
