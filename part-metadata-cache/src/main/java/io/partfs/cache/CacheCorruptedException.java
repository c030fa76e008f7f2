package io.partfs.cache;

import java.io.IOException;

/** The part-metadata cache directory cannot be opened. It holds only copies: deleting it loses no table data. */
public final class CacheCorruptedException extends IOException {
    private static final long serialVersionUID = 1L;

    public CacheCorruptedException(String message, Throwable cause) {
        super(message, cause);
    }
}
