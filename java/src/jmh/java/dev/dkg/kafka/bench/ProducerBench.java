package dev.dkg.kafka.bench;

import dev.dkg.kafka.DkgConfig;
import dev.dkg.kafka.DkgKafkaProducer;
import dev.dkg.kafka.it.Broker;
import dev.dkg.kafka.it.Doc;
import dev.dkg.kafka.it.Plugin;
import dev.dkg.kafka.it.Zipf;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * Producer-level benches against the broker of {@code DKG_TEST_BOOTSTRAP} (see java/README.md, "Tests and
 * benches"), printing ratios (BENCHMARKS.md's Java rows):
 *
 * <ul>
 *   <li><b>throughput</b>: {@code -Ddkg.bench.records} (10^6) Zipf(1.0)-keyed records of 100 bytes over 10^4
 *       16-byte keys into 12 partitions, with the plug-in (B, following a 64 * 12-bucket assignment with 50 heavy
 *       keys) and without (A, the client's own placement), in interleaved rounds A B A B ...
 *       ({@code -Ddkg.bench.rounds}, 5) after one untimed round of each; each round is a fresh producer, timed
 *       from the first send to the end of {@code flush()}. Prints the median of the per-round ratios B/A with min
 *       and max. Target: at least 0.97.
 *   <li><b>ordering</b>: the same records through {@link DkgKafkaProducer} (marker mode) against a plain producer
 *       with the same {@code acks=all} and idempotence, with the stamp window closed and open (see
 *       {@link #ordering}). Prints the medians of the per-round ratios with min and max.
 *   <li><b>adoption</b>: {@code -Ddkg.bench.publications} (20) publications, each moving a probe key to another
 *       partition: time from the publication's acknowledgement to the plug-in reporting the new epoch (polled
 *       every 5 ms), each checked by sending the probe and finding it on the new partition. p50/p99. Target: p99
 *       at most 1 s.
 *   <li><b>keyless</b>: {@code records / 10} keyless records of 100 bytes with and without the plug-in: the
 *       client's {@code batch-size-avg} and {@code records-per-request-avg}, and the per-partition spread (end
 *       offsets: max/mean - 1).
 * </ul>
 */
public final class ProducerBench {
    private static final int PARTITIONS = 12;
    private static final int KEYS = 10_000;
    private static final int VALUE_BYTES = 100;

    private ProducerBench() {}

    public static void main(String[] args) {
        int records = Integer.getInteger("dkg.bench.records", 1_000_000);
        int rounds = Integer.getInteger("dkg.bench.rounds", 5);
        int publications = Integer.getInteger("dkg.bench.publications", 20);
        System.out.printf("producer bench: broker %s, %d records x %d rounds, %d publications%n", Broker.bootstrap(),
                records, rounds, publications);
        // -Ddkg.bench.only=throughput,ordering,adoption,keyless: some of them (default: all).
        List<String> only = List.of(System.getProperty("dkg.bench.only", "throughput,ordering,adoption,keyless")
                .split(","));
        if (only.contains("throughput")) {
            throughput(records, rounds);
        }
        if (only.contains("ordering")) {
            ordering(records, rounds);
        }
        if (only.contains("adoption")) {
            adoption(publications);
        }
        if (only.contains("keyless")) {
            keyless(Math.max(1, records / 10));
        }
    }

    private static Properties tuned(Properties p) {
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.ACKS_CONFIG, "1");
        return p;
    }

    /** Sends {@code n} records keyed by {@code zipf} (null = keyless) and returns records per second to the flush. */
    private static double run(Properties config, String topic, Zipf zipf, int n) {
        return run(() -> new KafkaProducer<>(config), topic, zipf, n);
    }

    /** {@link #run(Properties, String, Zipf, int)} through the producer {@code create} makes (closed after). */
    private static double run(Supplier<Producer<byte[], byte[]>> create, String topic, Zipf zipf, int n) {
        byte[] value = new byte[VALUE_BYTES];
        AtomicReference<Exception> failure = new AtomicReference<>();
        try (Producer<byte[], byte[]> producer = create.get()) {
            long start = System.nanoTime();
            for (int i = 0; i < n; i++) {
                byte[] key = zipf == null ? null : zipf.keyOf(zipf.nextRank());
                producer.send(new ProducerRecord<>(topic, key, value), (md, e) -> {
                    if (e != null) {
                        failure.compareAndSet(null, e);
                    }
                });
            }
            producer.flush();
            double seconds = (System.nanoTime() - start) / 1e9;
            if (failure.get() != null) {
                throw new IllegalStateException("a send failed", failure.get());
            }
            return n / seconds;
        }
    }

    /** The assignment both producer comparisons run under: the Zipf head's 50 keys heavy, spread over the partitions. */
    private static Doc zipfHeadDoc(String topic) {
        List<Doc.Heavy> heavy = new ArrayList<>();
        for (int rank = 1; rank <= 50; rank++) {
            heavy.add(new Doc.Heavy(Zipf.key(rank), rank % PARTITIONS));
        }
        return Doc.shuffled(topic, PARTITIONS, 1, 64, 7, heavy);
    }

    private static void throughput(int records, int rounds) {
        String topic = Broker.newTopic("bench-throughput", PARTITIONS);
        String control = Broker.createControlTopic("bench-throughput");
        try (KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            Broker.publish(publisher, control, zipfHeadDoc(topic));
        }
        // One untimed round of each first, so neither side pays for the JIT or the broker's first segment.
        run(tuned(Broker.plainProducerConfig()), topic, new Zipf(KEYS, 1.0, -1), records);
        run(tuned(Broker.dkgProducerConfig(control)), topic, new Zipf(KEYS, 1.0, -1), records);
        double[] ratios = new double[rounds];
        for (int r = 0; r < rounds; r++) {
            double plain = run(tuned(Broker.plainProducerConfig()), topic, new Zipf(KEYS, 1.0, r), records);
            double dkg = run(tuned(Broker.dkgProducerConfig(control)), topic, new Zipf(KEYS, 1.0, r), records);
            ratios[r] = dkg / plain;
            System.out.printf("throughput round %d: plain %.0f rec/s, dkg %.0f rec/s, ratio %.3f%n", r + 1, plain, dkg,
                    ratios[r]);
        }
        double[] sorted = ratios.clone();
        Arrays.sort(sorted);
        System.out.printf("throughput ratio dkg/plain: median %.3f (min %.3f, max %.3f) over %d rounds; "
                + "target >= 0.97%n", median(sorted), sorted[0], sorted[sorted.length - 1], rounds);
    }

    /**
     * The ordering producer ({@link DkgKafkaProducer}) against a plain {@code KafkaProducer} with the same
     * {@code acks=all} and idempotence, in interleaved rounds A B C A B C ...: B with its stamp window closed (the
     * state outside a switch: a 1 ms bound, closed before the timed sends), C inside the start-up window, which a
     * consumer group that never drains keeps open (every placed record stamped: the worst case of a window; after a
     * switch only the moved keys' records are).
     */
    private static void ordering(int records, int rounds) {
        String topic = Broker.newTopic("bench-ordering", PARTITIONS);
        String control = Broker.createControlTopic("bench-ordering");
        String handoff = Broker.createControlTopic("bench-ordering-handoff");
        try (KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            Broker.publish(publisher, control, zipfHeadDoc(topic));
            // A consumer group that never drains epoch 1: the start-up window stays open to its bound.
            Broker.announceProgress(publisher, handoff, "bench", topic, PARTITIONS, 0);
        }
        Properties plain = Broker.plainProducerConfig();
        plain.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        plain.put(ProducerConfig.ACKS_CONFIG, "all");
        Supplier<Producer<byte[], byte[]>> a = () -> new KafkaProducer<>(plain);
        Supplier<Producer<byte[], byte[]>> b = () -> orderingProducer(control, handoff, topic, 1);
        Supplier<Producer<byte[], byte[]>> c = () -> orderingProducer(control, handoff, topic, 3_600_000);
        for (Supplier<Producer<byte[], byte[]>> warm : List.of(a, b, c)) {
            run(warm, topic, new Zipf(KEYS, 1.0, -1), records);
        }
        double[] closed = new double[rounds];
        double[] open = new double[rounds];
        for (int r = 0; r < rounds; r++) {
            double base = run(a, topic, new Zipf(KEYS, 1.0, r), records);
            double outside = run(b, topic, new Zipf(KEYS, 1.0, r), records);
            double inside = run(c, topic, new Zipf(KEYS, 1.0, r), records);
            closed[r] = outside / base;
            open[r] = inside / base;
            System.out.printf("ordering round %d: plain acks=all %.0f rec/s, ordering %.0f rec/s (window closed), "
                    + "%.0f rec/s (window open); ratios %.3f, %.3f%n", r + 1, base, outside, inside, closed[r],
                    open[r]);
        }
        Arrays.sort(closed);
        Arrays.sort(open);
        System.out.printf("ordering producer / plain acks=all: window closed median %.3f (min %.3f, max %.3f), "
                + "window open median %.3f (min %.3f, max %.3f) over %d rounds; target (Rust's) >= 0.95%n",
                median(closed), closed[0], closed[rounds - 1], median(open), open[0], open[rounds - 1], rounds);
    }

    private static Producer<byte[], byte[]> orderingProducer(String control, String handoff, String topic,
            long stampWindowMs) {
        Map<String, Object> config = Broker.orderingProducerConfig(control, handoff, topic);
        config.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        config.put(DkgConfig.STAMP_WINDOW_MS_CONFIG, Long.toString(stampWindowMs));
        DkgKafkaProducer<byte[], byte[]> p = Broker.orderingProducer(config);
        if (stampWindowMs <= 1) {
            Broker.waitUntil("the stamp window to close", Duration.ofSeconds(10), () -> p.stampWindowsTimedOut() >= 1);
        }
        return p;
    }

    private static void adoption(int publications) {
        String topic = Broker.newTopic("bench-adoption", PARTITIONS);
        String control = Broker.createControlTopic("bench-adoption");
        byte[] probe = Zipf.key(1);
        List<Double> waitsMs = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(Broker.dkgProducerConfig(control));
                KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            // The plug-in registers a topic's metrics when it first places a record for it.
            Broker.ack(producer.send(new ProducerRecord<>(topic, probe, probe)), "the first probe");
            for (int epoch = 1; epoch <= publications; epoch++) {
                int target = epoch % PARTITIONS;
                Broker.publish(publisher, control, Doc.constant(topic, PARTITIONS, epoch, target, List.of()));
                long published = System.nanoTime();
                int e = epoch;
                Broker.waitUntil("epoch " + epoch, Duration.ofSeconds(30), () -> Plugin.epoch(producer, topic) == e);
                waitsMs.add((System.nanoTime() - published) / 1e6);
                int got = Broker.ack(producer.send(new ProducerRecord<>(topic, probe, probe)), "a probe").partition();
                if (got != target) {
                    throw new IllegalStateException("epoch " + epoch + " in force but the probe went to " + got);
                }
            }
        }
        Collections.sort(waitsMs);
        double p50 = waitsMs.get(waitsMs.size() / 2);
        // Nearest rank.
        double p99 = waitsMs.get((int) Math.ceil(0.99 * waitsMs.size()) - 1);
        System.out.printf("adoption latency (publish ack -> epoch in force) over %d publications: p50 %.1f ms, "
                + "p99 %.1f ms; target p99 <= 1000 ms%n", waitsMs.size(), p50, p99);
    }

    private static void keyless(int records) {
        String control = Broker.createControlTopic("bench-keyless");
        for (boolean withPlugin : new boolean[] {false, true}) {
            String topic = Broker.newTopic("bench-keyless", PARTITIONS);
            Properties config = tuned(withPlugin ? Broker.dkgProducerConfig(control) : Broker.plainProducerConfig());
            byte[] value = new byte[VALUE_BYTES];
            double batch;
            double perRequest;
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config)) {
                for (int i = 0; i < records; i++) {
                    producer.send(new ProducerRecord<>(topic, null, value));
                }
                producer.flush();
                batch = Broker.metric(producer.metrics(), "batch-size-avg");
                perRequest = Broker.metric(producer.metrics(), "records-per-request-avg");
            }
            long[] end = Broker.endOffsets(topic);
            long min = Arrays.stream(end).min().orElse(0);
            long max = Arrays.stream(end).max().orElse(0);
            System.out.printf("keyless %s: batch-size-avg %.0f B, records-per-request-avg %.1f, per partition min %d "
                    + "max %d, imbalance %.3f%n", withPlugin ? "dkg  " : "plain", batch, perRequest, min, max,
                    Broker.imbalance(new long[PARTITIONS], end));
        }
    }

    private static double median(double[] sorted) {
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }
}
