package io.partfs.bench.jmh;

import java.util.SplittableRandom;

/**
 * Zipf-distributed ranks in [0, n) with exponent s (1.0 is the classic skew: a few parts'
 * metadata read far more often than the rest), drawn by inverting a precomputed CDF.
 */
final class Zipf {
    private final double[] cdf;

    Zipf(int n, double s) {
        cdf = new double[n];
        double sum = 0;
        for (int i = 0; i < n; i++) {
            sum += 1 / Math.pow(i + 1, s);
            cdf[i] = sum;
        }
        for (int i = 0; i < n; i++) {
            cdf[i] /= sum;
        }
    }

    int next(SplittableRandom r) {
        int i = java.util.Arrays.binarySearch(cdf, r.nextDouble());
        return Math.min(cdf.length - 1, i >= 0 ? i : -i - 1);
    }
}
