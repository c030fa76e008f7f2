package io.partfs.cli;

import io.partfs.cache.MergeTreePaths;
import io.partfs.cache.PartMetadataStore;
import io.partfs.cache.TableSelector;
import io.partfs.engine.Attr;
import io.partfs.engine.FsException;
import io.partfs.engine.PartFs;
import io.partfs.engine.PartFsConfig;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.object.StorageUrl;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/** {@code partfs cache}: inspect, check, fill and empty the part-metadata cache. */
@Command(name = "cache", mixinStandardHelpOptions = true,
        description = "Inspect, verify, warm up or drop the part-metadata cache of a volume.",
        subcommands = {CacheCommand.Stats.class, CacheCommand.Verify.class, CacheCommand.Warmup.class, CacheCommand.Drop.class})
final class CacheCommand {

    /** Where the cache is and which disk it serves. */
    static final class CacheOptions {
        @Mixin
        VolumeOptions volume;

        @Option(names = "--metadata-cache-dir", paramLabel = "DIR",
                description = "Part-metadata cache directory (default: as partfs mount chooses it).")
        Path dir;

        @Option(names = "--disk-name", paramLabel = "NAME", defaultValue = "default",
                description = "ClickHouse disk name of the mount (default: ${DEFAULT-VALUE}).")
        String disk;

        Path cacheDir() throws IOException {
            if (dir != null) {
                return dir;
            }
            if (volume.embedded()) {
                return volume.embeddedDir().resolve("metadata-cache");
            }
            try (MetaEngine meta = volume.openMetaReadOnly()) {
                return volume.home().resolve("metadata-cache").resolve(meta.volumeFormat().uuid());
            }
        }

        /** The volume for reading only (works while it is mounted): no cache in the way. */
        PartFs openVolumeReadOnly() throws IOException {
            MetaEngine meta = volume.openMetaReadOnly();
            try {
                var objects = StorageUrl.parse(meta.volumeFormat().storage()).open(volume.credentials(), false);
                return PartFs.open(meta, objects, PartFsConfig.builder().readOnly(true).build());
            } catch (IOException | RuntimeException e) {
                meta.close();
                throw e;
            }
        }
    }

    /** Table names given on the command line; none means all. */
    static final class TableFilter {
        private final List<String> names;
        private final TableSelector ddl = TableSelector.parse("");

        TableFilter(List<String> names) {
            this.names = names == null ? List.of() : names;
            for (String n : this.names) {
                if (!n.matches("[^.\\s]+\\.[^.\\s]+")) {
                    throw new IllegalArgumentException("invalid table '" + n + "': use db.table");
                }
            }
        }

        void learnDdl(PartFs fs) throws IOException {
            TableDdl.learnAll(fs, ddl);
        }

        boolean accepts(String relativePath) {
            if (names.isEmpty()) {
                return true;
            }
            return ddl.tableNameOf(relativePath).map(names::contains).orElse(false);
        }
    }

    /** A cache command over the cache of a volume and an optional list of tables. */
    abstract static class TableCommand implements java.util.concurrent.Callable<Integer> {
        @Spec
        CommandSpec spec;

        @Mixin
        CacheOptions cache;

        @Parameters(paramLabel = "DB.TABLE", arity = "0..*", description = "Only these tables (default: all).")
        List<String> tables;

        @Override
        public Integer call() throws Exception {
            return run(spec.commandLine().getOut(), new TableFilter(tables));
        }

        abstract int run(PrintWriter out, TableFilter filter) throws Exception;
    }

    @Command(name = "stats", mixinStandardHelpOptions = true,
            description = "Entries and bytes in the cache, and the hits and misses counted by the last mount.")
    static final class Stats implements java.util.concurrent.Callable<Integer> {
        @Spec
        CommandSpec spec;

        @Mixin
        CacheOptions cache;

        @Override
        public Integer call() throws Exception {
            PrintWriter out = spec.commandLine().getOut();
            try (PartMetadataStore store = PartMetadataStore.openReadOnly(cache.cacheDir())) {
                PartMetadataStore.Stats s = store.stats();
                out.printf("cache:   %s%nentries: %d%nbytes:   %s%nhits:    %d%nmisses:  %d%ncorrupt: %d%n", store.dir(),
                        s.entries(), Sizes.human(s.bytes()), s.hits(), s.misses(), s.corrupt());
            }
            return 0;
        }
    }

    @Command(name = "verify", mixinStandardHelpOptions = true,
            description = {"Compare every cached value with the file on the volume (as ClickHouse's",
                    "checkPartMetadataCache did). Lists keys whose cached bytes differ from the file",
                    "although their attributes say they are current; exits 1 when there is any."})
    static final class Verify extends TableCommand {
        @Override
        int run(PrintWriter out, TableFilter filter) throws Exception {
            long ok = 0;
            long outdated = 0;
            List<String> mismatches = new ArrayList<>();
            try (PartMetadataStore store = PartMetadataStore.openReadOnly(cache.cacheDir());
                 PartFs fs = cache.openVolumeReadOnly()) {
                filter.learnDdl(fs);
                String prefix = cache.disk + ":";
                for (String key : store.keys(prefix)) {
                    String path = key.substring(prefix.length());
                    if (!filter.accepts(path)) {
                        continue;
                    }
                    PartMetadataStore.Entry e = store.peek(key).orElse(null);
                    Attr a;
                    try {
                        a = fs.resolve("/" + path);
                    } catch (FsException.NoSuchEntry | FsException.NotDirectory gone) {
                        outdated++;
                        continue;
                    }
                    if (e == null) {
                        mismatches.add(key + " (unreadable value)");
                    } else if (e.ino() != a.ino() || e.size() != a.size() || e.version() != a.dataVersion()) {
                        outdated++; // never served: the attributes tell it apart
                    } else if (Arrays.equals(e.bytes(), fs.readFile("/" + path))) {
                        ok++;
                    } else {
                        mismatches.add(key);
                    }
                }
            }
            for (String m : mismatches) {
                out.println("MISMATCH " + m);
            }
            out.printf("verified %d entries: %d match, %d outdated (never served), %d mismatch%n",
                    ok + outdated + mismatches.size(), ok, outdated, mismatches.size());
            return mismatches.isEmpty() ? 0 : 1;
        }
    }

    @Command(name = "warmup", mixinStandardHelpOptions = true,
            description = {"Fill the cache of a running mount: read every part-metadata file of the",
                    "cached tables, and each one's format_version.txt and DDL, through the mount,",
                    "in parallel, showing progress."})
    static final class Warmup implements java.util.concurrent.Callable<Integer> {
        /**
         * The part-metadata files under data/ (db/table/part/file) or store/ (xxx/uuid/part/file),
         * the tables' format_version.txt there and their DDL under metadata/ (db/table.sql), found
         * by listing directories only: names say what an entry is, so no file is stat'ed (a stat
         * through the mount per file would cost more than the warmup's reads).
         */
        static void collect(Path mp, Path dir, int depth, TableFilter filter, List<Path> out) throws IOException {
            if (depth > 5 || !Files.isDirectory(dir)) {
                return;
            }
            try (java.nio.file.DirectoryStream<Path> entries = Files.newDirectoryStream(dir)) {
                for (Path p : entries) {
                    String rel = mp.relativize(p).toString();
                    String name = p.getFileName().toString();
                    if (MergeTreePaths.isPartMetadataFile(rel) || MergeTreePaths.isTableMetadataFile(rel)) {
                        if (filter.accepts(rel)) {
                            out.add(p);
                        }
                    } else if (depth < 2 // databases and tables (store/: xxx/ and uuid/)
                            || name.equals("detached") || name.endsWith(".proj")
                            || (MergeTreePaths.isPartName(name) && !name.contains("."))) {
                        collect(mp, p, depth + 1, filter, out);
                    }
                }
            }
        }

        @Spec
        CommandSpec spec;

        @Parameters(index = "0", paramLabel = "MOUNTPOINT")
        Path mountPoint;

        @Parameters(index = "1..*", paramLabel = "DB.TABLE", arity = "0..*", description = "Only these tables (default: all).")
        List<String> tables;

        @Option(names = {"-p", "--threads"}, defaultValue = "16", description = "Parallel reads (default: ${DEFAULT-VALUE}).")
        int threads;

        @Override
        public Integer call() throws Exception {
            PrintWriter out = spec.commandLine().getOut();
            Path mp = io.partfs.engine.fuse.Mounts.resolve(mountPoint);
            if (!"fuse.partfs".equals(io.partfs.engine.fuse.Mounts.typeAt(mp))) {
                throw new IllegalArgumentException(mp + " is not a PartFS mount: give the mount point of a running 'partfs mount'");
            }
            TableFilter filter = new TableFilter(tables);
            List<Path> files = new ArrayList<>();
            for (String top : new String[] {"metadata", "data", "store"}) {
                collect(mp, mp.resolve(top), 0, filter, files);
            }
            AtomicLong done = new AtomicLong();
            AtomicLong bytes = new AtomicLong();
            long start = System.nanoTime();
            ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, threads));
            try {
                List<Future<?>> futures = new ArrayList<>();
                for (Path f : files) {
                    futures.add(pool.submit(() -> {
                        bytes.addAndGet(Files.readAllBytes(f).length);
                        done.incrementAndGet();
                        return null;
                    }));
                }
                pool.shutdown();
                while (!pool.awaitTermination(1, TimeUnit.SECONDS)) {
                    out.printf("warmup: %d/%d files, %s%n", done.get(), files.size(), Sizes.human(bytes.get()));
                    out.flush();
                }
                for (Future<?> f : futures) {
                    f.get();
                }
            } finally {
                pool.shutdownNow();
            }
            out.printf("warmup: read %d metadata files (%s) in %.1f s%n", done.get(), Sizes.human(bytes.get()),
                    (System.nanoTime() - start) / 1e9);
            return 0;
        }
    }

    @Command(name = "drop", mixinStandardHelpOptions = true,
            description = {"Delete cached entries (of the given tables, or all); while mounted, through the mount's --sidecar endpoint.",
                    "The cache holds only copies: dropping loses no table data."})
    static final class Drop extends TableCommand {
        @Mixin
        SidecarOptions sidecar;

        @Override
        int run(PrintWriter out, TableFilter filter) throws Exception {
            Path dir = cache.cacheDir();
            if (!Files.isDirectory(dir)) {
                throw new IllegalArgumentException("no part-metadata cache at " + dir);
            }
            if (tables != null && !tables.isEmpty()) {
                try (PartFs fs = cache.openVolumeReadOnly()) {
                    filter.learnDdl(fs);
                }
            }
            int n = 0;
            try (PartMetadataStore store = PartMetadataStore.open(dir, 8 << 20, false)) {
                String prefix = cache.disk + ":";
                for (String key : store.keys(prefix)) {
                    if (filter.accepts(key.substring(prefix.length()))) {
                        store.delete(key);
                        n++;
                    }
                }
            } catch (IOException e) {
                if (!String.valueOf(e.getMessage()).contains("in use")) {
                    throw e;
                }
                // a running mount holds the cache: it drops the entries itself
                StringBuilder q = new StringBuilder("/metadata-cache/drop?prefix=" + SidecarOptions.enc(cache.disk + ":"));
                for (String t : tables == null ? List.<String>of() : tables) {
                    q.append("&table=").append(SidecarOptions.enc(t));
                }
                try {
                    n = Integer.parseInt(sidecar.call("POST", q.toString()).trim());
                } catch (IOException s) {
                    throw new IllegalStateException("the cache " + dir + " is in use by a running mount, and " + s.getMessage());
                }
                out.printf("dropped %d entries from %s (through the mount at %s)%n", n, dir, sidecar.base());
                return 0;
            }
            out.printf("dropped %d entries from %s%n", n, dir);
            return 0;
        }
    }
}
