package io.partfs.cli.http;

import com.sun.net.httpserver.HttpExchange;
import io.partfs.engine.Attr;
import io.partfs.engine.PartFs;
import io.partfs.engine.data.CompactPass;
import java.io.IOException;
import java.util.Locale;
import java.util.concurrent.Semaphore;

/**
 * {@code POST /compact?path=P}: compacts the fragmented chunks of the files at or under P (an
 * absolute path on this sidecar's mount; see {@link CompactPass}), answering as it goes with a
 * {@code progress} line a second and a last line {@code done} (or {@code error MESSAGE}), each
 * with the fields of {@link #fields}. One at a time: it holds one of the endpoint's four threads
 * for as long as it takes.
 */
final class CompactEndpoint {
    private final SidecarHttpServer.Volume volume;
    private final Semaphore running = new Semaphore(1);

    CompactEndpoint(SidecarHttpServer.Volume volume) {
        this.volume = volume;
    }

    /** Serves one request; the caller maps IllegalArgumentException to 400 before anything is sent. */
    void serve(HttpExchange ex, String method, String path, Runnable countRequest) throws IOException {
        if (!method.equals("POST")) {
            throw new IllegalArgumentException("use POST");
        }
        if (volume == null) {
            throw new IllegalArgumentException("this endpoint serves no mounted volume");
        }
        Attr start = volume.resolve(path);
        PartFs fs = volume.fs();
        if (fs.compactor() == null) {
            throw new IllegalArgumentException("the volume is mounted read-only: nothing is compacted on it");
        }
        if (!running.tryAcquire()) {
            throw new IllegalArgumentException("a compaction is running on this mount already: wait for it to end");
        }
        try {
            CompactPass pass = new CompactPass(fs.meta(), fs.chunks(), fs.compactor());
            new StreamedJob<>("compact", () -> pass.runAtLowPriority(start), pass::progress, CompactEndpoint::fields, pass::cancel)
                    .serve(ex, path, countRequest);
        } finally {
            running.release();
        }
    }

    /**
     * {@code files=.. chunks=.. fragmented=.. compacted_chunks=.. compactions=.. slices_before=..
     * slices_after=.. bytes_written=.. skipped=.. failed=.. seconds=..[ first_error=...]}: the
     * counters of {@link CompactPass.Progress}, the time so far, and the first failure's message
     * (to the end of the line).
     */
    static String fields(CompactPass.Progress p, double seconds) {
        String s = String.format(Locale.ROOT, "files=%d chunks=%d fragmented=%d compacted_chunks=%d compactions=%d slices_before=%d"
                + " slices_after=%d bytes_written=%d skipped=%d failed=%d seconds=%.1f", p.files(), p.chunks(), p.fragmented(),
                p.compactedChunks(), p.compactions(), p.slicesBefore(), p.slicesAfter(), p.bytesWritten(), p.skipped(), p.failed(),
                seconds);
        return p.firstError() == null ? s : s + " first_error=" + p.firstError().replace('\n', ' ');
    }
}
