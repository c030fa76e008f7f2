package io.partfs.engine.object;

import io.partfs.engine.object.ObjectStore.IoConsumer;
import io.partfs.engine.object.ObjectStore.ObjectInfo;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Lists every object under a prefix with several listings at once, for stores where a listing
 * is a round trip: the keys are cut along their "directories" ('/'), found level by level with
 * delimiter listings, and each directory {@code depth} levels down is listed in full, all of it
 * by {@code threads} threads. The directories and the objects beside them partition the keys,
 * so every object is handed over once. Stores that keep objects as files list a directory far
 * faster than a page of a whole bucket (s3proxy here: 50,000 objects in 0.8-1.9 s by directory
 * against 13.5 s paging through the bucket, which rereads the whole tree for every page), and
 * on S3 the listings overlap their latency.
 *
 * <p>The consumer runs on the calling thread only, a page at a time, so it needs no locking;
 * the listings wait for it when it falls {@code 2 * threads} pages behind. The first failure,
 * of a listing or of the consumer, stops the scan and is thrown; no listing thread outlives it.
 */
final class ParallelScan {
    /** One page of a listing one level deep: objects directly under the prefix, directories under it, the next page's token (null at the end). */
    record Level(List<ObjectInfo> objects, List<String> directories, String next) {
    }

    /** The two listings a store offers. */
    interface Lister {
        /** A delimiter listing of {@code prefix}, one page ({@code token}: null for the first). */
        Level level(String prefix, String token) throws IOException;

        /** As {@link ObjectStore#list}. */
        List<ObjectInfo> page(String prefix, String startAfter, int limit) throws IOException;
    }

    private static final int PAGE = 1000;

    private final Lister lister;
    private final ExecutorService pool;
    private final BlockingQueue<List<ObjectInfo>> pages;
    /** Listings queued or running; the one that brings it to 0 queues {@link #end}. */
    private final AtomicInteger open = new AtomicInteger();
    private final AtomicReference<Throwable> failed = new AtomicReference<>();
    private final List<ObjectInfo> end = new ArrayList<>(0); // compared by identity

    private ParallelScan(Lister lister, int threads) {
        this.lister = lister;
        this.pool = Executors.newFixedThreadPool(threads, r -> {
            Thread t = new Thread(r, "partfs-list");
            t.setDaemon(true);
            return t;
        });
        this.pages = new ArrayBlockingQueue<>(2 * threads);
    }

    static void scan(Lister lister, String prefix, int depth, int threads, IoConsumer<ObjectInfo> each) throws IOException {
        if (threads < 1 || depth < 0) {
            throw new IllegalArgumentException("threads must be at least 1 and depth at least 0, not " + threads + " and " + depth);
        }
        new ParallelScan(lister, threads).run(prefix, depth, each);
    }

    private void run(String prefix, int depth, IoConsumer<ObjectInfo> each) throws IOException {
        try {
            submit(prefix, depth);
            while (true) {
                List<ObjectInfo> page = pages.take();
                if (page == end || failed.get() != null) {
                    break;
                }
                for (ObjectInfo o : page) {
                    each.accept(o);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("listing interrupted");
        } finally {
            pool.shutdownNow(); // a consumer that failed leaves listings waiting to queue their pages
            try {
                pool.awaitTermination(1, TimeUnit.MINUTES);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        Throwable t = failed.get();
        if (t instanceof IOException io) {
            throw io;
        }
        if (t != null) {
            throw new IOException("listing failed: " + t, t);
        }
    }

    private void submit(String prefix, int depth) {
        open.incrementAndGet();
        pool.execute(() -> {
            try {
                if (failed.get() == null) {
                    list(prefix, depth);
                }
            } catch (Throwable t) {
                if (failed.compareAndSet(null, t)) {
                    pages.offer(end); // wakes the consumer unless the queue is full, and then it has pages to wake it
                }
            } finally {
                if (open.decrementAndGet() == 0) {
                    try {
                        pages.put(end);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt(); // the scan is being stopped
                    }
                }
            }
        });
    }

    private void list(String prefix, int depth) throws IOException, InterruptedException {
        if (depth > 0) {
            String token = null;
            do {
                Level level = lister.level(prefix, token);
                put(level.objects());
                for (String dir : level.directories()) {
                    submit(dir, depth - 1);
                }
                token = level.next();
            } while (token != null);
            return;
        }
        String after = null;
        while (true) {
            List<ObjectInfo> page = lister.page(prefix, after, PAGE);
            put(page);
            if (page.size() < PAGE) {
                return;
            }
            after = page.get(page.size() - 1).key();
        }
    }

    private void put(List<ObjectInfo> page) throws InterruptedException {
        if (!page.isEmpty()) {
            pages.put(page);
        }
    }
}
