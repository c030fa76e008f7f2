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
 * by a walk, and its objects taken for leaks. Every referenced slice is kept in memory (a
 * {@link IdTable}: 21-46 bytes each, as are the slices in the trash and the deletion list, read
 * a page at a time), then the volume's block objects are listed once (by
 * directory of a thousand slices, several listings at once) and matched to their slices.
 * A block a slice needs but the store lacks is <em>missing</em> (its file reads back wrong); an
 * object no slice, no pending deletion and no slice in the trash refers to is <em>leaked</em> (it only costs storage),
 * and counts as such only when it is older than {@link Options#minAgeMillis}, since a writer
 * uploads blocks before it commits the slice that refers to them. fsck also walks the tree from
 * the root, for counts, entries whose inode is gone, link counts that differ from the names
 * found and symlinks without a target. All of it may run while the volume is mounted: a file
 * changed or deleted meanwhile can look broken, which {@link #stillBroken} (and its siblings
 * for the other findings) rechecks against the metadata as it is then.
 */
public final class VolumeCheck {
    /** Inodes whose attributes are read per request. */
    private static final int BATCH = 512;

    /** Whether to walk the tree (fsck), and to delete leaked objects older than {@code minAgeMillis} (gc). */
    public record Options(boolean walkTree, boolean deleteLeaked, long minAgeMillis, int listThreads) {
        /** Object listings at once unless told otherwise. */
        public static final int LIST_THREADS = 16;

        public Options(boolean walkTree, boolean deleteLeaked, long minAgeMillis) {
            this(walkTree, deleteLeaked, minAgeMillis, LIST_THREADS);
        }
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
        /** Inodes whose link count differs from the names found for them, before {@link #stillMismatched}. */
        public final Set<Long> linkMismatches = new TreeSet<>();
        /** Symlinks whose target is missing, before {@link #stillWithoutTarget}. */
        public final Set<Long> symlinksWithoutTarget = new TreeSet<>();
        /** Objects listed, and those of them that are leaked: count, bytes, deleted. */
        public long objects;
        public long leaked;
        public long leakedBytes;
        /** The keys of the first {@value #LEAKED_KEYS_KEPT} leaked objects found, to look into. */
        public final List<String> leakedKeys = new ArrayList<>();
        static final int LEAKED_KEYS_KEPT = 10;
        public long deleted;
        /** Unreferenced objects younger than the minimum age (perhaps a write in progress). */
        public long young;
        /** Objects of slices a mount uploaded and has not committed yet ({@link MetaEngine#uploadsOfRegisteredSessions}). */
        public long uploadingObjects;
        /** Objects of slices awaiting deletion, and files unlinked but still open somewhere. */
        public long pendingObjects;
        /** Objects of slices in the trash, and their bytes: kept until the volume's trash time is over. */
        public long trashObjects;
        public long trashBytes;
        public long pendingFiles;
        /** Keys under the chunk prefix that are not block keys (left alone). */
        public long foreign;
    }

    /** Entry {@code name} of directory {@code parent}, at {@code path}, whose inode does not exist. */
    public record Dangling(long parent, String name, String path) {
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
     * The heap a check of this volume needs for its tables: one entry per inode (the walk's
     * link counts, then the slices, one table at a time), from the volume's inode count, and
     * one per slice in the trash and the deletion list.
     */
    public long heapNeeded() throws IOException {
        return IdTable.bytesFor(meta.usage().inodes()) + IdTable.bytesFor(meta.trash().slices())
                + IdTable.bytesFor(meta.pendingDeletions().slices());
    }

    /**
     * Lists every slice by its chunk key (and, with {@code options.walkTree}, walks the tree
     * too, for counts, dangling entries, link counts and symlink targets), then every object;
     * deletes leaked objects only when {@code options} say so.
     */
    public Report run(Options options) throws IOException {
        long started = System.currentTimeMillis();
        Report report = new Report();
        if (options.walkTree()) {
            walk(report);
        }
        // presized for one slice per inode, the common case: growing costs three tables at once
        IdTable used = new IdTable(meta.usage().inodes()); // slice id: size, blocks listed
        meta.forEachChunk((ino, slices) -> {
            addSlices(slices, report, used);
            if (++report.chunks % 10_000 == 0) {
                progress.at("chunks", report.chunks);
            }
        });
        report.pendingFiles = meta.pendingFileDeletions().size();
        // read after the chunks: a file deleted meanwhile has its slices here by then; the trash
        // first, so a slice whose trash time ends meanwhile is in the deletion list read next
        // read a page at a time into primitive tables (21-46 bytes a slice): a busy volume's
        // trash holds millions of slices
        IdTable trashSlices = new IdTable(meta.trash().slices()); // presized: growing holds two tables at once
        meta.forEachTrashSlice((id, size) -> trashSlices.add(id, 0));
        IdTable pendingSlices = new IdTable(meta.pendingDeletions().slices());
        meta.forEachPendingSlice((id, size) -> pendingSlices.add(id, 0));
        java.util.Set<Long> uploading = meta.uploadsOfRegisteredSessions();
        long oldEnough = started - options.minAgeMillis();
        List<String> leaked = new ArrayList<>(); // to delete, a request's worth at a time
        // a thousand slices' blocks per listing, options.listThreads() at once (ParallelScan)
        store.scan(volume + "/chunks/", ChunkStore.KEY_LEVELS, options.listThreads(), o -> {
            report.objects++;
            if (report.objects % 10_000 == 0) {
                progress.at("objects", report.objects);
            }
            long[] k = parseBlockKey(o.key());
            if (k == null || !ChunkStore.blockKey(volume, k[0], (int) k[1], (int) k[2]).equals(o.key())) {
                report.foreign++;
                return;
            }
            int size = used.valueOf(k[0]);
            if (size >= 0 && k[1] < ChunkStore.blocks(blockSize, size) && k[2] == ChunkStore.blockLength(blockSize, size, (int) k[1])) {
                used.count(k[0]);
            } else if (pendingSlices.valueOf(k[0]) >= 0) {
                report.pendingObjects++;
            } else if (trashSlices.valueOf(k[0]) >= 0) {
                report.trashObjects++;
                report.trashBytes += o.size();
            } else if (uploading.contains(k[0])) {
                report.uploadingObjects++;
            } else if (o.modifiedMillis() > oldEnough) {
                report.young++;
            } else {
                report.leaked++;
                report.leakedBytes += o.size();
                synchronized (report.leakedKeys) {
                    if (report.leakedKeys.size() < Report.LEAKED_KEYS_KEPT) {
                        report.leakedKeys.add(o.key());
                    }
                }
                if (options.deleteLeaked()) {
                    leaked.add(o.key());
                    if (leaked.size() >= 1000) {
                        deleteLeaked(leaked, report);
                    }
                }
            }
        });
        deleteLeaked(leaked, report);
        Set<Long> broken = new HashSet<>();
        used.forEach((id, size, found) -> {
            int missing = ChunkStore.blocks(blockSize, size) - found;
            if (missing > 0) {
                report.missingBlocks += missing;
                broken.add(id);
            }
        });
        if (!broken.isEmpty()) { // the table keeps no inodes (8 bytes a slice): one more scan finds them
            meta.forEachChunk((ino, slices) -> {
                for (Slice s : slices) {
                    if (!s.isHole() && broken.contains(s.id())) {
                        report.brokenFiles.add(ino);
                    }
                }
            });
        }
        return report;
    }

    /** What {@link #finishDeletions} did: files whose data it freed, slices whose objects it deleted, and the objects. */
    public record Finished(long files, long slices, long objects) {
    }

    /**
     * Does the deletions mounts left undone, as a mount's background deletions would: the data
     * of files unlinked and closed, then the objects of freed slices (those in the trash only
     * once their time is over), a thousand slices at a time (each batch forgotten only once its
     * objects are gone). For {@code gc --delete} when
     * no client has the volume mounted: a mounted client may hold an unlinked file open, and
     * its own deletions do the rest. Needs metadata opened for writing.
     */
    public Finished finishDeletions() throws IOException {
        long files = 0;
        for (long ino : meta.pendingFileDeletions()) {
            meta.deleteFileData(ino);
            if (++files % 1000 == 0) {
                progress.at("files deleted", files);
            }
        }
        meta.expireTrash();
        long slices = 0;
        long objects = 0;
        for (List<long[]> batch; !(batch = meta.pendingSliceDeletions(1000)).isEmpty(); ) {
            List<String> keys = new ArrayList<>(batch.size());
            for (long[] s : batch) {
                keys.addAll(ChunkStore.blockKeys(volume, blockSize, s[0], (int) s[1]));
            }
            store.deleteAll(keys);
            meta.slicesDeleted(batch);
            slices += batch.size();
            objects += keys.size();
            progress.at("slices deleted", slices);
        }
        return new Finished(files, slices, objects);
    }

    private void deleteLeaked(List<String> keys, Report report) throws IOException {
        store.deleteAll(keys);
        report.deleted += keys.size();
        keys.clear();
    }

    /**
     * Every directory from the root: counts what is there and finds entries whose inode is gone,
     * symlinks without a target, and inodes whose link count is not the number of names they
     * have (a directory's is 2 and one per subdirectory). Too low a count is the dangerous one:
     * removing one name would delete data another name still shows.
     */
    private void walk(Report report) throws IOException {
        IdTable links = new IdTable(meta.usage().inodes()); // inode other than a directory: nlink, names found
        List<long[]> dirs = new ArrayList<>(); // {inode, links expected}, checked a batch at a time
        eachDirectory((dir, path, others, subdirectories) -> {
            report.directories++;
            dirs.add(new long[] {dir, 2L + subdirectories});
            if (dirs.size() >= BATCH) {
                checkDirectoryLinks(dirs, report);
            }
            for (int i = 0; i < others.size(); i += BATCH) {
                List<DirEntry> batch = others.subList(i, Math.min(others.size(), i + BATCH));
                List<Attr> attrs = meta.attrs(batch.stream().map(DirEntry::ino).toList());
                long before = report.files;
                for (int j = 0; j < batch.size(); j++) {
                    DirEntry e = batch.get(j);
                    Attr a = attrs.get(j);
                    if (a == null) {
                        report.danglingEntries.add(new Dangling(dir, e.name(), path + "/" + e.name()));
                        continue;
                    }
                    boolean first = links.add(a.ino(), a.nlink());
                    links.count(a.ino());
                    if (!first) {
                        continue; // another name of an inode counted already
                    }
                    if (a.type() == FileType.FILE) {
                        report.files++;
                    } else if (a.type() == FileType.SYMLINK) {
                        report.symlinks++;
                        if (!hasTarget(meta, a.ino())) {
                            report.symlinksWithoutTarget.add(a.ino());
                        }
                    }
                }
                if (report.files / 10_000 != before / 10_000) {
                    progress.at("files", report.files);
                }
            }
            return true;
        });
        checkDirectoryLinks(dirs, report);
        links.forEach((ino, nlink, names) -> {
            if (nlink != names) {
                report.linkMismatches.add(ino);
            }
        });
    }

    private void checkDirectoryLinks(List<long[]> dirs, Report report) throws IOException {
        List<Attr> attrs = meta.attrs(dirs.stream().map(d -> d[0]).toList());
        for (int i = 0; i < dirs.size(); i++) {
            if (attrs.get(i) != null && attrs.get(i).nlink() != dirs.get(i)[1]) {
                report.linkMismatches.add(dirs.get(i)[0]);
            }
        }
        dirs.clear();
    }

    /** False only for a symlink whose target is missing; one deleted or replaced meanwhile counts as fine. */
    private static boolean hasTarget(MetaEngine m, long symlink) throws IOException {
        if (m.hasSymlinkTarget(symlink)) {
            return true;
        }
        Attr a = m.attrs(List.of(symlink)).get(0);
        return a == null || a.type() != FileType.SYMLINK;
    }

    /** An inode with {@code nlink} links and {@code names} names, one of which is {@code path}. */
    public record LinkMismatch(long ino, int nlink, int names, String path) {
    }

    /**
     * Of {@code inos} whose link count looked wrong, those whose count still differs from their
     * names in {@code current} (a link or unlink during the first walk can look like one): the
     * tree walked again, counting only their names.
     */
    public static List<LinkMismatch> stillMismatched(MetaEngine current, Collection<Long> inos) throws IOException {
        if (inos.isEmpty()) {
            return List.of();
        }
        Map<Long, int[]> names = new HashMap<>();
        Map<Long, String> paths = new HashMap<>();
        for (long ino : inos) {
            names.put(ino, new int[1]);
        }
        io.partfs.engine.meta.TreeWalk.breadthFirst(current, MetaEngine.ROOT, "", (dir, path, others, subdirectories) -> {
            int[] n = names.get(dir);
            if (n != null) {
                n[0] = 2 + subdirectories;
                paths.putIfAbsent(dir, path.isEmpty() ? "/" : path);
            }
            for (DirEntry e : others) {
                int[] f = names.get(e.ino());
                if (f != null) {
                    f[0]++;
                    paths.putIfAbsent(e.ino(), path + "/" + e.name());
                }
            }
            return true;
        });
        List<Long> all = new ArrayList<>(inos);
        List<Attr> attrs = current.attrs(all);
        List<LinkMismatch> out = new ArrayList<>();
        for (int i = 0; i < all.size(); i++) {
            Attr a = attrs.get(i);
            int found = names.get(all.get(i))[0];
            if (a != null && a.nlink() != found) {
                out.add(new LinkMismatch(a.ino(), a.nlink(), found, paths.getOrDefault(a.ino(), "(no name)")));
            }
        }
        return out;
    }

    /** Of {@code symlinks} found without a target, the paths of those that still have none in {@code current}. */
    public List<String> stillWithoutTarget(MetaEngine current, Collection<Long> symlinks) throws IOException {
        List<Long> still = new ArrayList<>();
        for (long ino : symlinks) {
            if (!hasTarget(current, ino)) {
                still.add(ino);
            }
        }
        Map<Long, String> p = paths(still);
        return still.stream().map(i -> p.getOrDefault(i, "(inode " + i + ")")).toList();
    }

    /** Every directory from the root, breadth first, until {@code visitor} says stop. */
    private void eachDirectory(io.partfs.engine.meta.TreeWalk.DirVisitor visitor) throws IOException {
        io.partfs.engine.meta.TreeWalk.breadthFirst(meta, MetaEngine.ROOT, "", visitor);
    }

    private void addSlices(List<Slice> slices, Report report, IdTable used) {
        for (Slice s : slices) {
            if (!s.isHole() && used.add(s.id(), s.size())) {
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
            eachDirectory((dir, path, others, subdirectories) -> {
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
