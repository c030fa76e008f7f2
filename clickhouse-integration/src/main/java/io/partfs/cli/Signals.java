package io.partfs.cli;

import sun.misc.Signal;

/**
 * SIGTERM and SIGINT handling for a running mount: the handler only wakes the main thread,
 * which then flushes, unmounts and exits 0 in order (shutdown hooks would run in no order).
 */
final class Signals {
    private Signals() {
    }

    static void onTermination(Runnable action) {
        Signal.handle(new Signal("TERM"), s -> action.run());
        Signal.handle(new Signal("INT"), s -> action.run());
    }
}
