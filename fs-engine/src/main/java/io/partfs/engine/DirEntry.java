package io.partfs.engine;

/** One name in a directory: what it points at, and the type stored with the entry. */
public record DirEntry(String name, long ino, FileType type) {
}
