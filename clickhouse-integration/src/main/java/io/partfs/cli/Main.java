package io.partfs.cli;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The {@code partfs} command. Errors a user can fix print one line and exit non-zero; the
 * stack trace appears only with {@code --verbose}.
 */
@Command(name = "partfs", mixinStandardHelpOptions = true, version = "partfs 0.1.0",
        description = "PartFS: a filesystem on object storage, tuned for ClickHouse MergeTree.",
        subcommands = {FormatCommand.class, ConfigCommand.class, DestroyCommand.class, MountCommand.class, UmountCommand.class, StatusCommand.class, CheckCommands.Fsck.class, CheckCommands.Gc.class, MetaDumpCommands.Dump.class, MetaDumpCommands.Load.class, StatsCommand.class, ProfileCommand.class, WarmupCommand.class, CompactCommand.class, InfoCommand.class,
                CacheCommand.class, ClickHouseCommand.class, SqlCommand.class, BenchCommand.class, ObjBenchCommand.class, DemoCommand.class, CommandLine.HelpCommand.class})
public final class Main {
    @Option(names = "--verbose", scope = CommandLine.ScopeType.INHERIT,
            description = "Print stack traces and debug logging.")
    boolean verbose;

    public static void main(String[] args) {
        System.exit(run(args));
    }

    /** Runs the command line and returns the exit code (for tests). */
    public static int run(String... args) {
        CommandLine cl = new CommandLine(new Main());
        boolean verbose = java.util.Arrays.asList(args).contains("--verbose");
        cl.setExecutionExceptionHandler((e, cmd, parsed) -> {
            cmd.getErr().println("partfs: " + oneLine(e));
            if (verbose) {
                e.printStackTrace(cmd.getErr());
            }
            return 1;
        });
        cl.setExecutionStrategy(parsed -> {
            if (!verbose) {
                quietOutagesUnlessServing(parsed);
            }
            return new CommandLine.RunLast().execute(parsed);
        });
        configFile(args).ifPresent(f -> cl.setDefaultValueProvider(new CommandLine.PropertiesDefaultProvider(f.toFile())));
        reflow(cl);
        return outOfMemoryIsOneLine(() -> cl.execute(args), cl.getErr());
    }

    /** The commands that serve a mount for as long as it lasts, whose log says when the object store comes and goes. */
    private static final java.util.Set<String> SERVING = java.util.Set.of("mount", "demo");

    /**
     * A command that is not a mount ({@code format}, {@code gc}, {@code objbench}, ...) fails
     * with one line when the object store cannot be reached; the outage tracker's own warning,
     * which a mount's log wants, would come before it as a second one ({@code --verbose} keeps it).
     */
    private static void quietOutagesUnlessServing(CommandLine.ParseResult parsed) {
        CommandLine.ParseResult sub = parsed.subcommand();
        if (sub != null && !SERVING.contains(sub.commandSpec().name())
                && org.slf4j.LoggerFactory.getLogger("io.partfs.engine.object.StoreOutage")
                        instanceof ch.qos.logback.classic.Logger l && l.getLevel() == null) {
            l.setLevel(ch.qos.logback.classic.Level.ERROR);
        }
    }

    /**
     * Runs a command; when it runs out of heap (picocli passes errors through), says so in one
     * line with what to do instead of the JVM's stack trace. What filled the heap is garbage by
     * the time the message is printed.
     */
    static int outOfMemoryIsOneLine(java.util.function.IntSupplier command, java.io.PrintWriter err) {
        try {
            return command.getAsInt();
        } catch (OutOfMemoryError e) {
            long heapMiB = Runtime.getRuntime().maxMemory() >> 20;
            err.println("partfs: ran out of memory (" + heapMiB + " MiB of heap: " + e.getMessage()
                    + "): run it again with a larger heap, e.g. PARTFS_JAVA_EXTRA_OPTS=-Xmx" + Math.max(1024, heapMiB * 4) + "m");
            err.flush();
            return 1;
        }
    }

    /**
     * Descriptions are written as lines of source; picocli prints each element as its own
     * line and wraps it at 80 columns, which breaks long ones in the middle. Here a command's,
     * option's or parameter's lines become one paragraph that picocli wraps as a whole (a
     * command's first sentence stays a line of its own); a line that starts with a space (an
     * example) keeps a line of its own.
     */
    public static void reflow(CommandLine cl) {
        CommandLine.Model.CommandSpec spec = cl.getCommandSpec();
        spec.usageMessage().description(summaryFirst(paragraph(spec.usageMessage().description())));
        for (CommandLine.Model.OptionSpec o : new java.util.ArrayList<>(spec.options())) {
            if (o.description().length > 1) {
                spec.remove(o);
                spec.addOption(o.toBuilder().description(paragraph(o.description())).build());
            }
        }
        for (CommandLine.Model.PositionalParamSpec p : new java.util.ArrayList<>(spec.positionalParameters())) {
            if (p.description().length > 1) {
                spec.remove(p);
                spec.addPositional(p.toBuilder().description(paragraph(p.description())).build());
            }
        }
        for (CommandLine sub : cl.getSubcommands().values()) {
            reflow(sub);
        }
    }

    static String[] paragraph(String[] lines) {
        if (lines.length <= 1) {
            return lines;
        }
        StringBuilder b = new StringBuilder(formattable(lines[0]));
        for (int i = 1; i < lines.length; i++) {
            b.append(lines[i].startsWith(" ") || lines[i - 1].startsWith(" ") ? "%n" : " ").append(formattable(lines[i]));
        }
        return new String[] {b.toString()};
    }

    /**
     * A command's first sentence as a line of its own: the list of commands in {@code partfs
     * --help} shows a command's first description line only.
     */
    static String[] summaryFirst(String[] description) {
        if (description.length != 1) {
            return description;
        }
        int end = description[0].indexOf(". ");
        return end < 0 ? description : new String[] {description[0].substring(0, end + 1), description[0].substring(end + 2)};
    }

    /** A line picocli could not format (a literal '%', as in SQL) is printed raw: escaped, it stays so once joined. */
    private static String formattable(String line) {
        try {
            String.format(line);
            return line;
        } catch (java.util.IllegalFormatException e) {
            return line.replace("%", "%%");
        }
    }

    /**
     * The file named by {@code --config FILE} (or {@code --config=FILE}): its properties give
     * option defaults by long name without dashes ({@code metadata-cache-lru-size=512M}), and
     * options on the command line win.
     */
    static java.util.Optional<java.nio.file.Path> configFile(String... args) {
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--config") && i + 1 < args.length) {
                return java.util.Optional.of(java.nio.file.Path.of(args[i + 1]));
            }
            if (args[i].startsWith("--config=")) {
                return java.util.Optional.of(java.nio.file.Path.of(args[i].substring("--config=".length())));
            }
        }
        return java.util.Optional.empty();
    }

    /** A one-line description of a failure that says what went wrong where. */
    static String oneLine(Throwable e) {
        if (e instanceof java.nio.file.AccessDeniedException a) {
            return "permission denied: " + a.getFile() + ": run as a user that may write there, or choose another path";
        }
        if (e instanceof java.nio.file.NoSuchFileException f) {
            return "no such file or directory: " + f.getFile() + ": check the path, or create its parent first";
        }
        if (e instanceof java.nio.file.FileAlreadyExistsException f && !java.nio.file.Files.isDirectory(java.nio.file.Path.of(f.getFile()))) {
            // Files.createDirectories on a path (or a parent of it) that is a file
            return "cannot use " + f.getFile() + ": it is a file where a directory is needed: give a directory path";
        }
        if (e instanceof java.nio.file.FileSystemException f) {
            String reason = f.getReason() == null ? e.getClass().getSimpleName() : f.getReason();
            return "cannot use " + f.getFile() + (f.getOtherFile() == null ? "" : " -> " + f.getOtherFile()) + ": " + reason;
        }
        String msg = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
        return msg.lines().findFirst().orElse(msg);
    }
}
