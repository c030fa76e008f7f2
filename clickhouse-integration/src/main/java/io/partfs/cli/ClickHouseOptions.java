package io.partfs.cli;

import io.partfs.cli.clickhouse.ClickHouseClient;
import picocli.CommandLine.Option;

/** Where the ClickHouse server is: shared by the commands that talk to it. */
final class ClickHouseOptions {
    static final String PASSWORD_ENV = "PARTFS_CLICKHOUSE_PASSWORD";

    @Option(names = "--clickhouse", paramLabel = "URL", defaultValue = "http://127.0.0.1:8123",
            description = {"ClickHouse HTTP interface, http://host:port (default: ${DEFAULT-VALUE}).",
                    "The password is read from $" + PASSWORD_ENV + "."})
    String url;

    @Option(names = "--clickhouse-user", paramLabel = "USER", defaultValue = "default",
            description = "ClickHouse user (default: ${DEFAULT-VALUE}).")
    String user;

    ClickHouseClient client() {
        return new ClickHouseClient(url, user, System.getenv(PASSWORD_ENV));
    }
}
