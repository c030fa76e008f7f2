package io.partfs.engine.data;

import io.partfs.engine.meta.Slice;
import java.util.ArrayList;
import java.util.List;

/**
 * Which slices of a fragmented chunk a compaction merges, and the list that results: a pure
 * function of the chunk's slice list and how much of the chunk is inside the file, kept apart
 * and tested on its own, as {@link SliceView} is.
 *
 * <p>The newest slices are merged, size-tiered: taking slices from the top of the list, it stops
 * before a slice longer than all those taken together (at least two are taken). Appends one
 * write at a time thus merge into runs that double, so a byte is written again a few times over
 * its life, not once per compaction; a chunk written over again and again merges whole. The
 * merged slice holds the chunk's visible bytes over {@code [lo, hi)}, the span of the slices
 * taken (cut at the file's end), and goes on top of what is kept: the older slices, less those
 * wholly inside that span (nothing of them is visible any more, so they are freed too).
 *
 * <p>Beyond the file's end a chunk reads as zeros: a later extension of the file must not show
 * old bytes there. A truncation keeps that true with a hole on top; when the slices taken held
 * such a hole and a kept slice reaches past the end, the plan ends with a hole again, from
 * {@code holeFrom} (else -1).
 */
record CompactionPlan(int lo, int hi, List<Slice> kept, int holeFrom, int taken) {
    /**
     * The plan for {@code list} (two slices or more) of a chunk whose first {@code inFile} bytes
     * are inside the file; null when there is nothing to merge (the span is empty) or the list
     * would not get shorter.
     */
    static CompactionPlan of(List<Slice> list, int inFile) {
        int taken = 0;
        long sum = 0;
        int lo = Integer.MAX_VALUE;
        int hi = 0;
        for (int i = list.size() - 1; i >= 0; i--) {
            Slice s = list.get(i);
            if (taken >= 2 && sum < s.len()) {
                break;
            }
            sum += s.len();
            taken++;
            lo = Math.min(lo, s.pos());
            hi = Math.max(hi, s.end());
        }
        hi = Math.min(hi, inFile);
        if (lo >= hi) {
            return null;
        }
        List<Slice> kept = new ArrayList<>();
        for (Slice s : list.subList(0, list.size() - taken)) {
            if (s.pos() < lo || s.end() > hi) { // partly outside the span: still visible somewhere
                kept.add(s);
            }
        }
        // past the end: zeros before (as a truncation left it), so zeros after, whatever was taken
        boolean tailHole = inFile < ChunkStore.CHUNK && zerosBeyond(list, inFile) && !zerosBeyond(kept, inFile);
        if (kept.size() + 1 + (tailHole ? 1 : 0) >= list.size()) {
            return null; // no shorter: not worth writing
        }
        return new CompactionPlan(lo, hi, List.copyOf(kept), tailHole ? inFile : -1, taken);
    }

    /** Whether every byte of the chunk past {@code inFile} reads as zeros through {@code list}. */
    private static boolean zerosBeyond(List<Slice> list, int inFile) {
        for (SliceView.Segment seg : SliceView.resolve(list, inFile, ChunkStore.CHUNK)) {
            if (!seg.isZero()) {
                return false;
            }
        }
        return true;
    }

    /** The chunk's new list with {@code merged} (holding bytes {@code [lo, hi)}) in place of the slices taken. */
    List<Slice> apply(Slice merged) {
        List<Slice> out = new ArrayList<>(kept);
        out.add(merged);
        if (holeFrom >= 0) {
            out.add(Slice.hole(holeFrom, ChunkStore.CHUNK - holeFrom));
        }
        return out;
    }
}
