package io.partfs.engine.data;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.partfs.engine.meta.Slice;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Which slices a compaction merges, and that the chunk reads the same after it. */
class CompactionPlanTest {
    private static final int CHUNK = ChunkStore.CHUNK;

    private static Slice s(long id, int pos, int len) {
        return new Slice(id, len, 0, len, pos);
    }

    @Test
    void appendsMergeInRunsThatDouble() {
        List<Slice> list = new ArrayList<>();
        list.add(s(1, 0, 1 << 20)); // a big first write
        for (int i = 0; i < 31; i++) {
            list.add(s(10 + i, (1 << 20) + 100 * i, 100));
        }
        CompactionPlan p = CompactionPlan.of(list, (1 << 20) + 3100);
        assertEquals(31, p.taken(), "the appends, not the big write under them");
        assertEquals(List.of(list.get(0)), p.kept());
        assertEquals(1 << 20, p.lo());
        assertEquals((1 << 20) + 3100, p.hi());
        Slice merged = s(99, p.lo(), p.hi() - p.lo());
        assertEquals(List.of(list.get(0), merged), p.apply(merged));

        List<Slice> next = new ArrayList<>(p.apply(merged)); // 31 more appends on top: merged again with the first run, as long
        for (int i = 0; i < 31; i++) {
            next.add(s(200 + i, (1 << 20) + 3100 + 100 * i, 100));
        }
        CompactionPlan q = CompactionPlan.of(next, (1 << 20) + 6200);
        assertEquals(32, q.taken());
        assertEquals(1 << 20, q.lo());
    }

    @Test
    void aRegionWrittenOverAgainMergesWholeAndFreesEveryCopy() {
        List<Slice> list = new ArrayList<>();
        for (int i = 0; i < 32; i++) {
            list.add(s(i + 1, 0, 4096));
        }
        CompactionPlan p = CompactionPlan.of(list, 4096);
        assertEquals(32, p.taken());
        assertEquals(List.of(), p.kept());
        assertEquals(-1, p.holeFrom());
    }

    @Test
    void aTruncatedTailStaysZeros() {
        // 10,000 bytes, cut to 5,000 (a hole on top), then writes; a later extension must read zeros past 5,000
        List<Slice> list = List.of(s(1, 0, 10_000), Slice.hole(5_000, CHUNK - 5_000), s(2, 100, 10), s(3, 200, 10));
        CompactionPlan p = CompactionPlan.of(list, 5_000);
        assertEquals(2, p.taken(), "the writes, not the hole under them, longer than both");
        assertEquals(List.of(list.get(0), list.get(1)), p.kept());
        checkSameView(list, p, 5_000);
        List<Slice> cutLast = List.of(s(1, 0, 10_000), s(2, 100, 10), s(3, 200, 10), Slice.hole(5_000, CHUNK - 5_000));
        CompactionPlan q = CompactionPlan.of(cutLast, 5_000);
        assertEquals(List.of(), q.kept(), "a hole on top is longer than anything under it: all are taken");
        checkSameView(cutLast, q, 5_000);
    }

    /** Large slices side by side (a file fsynced every few MiB) are fine objects: not rewritten. */
    @Test
    void onlySmallOrOverlappingSlicesAreWorthMerging() {
        int mib = 1 << 20;
        List<Slice> fsyncedEvery2MiB = new ArrayList<>();
        for (int i = 0; i < 32; i++) {
            fsyncedEvery2MiB.add(s(i + 1, i * 2 * mib, 2 * mib));
        }
        assertTrue(!Compactor.worthIt(fsyncedEvery2MiB, mib));
        assertTrue(Compactor.worthIt(List.of(s(1, 0, 100), s(2, 100, 100)), mib), "small appends");
        assertTrue(Compactor.worthIt(List.of(s(1, 0, 4 * mib), s(2, 0, 4 * mib)), mib), "written over");
        assertTrue(Compactor.worthIt(List.of(s(2, 3 * mib, 2 * mib), s(1, 0, 4 * mib)), mib), "overlapping, in any order");
        assertTrue(!Compactor.worthIt(List.of(s(1, 0, 2 * mib), Slice.hole(100, CHUNK - 100), s(2, 2 * mib, 100)), mib),
                "one small one and a hole");
    }

    /** Random lists, holes among them: the chunk reads the same through the new list, and zeros past the end stay zeros. */
    @Test
    void theChunkReadsTheSameAfterAnyPlan() {
        Random r = new Random(7);
        int planned = 0;
        for (int round = 0; round < 150; round++) {
            List<Slice> list = new ArrayList<>();
            int n = 2 + r.nextInt(40);
            for (int i = 0; i < n; i++) {
                int pos = r.nextInt(1500);
                list.add(r.nextInt(8) == 0 ? Slice.hole(pos, CHUNK - pos) : s(i + 1, pos, 1 + r.nextInt(r.nextBoolean() ? 40 : 600)));
            }
            int inFile = 1 + r.nextInt(2200);
            CompactionPlan p = CompactionPlan.of(list, inFile);
            if (p != null) {
                planned++;
                assertTrue(p.taken() >= 2 && p.lo() < p.hi() && p.hi() <= inFile, p.toString());
                assertTrue(p.apply(s(999, p.lo(), p.hi() - p.lo())).size() < list.size(), "shorter");
                checkSameView(list, p, inFile);
            }
        }
        assertTrue(planned > 75, "most random lists get a plan: " + planned);
    }

    /** What byte {@code p} of the chunk shows through {@code list}: {slice id, byte of the slice}, or {0, 0} for zeros. */
    private static long[] at(List<Slice> list, int p) {
        SliceView.Segment seg = SliceView.resolve(list, p, p + 1).get(0);
        return seg.isZero() ? new long[] {0, 0} : new long[] {seg.slice().id(), seg.sliceOff()};
    }

    private static void checkSameView(List<Slice> list, CompactionPlan p, int inFile) {
        Slice merged = s(999_999, p.lo(), p.hi() - p.lo());
        List<Slice> after = p.apply(merged);
        boolean zerosPastEnd = true;
        for (int x = inFile; x < 2300 && zerosPastEnd; x++) {
            zerosPastEnd = at(list, x)[0] == 0;
        }
        for (int x = 0; x < 2300; x++) {
            long[] now = at(after, x);
            if (now[0] == merged.id()) {
                now = at(list, p.lo() + (int) now[1]); // the merged slice holds what the old list showed there
            }
            if (x < inFile) {
                assertEquals(List.of(at(list, x)[0], at(list, x)[1]), List.of(now[0], now[1]), "byte " + x + " of " + list + " by " + p);
            } else if (zerosPastEnd) {
                assertEquals(0, now[0], "byte " + x + " past the end of " + list + " by " + p);
            }
        }
    }
}
