package io.partfs.engine.data;

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
    private int commits;

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

    /** A commit of the file as it is: the run it takes, recorded as taken. */
    private long[] commit() throws IOException {
        CommittedBlocks.Run run = blocks.changes(ch, ch.size(), BS, false);
        if (run == null) {
            return null;
        }
        blocks.record(run, ++commits);
        return new long[] {run.from(), run.to()};
    }

    private static long[] run(long from, long to) {
        return new long[] {from, to};
    }

    private static void assertRun(long[] want, long[] got) {
        assertEquals(List.of(want[0], want[1]), List.of(got[0], got[1]), "run committed");
    }

    @Test
    void theFirstTwoCommitsTakeTheWholeFileAndLaterOnesWhatChanged() throws IOException {
        assertNull(commit(), "an empty file: nothing to commit");
        write(0, 3 * BS + 100);
        assertRun(run(0, 3 * BS + 100), commit()); // first: not read
        write(3 * BS + 100, BS);
        assertRun(run(0, 4 * BS + 100), commit()); // second: read, nothing recorded to compare with
        write(4 * BS + 100, 2 * BS); // appended: the last block grew, two more
        assertRun(run(4 * BS, 6 * BS + 100), commit());
        write(BS + 10, 5); // one block in the middle
        assertRun(run(BS, 2 * BS), commit());
        write(10, 5);
        write(5 * BS + 7, 1); // two apart: the run between them too
        assertRun(run(0, 6 * BS), commit());
        ch.write(ByteBuffer.wrap(read(2 * BS, BS)), 2 * BS); // the same bytes written again
        assertRun(run(6 * BS, 6 * BS + 100), commit()); // nothing changed: the last block, so times move on
    }

    @Test
    void anUploadThatReadOtherBytesThanItsCommitMakesTheNextCommitTakeTheBlock() throws IOException {
        write(0, 4 * BS);
        commit();
        commit();
        write(2 * BS, 10);
        assertRun(run(2 * BS, 3 * BS), commit()); // commit 3 holds block 2
        byte[] committed = read(2 * BS, BS);
        blocks.uploaded(2 * BS, commits, committed); // read as committed: nothing to do
        write(0, 1);
        assertRun(run(0, BS), commit());

        write(2 * BS, 10); // written after commit 3 (A to B), read by its upload, then written back (to A)
        byte[] later = read(2 * BS, BS);
        ch.write(ByteBuffer.wrap(committed), 2 * BS);
        blocks.uploaded(2 * BS, 3, later);
        assertRun(run(2 * BS, 3 * BS), commit()); // the object holds B: the file's A goes in again

        blocks.uploaded(2 * BS, 3, later); // a block an earlier commit covered since: no matter what it read
        write(0, 1);
        assertRun(run(0, BS), commit());
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
        assertRun(run(2 * BS, 3 * BS + 10), commit());
        blocks.forget();
        assertRun(run(0, 3 * BS + 10), commit());
    }

    @Test
    void aCommitMayBeForcedToTakeTheWholeFile() throws IOException {
        write(0, 3 * BS);
        commit();
        commit();
        CommittedBlocks.Run run = blocks.changes(ch, ch.size(), BS, true);
        assertEquals(List.of(0L, 3L * BS), List.of(run.from(), run.to()));
    }

    @Test
    void aRunIsCommittedAsOneSlicePerChunkItSpans() {
        long c = ChunkStore.CHUNK;
        assertEquals(List.of(new CommittedBlocks.Span(0, 0, 100)), CommittedBlocks.spans(0, 100));
        assertEquals(List.of(new CommittedBlocks.Span(0, (int) (c - BS), BS), new CommittedBlocks.Span(1, 0, (int) c),
                new CommittedBlocks.Span(2, 0, 7)), CommittedBlocks.spans(c - BS, 2 * c + 7));
        assertEquals(List.of(new CommittedBlocks.Span(3, BS, 1)), CommittedBlocks.spans(3 * c + BS, 3 * c + BS + 1));
    }
}
