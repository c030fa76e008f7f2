package io.partfs.cli;

import io.partfs.engine.object.ObjectStore;
import io.partfs.engine.object.StorageUrl;
import java.util.concurrent.Callable;
import java.util.concurrent.ThreadLocalRandom;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code partfs objbench}: the object store measured alone, with the requests PartFS makes. */
@Command(name = "objbench", mixinStandardHelpOptions = true,
        description = {"Measure an object store with the requests PartFS makes: PUT, GET, HEAD, LIST and DELETE of",
                "small objects, PUT and GET of block-sized ones; -p threads at once. The store is --storage, or",
                "the one the volume given by --meta was formatted with. Objects go under a temporary prefix",
                "and are deleted afterwards."})
final class ObjBenchCommand implements Callable<Integer> {
    @Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Mixin
    VolumeOptions volume;

    @Option(names = "--storage", paramLabel = "URL", description = "s3://bucket/prefix?endpoint=...&path-style=true, or a directory.")
    String storage;

    @Option(names = "--small-object-size", paramLabel = "SIZE", defaultValue = "128K", description = "Default: ${DEFAULT-VALUE}.")
    String smallSize;

    @Option(names = "--small-objects", paramLabel = "N", defaultValue = "100", description = "Small objects per thread (default: ${DEFAULT-VALUE}).")
    int smallCount;

    @Option(names = "--block-size", paramLabel = "SIZE", defaultValue = "4M", description = "Big object size, PartFS's block (default: ${DEFAULT-VALUE}).")
    String blockSize;

    @Option(names = "--blocks", paramLabel = "N", defaultValue = "25", description = "Big objects per thread (default: ${DEFAULT-VALUE}).")
    int blockCount;

    @Option(names = {"-p", "--threads"}, paramLabel = "N", defaultValue = "4", description = "Threads (default: ${DEFAULT-VALUE}).")
    int threads;

    @Override
    public Integer call() throws Exception {
        int small = (int) Sizes.parse(smallSize, "small object size");
        int block = (int) Sizes.parse(blockSize, "block size");
        BenchTable table = new BenchTable(threads);
        String url = storage;
        if (url == null) {
            try (var meta = volume.openMetaReadOnly()) {
                url = meta.volumeFormat().storage();
            }
        }
        String prefix = "__partfs-objbench-" + Long.toHexString(ThreadLocalRandom.current().nextLong()) + "/";
        try (ObjectStore store = StorageUrl.parse(url).open(volume.credentials(), false)) {
            // a small request first, as a mount does: a server refusing the credentials may cut a
            // block-sized PUT off mid-body, which then reads as an unreachable endpoint
            store.checkAccess();
            byte[] smallData = new byte[small];
            byte[] blockData = new byte[block];
            ThreadLocalRandom.current().nextBytes(smallData);
            ThreadLocalRandom.current().nextBytes(blockData);
            long n = (long) smallCount * threads;
            long b = (long) blockCount * threads;
            try {
                double t = table.time(th -> {
                    for (int i = 0; i < blockCount; i++) {
                        store.put(prefix + "big/" + th + "/" + i, blockData);
                    }
                });
                table.add("Put " + blockSize + " objects", t, (double) block * b / (1 << 20), "MiB", b, "object");
                t = table.time(th -> {
                    for (int i = 0; i < blockCount; i++) {
                        store.get(prefix + "big/" + th + "/" + i, 0, -1);
                    }
                });
                table.add("Get " + blockSize + " objects", t, (double) block * b / (1 << 20), "MiB", b, "object");
                t = table.time(th -> {
                    for (int i = 0; i < smallCount; i++) {
                        store.put(prefix + "small/" + th + "/" + i, smallData);
                    }
                });
                table.add("Put " + smallSize + " objects", t, n, "objects", n, "object");
                t = table.time(th -> {
                    for (int i = 0; i < smallCount; i++) {
                        store.get(prefix + "small/" + th + "/" + i, 0, -1);
                    }
                });
                table.add("Get " + smallSize + " objects", t, n, "objects", n, "object");
                t = table.time(th -> {
                    for (int i = 0; i < smallCount; i++) {
                        store.get(prefix + "small/" + th + "/" + i, small / 2, 4096);
                    }
                });
                table.add("Get 4 KiB ranges", t, n, "requests", n, "request");
                t = table.time(th -> {
                    for (int i = 0; i < smallCount; i++) {
                        store.head(prefix + "small/" + th + "/" + i);
                    }
                });
                table.add("Head objects", t, n, "requests", n, "request");
                t = table.time(th -> store.list(prefix + "small/" + th + "/", null, 1000));
                table.add("List " + smallCount + " keys", t, threads, "requests", threads, "request");
            } catch (Exception | Error e) {
                // the failure reported is the request that failed, not the clean-up after it,
                // which mostly fails the same way (same endpoint, same credentials)
                deleteQuietly(store, prefix);
                throw e;
            }
            double t = table.time(th -> {
                for (int i = 0; i < smallCount; i++) {
                    store.delete(prefix + "small/" + th + "/" + i);
                }
                for (int i = 0; i < blockCount; i++) {
                    store.delete(prefix + "big/" + th + "/" + i);
                }
            });
            table.add("Delete objects", t, n + b, "objects", n + b, "object");
            spec.commandLine().getOut().printf("partfs objbench %s: %d thread(s)%n", store.describe(), threads);
        }
        table.print(spec.commandLine().getOut());
        return 0;
    }

    /**
     * Best-effort removal of what a failed run stored: stops at the first failed request (an
     * endpoint that refuses one refuses them all) and says where objects may be left.
     */
    private void deleteQuietly(ObjectStore store, String prefix) {
        try {
            for (var o : store.listAll(prefix)) {
                store.delete(o.key());
            }
        } catch (Exception e) {
            spec.commandLine().getErr().println("partfs objbench: objects may be left under " + prefix + " in " + store.describe()
                    + " (delete them by hand)");
        }
    }
}
