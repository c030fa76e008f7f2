package io.partfs.bench.jmh;

import java.util.SplittableRandom;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;

/** A random source per benchmark thread, so threads do not contend on one. */
@State(Scope.Thread)
public class ThreadRandom {
    final SplittableRandom random = new SplittableRandom(Thread.currentThread().getId());
}
