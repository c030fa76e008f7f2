package io.partfs.cli.http;

import com.sun.net.httpserver.HttpExchange;
import io.partfs.engine.Attr;
import io.partfs.engine.data.Warmup;
import java.io.IOException;
import java.util.Locale;
import java.util.concurrent.Semaphore;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code POST /warmup?path=P&threads=N}: fetches the blocks under P (an absolute path on this
 * sidecar's mount) into its block cache, answering as it goes with a {@code progress} line a
 * second and a last line {@code done} (or {@code error MESSAGE}), each {@code key=value}
 * fields (see {@link #fields}). With {@code check=1} it fetches nothing and only counts the
 * blocks already on local disk; with {@code verify=1} it also reads the blocks in the block cache
 * and checks them against their checksums, dropping (and unless checking, fetching again) the
 * damaged ones. At most two run at once: each holds one of the endpoint's four
 * threads for as long as it takes.
 */
final class WarmupEndpoint {
    private static final Logger log = LoggerFactory.getLogger(WarmupEndpoint.class);

    private final SidecarHttpServer.Volume volume;
    private final Semaphore running = new Semaphore(2);

    WarmupEndpoint(SidecarHttpServer.Volume volume) {
        this.volume = volume;
    }

    /** The inode at {@code path}, which must be absolute and on this mount; bad input is an IllegalArgumentException. */
    Attr resolve(String path) throws IOException {
        if (volume == null) {
            throw new IllegalArgumentException("this endpoint serves no mounted volume");
        }
        return volume.resolve(path);
    }

    /**
     * The most fetches at once this process can hold: each holds a whole block in the heap until
     * it is in the cache, and warmup may take a quarter of the heap (the mount serves ClickHouse
     * meanwhile; with the launcher's 512 MiB and 4 MiB blocks, 32).
     */
    static int maxThreads(int blockSize) {
        return (int) Math.max(1, Math.min(256, Runtime.getRuntime().maxMemory() / 4 / blockSize));
    }

    static int threads(String value) {
        try {
            int n = value == null ? 16 : Integer.parseInt(value);
            if (n >= 1 && n <= 256) {
                return n;
            }
        } catch (NumberFormatException e) {
            // said below
        }
        throw new IllegalArgumentException("threads= must be a number from 1 to 256");
    }

    /** Serves one request; the caller maps IllegalArgumentException to 400 before anything is sent. */
    void serve(HttpExchange ex, String method, String path, String threadsParam, String checkParam,
            String verifyParam, Runnable countRequest)
            throws IOException {
        if (!method.equals("POST")) {
            throw new IllegalArgumentException("use POST");
        }
        Attr start = resolve(path);
        int threads = Math.min(threads(threadsParam), maxThreads(volume.fs().format().blockSize()));
        boolean check = flag(checkParam);
        boolean verify = flag(verifyParam);
        Warmup warmup = new Warmup(volume.fs().meta(), volume.fs().chunks(), threads, check, verify);
        if (!running.tryAcquire()) {
            throw new IllegalArgumentException("two warmups or checks are running on this mount already: wait for one to end");
        }
        try {
            log.info("warmup{}{} of {} with {} threads", check ? " check" : "", verify ? " verifying checksums" : "", path, threads);
            long capacity = volume.fs().chunks().cache().capacity();
            new StreamedJob<>("warmup", () -> warmup.run(start), warmup::progress,
                    (p, seconds) -> fields(p, seconds, capacity, threads), warmup::cancel).serve(ex, path, countRequest);
        } finally {
            running.release();
        }
    }

    private static boolean flag(String param) {
        return param != null && !param.equals("0");
    }

    /**
     * {@code files=.. file_bytes=.. blocks=.. block_bytes=.. local=.. local_bytes=.. fetched=..
     * fetched_bytes=.. failed=.. verified=.. uncheckable=.. damaged=.. seconds=.. cache_capacity=..
     * threads=..[ first_error=...]}: the counters of {@link Warmup.Progress}, the time so far, the
     * block cache's capacity, the threads used, and the first failure's message (to the end of
     * the line).
     */
    static String fields(Warmup.Progress p, double seconds, long cacheCapacity, int threads) {
        String s = String.format(Locale.ROOT, "files=%d file_bytes=%d blocks=%d block_bytes=%d local=%d local_bytes=%d fetched=%d"
                + " fetched_bytes=%d failed=%d verified=%d uncheckable=%d damaged=%d seconds=%.1f cache_capacity=%d threads=%d",
                p.files(), p.fileBytes(), p.blocks(), p.blockBytes(), p.localBlocks(), p.localBytes(), p.fetchedBlocks(),
                p.fetchedBytes(), p.failedBlocks(), p.verifiedBlocks(), p.uncheckableBlocks(), p.damagedBlocks(), seconds,
                cacheCapacity, threads);
        return p.firstError() == null ? s : s + " first_error=" + p.firstError().replace('\n', ' ');
    }
}
