package io.partfs.engine.spi;

import io.partfs.engine.Attr;

/**
 * The extension point of the filesystem: sees, by path, the file lifecycle events of one mount
 * and may answer whole-file reads of the files it cares about. The part-metadata cache plugs in
 * here; the filesystem knows nothing of what it does.
 *
 * <p>Paths are relative to the mount root, without a leading '/'. Calls come after the
 * operation succeeded, from any FUSE thread; an observer must be thread-safe and must not
 * throw (failures are logged and ignored). Correctness must not depend on seeing events in
 * order: a cached copy is served only when it matches the file's current {@link Attr}
 * ({@code ino}, {@code size}, {@code dataVersion}).
 */
public interface PathObserver {
    /** Whether reads of this file should go through {@link #cached} and {@link #store}. */
    boolean caches(String path);

    /** The whole content of {@code path} if a copy current for {@code attr} is held, else null. */
    byte[] cached(String path, Attr attr);

    /** The whole content of {@code path} as of {@code attr}, after a miss or a committed write. */
    void store(String path, Attr attr, byte[] content);

    /** {@code from} (a file or a directory and everything below it) is now {@code to}. */
    void renamed(String from, String to);

    /** {@code path} (a file, or a directory and everything below it) is gone, or its content changed. */
    void removed(String path);

    /** {@code added} is a new hard link of the file {@code existing}, whose attributes are {@code attr}. */
    void linked(String existing, String added, Attr attr);
}
