package io.partfs.engine.data;

import io.partfs.engine.meta.Slice;
import java.util.ArrayList;
import java.util.List;

/**
 * What a reader sees in one chunk: the slices of its list laid over each other, later ones on
 * top. Pure function of the slice list; the part of the data path that decides which bytes a
 * read returns, so it is kept apart and tested on its own.
 */
final class SliceView {
    private SliceView() {
    }

    /**
     * A run of bytes at {@code pos} in the chunk: {@code len} bytes of {@code slice} starting
     * {@code sliceOff} into its objects, or zeros when {@code slice} is null or a hole.
     */
    record Segment(int pos, int len, Slice slice, int sliceOff) {
        boolean isZero() {
            return slice == null || slice.isHole();
        }
    }

    /** The segments covering {@code [from, to)} of a chunk, in order, with no gaps. */
    static List<Segment> resolve(List<Slice> slices, int from, int to) {
        // Intervals not yet covered, walking from the newest slice to the oldest.
        List<int[]> open = new ArrayList<>();
        open.add(new int[] {from, to});
        List<Segment> found = new ArrayList<>();
        for (int i = slices.size() - 1; i >= 0 && !open.isEmpty(); i--) {
            Slice s = slices.get(i);
            List<int[]> next = new ArrayList<>();
            for (int[] iv : open) {
                int a = Math.max(iv[0], s.pos());
                int b = Math.min(iv[1], s.end());
                if (a >= b) {
                    next.add(iv);
                    continue;
                }
                found.add(new Segment(a, b - a, s, s.off() + (a - s.pos())));
                if (iv[0] < a) {
                    next.add(new int[] {iv[0], a});
                }
                if (b < iv[1]) {
                    next.add(new int[] {b, iv[1]});
                }
            }
            open = next;
        }
        for (int[] iv : open) {
            found.add(new Segment(iv[0], iv[1] - iv[0], null, 0));
        }
        found.sort((x, y) -> Integer.compare(x.pos(), y.pos()));
        return found;
    }
}
