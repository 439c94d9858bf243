package dev.dkg.kafka.it;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * Zipf-distributed key ranks over {@code 1..n} (P(rank) proportional to {@code rank^-alpha}) by inverse transform
 * over the cumulative table, and the keys of those ranks: 16-byte keys in the same format as the Rust tests'
 * {@code zipf_key} ({@code sampler/tests/common/mod.rs}), so both languages' workloads look alike to the sampler.
 */
public final class Zipf {
    private final double[] cumulative;
    private final SplittableRandom rng;
    private final byte[][] keys;

    /** Ranks over {@code 1..n} with exponent {@code alpha}, reproducible from {@code seed}. */
    public Zipf(int n, double alpha, long seed) {
        cumulative = new double[n];
        double sum = 0;
        for (int r = 1; r <= n; r++) {
            sum += Math.pow(r, -alpha);
            cumulative[r - 1] = sum;
        }
        for (int i = 0; i < n; i++) {
            cumulative[i] /= sum;
        }
        rng = new SplittableRandom(seed);
        keys = new byte[n][];
        for (int r = 1; r <= n; r++) {
            keys[r - 1] = key(r);
        }
    }

    /** The number of distinct keys. */
    public int size() {
        return keys.length;
    }

    /** The next rank, 1-based (1 = most frequent). */
    public int nextRank() {
        int i = Arrays.binarySearch(cumulative, rng.nextDouble());
        int idx = i >= 0 ? i : -i - 1;
        return Math.min(idx, cumulative.length - 1) + 1;
    }

    /** The key of {@code rank} (shared array: do not modify). */
    public byte[] keyOf(int rank) {
        return keys[rank - 1];
    }

    /** The share of all records that {@code rank} gets. */
    public double share(int rank) {
        return rank == 1 ? cumulative[0] : cumulative[rank - 1] - cumulative[rank - 2];
    }

    /** The 16-byte key of {@code rank}: {@code g00-k<rank, 11 digits>}. */
    public static byte[] key(int rank) {
        return String.format("g00-k%011d", rank).getBytes(StandardCharsets.UTF_8);
    }
}
