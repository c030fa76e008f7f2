package io.partfs.engine.data;

import io.partfs.engine.meta.MetaEngine.CommittedSlice;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The uploads {@link UploadRecheck} has still to ask about, written down in the staging
 * directory ({@value #FILE}), so that a process killed between an upload and its question
 * leaves them to the next start rather than leaking the object when another mount had freed
 * its slice. A line per uploaded block of a committed slice, {@code <key> <slice size> <inode>
 * <chunk>}, appended right after the upload; the file is emptied once every upload in it was
 * asked about, and written again without the answered ones when they are most of it.
 *
 * <p>Not fsynced: a killed process's writes are in the page cache and survive it; a machine
 * that loses power may lose lines, whose objects are then left to {@code partfs gc} as before.
 * Thread-safe.
 */
final class UploadJournal implements AutoCloseable {
    private static final Logger log = LoggerFactory.getLogger(UploadJournal.class);
    static final String FILE = ".uploaded";
    /** Lines beyond those still to ask about before the file is written again without the others. */
    static final int SLACK_LINES = 4096;

    /** An upload still to ask about: the block's key and its slice. */
    record Entry(String key, CommittedSlice slice) {
    }

    private final Path file;
    private final Map<String, Entry> unanswered = new LinkedHashMap<>();
    private FileChannel out;
    private long lines;
    private boolean failed;

    /** Opens the journal of staging directory {@code dir}, with what an earlier process left in it ({@link #unanswered}). */
    UploadJournal(Path dir) throws IOException {
        this.file = dir.resolve(FILE);
        if (Files.exists(file)) {
            // Latin-1 decodes any byte: a damaged line fails to parse, and the file does not stop the mount
            for (String line : Files.readAllLines(file, StandardCharsets.ISO_8859_1)) {
                Entry e = parse(line);
                if (e != null) { // a line cut short by the kill is not one
                    unanswered.put(e.key(), e);
                }
            }
            lines = unanswered.size();
            if (unanswered.isEmpty()) {
                Files.delete(file);
            }
        }
    }

    private static Entry parse(String line) {
        String[] f = line.split(" ");
        if (f.length != 4) {
            return null;
        }
        try {
            return new Entry(f[0], new CommittedSlice(ChunkStore.sliceIdOf(f[0]), Integer.parseInt(f[1]), Long.parseLong(f[2]),
                    Long.parseLong(f[3])));
        } catch (NumberFormatException | IndexOutOfBoundsException e) {
            return null;
        }
    }

    /** What was written down and not answered: at opening, what an earlier process left. */
    synchronized List<Entry> unanswered() {
        return new ArrayList<>(unanswered.values());
    }

    /** Writes down that block {@code key} of {@code slice} was uploaded and is to be asked about. */
    synchronized void add(String key, CommittedSlice slice) {
        if (unanswered.containsKey(key)) {
            return;
        }
        Entry e = new Entry(key, slice);
        unanswered.put(key, e);
        try {
            if (out == null) {
                out = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.APPEND);
            }
            ByteBuffer b = ByteBuffer.wrap(line(e).getBytes(StandardCharsets.US_ASCII));
            while (b.hasRemaining()) {
                out.write(b);
            }
            lines++;
        } catch (IOException ex) {
            if (!failed) { // the question is asked all the same; only a kill before it would leak the object
                failed = true;
                log.warn("cannot write down uploads still to ask about in {} (a crash before they are asked about may"
                        + " leave objects for 'partfs gc'): {}", file, ex.toString());
            }
        }
    }

    private static String line(Entry e) {
        CommittedSlice s = e.slice();
        return e.key() + " " + s.size() + " " + s.ino() + " " + s.chunk() + "\n";
    }

    /** The uploads of {@code keys} were asked about (or need not be): their lines are done with. */
    synchronized void answered(Collection<String> keys) {
        boolean any = false;
        for (String k : keys) {
            any |= unanswered.remove(k) != null;
        }
        if (!any) {
            return;
        }
        try {
            if (unanswered.isEmpty()) {
                closeOut();
                Files.deleteIfExists(file);
                lines = 0;
            } else if (lines > 2L * unanswered.size() + SLACK_LINES) {
                rewrite();
            }
        } catch (IOException e) {
            log.debug("cannot shorten {}: {}", file, e.toString());
        }
    }

    /** Writes the file again with the unanswered lines only (a new file renamed over it). */
    private void rewrite() throws IOException {
        closeOut();
        Path tmp = file.resolveSibling(FILE + ".tmp");
        StringBuilder sb = new StringBuilder();
        for (Entry e : unanswered.values()) {
            sb.append(line(e));
        }
        Files.writeString(tmp, sb, StandardCharsets.US_ASCII);
        Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        lines = unanswered.size();
    }

    private void closeOut() throws IOException {
        if (out != null) {
            out.close();
            out = null;
        }
    }

    /** Lines in the file now; for tests. */
    synchronized long lines() {
        return lines;
    }

    @Override
    public synchronized void close() {
        try {
            closeOut();
        } catch (IOException e) {
            log.debug("cannot close {}: {}", file, e.toString());
        }
    }
}
