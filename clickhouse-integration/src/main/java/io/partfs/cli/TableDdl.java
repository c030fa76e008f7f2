package io.partfs.cli;

import io.partfs.cache.TableSelector;
import io.partfs.engine.Attr;
import io.partfs.engine.DirEntry;
import io.partfs.engine.FsException;
import io.partfs.engine.PartFs;
import java.io.IOException;

/** Reads the table DDL files a ClickHouse disk root holds ({@code metadata/<db>/<table>.sql}). */
final class TableDdl {
    private TableDdl() {
    }

    /** Tells {@code tables} about every table DDL on the volume. */
    static void learnAll(PartFs fs, TableSelector tables) throws IOException {
        Attr metadata;
        try {
            metadata = fs.resolve("/metadata");
        } catch (FsException.NoSuchEntry e) {
            return; // not a ClickHouse disk root (yet)
        }
        if (!metadata.isDirectory()) {
            return;
        }
        for (DirEntry db : fs.readdir(metadata.ino())) {
            Attr dbDir = fs.getattr(db.ino());
            if (!dbDir.isDirectory()) {
                continue;
            }
            for (DirEntry t : fs.readdir(dbDir.ino())) {
                String path = "metadata/" + db.name() + "/" + t.name();
                if (TableSelector.isTableDdl(path)) {
                    tables.learn(path, fs.readFile("/" + path));
                }
            }
        }
    }
}
