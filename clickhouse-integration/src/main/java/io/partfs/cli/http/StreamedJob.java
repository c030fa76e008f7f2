package io.partfs.cli.http;

import com.sun.net.httpserver.HttpExchange;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BiFunction;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A long job a request starts on a thread of its own, answered as it goes: a line
 * {@code progress FIELDS} a second, and a last line {@code done FIELDS} or {@code error MESSAGE}
 * (the job's progress as {@code key=value} fields, see the endpoints). The client going away
 * cancels the job. Used by {@code POST /warmup} and {@code POST /compact}.
 */
final class StreamedJob<P> {
    private static final Logger log = LoggerFactory.getLogger(StreamedJob.class);

    /** The work: returns its last progress. */
    interface Work<P> {
        P run() throws IOException, InterruptedException;
    }

    private final String name;
    private final Work<P> work;
    private final Supplier<P> progress;
    private final BiFunction<P, Double, String> fields;
    private final Runnable cancel;

    /**
     * A job called {@code name} (for the thread and the log) that does {@code work}, tells its
     * {@code progress} while it runs, lays a progress out as fields given the seconds so far, and
     * stops early on {@code cancel}.
     */
    StreamedJob(String name, Work<P> work, Supplier<P> progress, BiFunction<P, Double, String> fields, Runnable cancel) {
        this.name = name;
        this.work = work;
        this.progress = progress;
        this.fields = fields;
        this.cancel = cancel;
    }

    /** Runs the job for {@code path}, answering {@code ex} (status 200, then the lines) until it ends. */
    void serve(HttpExchange ex, String path, Runnable countRequest) throws IOException {
        long t0 = System.nanoTime();
        CompletableFuture<P> done = CompletableFuture.supplyAsync(() -> {
            try {
                return work.run();
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted", e);
            }
        }, r -> {
            Thread t = new Thread(r, "partfs-" + name);
            t.setDaemon(true);
            t.start();
        });
        ex.getResponseHeaders().set("Content-Type", "text/plain; charset=utf-8");
        countRequest.run();
        ex.sendResponseHeaders(200, 0);
        OutputStream out = ex.getResponseBody();
        try {
            report(out, done, path, t0);
        } finally {
            cancel.run(); // the client went away, or this thread was interrupted: stop
            try {
                done.get(1, TimeUnit.MINUTES); // what it started has ended
            } catch (ExecutionException | TimeoutException | InterruptedException e) {
                // reported already, or nobody is left to tell
            }
        }
    }

    private void report(OutputStream out, CompletableFuture<P> done, String path, long t0) throws IOException {
        while (true) {
            try {
                P p = done.get(1, TimeUnit.SECONDS);
                String f = fields.apply(p, (System.nanoTime() - t0) / 1e9);
                line(out, "done " + f);
                log.info("{} of {} done: {}", name, path, f);
                return;
            } catch (TimeoutException e) {
                line(out, "progress " + fields.apply(progress.get(), (System.nanoTime() - t0) / 1e9));
            } catch (ExecutionException e) {
                Throwable c = e.getCause() instanceof java.io.UncheckedIOException u ? u.getCause() : e.getCause();
                line(out, "error " + String.valueOf(c.getMessage()).lines().findFirst().orElse(c.toString()));
                log.warn("{} of {} failed: {}", name, path, c.toString());
                return;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private static void line(OutputStream out, String s) throws IOException {
        out.write((s + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }
}
