package io.partfs.engine.data;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.FileType;
import io.partfs.engine.VolumeFormat;
import io.partfs.engine.meta.KvStore;
import io.partfs.engine.meta.MetaDump;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.meta.MetaUrl;
import io.partfs.engine.meta.RocksKvStore;
import io.partfs.engine.object.LocalObjectStore;
import io.partfs.engine.object.ObjectStore;
import io.partfs.engine.testing.Concurrently;
import io.partfs.engine.testing.RedisServer;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.GZIPInputStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Metadata backups in the object store, on embedded RocksDB and a local object store (and claims on Redis). */
class MetaBackupTest {
    private static final Instant T0 = Instant.parse("2026-12-02T05:00:00Z");
    @TempDir
    Path dir;
    private MetaEngine meta;
    private ObjectStore store;

    @BeforeEach
    void setUp() throws Exception {
        meta = new MetaEngine(new RocksKvStore(dir.resolve("meta")));
        meta.format(VolumeFormat.create("vol", VolumeFormat.DEFAULT_BLOCK_SIZE, "file:///objects"), 0, 0);
        store = new LocalObjectStore(dir.resolve("objects"));
        for (int i = 0; i < 2000; i++) {
            meta.mknod(MetaEngine.ROOT, "file-" + i + "-with-a-longer-name.bin", FileType.FILE, 0644, 0, 0, 0, null);
        }
    }

    @AfterEach
    void tearDown() throws IOException {
        meta.close();
        store.close();
    }

    private static String dump(KvStore kv) throws IOException {
        StringWriter w = new StringWriter();
        MetaDump.dump(kv, w, n -> { });
        return w.toString();
    }

    private MetaDump.Source source(MetaBackup backups, MetaBackup.Backup b) {
        return () -> new BufferedReader(new InputStreamReader(new GZIPInputStream(backups.open(b)), StandardCharsets.UTF_8));
    }

    @Test
    void backupInPiecesLoadsIntoEmptyMetadataWithTheSliceGap() throws Exception {
        MetaBackup backups = new MetaBackup(meta.store(), store, "vol", 4096);
        MetaBackup.Backup b = backups.write(T0, () -> false);
        assertTrue(b.pieces().size() > 2, "a dump of 2,000 files in 4 KiB pieces: " + b.pieces().size());
        assertEquals(List.of(b), backups.list());
        assertEquals(b, backups.find("latest"));
        assertTrue(store.head("vol/meta/" + b.name() + "/complete").isPresent());

        MetaDump.Counts checked = MetaDump.check(source(backups, b));
        assertEquals(2001, checked.inodes());
        try (KvStore target = MetaUrl.parse(dir.resolve("restored").toString()).openOrCreate()) {
            MetaDump.load(source(backups, b), checked, target, 1L << 40, n -> { });
            String restored = dump(target);
            String original = dump(meta.store());
            assertEquals(original.replaceFirst("\nC\tnextSlice\t(\\d+)\n", "\n"), restored.replaceFirst("\nC\tnextSlice\t(\\d+)\n", "\n"),
                    "every record but the slice counter as it was");
            assertEquals(counter(original, "nextSlice") + (1L << 40), counter(restored, "nextSlice"));
        }
    }

    private static long counter(String dump, String name) {
        return dump.lines().filter(l -> l.startsWith("C\t" + name + "\t")).mapToLong(l -> Long.parseLong(l.split("\t")[2]))
                .findFirst().orElseThrow();
    }

    @Test
    void aBackupWithoutItsCompleteMarkOrWithAPieceMissingIsNeverLoaded() throws Exception {
        MetaBackup backups = new MetaBackup(meta.store(), store, "vol", 4096);
        MetaBackup.Backup first = backups.write(T0, () -> false);
        MetaBackup.Backup second = backups.write(T0.plusSeconds(3600), () -> false);
        store.delete("vol/meta/" + second.name() + "/complete"); // as if the mount died while storing it
        assertEquals(first, backups.find("latest"), "the newest complete backup");
        assertFalse(backups.list().get(1).complete());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> backups.find(second.name()));
        assertTrue(e.getMessage().contains("--list-backups"), e.getMessage());

        store.delete(first.pieces().get(1));
        MetaBackup.Backup damaged = backups.find("latest");
        IOException d = assertThrows(IOException.class, () -> backups.open(damaged));
        assertTrue(d.getMessage().contains("is damaged") && d.getMessage().contains("load another backup"), d.getMessage());
    }

    /**
     * The metadata restarts empty while a backup of it is being finished (a CI run met it): the
     * backup, dumped before, stays complete and loadable, and neither its completion nor a later
     * claim is written into the empty metadata, which a restore of that backup must find empty.
     */
    @Test
    void aVolumeGoneFromTheMetadataDuringABackupKeepsTheBackupAndGetsNothingWritten() throws Exception {
        ObjectStore restartingMeta = new ObjectStore() {
            @Override
            public void put(String key, byte[] data) throws IOException {
                if (key.endsWith("/" + MetaBackup.COMPLETE)) {
                    meta.store().update(tx -> {
                        tx.delete("setting");
                        return null;
                    });
                }
                store.put(key, data);
            }

            @Override
            public byte[] get(String key, long offset, int length) throws IOException {
                return store.get(key, offset, length);
            }

            @Override
            public java.util.Optional<ObjectStore.ObjectInfo> head(String key) throws IOException {
                return store.head(key);
            }

            @Override
            public void delete(String key) throws IOException {
                store.delete(key);
            }

            @Override
            public List<ObjectStore.ObjectInfo> list(String prefix, String startAfter, int limit) throws IOException {
                return store.list(prefix, startAfter, limit);
            }

            @Override
            public String describe() {
                return store.describe();
            }

            @Override
            public void close() {
            }
        };
        MetaBackup backups = new MetaBackup(meta.store(), restartingMeta, "vol");
        Instant now = Instant.now();
        assertTrue(backups.claim(Duration.ofHours(1), now));
        MetaBackup.Backup b = backups.write(now, () -> false);
        assertTrue(backups.find("latest").complete() && backups.find("latest").name().equals(b.name()), "the backup stays");
        assertNull(meta.store().read(r -> r.get(MetaBackup.LAST_BACKUP_DONE)), "its completion is not recorded in the empty metadata");
        meta.store().update(tx -> {
            tx.delete(MetaBackup.LAST_BACKUP);
            return null;
        });
        assertFalse(backups.claim(Duration.ofHours(1), now.plus(Duration.ofHours(2))), "nothing to back up");
        assertNull(meta.store().read(r -> r.get(MetaBackup.LAST_BACKUP)), "and no claim written");
    }

    /** What a write-back mount asks before it drops a deleted file's staged blocks: after what time is data in no backup. */
    @Test
    void unbackedSinceIsTheLastCompletionAndNeverWhileABackupRuns() throws Exception {
        assertEquals(Long.MIN_VALUE, MetaBackup.unbackedSince(meta.store()), "no backup ever");
        MetaBackup backups = new MetaBackup(meta.store(), store, "vol");
        Instant now = Instant.now(); // claims and completions are both on the wall clock
        assertTrue(backups.claim(Duration.ofHours(1), now));
        assertEquals(Long.MAX_VALUE, MetaBackup.unbackedSince(meta.store()), "claimed, not completed: it may list anything");
        long before = System.currentTimeMillis();
        backups.write(now, () -> false);
        long done = MetaBackup.unbackedSince(meta.store());
        long margin = MetaBackup.thisClock() != null ? MetaBackup.SAME_CLOCK_MARGIN_MS : MetaBackup.OTHER_CLOCK_MARGIN_MS;
        assertTrue(done >= before + margin && done <= System.currentTimeMillis() + margin, "completed at " + done + " (with the margin)");
        meta.store().update(tx -> {
            tx.put(MetaBackup.LAST_BACKUP_CLOCK, "another machine".getBytes(java.nio.charset.StandardCharsets.UTF_8));
            return null;
        });
        assertEquals(done - margin + MetaBackup.OTHER_CLOCK_MARGIN_MS, MetaBackup.unbackedSince(meta.store()),
                "made by another machine: a minute for the two clocks");
        meta.store().update(tx -> {
            tx.delete(MetaBackup.LAST_BACKUP_CLOCK);
            return null;
        });
        assertEquals(done - margin + MetaBackup.OTHER_CLOCK_MARGIN_MS, MetaBackup.unbackedSince(meta.store()),
                "by a machine that did not say which: the same");
        Instant next = now.plus(Duration.ofHours(2));
        assertTrue(backups.claim(Duration.ofHours(1), next));
        assertEquals(Long.MAX_VALUE, MetaBackup.unbackedSince(meta.store()), "the next one runs");
        backups.unclaim(next);
        assertEquals(done - margin + MetaBackup.OTHER_CLOCK_MARGIN_MS, MetaBackup.unbackedSince(meta.store()),
                "it failed: the last completed one counts");
    }

    @Test
    void aCancelledBackupLeavesNothing() throws Exception {
        MetaBackup backups = new MetaBackup(meta.store(), store, "vol", 8); // the gzip header alone fills a piece
        AtomicInteger writes = new AtomicInteger();
        assertThrows(java.io.InterruptedIOException.class, () -> backups.write(T0, () -> writes.incrementAndGet() > 1));
        assertTrue(writes.get() > 1, "cancelled after the first piece was stored");
        assertEquals(List.of(), store.listAll("vol/meta/"), "the pieces stored before the cancel are deleted");
    }

    @Test
    void pruneKeepsTwoDaysThenDailyForTwoWeeksThenWeeklyForTwoMonths() throws Exception {
        Instant now = Instant.parse("2026-12-02T12:30:00Z");
        List<MetaBackup.Backup> hourly = new ArrayList<>();
        for (int h = 0; h < 24 * 90; h++) { // hourly backups for 90 days
            Instant t = now.minus(Duration.ofHours(h)).minusSeconds(60);
            hourly.add(new MetaBackup.Backup("b" + h, t, true, List.of(), 0));
        }
        Set<String> keep = MetaBackup.toKeep(hourly, now);
        long lastTwoDays = hourly.stream().filter(b -> b.taken().isAfter(now.minus(Duration.ofDays(2)))).count();
        assertEquals(48, lastTwoDays);
        assertTrue(keep.containsAll(hourly.subList(0, 48).stream().map(MetaBackup.Backup::name).toList()));
        // days 2-13 one each (the newest of a day is 23:29 UTC), days 14-59 one per ISO week
        long daily = keep.stream().filter(n -> {
            int h = Integer.parseInt(n.substring(1));
            return h >= 48 && h < 14 * 24;
        }).count();
        assertTrue(daily >= 11 && daily <= 13, "about one a day for the rest of two weeks: " + daily);
        long weekly = keep.stream().filter(n -> Integer.parseInt(n.substring(1)) >= 14 * 24).count();
        assertTrue(weekly >= 6 && weekly <= 8, "about one a week for the rest of two months: " + weekly);
        assertFalse(keep.stream().anyMatch(n -> Integer.parseInt(n.substring(1)) >= 60 * 24), "nothing older than two months");

        MetaBackup.Backup old = new MetaBackup.Backup("old", now.minus(Duration.ofDays(400)), true, List.of(), 0);
        assertEquals(Set.of("old"), MetaBackup.toKeep(List.of(old), now), "the newest backup is kept however old");
    }

    @Test
    void pruneDeletesWhatThePolicyDropsAndAbandonedIncompleteBackups() throws Exception {
        MetaBackup backups = new MetaBackup(meta.store(), store, "vol", 1 << 20);
        MetaBackup.Backup ancient = backups.write(T0.minus(Duration.ofDays(100)), () -> false);
        MetaBackup.Backup abandoned = backups.write(T0.minus(Duration.ofDays(3)), () -> false);
        store.delete("vol/meta/" + abandoned.name() + "/complete");
        MetaBackup.Backup writing = backups.write(T0.minus(Duration.ofMinutes(5)), () -> false);
        store.delete("vol/meta/" + writing.name() + "/complete"); // perhaps another mount still writing it
        MetaBackup.Backup fresh = backups.write(T0, () -> false);
        assertEquals(2, backups.prune(T0));
        List<String> left = backups.list().stream().map(MetaBackup.Backup::name).toList();
        assertEquals(List.of(writing.name(), fresh.name()), left);
        assertFalse(left.contains(ancient.name()));
    }

    @Test
    void claimsOnASharedRedisVolumeGoToOneMountPerInterval() throws Exception {
        try (RedisServer redis = RedisServer.start()) {
            List<KvStore> clients = new ArrayList<>();
            try {
                for (int i = 0; i < 4; i++) {
                    clients.add(MetaUrl.parse(redis.url(3)).open());
                }
                new MetaEngine(clients.get(0)).format(VolumeFormat.create("vol", VolumeFormat.DEFAULT_BLOCK_SIZE,
                        "file:///objects"), 0, 0); // (its store is closed with the clients)
                AtomicInteger won = new AtomicInteger();
                Concurrently.run(4, t -> {
                    if (new MetaBackup(clients.get(t), store, "vol").claim(Duration.ofHours(1), T0)) {
                        won.incrementAndGet();
                    }
                });
                assertEquals(1, won.get(), "one of four mounts makes the backup");
                MetaBackup one = new MetaBackup(clients.get(0), store, "vol");
                assertFalse(one.claim(Duration.ofHours(1), T0.plus(Duration.ofMinutes(59))));
                assertTrue(one.claim(Duration.ofHours(1), T0.plus(Duration.ofMinutes(61))));
                one.unclaim(T0.plus(Duration.ofMinutes(61)));
                assertTrue(one.claim(Duration.ofHours(1), T0.plus(Duration.ofMinutes(62))), "a failed backup's claim is taken back");
            } finally {
                for (KvStore c : clients) {
                    c.close();
                }
            }
        }
    }

    @Test
    void scheduleBacksUpWhileOpenAndStopsAtClose() throws Exception {
        MetaBackup backups = new MetaBackup(meta.store(), store, "vol");
        try (MetaBackup.Schedule s = new MetaBackup.Schedule(backups, Duration.ofMillis(200))) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (backups.list().stream().filter(MetaBackup.Backup::complete).count() < 2) {
                assertTrue(System.nanoTime() < deadline, "two backups within 30 s at a 200 ms interval");
                java.util.concurrent.locks.LockSupport.parkNanos(50_000_000L); // poll interval
            }
        }
        int after = backups.list().size();
        assertFalse(Thread.getAllStackTraces().keySet().stream().anyMatch(t -> t.getName().equals("partfs-meta-backup") && t.isAlive()),
                "the backup thread is gone after close");
        assertEquals(after, backups.list().size(), "no backup after close");
    }
}
