package io.partfs.cli;

import io.partfs.engine.data.FileLayout;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
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
 * {@code partfs info PATH...}: how a file or directory on a running mount is stored, as {@code
 * juicefs info} shows it. The mount answers ({@code GET /info}, see the sidecar's InfoEndpoint);
 * this command finds the path on it and lays the answer out.
 */
@Command(name = "info", mixinStandardHelpOptions = true,
        description = {"Show how a file or directory on a running mount is stored: its inode, and for a file its",
                "extents (runs of it written at once), the object key of each block and where the mount reads it from",
                "(block cache, write-back staging, object store), and where it stands in the part-metadata cache; for a",
                "directory, what is under it. --check also asks the object store for every block not on local disk,",
                "and exits 1 if one is missing or of the wrong size (partfs fsck checks a whole volume)."})
final class InfoCommand implements Callable<Integer> {
    @Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Mixin
    SidecarOptions sidecar;

    @Parameters(paramLabel = "PATH", arity = "1..*", description = "Files or directories on the mount the sidecar serves (a symlink is shown, not followed).")
    List<Path> paths;

    @Option(names = "--check", description = "Ask the object store for each block not on local disk (a HEAD each).")
    boolean check;

    /** How long a directory's walk or a check may take before the command gives up on the mount. */
    static final java.time.Duration LONG_ANSWER = java.time.Duration.ofMinutes(10);

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        int bad = 0;
        for (Path given : paths) {
            Path onMount = locate(given);
            // a directory's tree is walked, and a check sends a HEAD a block: either may take minutes on a large table
            boolean slow = check || java.nio.file.Files.isDirectory(onMount, java.nio.file.LinkOption.NOFOLLOW_LINKS);
            String answer = sidecar.forPath(onMount).call("GET", "/info?path=" + SidecarOptions.enc(onMount.toString()) + (check ? "&check=1" : ""),
                    slow ? LONG_ANSWER : SidecarOptions.ANSWER_TIMEOUT);
            int missing = print(out, onMount, answer);
            if (missing > 0) {
                err.printf("partfs info: %s: %d block%s missing or of the wrong size in the object store: the file cannot be read"
                        + " whole; partfs fsck lists every such file of the volume%n", onMount, missing, missing == 1 ? " is" : "s are");
                bad++;
            }
        }
        out.flush();
        return bad == 0 ? 0 : 1;
    }

    /** {@code given} with its directories resolved (the mount may be reached through a symlink), its last name kept. */
    static Path locate(Path given) throws java.io.IOException {
        Path abs = given.toAbsolutePath().normalize();
        try {
            if (abs.getParent() == null || abs.getFileName() == null) {
                return abs.toRealPath();
            }
            Path real = abs.getParent().toRealPath().resolve(abs.getFileName());
            if (!java.nio.file.Files.exists(real, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
                throw new java.nio.file.NoSuchFileException(real.toString());
            }
            return real;
        } catch (java.nio.file.NoSuchFileException e) {
            throw new IllegalArgumentException("no such file or directory: " + given);
        }
    }

    /** Prints the mount's answer for {@code path}; returns how many blocks are missing or of the wrong size. */
    static int print(PrintWriter out, Path path, String answer) {
        out.println(path);
        List<String[]> blocks = new ArrayList<>(); // offset, length, slice, where, key: one row a block or hole
        Map<String, Integer> where = new java.util.LinkedHashMap<>();
        java.util.Set<String> keys = new java.util.HashSet<>();
        int bad = 0;
        int extents = 0;
        int holes = 0;
        long blockBytes = 0;
        String[] extent = null;
        for (String line : answer.split("\n")) {
            String kind = line.contains(" ") ? line.substring(0, line.indexOf(' ')) : line;
            String rest = line.substring(kind.length()).trim();
            Map<String, String> f = WarmupCommand.fields(rest);
            switch (kind) {
                case "inode" -> {
                    long nlink = number(f, "nlink");
                    out.printf("  inode %s, %s, mode %s, %d link%s, uid %s gid %s%n", f.get("ino"), f.get("type"), f.get("mode"),
                            nlink, nlink == 1 ? "" : "s", f.get("uid"), f.get("gid"));
                    if ("file".equals(f.get("type"))) {
                        out.printf("  size %s (%d bytes), modified %s, data version %s%n", Sizes.human(number(f, "size")),
                                number(f, "size"), f.get("mtime"), f.get("version"));
                    } else {
                        out.printf("  modified %s%n", f.get("mtime"));
                    }
                }
                case "target" -> out.println("  -> " + rest);
                case "tree" -> out.printf(Locale.ROOT, "  under it: %s, %s (%s), %s%s%n", count(f, "directories", "directory", "directories"),
                        count(f, "files", "file", "files"), Sizes.human(number(f, "bytes")), count(f, "symlinks", "symlink", "symlinks"),
                        number(f, "others") > 0 ? ", " + count(f, "others", "other", "others") : "");
                case "cache" -> out.println("  part-metadata cache: " + standing(f.get("standing"))
                        + ("NOT_METADATA".equals(f.get("standing")) ? "" : " (key " + f.get("key") + ")"));
                case "extent" -> {
                    extent = new String[] {f.get("offset"), f.get("length"), f.get("slice")};
                    if ("0".equals(f.get("slice"))) {
                        holes++;
                        blocks.add(new String[] {extent[0], extent[1], "-", "hole: reads as zeros", ""});
                    } else {
                        extents++;
                    }
                }
                case "block" -> {
                    FileLayout.Where w = where(f.get("where"));
                    String said = w == null ? String.valueOf(f.get("where")) : w.text();
                    if (keys.add(f.get("key"))) { // a block two extents share (a slice an overwrite split) counts once
                        where.merge(said, 1, Integer::sum);
                        bad += w != null && w.bad() ? 1 : 0;
                        blockBytes += number(f, "size");
                    }
                    String text = w == FileLayout.Where.WRONG_SIZE ? said + " (" + f.get("stored") + " bytes)" : said;
                    blocks.add(new String[] {f.get("offset"), f.get("length"), extent == null ? "?" : extent[2], text, f.get("key")});
                }
                default -> { } // a line a newer mount sends that this command does not know
            }
        }
        if (extents + holes > 0 || !where.isEmpty()) {
            int total = where.values().stream().mapToInt(Integer::intValue).sum();
            List<String> parts = new ArrayList<>();
            for (Map.Entry<String, Integer> e : where.entrySet()) {
                parts.add(e.getValue() + " " + e.getKey());
            }
            out.printf(Locale.ROOT, "  data: %d extent%s%s, %d block%s (%s)%s%n", extents, extents == 1 ? "" : "s",
                    holes > 0 ? " and " + holes + " hole" + (holes == 1 ? "" : "s") : "", total, total == 1 ? "" : "s",
                    Sizes.human(blockBytes), parts.isEmpty() ? "" : ": " + String.join(", ", parts));
            out.printf("    %12s %12s %10s  %-30s %s%n", "offset", "length", "slice", "where", "object key");
            for (String[] r : blocks) {
                out.printf("    %12s %12s %10s  %-30s %s%n", r[0], r[1], r[2], r[3], r[4]);
            }
        } else if (answer.contains("type=file")) {
            out.println("  data: none (an empty file, or one whose writes are not committed yet)");
        }
        return bad;
    }

    /** How a part-metadata cache standing the mount names is said. */
    private static String standing(String name) {
        try {
            return io.partfs.cache.PartMetadataCache.Standing.valueOf(name).text();
        } catch (IllegalArgumentException | NullPointerException e) {
            return String.valueOf(name); // a newer mount's word
        }
    }

    /** Where a block is, as the mount names it; null for a newer mount's word. */
    private static FileLayout.Where where(String name) {
        try {
            return FileLayout.Where.valueOf(name);
        } catch (IllegalArgumentException | NullPointerException e) {
            return null;
        }
    }

    /** "1 file", "1,400 files". */
    private static String count(Map<String, String> f, String key, String one, String many) {
        long n = number(f, key);
        return String.format(Locale.ROOT, "%,d %s", n, n == 1 ? one : many);
    }

    private static long number(Map<String, String> f, String key) {
        try {
            return Long.parseLong(f.getOrDefault(key, "0"));
        } catch (NumberFormatException e) {
            return 0;
        }
    }
}
