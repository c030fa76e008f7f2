package io.partfs.engine.object;

import java.io.IOException;

/** The object does not exist. For data PartFS committed, this means the volume lost data. */
public final class ObjectNotFoundException extends IOException {
    private static final long serialVersionUID = 1L;

    public ObjectNotFoundException(String key) {
        super("object not found: " + key);
    }
}
