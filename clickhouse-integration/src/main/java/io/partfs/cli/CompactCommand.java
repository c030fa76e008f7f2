package io.partfs.cli;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code partfs compact PATH...}: has the running mount compact the fragmented chunks of files,
 * as {@code juicefs compact} does. The mount does the work (its {@code POST /compact}); this
 * command finds the real path, relays progress and sums up.
 */
@Command(name = "compact", mixinStandardHelpOptions = true,
        description = {"Compact the files at or under PATH on a running mount: each chunk (64 MiB of a file) that holds",
                "several slices (runs written by separate commits: appends, overwrites) is read and stored again as",
                "one, and the objects of the slices it replaces are freed (to the trash first, if it is on). The mount",
                "does this by itself in the background once a write leaves a chunk with 32 slices; this reaches chunks",
                "under that and files no longer written. Slices side by side that are each large (a file fsynced every",
                "few MiB) are left as they are, as rewriting them gains nothing. Reads and uploads what it compacts",
                "once, at low priority. Progress on stderr; exits 1 if a chunk could not be compacted."})
final class CompactCommand implements Callable<Integer> {
    @Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Mixin
    SidecarOptions sidecar;

    @Parameters(paramLabel = "PATH", arity = "1..*", description = "Files or directories on the mount the sidecar serves (symlinks are not followed).")
    List<Path> paths;

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        int failed = 0;
        for (Path given : paths) {
            Path real = InfoCommand.locate(given);
            Map<String, String> done = sidecar.forPath(real).job("/compact?path=" + SidecarOptions.enc(real.toString()), "compact", real,
                    CompactCommand::describe, err);
            out.println("compacted " + real + ": " + describe(done));
            if (WarmupCommand.number(done, "skipped") > 0) {
                err.printf("partfs compact: %s: %d file(s) skipped: the kernel still writes them (write-back); compact them once"
                        + " they are closed%n", real, WarmupCommand.number(done, "skipped"));
            }
            if (WarmupCommand.number(done, "failed") > 0) {
                err.println("partfs compact: " + real + ": " + done.get("failed") + " chunk(s) could not be compacted and stay as"
                        + " they were; the first: " + done.getOrDefault("first_error", "?"));
                failed++;
            }
        }
        out.flush();
        return failed == 0 ? 0 : 1;
    }

    /** "12 files, 14 chunks: 3 fragmented, 2 compacted (40 slices -> 2, 1.2 MiB rewritten), 0 failed, 0.4 s". */
    static String describe(Map<String, String> f) {
        return String.format(Locale.ROOT, "%d files, %d chunks: %d fragmented, %d compacted (%d slices -> %d, %s rewritten), %d failed, %s s",
                WarmupCommand.number(f, "files"), WarmupCommand.number(f, "chunks"), WarmupCommand.number(f, "fragmented"),
                WarmupCommand.number(f, "compacted_chunks"), WarmupCommand.number(f, "slices_before"),
                WarmupCommand.number(f, "slices_after"), Sizes.human(WarmupCommand.number(f, "bytes_written")),
                WarmupCommand.number(f, "failed"), f.getOrDefault("seconds", "0"));
    }
}
