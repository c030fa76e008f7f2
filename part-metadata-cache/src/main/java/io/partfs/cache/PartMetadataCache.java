package io.partfs.cache;

import io.partfs.engine.Attr;
import io.partfs.engine.spi.PathObserver;
import java.io.IOException;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The part-metadata cache as the filesystem sees it: keeps the part-metadata files of the
 * selected tables, and the two files ClickHouse reads per table when it attaches one (its
 * {@code format_version.txt} and its DDL), in a {@link PartMetadataStore} under
 * {@code disk:relative_path}, filled when such a file is written (at commit) or a DDL renamed
 * into place, on first read and by warmup; re-keyed when a part directory is renamed; removed
 * on unlink, rmdir and truncate. A copy is served only when its inode, size and data version
 * equal the file's current attributes, so it is never stale even if an event was missed
 * (another client, a crash): then it is a miss, read and stored again.
 *
 * <p>It also reads table DDL ({@code metadata/<db>/<table>.sql}) as it is written, to learn
 * which tables ask for the cache. Thread-safe.
 */
public final class PartMetadataCache implements PathObserver {
    private static final Logger log = LoggerFactory.getLogger(PartMetadataCache.class);
    /**
     * The cache failing (its disk full, say) fails it for every file alike: a line in 10 s. Files
     * are then read from the volume as if not cached, and what the cache holds is checked
     * against each file's attributes before it is served, so a missed update is never read.
     */
    private final io.partfs.engine.LogLimit failures = new io.partfs.engine.LogLimit(java.time.Duration.ofSeconds(10));

    /**
     * A whole file of the volume read by mount-relative path (table DDL), with its attributes as
     * they were before the bytes were read: a change in between leaves them behind the file's,
     * so the copy is never served.
     */
    public record FileContent(Attr attr, byte[] bytes) {
    }

    @FunctionalInterface
    public interface FileReader {
        FileContent read(String relativePath) throws IOException;
    }

    /** Reads files of {@code fs}. */
    public static FileReader reader(io.partfs.engine.PartFs fs) {
        return p -> {
            Attr a = fs.resolve("/" + p);
            if (a.isDirectory()) {
                throw new io.partfs.engine.FsException.IsDirectory(p);
            }
            return new FileContent(a, fs.readWhole(a));
        };
    }

    private final PartMetadataStore store;
    private final String disk;
    private final TableSelector tables;
    private final FileReader reader;
    private final AtomicLong lookups = new AtomicLong();
    private final AtomicLong served = new AtomicLong();
    private final AtomicLong filled = new AtomicLong();

    public PartMetadataCache(PartMetadataStore store, String disk, TableSelector tables, FileReader reader) {
        if (disk == null || !disk.matches("[A-Za-z0-9_.-]+")) {
            throw new IllegalArgumentException("invalid disk name '" + disk + "': use letters, digits, '_', '.' or '-'");
        }
        this.store = store;
        this.disk = disk;
        this.tables = tables;
        this.reader = reader;
    }

    public PartMetadataStore store() {
        return store;
    }

    public TableSelector tables() {
        return tables;
    }

    public String disk() {
        return disk;
    }

    private String key(String path) {
        return MergeTreePaths.key(disk, path);
    }

    @Override
    public boolean caches(String path) {
        return MergeTreePaths.tableOfMetadataFile(path).map(tables::selected).orElse(false);
    }

    @Override
    public byte[] cached(String path, Attr attr) {
        lookups.incrementAndGet();
        try {
            Optional<PartMetadataStore.Entry> e = store.get(key(path));
            if (e.isPresent() && matches(e.get(), attr)) {
                served.incrementAndGet();
                return e.get().bytes();
            }
        } catch (IOException ex) {
            failures.warn(log, "part-metadata cache read of {} failed, reading the file: {}", path, ex.toString());
        }
        return null;
    }

    /** Where a file stands in the cache ({@code partfs info}). */
    public enum Standing {
        NOT_METADATA("not a part-metadata file (column data and marks are not cached)"),
        TABLE_NOT_CACHED("its table is not cached (use_metadata_cache, --metadata-cache-tables, partfs sql)"),
        ABSENT("not cached yet (filled at its first read, its next write, or partfs cache warmup)"),
        CURRENT("cached, current"),
        STALE("cached copy is not current (served from the file; replaced at its next read)");

        private final String text;

        Standing(String text) {
            this.text = text;
        }

        public String text() {
            return text;
        }
    }

    /** How the file at {@code path} (relative to the disk root) with attributes {@code a} stands in the cache, and its key. */
    public Map.Entry<Standing, String> standing(String path, Attr a) throws IOException {
        String key = key(path);
        Optional<MergeTreePaths.TableRef> table = MergeTreePaths.tableOfMetadataFile(path);
        if (table.isEmpty()) {
            return Map.entry(Standing.NOT_METADATA, key);
        }
        if (!tables.selected(table.get())) {
            return Map.entry(Standing.TABLE_NOT_CACHED, key);
        }
        Optional<PartMetadataStore.Entry> e = store.get(key);
        return Map.entry(e.isEmpty() ? Standing.ABSENT : matches(e.get(), a) ? Standing.CURRENT : Standing.STALE, key);
    }

    static boolean matches(PartMetadataStore.Entry e, Attr a) {
        return e.ino() == a.ino() && e.size() == a.size() && e.version() == a.dataVersion() && e.bytes().length == a.size();
    }

    @Override
    public void store(String path, Attr attr, byte[] content) {
        if (content.length != attr.size() || !caches(path)) {
            return;
        }
        try {
            store.put(key(path), new PartMetadataStore.Entry(attr.ino(), attr.size(), attr.dataVersion(), content));
            filled.incrementAndGet();
        } catch (IOException e) {
            failures.warn(log, "cannot cache {}: {}", path, e.toString());
        }
    }

    @Override
    public void renamed(String from, String to) {
        try {
            store.renamePrefix(key(from) + "/", key(to) + "/");
            Optional<PartMetadataStore.Entry> file = store.peek(key(from));
            if (file.isPresent()) {
                store.delete(key(from));
                if (caches(to)) {
                    store.put(key(to), file.get());
                }
            } else {
                store.delete(key(to)); // the rename replaced whatever was there
            }
            if (TableSelector.isTableDdl(from)) {
                tables.forget(from);
            }
            if (TableSelector.isTableDdl(to)) {
                // ClickHouse writes DDL as <table>.sql.tmp and renames it: learn it, and keep it for the next start
                FileContent ddl = reader.read(to);
                tables.learn(to, ddl.bytes());
                store(to, ddl.attr(), ddl.bytes());
            }
        } catch (IOException e) {
            failures.warn(log, "cannot re-key the cache after renaming {} to {}: {}", from, to, e.toString());
        }
    }

    @Override
    public void removed(String path) {
        try {
            store.delete(key(path));
            store.deletePrefix(key(path) + "/");
            if (TableSelector.isTableDdl(path)) {
                tables.forget(path);
            }
        } catch (IOException e) {
            failures.warn(log, "cannot drop cache entries of {}: {}", path, e.toString());
        }
    }

    @Override
    public void linked(String existing, String added, Attr attr) {
        if (!caches(added)) {
            return;
        }
        try {
            Optional<PartMetadataStore.Entry> e = store.peek(key(existing));
            if (e.isPresent() && matches(e.get(), attr)) {
                store.put(key(added), e.get());
            }
        } catch (IOException ex) {
            failures.warn(log, "cannot cache the new link {}: {}", added, ex.toString());
        }
    }

    /** Reads of cached tables' metadata files looked up in the cache since start. */
    public long lookups() {
        return lookups.get();
    }

    /** Copies served from the cache and copies stored since start. */
    public long served() {
        return served.get();
    }

    public long filled() {
        return filled.get();
    }
}
