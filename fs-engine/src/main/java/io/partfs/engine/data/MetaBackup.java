package io.partfs.engine.data;

import io.partfs.engine.meta.KvStore;
import io.partfs.engine.meta.MetaDump;
import io.partfs.engine.meta.MetaEngine;
import io.partfs.engine.object.ObjectStore;
import java.io.BufferedWriter;
import java.io.ByteArrayOutputStream;
import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.time.temporal.ChronoUnit;
import java.time.temporal.IsoFields;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.zip.GZIPOutputStream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Backups of a volume's metadata in the volume's own object store, made by a mount now and then
 * (as JuiceFS's mount does): without them, the loss of the disk that holds an embedded RocksDB
 * volume's metadata loses every file, though the data is safe in S3.
 *
 * <p>A backup is a {@link MetaDump}, gzip-compressed, stored as pieces of at most a few MiB
 * (so neither the mount nor {@code partfs load} holds a whole dump in memory) under
 * {@code <volume>/meta/dump-<UTC time>/part-NNNNN}, followed by a {@code complete} object that
 * says how many pieces and bytes there are: a backup without it was cut short and is never
 * loaded. On RocksDB a dump is one snapshot, so a backup is a point in time even while files
 * change; on Redis, which has none, files changed during the dump may be copied half old.
 *
 * <p>Several mounts of a shared volume take turns: the one whose transaction moves the volume's
 * {@value #LAST_BACKUP} time on makes the backup ({@link #claim}). After each backup old ones
 * are thinned ({@link #toKeep}): all of the last two days, the newest of each day for two weeks,
 * the newest of each week for two months.
 */
public final class MetaBackup {
    private static final Logger log = LoggerFactory.getLogger(MetaBackup.class);
    /** Where a volume's backups are, after its name. */
    public static final String DIR = "/meta/";
    static final String PIECE = "part-";
    static final String COMPLETE = "complete";
    /** The metadata key holding when the last backup was claimed (epoch milliseconds, text). */
    static final String LAST_BACKUP = "lastBackup";
    /** The metadata key holding when the last backup was completed (epoch milliseconds, text). */
    static final String LAST_BACKUP_DONE = "lastBackupDone";
    /**
     * The metadata key holding which clock {@value #LAST_BACKUP_DONE} was read from: the Linux
     * boot id of the machine that made the backup ({@link #thisClock}); absent before it existed.
     */
    static final String LAST_BACKUP_CLOCK = "lastBackupClock";
    /** Clock difference allowed for between this machine and another one that made the last backup. */
    static final long OTHER_CLOCK_MARGIN_MS = Duration.ofMinutes(1).toMillis();
    /** What the same clock may be stepped back by between two readings (an NTP correction). */
    static final long SAME_CLOCK_MARGIN_MS = Duration.ofSeconds(1).toMillis();
    private static final DateTimeFormatter NAME =
            DateTimeFormatter.ofPattern("'dump-'yyyyMMdd-HHmmss-SSS").withZone(ZoneOffset.UTC);
    /** An incomplete backup older than this is not being written any more: it is deleted. */
    private static final Duration ABANDONED = Duration.ofDays(1);
    private static final int DEFAULT_PIECE = 8 << 20;

    /** A backup found in the object store. {@code complete} only when its {@value #COMPLETE} object exists. */
    public record Backup(String name, Instant taken, boolean complete, List<String> pieces, long bytes) {
    }

    private final KvStore kv;
    private final ObjectStore store;
    private final String volume;
    private final int pieceSize;

    public MetaBackup(KvStore kv, ObjectStore store, String volume) {
        this(kv, store, volume, DEFAULT_PIECE);
    }

    MetaBackup(KvStore kv, ObjectStore store, String volume, int pieceSize) {
        this.kv = kv;
        this.store = store;
        this.volume = volume;
        this.pieceSize = pieceSize;
    }

    private String prefix() {
        return volume + DIR;
    }

    /**
     * Dumps the metadata into a new backup named after {@code now}. Stops with an
     * {@link InterruptedIOException} once {@code cancelled} says so; what it had stored is then
     * deleted, as on any failure.
     */
    public Backup write(Instant now, BooleanSupplier cancelled) throws IOException {
        String name = NAME.format(now);
        String base = prefix() + name + "/";
        Pieces pieces = new Pieces(base, cancelled);
        try {
            GZIPOutputStream gz = new GZIPOutputStream(pieces, 1 << 16);
            Writer w = new BufferedWriter(new OutputStreamWriter(gz, StandardCharsets.UTF_8), 1 << 16);
            MetaDump.Counts c = MetaDump.dump(kv, w, n -> { });
            w.flush();
            gz.finish();
            pieces.putPiece();
            String marker = "pieces " + pieces.keys.size() + "\nbytes " + pieces.total + "\nrecords " + c.records()
                    + "\ninodes " + c.inodes() + "\nvolume " + c.format().name() + " " + c.format().uuid() + "\n";
            store.put(base + COMPLETE, marker.getBytes(StandardCharsets.UTF_8));
            byte[] done = Long.toString(System.currentTimeMillis()).getBytes(StandardCharsets.UTF_8);
            String clock = thisClock();
            String uuid = c.format().uuid();
            kv.update(tx -> {
                if (!uuid.equals(MetaEngine.volumeUuid(tx))) {
                    return null; // the volume's metadata went away after the dump (a Redis restarted empty): this backup restores it
                }
                tx.put(LAST_BACKUP_DONE, done);
                if (clock != null) {
                    tx.put(LAST_BACKUP_CLOCK, clock.getBytes(StandardCharsets.UTF_8));
                } else {
                    tx.delete(LAST_BACKUP_CLOCK);
                }
                return null;
            });
            return new Backup(name, now, true, List.copyOf(pieces.keys), pieces.total);
        } catch (IOException | RuntimeException e) {
            try {
                store.delete(base + COMPLETE); // a put that failed may still have stored it
                store.deleteAll(pieces.keys);
            } catch (IOException | RuntimeException d) {
                e.addSuppressed(d);
            }
            throw e;
        }
    }

    /** Every backup of the volume in the store, complete or not, oldest first. */
    public List<Backup> list() throws IOException {
        Map<String, List<String>> pieces = new LinkedHashMap<>();
        Map<String, Long> bytes = new java.util.HashMap<>();
        Set<String> complete = new HashSet<>();
        for (ObjectStore.ObjectInfo o : store.listAll(prefix())) {
            String rest = o.key().substring(prefix().length());
            int slash = rest.indexOf('/');
            if (slash < 0 || taken(rest.substring(0, slash)) == null) {
                continue; // not ours
            }
            String name = rest.substring(0, slash);
            String file = rest.substring(slash + 1);
            List<String> p = pieces.computeIfAbsent(name, k -> new ArrayList<>());
            if (file.equals(COMPLETE)) {
                complete.add(name);
            } else if (file.startsWith(PIECE)) {
                p.add(o.key());
                bytes.merge(name, o.size(), Long::sum);
            }
        }
        List<Backup> all = new ArrayList<>();
        for (Map.Entry<String, List<String>> e : pieces.entrySet()) {
            List<String> p = e.getValue().stream().sorted().toList();
            all.add(new Backup(e.getKey(), taken(e.getKey()), complete.contains(e.getKey()), p, bytes.getOrDefault(e.getKey(), 0L)));
        }
        all.sort(Comparator.comparing(Backup::taken));
        return all;
    }

    /** When a backup of this name was taken, or null when it is not a backup's name. */
    static Instant taken(String name) {
        try {
            return Instant.from(NAME.parse(name));
        } catch (DateTimeParseException e) {
            return null;
        }
    }

    /** The complete backup called {@code name}, or the newest for {@code latest}. */
    public Backup find(String name) throws IOException {
        List<Backup> complete = list().stream().filter(Backup::complete).toList();
        if (complete.isEmpty()) {
            throw new IllegalArgumentException("no complete metadata backup of volume '" + volume + "' under " + prefix()
                    + " in " + store.describe() + ": check --storage and --name");
        }
        if (name.equals("latest")) {
            return complete.get(complete.size() - 1);
        }
        return complete.stream().filter(b -> b.name().equals(name)).findFirst().orElseThrow(() -> new IllegalArgumentException(
                "no complete metadata backup '" + name + "' of volume '" + volume + "': 'partfs load --list-backups' shows them"));
    }

    /**
     * The compressed dump of a complete backup, its pieces read one at a time. Fails at once when
     * a piece is missing or the pieces do not add up to what the {@value #COMPLETE} object says.
     */
    public InputStream open(Backup b) throws IOException {
        byte[] marker = store.get(prefix() + b.name() + "/" + COMPLETE, 0, -1);
        Map<String, String> said = new java.util.HashMap<>();
        for (String line : new String(marker, StandardCharsets.UTF_8).split("\n")) {
            int sp = line.indexOf(' ');
            if (sp > 0) {
                said.put(line.substring(0, sp), line.substring(sp + 1));
            }
        }
        if (!String.valueOf(b.pieces().size()).equals(said.get("pieces")) || !String.valueOf(b.bytes()).equals(said.get("bytes"))) {
            throw new IOException("metadata backup " + b.name() + " is damaged: it should have " + said.get("pieces") + " pieces of "
                    + said.get("bytes") + " bytes in all, the store holds " + b.pieces().size() + " of " + b.bytes()
                    + ": load another backup");
        }
        List<String> keys = b.pieces();
        return new InputStream() {
            private int next;
            private InputStream current = InputStream.nullInputStream();

            @Override
            public int read() throws IOException {
                byte[] one = new byte[1];
                return read(one, 0, 1) < 0 ? -1 : one[0] & 0xff;
            }

            @Override
            public int read(byte[] buf, int off, int len) throws IOException {
                while (true) {
                    int n = current.read(buf, off, len);
                    if (n >= 0 || next == keys.size()) {
                        return n;
                    }
                    current = new java.io.ByteArrayInputStream(store.get(keys.get(next++), 0, -1));
                }
            }
        };
    }

    /**
     * Deletes the backups {@link #toKeep} does not keep, and incomplete ones older than a day
     * (cut short by a crash). Returns how many backups were deleted.
     */
    public int prune(Instant now) throws IOException {
        List<Backup> all = list();
        Set<String> keep = toKeep(all.stream().filter(Backup::complete).toList(), now);
        int deleted = 0;
        for (Backup b : all) {
            boolean abandoned = !b.complete() && b.taken().isBefore(now.minus(ABANDONED));
            if (b.complete() ? !keep.contains(b.name()) : abandoned) {
                store.delete(prefix() + b.name() + "/" + COMPLETE); // first: a backup never looks complete without its pieces
                store.deleteAll(b.pieces());
                deleted++;
            }
        }
        return deleted;
    }

    /**
     * The names of the backups to keep at {@code now}: the newest, every one of the last two
     * days, the newest of each day for two weeks, the newest of each week for two months.
     */
    static Set<String> toKeep(List<Backup> complete, Instant now) {
        Set<String> keep = new HashSet<>();
        Set<Object> days = new HashSet<>();
        Set<Object> weeks = new HashSet<>();
        List<Backup> newestFirst = complete.stream().sorted(Comparator.comparing(Backup::taken).reversed()).toList();
        for (Backup b : newestFirst) {
            Duration age = Duration.between(b.taken(), now);
            java.time.LocalDate day = b.taken().atZone(ZoneOffset.UTC).toLocalDate();
            boolean newestOfDay = days.add(day);
            boolean newestOfWeek = weeks.add(day.get(IsoFields.WEEK_BASED_YEAR) * 100 + day.get(IsoFields.WEEK_OF_WEEK_BASED_YEAR));
            if (keep.isEmpty() || age.compareTo(Duration.ofDays(2)) < 0
                    || (age.compareTo(Duration.ofDays(14)) < 0 && newestOfDay)
                    || (age.compareTo(Duration.ofDays(60)) < 0 && newestOfWeek)) {
                keep.add(b.name());
            }
        }
        return keep;
    }

    /**
     * True when this caller is to make the backup due at {@code now}: no backup was claimed
     * within {@code every}. Moves the volume's last backup time to {@code now} in the same
     * transaction, so of several mounts only one makes it. False, writing nothing, when the
     * metadata holds no volume any more (a Redis that restarted empty under the mount).
     */
    public boolean claim(Duration every, Instant now) throws IOException {
        return kv.update(tx -> {
            if (MetaEngine.volumeUuid(tx) == null) {
                return false; // no volume to back up here (a Redis restarted empty): nothing is written into it
            }
            byte[] v = tx.get(LAST_BACKUP);
            long last = v == null ? 0 : Long.parseLong(new String(v, StandardCharsets.UTF_8));
            if (now.toEpochMilli() - last < every.toMillis() && now.toEpochMilli() >= last) {
                return false;
            }
            tx.put(LAST_BACKUP, Long.toString(now.toEpochMilli()).getBytes(StandardCharsets.UTF_8));
            return true;
        });
    }

    /**
     * When the volume's last backup began (it may still be running; a failed one is not
     * counted), or null when no mount has made one.
     */
    public static Instant lastStarted(KvStore kv) throws IOException {
        byte[] v = kv.read(r -> r.get(LAST_BACKUP));
        return v == null ? null : Instant.ofEpochMilli(Long.parseLong(new String(v, StandardCharsets.UTF_8)));
    }

    /**
     * The time (epoch milliseconds, this machine's clock) after which data staged here is in no
     * backup: when the last backup was completed, plus a margin for the clocks: a second when
     * this machine made it (same clock), a minute when another one did (or one that did not
     * say which). {@code Long.MAX_VALUE} while one is under way (or one died before completing,
     * until the next completes), since a dump of Redis reads the volume over its whole duration;
     * {@code Long.MIN_VALUE} when none was ever made. For write-back mounts, which need not
     * upload a deleted file's blocks that no backup can list.
     */
    public static long unbackedSince(KvStore kv) throws IOException {
        List<byte[]> v = kv.read(r -> r.getAll(List.of(LAST_BACKUP, LAST_BACKUP_DONE, LAST_BACKUP_CLOCK)));
        Long started = v.get(0) == null ? null : Long.parseLong(new String(v.get(0), StandardCharsets.UTF_8));
        Long done = v.get(1) == null ? null : Long.parseLong(new String(v.get(1), StandardCharsets.UTF_8));
        if (started != null && (done == null || done < started)) {
            return Long.MAX_VALUE;
        }
        if (done == null) {
            return Long.MIN_VALUE;
        }
        String clock = thisClock();
        boolean sameClock = clock != null && v.get(2) != null && clock.equals(new String(v.get(2), StandardCharsets.UTF_8));
        return done + (sameClock ? SAME_CLOCK_MARGIN_MS : OTHER_CLOCK_MARGIN_MS);
    }

    private static volatile String clock;

    /**
     * This machine's clock, named by the running kernel's boot id (which containers on one host
     * share, as they share its clock); null where there is none to read.
     */
    public static String thisClock() {
        String c = clock;
        if (c == null) {
            try {
                c = java.nio.file.Files.readString(java.nio.file.Path.of("/proc/sys/kernel/random/boot_id")).trim();
            } catch (IOException | RuntimeException e) {
                c = "";
            }
            clock = c;
        }
        return c.isEmpty() ? null : c;
    }

    /** Takes back a claim whose backup failed, so the next tick tries again instead of a whole interval later. */
    void unclaim(Instant claimed) throws IOException {
        kv.update(tx -> {
            byte[] v = tx.get(LAST_BACKUP);
            if (v != null && new String(v, StandardCharsets.UTF_8).equals(Long.toString(claimed.toEpochMilli()))) {
                tx.delete(LAST_BACKUP);
            }
            return null;
        });
    }

    /**
     * Backs the volume up every {@code every} from a thread of its own, while open: checks every
     * {@code min(every, 1 min)} whether a backup is due, claims it, writes it, thins the old ones.
     * {@link #close} stops a backup under way and waits for the thread, so the metadata engine
     * can be closed after it.
     */
    public static final class Schedule implements Closeable {
        private final MetaBackup backup;
        private final Duration every;
        private final ScheduledExecutorService timer;
        private volatile boolean closing;

        public Schedule(MetaBackup backup, Duration every) {
            this.backup = backup;
            this.every = every;
            this.timer = java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "partfs-meta-backup");
                t.setDaemon(true);
                t.setPriority(Thread.MIN_PRIORITY);
                return t;
            });
            long tick = Math.min(every.toMillis(), TimeUnit.MINUTES.toMillis(1));
            timer.scheduleWithFixedDelay(this::tick, tick, tick, TimeUnit.MILLISECONDS);
        }

        private void tick() {
            Instant now = Instant.now();
            try {
                if (!backup.claim(every, now)) {
                    return;
                }
            } catch (IOException | RuntimeException e) {
                log.warn("cannot check whether a metadata backup is due (tried again in a minute): {}", e.toString());
                return;
            }
            long started = System.nanoTime();
            try {
                Backup b = backup.write(now, () -> closing);
                log.info("metadata backup {} of volume {}: {} KiB in {} piece(s), {} s", b.name(), backup.volume,
                        (b.bytes() + 1023) >> 10, b.pieces().size(), String.format("%.1f", (System.nanoTime() - started) / 1e9));
            } catch (IOException | RuntimeException e) {
                if (closing) {
                    log.info("metadata backup stopped by the unmount; the next mount makes one when due");
                } else {
                    log.warn("metadata backup of volume {} failed (tried again at the next check): {}", backup.volume, e.toString());
                }
                try {
                    backup.unclaim(now);
                } catch (IOException | RuntimeException u) {
                    log.debug("cannot take back the backup claim: {}", u.toString());
                }
                return;
            }
            try {
                int pruned = backup.prune(now);
                if (pruned > 0) {
                    log.info("deleted {} old metadata backup(s) of volume {}", pruned, backup.volume);
                }
            } catch (IOException | RuntimeException e) {
                log.warn("cannot delete old metadata backups of volume {} (tried again after the next backup): {}",
                        backup.volume, e.toString());
            }
        }

        @Override
        public void close() {
            closing = true;
            timer.shutdownNow();
            try {
                if (!timer.awaitTermination(60, TimeUnit.SECONDS)) {
                    log.warn("metadata backup did not stop within 60 s");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** An output stream storing what it is given as pieces of {@link #pieceSize} bytes. */
    private final class Pieces extends OutputStream {
        private final String base;
        private final BooleanSupplier cancelled;
        private final ByteArrayOutputStream buf = new ByteArrayOutputStream();
        final List<String> keys = new ArrayList<>();
        long total;

        Pieces(String base, BooleanSupplier cancelled) {
            this.base = base;
            this.cancelled = cancelled;
        }

        @Override
        public void write(int b) throws IOException {
            write(new byte[] {(byte) b}, 0, 1);
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            if (cancelled.getAsBoolean()) {
                throw new InterruptedIOException("metadata backup cancelled");
            }
            while (len > 0) {
                int n = Math.min(len, pieceSize - buf.size());
                buf.write(b, off, n);
                off += n;
                len -= n;
                if (buf.size() == pieceSize) {
                    putPiece();
                }
            }
        }

        /** Stores what is buffered as the next piece (nothing when empty). */
        void putPiece() throws IOException {
            if (buf.size() == 0) {
                return;
            }
            String key = base + PIECE + String.format("%05d", keys.size());
            keys.add(key); // before the put: a failed put may still have stored it, and is deleted with the rest
            store.put(key, buf.toByteArray());
            total += buf.size();
            buf.reset();
        }
    }
}
