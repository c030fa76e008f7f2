package io.partfs.engine.fuse;

import io.partfs.engine.meta.MetaEngine;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The name the kernel last knew each inode by, for drivers that get inode numbers but must tell
 * a {@link io.partfs.engine.spi.PathObserver} paths. An inode is known from the reply that gave it
 * to the kernel (lookup, create, readdirplus, ...) until the kernel forgets it, counted as the
 * kernel counts it. A file with several hard links has the name it was last looked up by; an
 * observer never depends on that being the one a process used, since it checks content by
 * inode, size and data version.
 */
final class NodeNames {
    private record Node(long parent, String name, long lookups) {
    }

    private static final int MAX_DEPTH = 4096;

    private final ConcurrentHashMap<Long, Node> nodes = new ConcurrentHashMap<>();

    /** The kernel got {@code ino} as {@code name} in {@code parent} (one more lookup to forget). */
    void looked(long parent, String name, long ino) {
        nodes.compute(ino, (k, n) -> new Node(parent, name, n == null ? 1 : n.lookups + 1));
    }

    /** The kernel dropped {@code count} of its lookups of {@code ino}; true when it holds none now. */
    boolean forget(long ino, long count) {
        return nodes.computeIfPresent(ino, (k, n) -> n.lookups <= count ? null : new Node(n.parent, n.name, n.lookups - count)) == null;
    }

    /** {@code ino} was renamed to {@code name} in {@code parent}. */
    void moved(long ino, long parent, String name) {
        nodes.computeIfPresent(ino, (k, n) -> new Node(parent, name, n.lookups));
    }

    /**
     * Whether the kernel knows {@code ino} as a file of a committed MergeTree part: its
     * directory's name is a part name ({@code tmp_...} directories of parts being written are not).
     */
    boolean inPart(long ino) {
        Node n = nodes.get(ino);
        Node dir = n == null ? null : nodes.get(n.parent());
        return dir != null && PartPrefetcher.PART.matcher(dir.name()).matches();
    }

    /** The mount-relative path of {@code ino} ("" for the root), or null when not known. */
    String path(long ino) {
        if (ino == MetaEngine.ROOT) {
            return "";
        }
        String[] parts = new String[16];
        int depth = 0;
        long cur = ino;
        while (cur != MetaEngine.ROOT) {
            Node n = nodes.get(cur);
            if (n == null || depth == MAX_DEPTH) {
                return null;
            }
            if (depth == parts.length) {
                parts = java.util.Arrays.copyOf(parts, depth * 2);
            }
            parts[depth++] = n.name;
            cur = n.parent;
        }
        StringBuilder sb = new StringBuilder();
        for (int i = depth - 1; i >= 0; i--) {
            sb.append(parts[i]);
            if (i > 0) {
                sb.append('/');
            }
        }
        return sb.toString();
    }

    /** The path of {@code name} in directory {@code parent}, or null when the directory is not known. */
    String path(long parent, String name) {
        String p = path(parent);
        return p == null ? null : p.isEmpty() ? name : p + "/" + name;
    }
}
