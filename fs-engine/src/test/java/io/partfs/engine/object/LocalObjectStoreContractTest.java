package io.partfs.engine.object;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The object store contract on a local directory. */
class LocalObjectStoreContractTest extends ObjectStoreContract {
    @TempDir
    Path dir;

    @Override
    protected ObjectStore newStore() throws Exception {
        return new LocalObjectStore(dir.resolve("objects"));
    }

    @Test
    void deleteRemovesDirectoriesLeftEmpty() throws Exception {
        store.put("v/chunks/0/1/5_0_10", new byte[10]);
        store.delete("v/chunks/0/1/5_0_10");
        assertEquals(0, Files.list(dir.resolve("objects")).count());
    }

    @Test
    void aFileWhereTheDirectoryShouldBeIsAClearError() throws Exception {
        Files.writeString(dir.resolve("file"), "x");
        ObjectStoreException e = assertThrows(ObjectStoreException.class, () -> new LocalObjectStore(dir.resolve("file")));
        org.junit.jupiter.api.Assertions.assertTrue(e.getMessage().contains("not a directory"), e.getMessage());
    }
}
