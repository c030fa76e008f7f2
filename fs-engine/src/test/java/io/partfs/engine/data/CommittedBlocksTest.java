package io.partfs.engine.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.partfs.engine.testing.TempDirs;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Which run of a file each commit takes ({@link CommittedBlocks}), on a real local file. */
class CommittedBlocksTest {
    private static final int BS = 64 << 10;
    private Path dir;
    private FileChannel ch;
    private final CommittedBlocks blocks = new CommittedBlocks();
    private final Random rnd = new Random(7);

    @BeforeEach
    void open() throws IOException {
        dir = Files.createTempDirectory("partfs-cb-");
        ch = FileChannel.open(dir.resolve("f"), StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE);
    }

    @AfterEach
    void close() throws IOException {
        ch.close();
        TempDirs.deleteRecursively(dir);
    }

    private void write(long at, int len) throws IOException {
        byte[] b = new byte[len];
        rnd.nextBytes(b);
        ch.write(ByteBuffer.wrap(b), at);
    }

    private byte[] read(long at, int len) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(len);
        ch.read(b, at);
        return b.array();
    }

    /** A commit of the file as it is: the runs it takes, recorded as taken. */
    private List<Long> commit() throws IOException {
        CommittedBlocks.Changes c = blocks.changes(ch, ch.size(), BS, false);
        if (c == null) {
            return null;
        }
        blocks.record(c);
        return java.util.Arrays.stream(c.bounds()).boxed().toList();
    }

    /** Runs {@code [b[0], b[1])}, {@code [b[2], b[3])}, ... */
    private static List<Long> run(long... bounds) {
        return java.util.Arrays.stream(bounds).boxed().toList();
    }

    private static void assertRun(List<Long> want, List<Long> got) {
        assertEquals(want, got, "runs committed");
    }

    @Test
    void theFirstTwoCommitsTakeTheWholeFileAndLaterOnesWhatChanged() throws IOException {
        assertNull(commit(), "an empty file: nothing to commit");
        write(0, 3 * BS + 100);
        assertRun(run(0, 3 * BS + 100), commit()); // first: not read
        write(3 * BS + 100, BS);
        assertRun(run(0, 4 * BS + 100), commit()); // second: read, nothing recorded to compare with
        write(4 * BS + 100, 2 * BS); // appended: the last block grew (from its old end), two more
        assertRun(run(4 * BS + 100, 6 * BS + 100), commit());
        write(BS + 10, 5); // one block in the middle
        assertRun(run(BS, 2 * BS), commit());
        write(10, 5);
        write(5 * BS + 7, 1); // two apart: a run each
        CommittedBlocks.Changes apart = blocks.changes(ch, ch.size(), BS, false);
        assertRun(run(0, BS, 5 * BS, 6 * BS), run(apart.bounds()));
        assertRun(run(0, 6 * BS), run(apart.merged().bounds())); // one run, when the attribute has no room for more
        assertRun(run(0, BS, 5 * BS, 6 * BS), commit());
        write(2 * BS, 1);
        write(3 * BS, 1); // side by side: one run
        assertRun(run(2 * BS, 4 * BS), commit());
        ch.write(ByteBuffer.wrap(read(2 * BS, BS)), 2 * BS); // the same bytes written again
        assertRun(run(6 * BS, 6 * BS + 100), commit()); // nothing changed: the last block, so times move on
        write(6 * BS + 100, 50);
        assertRun(run(6 * BS + 100, 6 * BS + 150), commit());
        write(6 * BS + 99, 2); // bytes inside what the block held at its commit: all of the block
        assertRun(run(6 * BS, 6 * BS + 150), commit());
    }

    @Test
    void anUploadThatReadOtherBytesThanItsCommitMakesTheNextCommitTakeTheBlock() throws IOException {
        Path file = dir.resolve("f");
        write(0, 4 * BS);
        commit();
        commit();
        write(2 * BS, 10);
        assertRun(run(2 * BS, 3 * BS), commit());
        byte[] committed = read(2 * BS, BS);
        assertArrayEquals(committed, blocks.readChecked(file, 2 * BS, BS)); // read as committed: nothing to do
        write(0, 1);
        assertRun(run(0, BS), commit());

        write(2 * BS, 10); // written after its commit (A to B), read by its upload, then written back (to A)
        byte[] later = read(2 * BS, BS);
        assertArrayEquals(later, blocks.readChecked(file, 2 * BS, BS));
        ch.write(ByteBuffer.wrap(committed), 2 * BS);
        assertRun(run(2 * BS, 3 * BS), commit()); // the object holds B: the file's A goes in again

        write(4 * BS, 100);
        assertRun(run(4 * BS, 4 * BS + 100), commit());
        write(4 * BS + 100, 100);
        assertRun(run(4 * BS + 100, 4 * BS + 200), commit()); // a run inside the block
        assertArrayEquals(read(4 * BS + 100, 100), blocks.readChecked(file, 4 * BS + 100, 100)); // checks all 200 bytes
        write(0, 1);
        assertRun(run(0, BS), commit());
        write(4 * BS + 5, 1); // written in the block's first part, which an upload of its second part reads
        blocks.readChecked(file, 4 * BS + 100, 100);
        assertRun(run(4 * BS, 4 * BS + 200), commit());
    }

    @Test
    void aTruncationAndAForgottenRecordMakeTheBlocksTakenAgain() throws IOException {
        write(0, 4 * BS);
        commit();
        commit();
        ch.truncate(2 * BS + 5);
        blocks.truncated(4 * BS, 2 * BS + 5);
        assertRun(run(2 * BS, 2 * BS + 5), commit());
        write(3 * BS, 10); // a write past the end: zeros between
        assertRun(run(2 * BS + 5, 3 * BS + 10), commit());
        blocks.forget();
        assertRun(run(0, 3 * BS + 10), commit());
    }

    @Test
    void aCommitMayBeForcedToTakeTheWholeFile() throws IOException {
        write(0, 3 * BS);
        commit();
        commit();
        write(BS, 1);
        CommittedBlocks.Changes c = blocks.changes(ch, ch.size(), BS, true);
        assertEquals(List.of(0L, 3L * BS), run(c.bounds()));
    }

    @Test
    void eachRunIsCommittedAsOneSlicePerChunkItSpans() {
        long c = ChunkStore.CHUNK;
        assertEquals(List.of(new CommittedBlocks.Span(0, 0, 100)), CommittedBlocks.spans(0, 100));
        assertEquals(List.of(new CommittedBlocks.Span(0, (int) (c - BS), BS), new CommittedBlocks.Span(1, 0, (int) c),
                new CommittedBlocks.Span(2, 0, 7)), CommittedBlocks.spans(c - BS, 2 * c + 7));
        assertEquals(List.of(new CommittedBlocks.Span(3, BS, 1)), CommittedBlocks.spans(3 * c + BS, 3 * c + BS + 1));
        assertEquals(List.of(new CommittedBlocks.Span(0, 5, 10), new CommittedBlocks.Span(1, 0, 3)),
                CommittedBlocks.spans(new long[] {5, 15, c, c + 3}));
    }
}
