package io.partfs.engine.data;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.partfs.engine.meta.Slice;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

class SliceViewTest {
    @Test
    void noSlicesReadsZeros() {
        assertEquals(List.of(new SliceView.Segment(0, 100, null, 0)), SliceView.resolve(List.of(), 0, 100));
    }

    @Test
    void laterSlicesCoverEarlierOnes() {
        Slice a = new Slice(1, 100, 0, 100, 0);
        Slice b = new Slice(2, 10, 0, 10, 40);
        List<SliceView.Segment> segs = SliceView.resolve(List.of(a, b), 0, 100);
        assertEquals(List.of(
                new SliceView.Segment(0, 40, a, 0),
                new SliceView.Segment(40, 10, b, 0),
                new SliceView.Segment(50, 50, a, 50)), segs);
    }

    @Test
    void holesAndGapsReadAsZeros() {
        Slice a = new Slice(1, 100, 0, 100, 0);
        Slice hole = Slice.hole(30, 1000);
        List<SliceView.Segment> segs = SliceView.resolve(List.of(a, hole), 20, 200);
        assertEquals(2, segs.size());
        assertEquals(new SliceView.Segment(20, 10, a, 20), segs.get(0));
        assertEquals(true, segs.get(1).isZero());
    }

    /** Against a byte-array model: painting slices in order must give what resolve says. */
    @Test
    void matchesAPaintedModel() {
        Random rnd = new Random(42);
        for (int round = 0; round < 500; round++) {
            int size = 1 + rnd.nextInt(300);
            long[] model = new long[size]; // slice id * 1000 + offset within slice, 0 = zero
            List<Slice> slices = new ArrayList<>();
            for (int i = 1; i <= 1 + rnd.nextInt(8); i++) {
                int pos = rnd.nextInt(size);
                int len = 1 + rnd.nextInt(size - pos);
                boolean hole = rnd.nextInt(5) == 0;
                Slice s = hole ? Slice.hole(pos, len) : new Slice(i, len, 0, len, pos);
                slices.add(s);
                for (int k = 0; k < len; k++) {
                    model[pos + k] = hole ? 0 : i * 1000L + k;
                }
            }
            int from = rnd.nextInt(size);
            int to = from + 1 + rnd.nextInt(size - from);
            int expectPos = from;
            for (SliceView.Segment seg : SliceView.resolve(slices, from, to)) {
                assertEquals(expectPos, seg.pos(), "segments are contiguous");
                for (int k = 0; k < seg.len(); k++) {
                    long got = seg.isZero() ? 0 : seg.slice().id() * 1000L + seg.sliceOff() + k;
                    assertEquals(model[seg.pos() + k], got, "round " + round + " byte " + (seg.pos() + k));
                }
                expectPos += seg.len();
            }
            assertEquals(to, expectPos);
        }
    }
}
