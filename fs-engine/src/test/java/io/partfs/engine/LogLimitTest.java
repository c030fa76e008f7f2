package io.partfs.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class LogLimitTest {
    private final AtomicLong now = new AtomicLong(5_000_000_000L);
    private final LogLimit limit = new LogLimit(Duration.ofSeconds(10), now::get);

    @Test
    void oneLineAnIntervalAndItSaysHowManyWereLeftOut() {
        assertEquals("", limit.admit(), "the first one is logged as it is");
        for (int i = 0; i < 500; i++) {
            now.addAndGet(10_000_000L);
            assertNull(limit.admit(), "within 10 s of the last line");
        }
        now.addAndGet(5_000_000_000L);
        assertEquals(" (and 500 more like it not logged since 10 s ago)", limit.admit());
        now.addAndGet(10_000_000_000L);
        assertEquals("", limit.admit(), "none left out since");
    }

    @Test
    void theArgumentsOfALoggedLineGetTheCountAppended() {
        java.util.List<String> lines = new java.util.ArrayList<>();
        org.slf4j.Logger log = (org.slf4j.Logger) java.lang.reflect.Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {org.slf4j.Logger.class}, (proxy, method, args) -> {
                    if (method.getName().equals("warn") && args.length == 2 && args[1] instanceof Object[] a) {
                        lines.add(org.slf4j.helpers.MessageFormatter.arrayFormat((String) args[0], a).getMessage());
                    }
                    return null;
                });
        limit.warn(log, "upload of {} failed: {}", "k1", "refused");
        limit.warn(log, "upload of {} failed: {}", "k2", "refused");
        now.addAndGet(10_000_000_000L);
        limit.warn(log, "upload of {} failed: {}", "k3", "refused");
        assertEquals(java.util.List.of("upload of k1 failed: refused",
                "upload of k3 failed: refused (and 1 more like it not logged since 10 s ago)"), lines);
    }
}
