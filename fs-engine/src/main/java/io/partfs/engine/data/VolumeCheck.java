package io.partfs.engine.data;

import io.partfs.engine.Attr;
import io.partfs.engine.DirEntry;
import io.partfs.engine.FileType;
import io.partfs.engine.VolumeFormat;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.Slice;
import io.partfs.engine.object.ObjectStore;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * {@code partfs fsck} and {@code partfs gc}: every slice the metadata refers to against the
 * block objects in the store.
 *
 * <p>The slices are found by chunk key, not through the tree: a file renamed from a directory
 * not yet read into one already read, as ClickHouse does with parts all the time, would be missed
 * by a walk, and its objects taken for leaks. Every referenced slice is kept in memory (about
 * 100 bytes each), then the volume's block objects are listed once and matched to their slices.
 * A block a slice needs but the store lacks is <em>missing</em> (its file reads back wrong); an
 * object no slice and no pending deletion refers to is <em>leaked</em> (it only costs storage),
 * and counts as such only when it is older than {@link Options#minAgeMillis}, since a writer
 * uploads blocks before it commits the slice that refers to them. fsck also walks the tree from
 * the root, for counts and for entries whose inode is gone. All of it may run while the volume
 * is mounted: a file changed or deleted meanwhile can look broken, which {@link #stillBroken}
 * rechecks against the metadata as it is then.
 */
public final class VolumeCheck {
    /** Inodes whose attributes are read per request. */
    private static final int BATCH = 512;

    /** Whether to walk the tree (fsck), and to delete leaked objects older than {@code minAgeMillis} (gc). */
    public record Options(boolean walkTree, boolean deleteLeaked, long minAgeMillis) {
    }

    /** Told how far each pass is, every few thousand items. */
    @FunctionalInterface
    public interface Progress {
        void at(String phase, long done);
    }

    /** What a check found. */
    public static final class Report {
        public long directories;
        public long files;
        public long symlinks;
        public long chunks;
        public long slices;
        /** Blocks the files need, and how many of them the store lacks. */
        public long blocks;
        public long missingBlocks;
        /** Files with a missing block (inode numbers), before {@link #stillBroken}. */
        public final Set<Long> brokenFiles = new TreeSet<>();
        /** Directory entries whose inode does not exist. */
        public final List<Dangling> danglingEntries = new ArrayList<>();
        /** Objects listed, and those of them that are leaked: count, bytes, deleted. */
        public long objects;
        public long leaked;
        public long leakedBytes;
        public long deleted;
        /** Unreferenced objects younger than the minimum age (perhaps a write in progress). */
        public long young;
        /** Objects of slices awaiting deletion, and files unlinked but still open somewhere. */
        public long pendingObjects;
        public long pendingFiles;
        /** Keys under the chunk prefix that are not block keys (left alone). */
        public long foreign;
    }

    /** Entry {@code name} of directory {@code parent}, at {@code path}, whose inode does not exist. */
    public record Dangling(long parent, String name, String path) {
    }

    /** A referenced slice: its size, a file that uses it, and how many of its blocks were found. */
    private static final class SliceUse {
        final int size;
        final long ino;
        int found;

        SliceUse(int size, long ino) {
            this.size = size;
            this.ino = ino;
        }
    }

    private final MetaEngine meta;
    private final ObjectStore store;
    private final String volume;
    private final int blockSize;
    private final Progress progress;

    public VolumeCheck(MetaEngine meta, ObjectStore store, Progress progress) {
        this.meta = meta;
        this.store = store;
        VolumeFormat f = meta.volumeFormat();
        this.volume = f.name();
        this.blockSize = f.blockSize();
        this.progress = progress;
    }

    /**
     * Lists every slice by its chunk key (and, with {@code options.walkTree}, walks the tree
     * too, for counts and dangling entries), then every object; deletes leaked objects only when
     * {@code options} say so.
     */
    public Report run(Options options) throws IOException {
        long started = System.currentTimeMillis();
        Report report = new Report();
        if (options.walkTree()) {
            walk(report);
        }
        Map<Long, SliceUse> used = new HashMap<>();
        meta.forEachChunk((ino, slices) -> {
            addSlices(ino, slices, report, used);
            if (++report.chunks % 10_000 == 0) {
                progress.at("chunks", report.chunks);
            }
        });
        report.pendingFiles = meta.pendingFileDeletions().size();
        // read after the chunks: a file deleted meanwhile has its slices here by then
        Set<Long> pendingSlices = new HashSet<>();
        for (long[] s : meta.pendingSliceDeletions(Integer.MAX_VALUE)) {
            pendingSlices.add(s[0]);
        }
        long oldEnough = started - options.minAgeMillis();
        store.scan(volume + "/chunks/", o -> {
            report.objects++;
            if (report.objects % 10_000 == 0) {
                progress.at("objects", report.objects);
            }
            long[] k = parseBlockKey(o.key());
            if (k == null || !ChunkStore.blockKey(volume, k[0], (int) k[1], (int) k[2]).equals(o.key())) {
                report.foreign++;
                return;
            }
            SliceUse use = used.get(k[0]);
            if (use != null && k[1] < ChunkStore.blocks(blockSize, use.size)
                    && k[2] == ChunkStore.blockLength(blockSize, use.size, (int) k[1])) {
                use.found++;
            } else if (pendingSlices.contains(k[0])) {
                report.pendingObjects++;
            } else if (o.modifiedMillis() > oldEnough) {
                report.young++;
            } else {
                report.leaked++;
                report.leakedBytes += o.size();
                if (options.deleteLeaked()) {
                    store.delete(o.key());
                    report.deleted++;
                }
            }
        });
        for (SliceUse u : used.values()) {
            int missing = ChunkStore.blocks(blockSize, u.size) - u.found;
            if (missing > 0) {
                report.missingBlocks += missing;
                report.brokenFiles.add(u.ino);
            }
        }
        return report;
    }

    /** Every directory from the root: counts what is there and finds entries whose inode is gone. */
    private void walk(Report report) throws IOException {
        Set<Long> linked = new HashSet<>(); // files with more than one link, counted once
        eachDirectory((dir, path, others) -> {
            report.directories++;
            for (int i = 0; i < others.size(); i += BATCH) {
                List<DirEntry> batch = others.subList(i, Math.min(others.size(), i + BATCH));
                List<Attr> attrs = meta.attrs(batch.stream().map(DirEntry::ino).toList());
                long before = report.files;
                for (int j = 0; j < batch.size(); j++) {
                    DirEntry e = batch.get(j);
                    Attr a = attrs.get(j);
                    if (a == null) {
                        report.danglingEntries.add(new Dangling(dir, e.name(), path + "/" + e.name()));
                    } else if (a.nlink() > 1 && !linked.add(a.ino())) {
                        continue; // another name of a file counted already
                    } else if (a.type() == FileType.FILE) {
                        report.files++;
                    } else if (a.type() == FileType.SYMLINK) {
                        report.symlinks++;
                    }
                }
                if (report.files / 10_000 != before / 10_000) {
                    progress.at("files", report.files);
                }
            }
            return true;
        });
    }

    /** Every directory from the root, breadth first, until {@code visitor} says stop. */
    private void eachDirectory(io.partfs.engine.meta.TreeWalk.DirVisitor visitor) throws IOException {
        io.partfs.engine.meta.TreeWalk.breadthFirst(meta, MetaEngine.ROOT, "", visitor);
    }

    private void addSlices(long ino, List<Slice> slices, Report report, Map<Long, SliceUse> used) {
        for (Slice s : slices) {
            if (!s.isHole() && used.putIfAbsent(s.id(), new SliceUse(s.size(), ino)) == null) {
                report.slices++;
                report.blocks += ChunkStore.blocks(blockSize, s.size());
            }
        }
    }

    /**
     * Of {@code inos} reported broken, those that still are: their slices read again from
     * {@code current} (the metadata as it is now) and each block asked for by name. A file
     * deleted or rewritten since the first pass drops out.
     */
    public List<Long> stillBroken(MetaEngine current, Collection<Long> inos) throws IOException {
        List<Long> out = new ArrayList<>();
        List<Long> all = new ArrayList<>(inos);
        for (int i = 0; i < all.size(); i += BATCH) {
            for (MetaEngine.FileSlices f : current.fileSlices(all.subList(i, Math.min(all.size(), i + BATCH)))) {
                if (f.attr() != null && missingBlock(f)) {
                    out.add(f.ino());
                }
            }
        }
        return out;
    }

    /** Of {@code entries} found dangling, those that still are in {@code current}. */
    public static List<Dangling> stillDangling(MetaEngine current, List<Dangling> entries) throws IOException {
        List<Dangling> out = new ArrayList<>();
        for (Dangling d : entries) {
            for (DirEntry e : current.readdir(d.parent())) {
                if (e.name().equals(d.name()) && current.fileSlices(List.of(e.ino())).get(0).attr() == null) {
                    out.add(d);
                }
            }
        }
        return out;
    }

    private boolean missingBlock(MetaEngine.FileSlices f) throws IOException {
        for (Slice s : f.slices()) {
            for (int b = 0; !s.isHole() && b < ChunkStore.blocks(blockSize, s.size()); b++) {
                String key = ChunkStore.blockKey(volume, s.id(), b, ChunkStore.blockLength(blockSize, s.size(), b));
                if (store.head(key).isEmpty()) {
                    return true;
                }
            }
        }
        return false;
    }

    /**
     * The paths of {@code inos}, found by walking the tree again (the first pass keeps no paths:
     * they would take more memory than the slices); an inode with several links gets one of them.
     */
    public Map<Long, String> paths(Collection<Long> inos) throws IOException {
        Set<Long> wanted = new HashSet<>(inos);
        Map<Long, String> out = new HashMap<>();
        if (!wanted.isEmpty()) {
            eachDirectory((dir, path, others) -> {
                for (DirEntry e : others) {
                    if (wanted.contains(e.ino())) {
                        out.putIfAbsent(e.ino(), path + "/" + e.name());
                    }
                }
                return out.size() < wanted.size();
            });
        }
        return out;
    }

    /** {id, index, size} of a block key ({@code <volume>/chunks/<a>/<b>/<id>_<index>_<size>}), or null. */
    static long[] parseBlockKey(String key) {
        String name = key.substring(key.lastIndexOf('/') + 1);
        String[] parts = name.split("_", -1);
        if (parts.length != 3) {
            return null;
        }
        try {
            long[] k = {Long.parseLong(parts[0]), Long.parseLong(parts[1]), Long.parseLong(parts[2])};
            return k[0] > 0 && k[1] >= 0 && k[2] >= 0 ? k : null;
        } catch (NumberFormatException e) {
            return null;
        }
    }
}
