package io.partfs.engine.meta;

import io.partfs.engine.Attr;
import io.partfs.engine.DirEntry;
import io.partfs.engine.FileType;
import java.io.IOException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** A walk of a directory tree through the metadata, breadth first, one readdir per directory. */
public final class TreeWalk {
    private TreeWalk() {
    }

    /**
     * Told each directory's inode, path, entries other than directories and how many
     * subdirectories it has; false stops the walk.
     */
    @FunctionalInterface
    public interface DirVisitor {
        boolean visit(long dir, String path, List<DirEntry> others, int subdirectories) throws IOException;
    }

    /**
     * Every directory under {@code dir} (itself first, known by {@code path}) until
     * {@code visitor} says stop. Symlinks are not followed; a directory deleted while the walk
     * is on its way to it is skipped.
     */
    public static void breadthFirst(MetaEngine meta, long dir, String path, DirVisitor visitor) throws IOException {
        ArrayDeque<Map.Entry<Long, String>> dirs = new ArrayDeque<>();
        dirs.add(Map.entry(dir, path));
        while (!dirs.isEmpty()) {
            Map.Entry<Long, String> d = dirs.poll();
            List<DirEntry> entries;
            try {
                entries = meta.readdir(d.getKey());
            } catch (io.partfs.engine.FsException.NoSuchEntry | io.partfs.engine.FsException.NotDirectory e) {
                if (d.getKey() == dir) {
                    throw e;
                }
                continue;
            }
            List<DirEntry> others = new ArrayList<>();
            int subdirectories = 0;
            for (DirEntry e : entries) {
                if (e.type() == FileType.DIRECTORY) {
                    dirs.add(Map.entry(e.ino(), d.getValue() + "/" + e.name()));
                    subdirectories++;
                } else {
                    others.add(e);
                }
            }
            if (!visitor.visit(d.getKey(), d.getValue(), others, subdirectories)) {
                return;
            }
        }
    }

    /** Attributes read in one request of the metadata engine. */
    private static final int BATCH = 512;

    /** Told of a regular file, its attributes as just read. */
    @FunctionalInterface
    public interface FileVisitor {
        void file(Attr a) throws IOException;
    }

    /**
     * The regular files among {@code entries} (a directory's, as a walk gives them), their
     * attributes read {@value #BATCH} at a time. A file with several links is given at its first
     * name only ({@code linked} remembers such files across the directories of one walk); a file
     * deleted meanwhile not at all.
     */
    public static void regularFiles(MetaEngine meta, List<DirEntry> entries, Set<Long> linked, FileVisitor visitor)
            throws IOException {
        List<Long> inos = new ArrayList<>();
        for (DirEntry e : entries) {
            if (e.type() == FileType.FILE) {
                inos.add(e.ino());
            }
        }
        for (int i = 0; i < inos.size(); i += BATCH) {
            for (Attr a : meta.attrs(inos.subList(i, Math.min(inos.size(), i + BATCH)))) {
                if (a != null && (a.nlink() <= 1 || linked.add(a.ino()))) {
                    visitor.file(a);
                }
            }
        }
    }
}
