package io.partfs.engine.testing;

import io.partfs.engine.object.ObjectStore;
import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * Passes every call to a real object store and remembers, per key, each PUT and DELETE: which
 * client ({@code who}) made it, when, on which thread, and through which PartFS methods. For
 * finding out where a leaked object came from ({@code SharedVolumeFuzzTest} with
 * {@code -Dpartfs.strictLeaks=true}); a stack walk per request makes it too slow for more.
 */
public final class KeyHistoryStore implements ObjectStore {
    private final Map<String, List<String>> history;
    private final ObjectStore real;
    private final String who;

    /** Wraps {@code real} for client {@code who}, noting into {@code history} (shared by the clients of one test). */
    public KeyHistoryStore(ObjectStore real, String who, Map<String, List<String>> history) {
        this.real = real;
        this.who = who;
        this.history = history;
    }

    /** A history several stores can share. */
    public static Map<String, List<String>> newHistory() {
        return new ConcurrentHashMap<>();
    }

    private void note(String key, String what) {
        StringBuilder sb = new StringBuilder(who).append(' ').append(what).append(" at ").append(System.nanoTime() / 1000)
                .append(" us on ").append(Thread.currentThread().getName());
        for (StackTraceElement e : new Throwable().getStackTrace()) {
            if (e.getClassName().startsWith("io.partfs.engine") && !e.getClassName().equals(KeyHistoryStore.class.getName())) {
                sb.append(" < ").append(e.getClassName().substring("io.partfs.engine.".length())).append('.')
                        .append(e.getMethodName()).append(':').append(e.getLineNumber());
            }
        }
        history.computeIfAbsent(key, k -> new CopyOnWriteArrayList<>()).add(sb.toString());
    }

    @Override
    public void put(String key, byte[] data) throws IOException {
        note(key, "PUT");
        real.put(key, data);
    }

    @Override
    public byte[] get(String key, long offset, int length) throws IOException {
        return real.get(key, offset, length);
    }

    @Override
    public Optional<ObjectInfo> head(String key) throws IOException {
        return real.head(key);
    }

    @Override
    public void delete(String key) throws IOException {
        note(key, "DELETE");
        real.delete(key);
    }

    @Override
    public void deleteAll(List<String> keys) throws IOException {
        for (String k : keys) {
            note(k, "DELETE (batch)");
        }
        real.deleteAll(keys);
    }

    @Override
    public List<ObjectInfo> list(String prefix, String startAfter, int limit) throws IOException {
        return real.list(prefix, startAfter, limit);
    }

    @Override
    public java.nio.file.Path localFile(String key) {
        return real.localFile(key);
    }

    @Override
    public Optional<LocalSpace> localSpace() {
        return real.localSpace();
    }

    @Override
    public String describe() {
        return real.describe();
    }

    @Override
    public void close() throws IOException {
        real.close();
    }
}
