package io.partfs.cli;

import io.partfs.cli.clickhouse.ClickHouseClient;
import io.partfs.cli.http.CacheRows;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParentCommand;
import picocli.CommandLine.Spec;

/** {@code partfs clickhouse install|config|tables}: puts ClickHouse on the mount and shows the cache in it. */
@Command(name = "clickhouse", mixinStandardHelpOptions = true,
        description = "ClickHouse integration: the system-table view of the part-metadata cache, the disk configuration, the tables.",
        subcommands = {ClickHouseCommand.Install.class, ClickHouseCommand.Config.class, ClickHouseCommand.Tables.class})
final class ClickHouseCommand implements Callable<Integer> {
    /** The view, named as the table ClickHouse removed in 23.9: system.merge_tree_metadata_cache. */
    static final String VIEW_TABLE = "merge_tree_metadata_cache";
    static final String VIEW = "partfs." + VIEW_TABLE;

    @Spec
    picocli.CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        spec.commandLine().usage(spec.commandLine().getOut());
        return 0;
    }

    @Command(name = "install", mixinStandardHelpOptions = true,
            description = {"Create the database (default partfs) and its view merge_tree_metadata_cache over the sidecar's",
                    "endpoint, so that ClickHouse answers as system.merge_tree_metadata_cache did:",
                    "  SELECT key FROM partfs.merge_tree_metadata_cache WHERE key LIKE 'default:%' LIMIT 10",
                    "  SELECT value FROM partfs.merge_tree_metadata_cache WHERE key = 'default:data/db/t/1_1_1_0/checksums.txt'",
                    "Conditions on key (=, IN, LIKE 'prefix%', startsWith) reach the sidecar, so a point lookup",
                    "transfers one row. Replaces an existing view of that name."})
    static final class Install implements Callable<Integer> {
        @Spec
        picocli.CommandLine.Model.CommandSpec spec;

        @Mixin
        ClickHouseOptions clickhouse;

        @Mixin
        SidecarOptions sidecar;

        @Option(names = "--database", paramLabel = "NAME", defaultValue = "partfs",
                description = "Database to hold the view (default: ${DEFAULT-VALUE}).")
        String database;

        @Override
        public Integer call() throws Exception {
            if (!database.matches("[A-Za-z_][A-Za-z0-9_]*")) {
                throw new IllegalArgumentException("invalid database name '" + database + "': use letters, digits and '_'");
            }
            sidecar.call("GET", "/health");
            ClickHouseClient ch = clickhouse.client();
            String url = sidecar.base() + "/metadata-cache/view?format=TabSeparated&view=" + database + "." + VIEW_TABLE
                    + (SidecarOptions.token() == null ? "" : "&token=" + SidecarOptions.enc(SidecarOptions.token()));
            ch.execute("CREATE DATABASE IF NOT EXISTS " + database);
            ch.execute("DROP TABLE IF EXISTS " + database + "." + VIEW_TABLE);
            ch.execute("CREATE VIEW " + database + "." + VIEW_TABLE + " AS SELECT key, value, table, part, file, size FROM url("
                    + quote(url) + ", TabSeparated, " + quote(CacheRows.STRUCTURE) + ")");
            String rows = ch.query("SELECT count() FROM " + database + "." + VIEW_TABLE + " WHERE key = ''").get(0).get(0);
            PrintWriter out = spec.commandLine().getOut();
            out.printf("partfs: created %s.%s on ClickHouse %s (reads %s; check: %s rows for an empty key)%n",
                    database, VIEW_TABLE, ch.version(), sidecar.base(), rows);
            return 0;
        }
    }

    @Command(name = "config", mixinStandardHelpOptions = true,
            description = {"Print (or write with --write) the config.d file that puts ClickHouse's data on the mount:",
                    "a disk and a storage policy in <storage_configuration> for servers that have them (19.15+),",
                    "or <path> for older ones (18.16). --style auto asks the server its version."})
    static final class Config implements Callable<Integer> {
        @Spec
        picocli.CommandLine.Model.CommandSpec spec;

        @Mixin
        ClickHouseOptions clickhouse;

        @Option(names = "--mountpoint", required = true, paramLabel = "DIR", description = "Where the volume is mounted.")
        Path mountPoint;

        @Option(names = "--disk-name", paramLabel = "NAME", defaultValue = "partfs",
                description = "Disk and storage policy name (default: ${DEFAULT-VALUE}); mount with the same --disk-name.")
        String diskName;

        @Option(names = "--style", paramLabel = "STYLE", defaultValue = "auto",
                description = "storage-policy, path, or auto: by the server's version (default: ${DEFAULT-VALUE}).")
        String style;

        @Option(names = "--write", paramLabel = "CONFIG_D",
                description = "Write the file as partfs.xml into this config.d directory instead of printing it.")
        Path write;

        @Override
        public Integer call() throws Exception {
            if (!diskName.matches("[A-Za-z0-9_]+")) {
                throw new IllegalArgumentException("invalid disk name '" + diskName + "': use letters, digits and '_'");
            }
            String mp = mountPoint.toAbsolutePath().normalize().toString();
            String chosen = switch (style) {
                case "path", "storage-policy" -> style;
                case "auto" -> {
                    try {
                        yield clickhouse.client().versionNumber() >= 1915 ? "storage-policy" : "path";
                    } catch (IOException e) {
                        throw new IOException(e.getMessage() + " (or pass --style path|storage-policy)", e);
                    }
                }
                default -> throw new IllegalArgumentException("invalid --style '" + style + "': use auto, path or storage-policy");
            };
            String xml = chosen.equals("path") ? pathConfig(mp) : storagePolicyConfig(mp, diskName);
            if (write == null) {
                spec.commandLine().getOut().print(xml);
                return 0;
            }
            Files.createDirectories(write);
            Path target = write.resolve("partfs.xml");
            Path tmp = write.resolve(".partfs.xml.tmp");
            Files.writeString(tmp, xml);
            Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            spec.commandLine().getOut().printf("partfs: wrote %s (%s); restart ClickHouse to use it%n", target, chosen);
            return 0;
        }

        static String pathConfig(String mp) {
            return """
                    <?xml version="1.0"?>
                    <!-- Written by partfs clickhouse config: ClickHouse's whole data path on the PartFS mount.
                         Servers without storage policies (18.16) keep tables and metadata under <path>. -->
                    <yandex>
                        <path>%1$s/</path>
                        <user_files_path>%1$s/user_files/</user_files_path>
                    </yandex>
                    """.formatted(mp);
        }

        static String storagePolicyConfig(String mp, String disk) {
            return """
                    <?xml version="1.0"?>
                    <!-- Written by partfs clickhouse config: a disk and a storage policy on the PartFS mount.
                         Use it per table: CREATE TABLE ... SETTINGS storage_policy = '%2$s', use_metadata_cache = true
                         and mount with --disk-name %2$s so that cache keys read %2$s:store/... -->
                    <clickhouse>
                        <storage_configuration>
                            <disks>
                                <%2$s>
                                    <type>local</type>
                                    <path>%1$s/</path>
                                </%2$s>
                            </disks>
                            <policies>
                                <%2$s>
                                    <volumes>
                                        <main>
                                            <disk>%2$s</disk>
                                        </main>
                                    </volumes>
                                </%2$s>
                            </policies>
                        </storage_configuration>
                    </clickhouse>
                    """.formatted(mp, disk);
        }
    }

    @Command(name = "tables", mixinStandardHelpOptions = true,
            description = "List MergeTree tables, their data paths and whether the sidecar caches their part metadata.")
    static final class Tables implements Callable<Integer> {
        @Spec
        picocli.CommandLine.Model.CommandSpec spec;

        @Mixin
        ClickHouseOptions clickhouse;

        @Mixin
        SidecarOptions sidecar;

        @Override
        public Integer call() throws Exception {
            ClickHouseClient ch = clickhouse.client();
            List<List<String>> rows;
            String where = " FROM system.tables WHERE engine LIKE '%MergeTree%' AND database != 'system' ORDER BY database, name";
            rows = ch.query("SELECT database, name, engine, "
                    + (ch.hasColumn("tables", "data_paths") ? "arrayStringConcat(data_paths, ',')" : "data_path") + where);
            List<String> cached = new ArrayList<>();
            String note = "";
            if (!rows.isEmpty()) {
                StringBuilder q = new StringBuilder("/tables?");
                for (List<String> r : rows) {
                    q.append("name=").append(SidecarOptions.enc(r.get(0) + "." + r.get(1))).append('&');
                }
                try {
                    for (String line : sidecar.call("GET", q.toString()).split("\n")) {
                        String[] f = line.split("\t", -1);
                        cached.add(f.length >= 3 && f[1].equals("1") ? "yes (" + f[2] + ")" : "no");
                    }
                } catch (IOException e) {
                    note = "partfs: " + e.getMessage();
                    rows.forEach(r -> cached.add("?"));
                }
            }
            PrintWriter out = spec.commandLine().getOut();
            out.printf("%-40s %-28s %-18s %s%n", "TABLE", "ENGINE", "CACHED", "DATA PATH");
            for (int i = 0; i < rows.size(); i++) {
                List<String> r = rows.get(i);
                out.printf("%-40s %-28s %-18s %s%n", r.get(0) + "." + r.get(1), r.get(2), cached.get(i), r.get(3));
            }
            if (!note.isEmpty()) {
                spec.commandLine().getErr().println(note);
            }
            return 0;
        }
    }

    /** A ClickHouse string literal. */
    static String quote(String s) {
        return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'";
    }
}
