package io.partfs.engine.meta;

import io.partfs.engine.NameCodec;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;
import org.rocksdb.BlockBasedTableConfig;
import org.rocksdb.LRUCache;
import org.rocksdb.Options;
import org.rocksdb.ReadOptions;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksDBException;
import org.rocksdb.RocksIterator;
import org.rocksdb.Snapshot;
import org.rocksdb.WriteBatch;
import org.rocksdb.WriteOptions;

/**
 * {@link KvStore} on an embedded RocksDB: the single-machine metadata engine.
 *
 * <p>Concurrency: transactions are serialized by {@link #writeLock}; inside it a transaction
 * reads the latest committed state and commits one {@link WriteBatch}, so transactions are
 * serializable without conflicts or retries. Read-only views read a RocksDB snapshot and take
 * only {@link RocksHandle}'s lock shared, which excludes nothing but a reopen. Commits reach the write-ahead
 * log before {@code update} returns (they survive a process crash); {@link #sync()} fsyncs the
 * log (they survive a power loss).
 *
 * <p>A full disk: a commit whose log append gets ENOSPC fails with
 * {@link io.partfs.engine.FsException.NoSpace}, and stops RocksDB's writes until the database is
 * reopened, which the next commit does once the disk has room again ({@link RocksHandle}).
 *
 * <p>Layout: plain keys {@code 'k'+key}, counters {@code 'c'+key} (8-byte big-endian), hash
 * fields {@code 'h'+hash+'\0'+field}. Keys and field names never contain NUL.
 */
public final class RocksKvStore implements KvStore {
    static {
        RocksNative.load();
    }

    private final Path dir;
    /** The database; every use of it goes through this handle, which reopens it after a full disk. */
    private final RocksHandle handle;
    private final Options options;
    private final LRUCache blockCache;
    private final WriteOptions writeOptions = new WriteOptions();
    private final ReentrantLock writeLock = new ReentrantLock();
    /** Set by the first {@link #close}: RocksDB aborts the JVM when a closed database is used. */
    private boolean closed;

    private final boolean readOnly;

    public RocksKvStore(Path dir) throws IOException {
        this(dir, false);
    }

    /**
     * Opens the database in {@code dir}. Read-only opens work while another process has it
     * open for writing (for {@code partfs status}); they see what was committed before they opened.
     */
    public RocksKvStore(Path dir, boolean readOnly) throws IOException {
        this.dir = dir.toAbsolutePath().normalize();
        this.readOnly = readOnly;
        if (readOnly && !Files.isDirectory(this.dir)) {
            throw new IOException("no metadata at " + this.dir + ": check the path or run 'partfs format'");
        }
        Files.createDirectories(this.dir);
        this.blockCache = new LRUCache(32L << 20);
        this.options = new Options().setCreateIfMissing(true)
                .setTableFormatConfig(new BlockBasedTableConfig().setBlockCache(blockCache));
        String path = this.dir.toString();
        try {
            this.handle = new RocksHandle(this.dir, "metadata", readOnly ? () -> RocksDB.openReadOnly(options, path)
                    : () -> RocksDB.open(options, path), null);
        } catch (RocksDBException e) {
            options.close();
            blockCache.close();
            String msg = String.valueOf(e.getMessage());
            if (msg.contains("lock")) {
                throw new IOException("metadata directory " + this.dir
                        + " is in use by another process: unmount the volume there first", e);
            }
            throw RocksHandle.corrupted(e) ? corrupted(e) : new IOException("cannot open metadata directory " + this.dir + ": " + msg, e);
        }
    }

    private static byte[] plain(String key) {
        return prefixed('k', key);
    }

    private static byte[] counterKey(String key) {
        return prefixed('c', key);
    }

    private static byte[] fieldPrefix(String hash) {
        return prefixed('h', hash + '\0');
    }

    private static byte[] field(String hash, String field) {
        return prefixed('h', hash + '\0' + field);
    }

    private static byte[] prefixed(char type, String s) {
        byte[] b = NameCodec.encode(s);
        byte[] out = new byte[b.length + 1];
        out[0] = (byte) type;
        System.arraycopy(b, 0, out, 1, b.length);
        return out;
    }

    private static long decodeCounter(byte[] v) {
        return v == null ? 0 : ByteBuffer.wrap(v).getLong();
    }

    private static byte[] encodeCounter(long v) {
        return ByteBuffer.allocate(8).putLong(v).array();
    }

    private IOException wrap(String op, RocksDBException e) {
        if (RocksHandle.corrupted(e)) {
            return corrupted(e);
        }
        return new IOException("metadata " + op + " failed in " + dir + ": " + e.getMessage(), e);
    }

    /**
     * A damaged database is left as it is (RocksDB's repair drops what it cannot read, which for
     * a filesystem means files silently gone); the way back is a copy made before the damage.
     */
    private IOException corrupted(RocksDBException e) {
        return new IOException("the metadata in " + dir + " is damaged (" + String.valueOf(e.getMessage()).strip()
                + "): restore it into a new directory from the backups mounts make in the object store"
                + " ('partfs load --meta NEWDIR --storage URL --name NAME --from-backup latest') or from a dump"
                + " ('partfs load --meta NEWDIR FILE'), then mount with --meta NEWDIR", e);
    }

    /** Reads from {@code db} as of {@code readOptions} (latest, or a snapshot); used inside a {@link RocksHandle} call only. */
    private final class StoredReader implements Reader {
        private final RocksDB db;
        private final ReadOptions readOptions;

        StoredReader(RocksDB db, ReadOptions readOptions) {
            this.db = db;
            this.readOptions = readOptions;
        }

        @Override
        public byte[] get(String key) throws IOException {
            try {
                return db.get(readOptions, plain(key));
            } catch (RocksDBException e) {
                throw wrap("get", e);
            }
        }

        @Override
        public long counter(String key) throws IOException {
            try {
                return decodeCounter(db.get(readOptions, counterKey(key)));
            } catch (RocksDBException e) {
                throw wrap("get", e);
            }
        }

        @Override
        public byte[] hget(String hash, String f) throws IOException {
            try {
                return db.get(readOptions, field(hash, f));
            } catch (RocksDBException e) {
                throw wrap("get", e);
            }
        }

        @Override
        public Map<String, byte[]> hgetAll(String hash) {
            return hgetSome(hash, Integer.MAX_VALUE);
        }

        @Override
        public Map<String, byte[]> hgetSome(String hash, int limit) {
            Map<String, byte[]> out = new HashMap<>();
            byte[] prefix = fieldPrefix(hash);
            try (RocksIterator it = db.newIterator(readOptions)) {
                for (it.seek(prefix); it.isValid() && startsWith(it.key(), prefix) && out.size() < limit; it.next()) {
                    byte[] k = it.key();
                    out.put(NameCodec.decode(k, prefix.length, k.length - prefix.length), it.value());
                }
            }
            return out;
        }

        @Override
        public java.util.List<byte[]> getAll(java.util.List<String> keys) throws IOException {
            if (keys.isEmpty()) {
                return java.util.List.of(); // multiGetAsList rejects an empty list
            }
            java.util.List<byte[]> raw = new java.util.ArrayList<>(keys.size());
            for (String k : keys) {
                raw.add(plain(k));
            }
            try {
                return db.multiGetAsList(readOptions, raw);
            } catch (RocksDBException e) {
                throw wrap("multiget", e);
            }
        }

        @Override
        public boolean holdsAnyKey() {
            try (RocksIterator it = db.newIterator(readOptions)) {
                it.seekToFirst();
                return it.isValid();
            }
        }

        @Override
        public void scanKeys(String prefix, KeyPage each) throws IOException {
            byte[] start = plain(prefix);
            int skip = plain("").length;
            java.util.List<String> page = new java.util.ArrayList<>();
            try (RocksIterator it = db.newIterator(readOptions)) {
                for (it.seek(start); it.isValid() && startsWith(it.key(), start); it.next()) {
                    byte[] k = it.key();
                    page.add(NameCodec.decode(k, skip, k.length - skip));
                    if (page.size() == 1000) {
                        each.accept(page);
                        page = new java.util.ArrayList<>();
                    }
                }
            }
            if (!page.isEmpty()) {
                each.accept(page);
            }
        }

        @Override
        public void scanHash(String hash, FieldPage each) throws IOException {
            byte[] prefix = fieldPrefix(hash);
            Map<String, byte[]> page = new HashMap<>();
            try (RocksIterator it = db.newIterator(readOptions)) {
                for (it.seek(prefix); it.isValid() && startsWith(it.key(), prefix); it.next()) {
                    byte[] k = it.key();
                    page.put(NameCodec.decode(k, prefix.length, k.length - prefix.length), it.value());
                    if (page.size() == 1000) {
                        each.accept(page);
                        page = new HashMap<>();
                    }
                }
            }
            if (!page.isEmpty()) {
                each.accept(page);
            }
        }

        @Override
        public long hlen(String hash) {
            long n = 0;
            byte[] prefix = fieldPrefix(hash);
            try (RocksIterator it = db.newIterator(readOptions)) {
                for (it.seek(prefix); it.isValid() && startsWith(it.key(), prefix); it.next()) {
                    n++;
                }
            }
            return n;
        }
    }

    private static boolean startsWith(byte[] b, byte[] prefix) {
        return b.length >= prefix.length && java.util.Arrays.equals(b, 0, prefix.length, prefix, 0, prefix.length);
    }

    /** Applies a transaction's writes in one {@link WriteBatch}; called under {@link #writeLock}. */
    private void commit(RocksDB db, TxnBuffer buf, StoredReader stored) throws IOException, RocksDBException {
        if (buf.isEmpty()) {
            return;
        }
        try (WriteBatch batch = new WriteBatch()) {
            Map<String, Long> counters = new HashMap<>();
            for (TxnBuffer.Op op : buf.ops()) {
                if (op instanceof TxnBuffer.Put p) {
                    batch.put(plain(p.key()), p.value());
                } else if (op instanceof TxnBuffer.Delete d) {
                    batch.delete(plain(d.key()));
                } else if (op instanceof TxnBuffer.HSet h) {
                    batch.put(field(h.hash(), h.field()), h.value());
                } else if (op instanceof TxnBuffer.HDel h) {
                    batch.delete(field(h.hash(), h.field()));
                } else if (op instanceof TxnBuffer.HDelAll h) {
                    byte[] prefix = fieldPrefix(h.hash());
                    byte[] end = prefix.clone();
                    end[end.length - 1]++; // '\0' + 1: just past every field of this hash
                    batch.deleteRange(prefix, end);
                } else if (op instanceof TxnBuffer.Add a) {
                    counters.merge(a.counter(), a.delta(), Long::sum);
                }
            }
            for (Map.Entry<String, Long> c : counters.entrySet()) {
                batch.put(counterKey(c.getKey()), encodeCounter(stored.counter(c.getKey()) + c.getValue()));
            }
            db.write(writeOptions, batch);
        }
    }

    @Override
    public <T> T update(Txn<T> body) throws IOException {
        if (readOnly) {
            throw new IOException("metadata at " + dir + " is open read-only");
        }
        writeLock.lock();
        try {
            return handle.write(db -> {
                try (ReadOptions latest = new ReadOptions()) {
                    StoredReader stored = new StoredReader(db, latest);
                    TxnBuffer tx = new TxnBuffer(stored);
                    T result = body.run(tx);
                    commit(db, tx, stored);
                    return result;
                }
            });
        } catch (RocksDBException e) {
            throw wrap("commit", e);
        } finally {
            writeLock.unlock();
        }
    }

    @Override
    public <T> T read(ReadBody<T> body) throws IOException {
        try {
            return handle.read(db -> {
                Snapshot snapshot = db.getSnapshot();
                try (ReadOptions ro = new ReadOptions().setSnapshot(snapshot)) {
                    return body.run(new StoredReader(db, ro));
                } finally {
                    db.releaseSnapshot(snapshot);
                }
            });
        } catch (RocksDBException e) {
            throw wrap("read", e);
        }
    }

    @Override
    public long increment(String key, long delta) throws IOException {
        return update(tx -> {
            long v = tx.counter(key) + delta;
            tx.add(key, delta);
            return v;
        });
    }

    @Override
    public void sync() throws IOException {
        if (readOnly) {
            return;
        }
        try {
            handle.read(db -> {
                db.flushWal(true);
                return null;
            });
        } catch (RocksDBException e) {
            throw wrap("sync", e);
        }
    }

    @Override
    public String describe() {
        return "rocksdb://" + dir;
    }

    @Override
    public boolean exclusive() {
        return !readOnly; // the LOCK file keeps every other writer out
    }

    @Override
    public void close() throws IOException {
        writeLock.lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            handle.close(db -> {
                if (!readOnly) {
                    db.flushWal(true);
                }
                return null;
            });
        } catch (RocksDBException e) {
            throw wrap("close", e);
        } finally {
            writeOptions.close();
            options.close();
            blockCache.close();
            writeLock.unlock();
        }
    }
}
