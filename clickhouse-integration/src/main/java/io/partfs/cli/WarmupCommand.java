package io.partfs.cli;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code partfs warmup PATH...}: has the running mount fetch the data of files into its block
 * cache, as {@code juicefs warmup} does. The mount does the work (its {@code POST /warmup});
 * this command finds the real path, relays progress and sums up.
 */
@Command(name = "warmup", mixinStandardHelpOptions = true,
        description = {"Fetch the data of files into a running mount's block cache, so that their first reads do",
                "not wait for the object store: after a restart, on a new replica, before a heavy query. PATH is a",
                "file or a directory on the mount (e.g. <mountpoint>/data/db/table, or a part); blocks already on",
                "local disk are skipped, and nothing goes through the page cache. Progress on stderr; exits 1 if a",
                "block could not be fetched. --check only tells how much is on local disk already (after a pod moved,",
                "say). --verify also reads the cached blocks and checks their checksums (a scrub of the cache disk).",
                "The part-metadata cache has its own: 'partfs cache warmup'."})
final class WarmupCommand implements Callable<Integer> {
    @Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Mixin
    SidecarOptions sidecar;

    @Parameters(paramLabel = "PATH", arity = "1..*", description = "Files or directories on the mount the sidecar serves.")
    List<Path> paths;

    @Option(names = {"-p", "--threads"}, paramLabel = "N", defaultValue = "16",
            description = {"Blocks fetched in parallel, 1-256 (default: ${DEFAULT-VALUE}). Each holds a block of the",
                    "mount's heap while it is fetched, so the mount uses at most as many as a quarter of its heap holds",
                    "(32 with the default 512 MiB and 4 MiB blocks)."})
    int threads;

    @Option(names = "--check", description = {"Fetch nothing: count the blocks already on local disk (block cache, write-back",
            "staging) and those only in the object store."})
    boolean check;

    @Option(names = "--verify", description = {"Also read every block of PATH in the block cache and check it against its",
            "checksums, however often reads checked it before (reads check a block once per mount): a damaged one",
            "is dropped, and fetched again unless --check. Exits 1 if any was damaged: look at the cache disk.",
            "Reads the cached bytes from disk; blocks staged by write-back are checked at their upload instead."})
    boolean verify;

    @Override
    public Integer call() throws Exception {
        if (threads < 1 || threads > 256) {
            throw new IllegalArgumentException("--threads must be 1-256");
        }
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        int failed = 0;
        for (Path given : paths) {
            Path real;
            try {
                real = given.toRealPath();
            } catch (java.nio.file.NoSuchFileException e) {
                throw new IllegalArgumentException("no such file or directory: " + given);
            }
            SidecarOptions endpoint = sidecar.forPath(real);
            Map<String, String> last = endpoint.job("/warmup?path=" + SidecarOptions.enc(real.toString()) + "&threads=" + threads
                    + (check ? "&check=1" : "") + (verify ? "&verify=1" : ""), "warmup", real,
                    f -> (check ? describeCheck(f) : describe(f)) + (verify ? verified(f) : ""), err);
            if (verify && !last.containsKey("verified")) {
                throw new IllegalStateException("the sidecar at " + endpoint.base() + " does not verify checksums: it runs an older"
                        + " partfs; restart the mount with this version");
            }
            if (number(last, "damaged") > 0) {
                err.printf("partfs warmup: %s: %d cached blocks did not match their checksums or could not be read: dropped%s;"
                        + " the disk under the mount's --cache-dir returned other bytes than were written: check it (dmesg,"
                        + " smartctl)%n", real, number(last, "damaged"), check ? ", to be read from the object store" : " and fetched again");
                failed++;
            }
            if (check) {
                out.println("checked " + real + ": " + describeCheck(last) + (verify ? verified(last) : ""));
                continue;
            }
            out.println("warmed " + real + ": " + describe(last) + (verify ? verified(last) : ""));
            if (number(last, "threads") > 0 && number(last, "threads") < threads) {
                err.printf("partfs warmup: the mount fetched %d blocks at a time, not %d: a quarter of its heap holds no more%n",
                        number(last, "threads"), threads);
            }
            long capacity = number(last, "cache_capacity");
            if (capacity > 0 && number(last, "file_bytes") > capacity) {
                err.printf("partfs warmup: %s holds %s, more than the mount's block cache (%s): the blocks warmed first were"
                        + " evicted again; mount with a larger --cache-size, or warm less%n", real,
                        Sizes.human(number(last, "file_bytes")), Sizes.human(capacity));
            }
            if (number(last, "failed") > 0) {
                err.println("partfs warmup: " + real + ": " + last.get("failed") + " blocks could not be fetched, the first: "
                        + last.getOrDefault("first_error", "?") + " (partfs fsck lists files with missing blocks)");
                failed++;
            }
        }
        out.flush();
        return failed == 0 ? 0 : 1;
    }

    /** The {@code key=value} fields of a line; {@code first_error} takes the rest of the line. */
    static Map<String, String> fields(String s) {
        Map<String, String> out = new HashMap<>();
        int err = s.indexOf("first_error=");
        if (err >= 0) {
            out.put("first_error", s.substring(err + "first_error=".length()));
            s = s.substring(0, err);
        }
        for (String kv : s.trim().split(" +")) {
            int eq = kv.indexOf('=');
            if (eq > 0) {
                out.put(kv.substring(0, eq), kv.substring(eq + 1));
            }
        }
        return out;
    }

    static long number(Map<String, String> f, String key) {
        try {
            return Long.parseLong(f.getOrDefault(key, "0"));
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    /** "12 files (1.2 GiB), 300 blocks (1.2 GiB): 20 on local disk (80.0 MiB, 6.5%), 280 only in the object store". */
    static String describeCheck(Map<String, String> f) {
        long blockBytes = number(f, "block_bytes");
        long localBytes = number(f, "local_bytes");
        return String.format(Locale.ROOT, "%d files (%s), %d blocks (%s): %d on local disk (%s, %.1f%%), %d only in the object store",
                number(f, "files"), Sizes.human(number(f, "file_bytes")), number(f, "blocks"), Sizes.human(blockBytes),
                number(f, "local"), Sizes.human(localBytes), blockBytes > 0 ? 100.0 * localBytes / blockBytes : 100.0,
                number(f, "blocks") - number(f, "local"));
    }

    /** "; checksums: 20 good, 1 damaged, 0 without checksums": what a --verify run found. */
    static String verified(Map<String, String> f) {
        return String.format(Locale.ROOT, "; checksums: %d good, %d damaged, %d without checksums", number(f, "verified"),
                number(f, "damaged"), number(f, "uncheckable"));
    }

    /** "12 files (1.2 GiB), 300 blocks: 280 fetched (1.1 GiB, 95.0 MiB/s), 20 already local, 0 failed, 12.3 s". */
    static String describe(Map<String, String> f) {
        double seconds = Double.parseDouble(f.getOrDefault("seconds", "0"));
        long fetchedBytes = number(f, "fetched_bytes");
        return String.format(Locale.ROOT, "%d files (%s), %d blocks: %d fetched (%s, %.1f MiB/s), %d already local, %d failed, %.1f s",
                number(f, "files"), Sizes.human(number(f, "file_bytes")), number(f, "blocks"), number(f, "fetched"),
                Sizes.human(fetchedBytes), seconds > 0 ? fetchedBytes / seconds / (1 << 20) : 0.0, number(f, "local"),
                number(f, "failed"), seconds);
    }
}
