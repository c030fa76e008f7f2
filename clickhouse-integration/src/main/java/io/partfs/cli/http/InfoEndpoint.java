package io.partfs.cli.http;

import io.partfs.cache.PartMetadataCache;
import io.partfs.engine.Attr;
import io.partfs.engine.FileType;
import io.partfs.engine.data.FileLayout;
import java.io.IOException;
import java.time.Instant;
import java.util.Locale;
import java.util.Map;

/**
 * {@code GET /info?path=P[&check=1]}: how the file or directory at P (absolute, on this mount)
 * is stored, for {@code partfs info}. One line per fact, a word and then {@code key=value}
 * fields (values have no spaces, except where a field takes the rest of the line):
 *
 * <pre>
 * inode ino=.. type=file|directory|symlink|.. mode=0644 nlink=.. uid=.. gid=.. size=.. mtime=ISO version=..
 * target PATH                                           a symlink's target (the rest of the line)
 * cache standing=CURRENT key=K                          a file: where it stands in the part-metadata cache
 * extent offset=.. length=.. slice=.. slice_offset=..   a file: a run of it one slice holds (slice=0: a hole)
 * block offset=.. length=.. where=BLOCK_CACHE size=.. stored=.. key=K
 *                                                       a block of the extent above: the file range it serves there,
 *                                                       where it is ({@link FileLayout.Where}), its size, the size
 *                                                       a check found (else -1)
 * tree directories=.. files=.. bytes=.. symlinks=.. others=..   a directory: what is under it
 * </pre>
 *
 * With {@code check=1} each block not on local disk is asked of the object store (a HEAD each).
 */
final class InfoEndpoint {
    private final SidecarHttpServer.Volume volume;
    private final PartMetadataCache cache;
    /** Requests that may take long, at most two at once: the endpoint has four threads, which the system-table view needs too. */
    private final java.util.concurrent.Semaphore slowOnes = new java.util.concurrent.Semaphore(2);

    InfoEndpoint(SidecarHttpServer.Volume volume, PartMetadataCache cache) {
        this.volume = volume;
        this.cache = cache;
    }

    /** The answer's lines; bad input is an IllegalArgumentException. */
    String answer(String path, boolean check) throws IOException {
        if (volume == null) {
            throw new IllegalArgumentException("this endpoint serves no mounted volume");
        }
        Attr a = volume.resolve(path);
        boolean slow = check || a.type() == FileType.DIRECTORY; // a walk of a tree, or a HEAD a block
        if (slow && !slowOnes.tryAcquire()) {
            throw new IllegalArgumentException("two directory walks or checks are running on this mount already: wait for one to end");
        }
        try {
            return describe(path, a, check);
        } finally {
            if (slow) {
                slowOnes.release();
            }
        }
    }

    private String describe(String path, Attr a, boolean check) throws IOException {
        StringBuilder out = new StringBuilder();
        out.append(String.format(Locale.ROOT, "inode ino=%d type=%s mode=%04o nlink=%d uid=%d gid=%d size=%d mtime=%s version=%d%n",
                a.ino(), a.type().name().toLowerCase(Locale.ROOT), a.mode(), a.nlink(), a.uid(), a.gid(), a.size(),
                Instant.ofEpochSecond(0, a.mtimeNs()), a.dataVersion()));
        switch (a.type()) {
            case SYMLINK -> out.append("target ").append(volume.fs().readlink(a.ino()).replace('\n', ' ')).append('\n');
            case DIRECTORY -> {
                FileLayout.Tree t = FileLayout.tree(volume.fs().meta(), a);
                out.append(String.format(Locale.ROOT, "tree directories=%d files=%d bytes=%d symlinks=%d others=%d%n",
                        t.directories(), t.files(), t.bytes(), t.symlinks(), t.others()));
            }
            case FILE -> {
                if (cache != null) {
                    Map.Entry<PartMetadataCache.Standing, String> s = cache.standing(volume.relative(path), a);
                    out.append("cache standing=").append(s.getKey().name()).append(" key=").append(s.getValue()).append('\n');
                }
                for (FileLayout.Extent e : FileLayout.of(volume.fs().chunks(), a, check)) {
                    out.append(String.format(Locale.ROOT, "extent offset=%d length=%d slice=%d slice_offset=%d%n",
                            e.offset(), e.length(), e.slice(), e.sliceOffset()));
                    for (FileLayout.Piece p : e.pieces()) {
                        FileLayout.Block b = p.block();
                        out.append(String.format(Locale.ROOT, "block offset=%d length=%d where=%s size=%d stored=%d key=%s%n",
                                p.offset(), p.length(), b.where().name(), b.size(), b.storedSize(), b.key()));
                    }
                }
            }
            default -> { } // a device, FIFO or socket: its inode says all
        }
        return out.toString();
    }
}
