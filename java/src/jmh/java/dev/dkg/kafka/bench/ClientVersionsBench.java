package dev.dkg.kafka.bench;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.LongUnaryOperator;

/**
 * The plug-in's per-key cost on several kafka-clients versions in ONE JVM, interleaved: each version gets a class
 * loader of its own (the same plug-in classes and dependencies, only the kafka-clients jar differs) running
 * {@link ClientVersionLoop}, and the versions take turns, a batch of about {@code dkg.bench.sliceMs} of work each,
 * round after round. Each batch is timed in thread CPU time, so that time the thread spends descheduled on a busy
 * machine (where JMH's wall-clock forks vary tenfold) is not counted. Prints each version's median ns per key and
 * the median, min, max and interquartile range of the per-round ratios to the first version.
 *
 * <p>Arguments: {@code <shared classpath> <version>=<kafka-clients jar> ...} (scripts/bench-java-clients --in-jvm
 * builds them). Properties: {@code dkg.bench.rounds} (40), {@code dkg.bench.warmupRounds} (10),
 * {@code dkg.bench.keyLength} (16), {@code dkg.bench.sliceMs} (50).
 */
public final class ClientVersionsBench {
    private ClientVersionsBench() {}

    public static void main(String[] args) throws Exception {
        int rounds = Integer.getInteger("dkg.bench.rounds", 40);
        int warmup = Integer.getInteger("dkg.bench.warmupRounds", 10);
        int keyLength = Integer.getInteger("dkg.bench.keyLength", 16);
        long sliceMs = Long.getLong("dkg.bench.sliceMs", 50);
        List<URL> shared = new ArrayList<>();
        for (String p : args[0].split(":")) {
            if (!p.isEmpty()) {
                shared.add(Paths.get(p).toUri().toURL());
            }
        }
        int n = args.length - 1;
        String[] names = new String[n];
        LongUnaryOperator[] loops = new LongUnaryOperator[n];
        for (int i = 0; i < n; i++) {
            String[] kv = args[i + 1].split("=", 2);
            names[i] = kv[0];
            List<URL> urls = new ArrayList<>(shared);
            urls.add(Paths.get(kv[1]).toUri().toURL());
            // Parent: the platform loader, so that nothing of Kafka or the plug-in comes from the app class path.
            ClassLoader loader = new URLClassLoader("kafka-clients-" + kv[0], urls.toArray(new URL[0]),
                    ClassLoader.getPlatformClassLoader());
            loops[i] = (LongUnaryOperator) loader.loadClass("dev.dkg.kafka.bench.ClientVersionLoop")
                    .getConstructor(int.class).newInstance(keyLength);
            Class<?> info = loader.loadClass("org.apache.kafka.common.utils.AppInfoParser");
            String version = (String) info.getMethod("getVersion").invoke(null);
            if (!version.equals(kv[0])) {
                throw new IllegalStateException("loader " + kv[0] + " runs kafka-clients " + version);
            }
        }
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        // Batches per slice, from a first timing of each version (the same count for all, so each round does the
        // same work on every version).
        long batches = 1;
        for (int i = 0; i < n; i++) {
            loops[i].applyAsLong(200);
        }
        long t0 = mx.getCurrentThreadCpuTime();
        loops[0].applyAsLong(200);
        long per = Math.max(1, (mx.getCurrentThreadCpuTime() - t0) / 200);
        batches = Math.max(1, sliceMs * 1_000_000L / per);
        int keys = PartitionBench.BATCH;
        double[][] ns = new double[n][rounds];
        long sink = 0;
        for (int r = -warmup; r < rounds; r++) {
            for (int j = 0; j < n; j++) {
                // Rotate the order each round, so that no version always runs first after the others.
                int i = Math.floorMod(j + r, n);
                long start = mx.getCurrentThreadCpuTime();
                sink += loops[i].applyAsLong(batches);
                long cpu = mx.getCurrentThreadCpuTime() - start;
                if (r >= 0) {
                    ns[i][r] = (double) cpu / (batches * keys);
                }
            }
        }
        System.out.printf("keyLength=%d, %d rounds (+%d warm-up), %d x %d keys per slice, checksum %d%n", keyLength,
                rounds, warmup, batches, keys, sink);
        for (int i = 0; i < n; i++) {
            System.out.printf("kafka-clients %s: median %.3f ns/key (min %.3f, max %.3f)%n", names[i],
                    median(ns[i]), min(ns[i]), max(ns[i]));
        }
        boolean met = true;
        for (int i = 1; i < n; i++) {
            double[] ratio = new double[rounds];
            for (int r = 0; r < rounds; r++) {
                ratio[r] = ns[i][r] / ns[0][r];
            }
            double[] sorted = ratio.clone();
            Arrays.sort(sorted);
            double med = median(ratio);
            met &= med <= 1.05;
            System.out.printf("kafka-clients %s / %s: median %.3f (min %.3f, max %.3f, IQR %.3f-%.3f)%n", names[i],
                    names[0], med, sorted[0], sorted[rounds - 1], sorted[rounds / 4], sorted[(3 * rounds) / 4]);
        }
        System.out.println("target (median ratio <= 1.05): " + (met ? "met" : "NOT met"));
    }

    private static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }

    private static double min(double[] v) {
        return Arrays.stream(v).min().orElse(Double.NaN);
    }

    private static double max(double[] v) {
        return Arrays.stream(v).max().orElse(Double.NaN);
    }
}
