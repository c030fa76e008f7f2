package io.partfs.engine.testing;

/**
 * A test's teardown in one line: each step runs, in order, even when one before it failed
 * (a mount that failed to unmount still has its volume closed and its directory removed); the
 * first failure is thrown at the end with the others suppressed in it. Null steps are skipped,
 * for what the test never got to start.
 */
public final class Teardown {
    private Teardown() {
    }

    public static void inOrder(AutoCloseable... steps) throws Exception {
        Exception first = null;
        for (AutoCloseable step : steps) {
            if (step == null) {
                continue;
            }
            try {
                step.close();
            } catch (Exception e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
