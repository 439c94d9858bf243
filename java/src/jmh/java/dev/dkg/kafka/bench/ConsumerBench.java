package dev.dkg.kafka.bench;

import dev.dkg.kafka.DkgConfig;
import dev.dkg.kafka.DkgConsumerListener;
import dev.dkg.kafka.DkgKafkaConsumer;
import dev.dkg.kafka.DkgKafkaProducer;
import dev.dkg.kafka.DkgMetrics;
import dev.dkg.kafka.it.Broker;
import dev.dkg.kafka.it.Doc;
import dev.dkg.kafka.it.Zipf;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Consumer-level benches of {@link DkgKafkaConsumer} against the broker of {@code DKG_TEST_BOOTSTRAP} (see
 * java/README.md, "Tests and benches"; BENCHMARKS.md, "Java ordering consumer"):
 *
 * <ul>
 *   <li><b>throughput</b>: one topic of 12 partitions pre-filled by a {@link DkgKafkaProducer} with ordering
 *       ({@code -Ddkg.bench.records}, 200 000, Zipf(1.0)-keyed records of 100 bytes over 10^4 keys), its assignment
 *       published before the fill and its stamp window closed (no switch in progress: no record is stamped), read
 *       whole by a fresh group of one member, a plain {@code KafkaConsumer} (A) or a {@link DkgKafkaConsumer} (B), in
 *       interleaved rounds A B A B ... ({@code -Ddkg.bench.rounds}, 5) after one untimed round of each. Both poll
 *       byte arrays with {@code enable.auto.commit=false} and {@code commitAsync()} after each poll (at least once;
 *       {@code -Ddkg.bench.commit=none}: no commit in the loop, the poll path alone).
 *       A round is timed from its first record to its last (the group's join is not the poll path). Prints the
 *       median of the per-round ratios B/A with min and max (target: at least 0.95), and the same by the polling
 *       thread's CPU time per record (steadier on a shared machine).
 *   <li><b>hold</b>: the workload of the Rust consumer's figure (BENCHMARKS.md, "Hold time of moved keys";
 *       {@code partitioner/tests/consumer_keeps_key_order_across_epochs.rs}): 2 ordering producers at 2 500
 *       records/s each (20 000 each, Zipf(1.1) over 2 000 keys {@code k0001...}), 3 {@link DkgKafkaConsumer} members
 *       that stall 150 ms every 700, 1 000 and 1 300 records, 12 partitions, and 5 switches 1.3 s apart, each moving
 *       the 12 hot keys and 4 of 48 buckets. {@code -Ddkg.bench.holdRuns} (3) runs; prints per run and over all
 *       the {@code dkg-consumer-hold-seconds} histogram (summed over the members), its p50 and p99 (the bucket bound
 *       reached, as the Rust figure is read) and the mean, and the per-key order violations seen (must be 0).
 * </ul>
 */
public final class ConsumerBench {
    private static final int PARTITIONS = 12;
    private static final int KEYS = 10_000;
    private static final int VALUE_BYTES = 100;
    /** {@code -Ddkg.bench.commit=none}: no commit in the read loop (the poll path alone); default: after each poll. */
    private static final boolean COMMIT_EACH_POLL = !"none".equals(System.getProperty("dkg.bench.commit"));

    /**
     * {@code -Ddkg.bench.progress=record}: a hold-run member tells the consumer what it processed before each stall
     * ({@code commitAsync(offsets)}), as the Rust member's {@code recv()} does per record; default {@code batch}: the
     * poll's records count as processed at the next poll (the {@code Consumer} contract).
     */
    private static final boolean PROGRESS_PER_RECORD = "record".equals(System.getProperty("dkg.bench.progress"));

    private static final ThreadMXBean CPU = ManagementFactory.getThreadMXBean();

    private ConsumerBench() {}

    public static void main(String[] args) throws Exception {
        int records = Integer.getInteger("dkg.bench.records", 200_000);
        int rounds = Integer.getInteger("dkg.bench.rounds", 5);
        int holdRuns = Integer.getInteger("dkg.bench.holdRuns", 3);
        System.out.printf("consumer bench: broker %s, %d records x %d rounds, %d hold runs%n", Broker.bootstrap(),
                records, rounds, holdRuns);
        // -Ddkg.bench.only=throughput,hold: some of them (default: both).
        List<String> only = List.of(System.getProperty("dkg.bench.only", "throughput,hold").split(","));
        if (only.contains("throughput")) {
            throughput(records, rounds);
        }
        if (only.contains("hold")) {
            hold(holdRuns);
        }
    }

    // ------------------------------------------------------------------------------------------------ throughput

    private static void throughput(int records, int rounds) {
        String topic = Broker.newTopic("bench-consumer", PARTITIONS);
        String control = Broker.createControlTopic("bench-consumer");
        String handoff = Broker.createControlTopic("bench-consumer-handoff");
        List<Doc.Heavy> heavy = new ArrayList<>();
        for (int rank = 1; rank <= 50; rank++) {
            heavy.add(new Doc.Heavy(Zipf.key(rank), rank % PARTITIONS));
        }
        try (var publisher = Broker.publisher()) {
            Broker.publish(publisher, control, Doc.shuffled(topic, PARTITIONS, 1, 64, 7, heavy));
            // A group that never drains epoch 1 opens the producer's start-up window, which then closes at its 1 ms
            // bound (as ProducerBench's "window closed"): the fill's records carry no stamp.
            Broker.announceProgress(publisher, handoff, "bench-other", topic, PARTITIONS, 0);
        }
        fill(control, handoff, topic, records);
        Function<String, Consumer<byte[], byte[]>> plain = g -> new KafkaConsumer<>(consumerConfig(g, control, handoff),
                new ByteArrayDeserializer(), new ByteArrayDeserializer());
        Function<String, Consumer<byte[], byte[]>> dkg = g -> new DkgKafkaConsumer<>(consumerConfig(g, control,
                handoff), new ByteArrayDeserializer(), new ByteArrayDeserializer());
        // One untimed round of each first (JIT, the broker's page cache).
        read(plain, topic, records, "warm-plain");
        read(dkg, topic, records, "warm-dkg");
        double[] ratios = new double[rounds];
        double[] cpuRatios = new double[rounds];
        for (int r = 0; r < rounds; r++) {
            Rate a = read(plain, topic, records, "plain-" + r);
            Rate b = read(dkg, topic, records, "dkg-" + r);
            ratios[r] = b.perSecond / a.perSecond;
            cpuRatios[r] = a.cpuNanosPerRecord / b.cpuNanosPerRecord;
            System.out.printf("throughput round %d: plain KafkaConsumer %.0f rec/s (%.0f ns CPU/record), "
                    + "DkgKafkaConsumer %.0f rec/s (%.0f ns CPU/record), ratio %.3f (by CPU time %.3f)%n", r + 1,
                    a.perSecond, a.cpuNanosPerRecord, b.perSecond, b.cpuNanosPerRecord, ratios[r], cpuRatios[r]);
        }
        Arrays.sort(ratios);
        Arrays.sort(cpuRatios);
        System.out.printf("consumer throughput ratio dkg/plain: median %.3f (min %.3f, max %.3f) over %d rounds; "
                + "target >= 0.95%n", median(ratios), ratios[0], ratios[rounds - 1], rounds);
        System.out.printf("consumer throughput ratio dkg/plain by the polling thread's CPU time per record: median %.3f "
                + "(min %.3f, max %.3f)%n", median(cpuRatios), cpuRatios[0], cpuRatios[rounds - 1]);
    }

    /** {@code n} records through an ordering producer whose stamp window is closed first: none is stamped. */
    private static void fill(String control, String handoff, String topic, int n) {
        Map<String, Object> config = Broker.orderingProducerConfig(control, handoff, topic);
        config.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        config.put(DkgConfig.STAMP_WINDOW_MS_CONFIG, "1");
        Zipf zipf = new Zipf(KEYS, 1.0, 1);
        byte[] value = new byte[VALUE_BYTES];
        AtomicReference<Exception> failure = new AtomicReference<>();
        try (DkgKafkaProducer<byte[], byte[]> p = Broker.orderingProducer(config)) {
            Broker.waitUntil("the stamp window to close", Duration.ofSeconds(10), () -> p.stampWindowsTimedOut() >= 1);
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, zipf.keyOf(zipf.nextRank()), value), (md, e) -> {
                    if (e != null) {
                        failure.compareAndSet(null, e);
                    }
                });
            }
            p.flush();
        }
        if (failure.get() != null) {
            throw new IllegalStateException("a send failed", failure.get());
        }
        long total = Arrays.stream(Broker.endOffsets(topic)).sum();
        if (total != n) {
            throw new IllegalStateException("filled " + total + " records, expected " + n);
        }
    }

    private static Map<String, Object> consumerConfig(String group, String control, String handoff) {
        Map<String, Object> c = new HashMap<>();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, Broker.bootstrap());
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        c.put(DkgConfig.CONTROL_TOPIC_CONFIG, control);
        c.put(DkgConfig.HANDOFF_TOPIC_CONFIG, handoff);
        c.put(DkgConfig.STARTUP_TIMEOUT_MS_CONFIG, "20000");
        return c;
    }

    /** Records per second (wall clock) and the polling thread's CPU nanoseconds per record, first record to last. */
    private record Rate(double perSecond, double cpuNanosPerRecord) {}

    /** A fresh group of one reads the whole topic, timed from its first record to its last. */
    private static Rate read(Function<String, Consumer<byte[], byte[]>> create, String topic, int n, String name) {
        long count = 0;
        long bytes = 0;
        long first = 0;
        long firstCpu = 0;
        long firstBatch = 0;
        long stamped = 0;
        long deadline = System.nanoTime() + 120_000_000_000L;
        try (Consumer<byte[], byte[]> consumer = create.apply(Broker.uniqueTopic("g-bench-" + name))) {
            consumer.subscribe(List.of(topic));
            while (count < n) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(100));
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    // Touch the record as an application would.
                    bytes += r.value().length + r.key().length;
                    if (r.headers().toArray().length > 0) {
                        stamped++;
                    }
                }
                if (count == 0 && !batch.isEmpty()) {
                    first = System.nanoTime();
                    firstCpu = CPU.getCurrentThreadCpuTime();
                    firstBatch = batch.count();
                }
                count += batch.count();
                if (COMMIT_EACH_POLL) {
                    consumer.commitAsync();
                }
                if (System.nanoTime() - deadline > 0) {
                    throw new IllegalStateException(name + ": " + count + " of " + n + " records in 120 s");
                }
            }
            double seconds = (System.nanoTime() - first) / 1e9;
            // The polling thread's CPU time: the decorator's own cost, less sensitive to other jobs on the machine
            // than wall time (the clients' background threads are not in it, on either side).
            double cpu = CPU.getCurrentThreadCpuTime() - firstCpu;
            if (count != n || bytes == 0) {
                throw new IllegalStateException(name + ": read " + count + " records, expected " + n);
            }
            if (name.startsWith("warm")) {
                System.out.printf("%s: %d records, %d with headers%n", name, count, stamped);
            }
            return new Rate((count - firstBatch) / seconds, cpu / (count - firstBatch));
        }
    }

    // ------------------------------------------------------------------------------------------------ hold time

    private static final int HOLD_KEYS = 2_000;
    private static final int HOT = 12;
    private static final int BUCKETS = 48;
    private static final int MOVING_BUCKETS = 4;
    private static final int PER_PRODUCER = 20_000;
    private static final double RATE = 2_500.0;
    private static final int MEMBERS = 3;
    private static final String[] LE = {"0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.075", "0.1", "0.15",
        "0.2", "0.25", "0.3", "0.4", "0.5", "0.75", "1.0", "2.0", "5.0", "10.0", "30.0"};

    private static byte[] holdKey(int rank) {
        return String.format("k%04d", rank).getBytes(StandardCharsets.UTF_8);
    }

    /** The Rust test's assignment of epoch e: hot key r on (r + 2e) % 12, bucket b on b % 12 but b < 4 on (b + 2e) % 12. */
    private static Doc holdDoc(String topic, int e) {
        int[] table = new int[BUCKETS];
        for (int b = 0; b < BUCKETS; b++) {
            table[b] = b < MOVING_BUCKETS ? (b + 2 * e) % PARTITIONS : b % PARTITIONS;
        }
        List<Doc.Heavy> heavy = new ArrayList<>();
        for (int r = 1; r <= HOT; r++) {
            heavy.add(new Doc.Heavy(holdKey(r), (r + 2 * e) % PARTITIONS));
        }
        return new Doc(topic, PARTITIONS, e, table, heavy);
    }

    private static void hold(int runs) throws Exception {
        long[] all = new long[LE.length];
        long allCount = 0;
        double allSum = 0;
        for (int run = 1; run <= runs; run++) {
            HoldRun h = holdRun(run);
            for (int i = 0; i < LE.length; i++) {
                all[i] += h.buckets[i];
            }
            allCount += h.count;
            allSum += h.sumSeconds;
            System.out.printf("hold run %d: %d records sent, %d processed, %d order violations; %s%n", run, h.sent,
                    h.processed, h.violations, describe(h.buckets, h.count, h.sumSeconds));
            if (h.violations != 0) {
                throw new IllegalStateException("per-key order violated in hold run " + run);
            }
        }
        System.out.printf("hold time of moved keys over %d runs: %s%n", runs, describe(all, allCount, allSum));
    }

    private static String describe(long[] buckets, long count, double sumSeconds) {
        StringBuilder s = new StringBuilder();
        s.append(count).append(" held records");
        for (int i = 0; i < LE.length; i++) {
            if (LE[i].equals("0.025") || LE[i].equals("0.05") || LE[i].equals("0.1") || LE[i].equals("0.15")
                    || LE[i].equals("0.2") || LE[i].equals("0.25") || LE[i].equals("0.5") || LE[i].equals("2.0")) {
                s.append(", <= ").append(LE[i]).append(" s: ").append(buckets[i]);
            }
        }
        s.append(String.format("; p50 <= %s s, p99 <= %s s (bucket bounds), mean %.1f ms", quantile(buckets, count,
                0.50), quantile(buckets, count, 0.99), count == 0 ? 0 : 1000 * sumSeconds / count));
        return s.toString();
    }

    /** The smallest bucket bound that covers the q-quantile (nearest rank), as a Prometheus histogram is read. */
    private static String quantile(long[] cumulative, long count, double q) {
        if (count == 0) {
            return "-";
        }
        long rank = (long) Math.ceil(q * count);
        for (int i = 0; i < LE.length; i++) {
            if (cumulative[i] >= rank) {
                return LE[i];
            }
        }
        return "+Inf";
    }

    private record HoldRun(long sent, long processed, long violations, long[] buckets, long count,
            double sumSeconds) {}

    private static HoldRun holdRun(int run) throws Exception {
        String topic = Broker.newTopic("bench-hold", PARTITIONS);
        String control = Broker.createControlTopic("bench-hold");
        String handoff = Broker.createControlTopic("bench-hold-handoff");
        String group = Broker.uniqueTopic("g-bench-hold");
        // What the members processed: (producer, seq) -> seen, and per (producer, key) the highest seq so far.
        Map<String, Long> highest = new ConcurrentHashMap<>();
        Map<Long, Boolean> seen = new ConcurrentHashMap<>();
        AtomicInteger violations = new AtomicInteger();
        AtomicBoolean consuming = new AtomicBoolean(true);
        long[] buckets = new long[LE.length];
        double[] sum = new double[1];
        long[] count = new long[1];
        List<Throwable> errors = new ArrayList<>();
        Map<Integer, Integer> owned = new ConcurrentHashMap<>();
        List<Thread> members = new ArrayList<>();
        try (var publisher = Broker.publisher()) {
            Broker.publish(publisher, control, holdDoc(topic, 1));
            for (int m = 0; m < MEMBERS; m++) {
                int member = m;
                int every = 700 + 300 * m;
                Thread t = new Thread(() -> {
                    Map<String, Object> c = consumerConfig(group, control, handoff);
                    try (DkgKafkaConsumer<byte[], byte[]> consumer = new DkgKafkaConsumer<>(c,
                            new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                        consumer.listener(new DkgConsumerListener() {
                            @Override
                            public void onPartitionsAssigned(String t, Collection<Integer> partitions) {
                                owned.merge(member, partitions.size(), Integer::sum);
                            }

                            @Override
                            public void onPartitionsRevoked(String t, Collection<Integer> partitions) {
                                owned.merge(member, -partitions.size(), Integer::sum);
                            }
                        });
                        consumer.subscribe(List.of(topic));
                        long processed = 0;
                        while (consuming.get()) {
                            ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(100));
                            // Per partition, the offset below which this batch's records are all processed (released
                            // records of a partition come in release order, not always offset order).
                            Map<TopicPartition, OffsetAndMetadata> done = new HashMap<>();
                            for (TopicPartition tp : batch.partitions()) {
                                List<ConsumerRecord<byte[], byte[]>> recs = batch.records(tp);
                                long[] below = new long[recs.size() + 1];
                                below[recs.size()] = Long.MAX_VALUE;
                                for (int i = recs.size() - 1; i >= 0; i--) {
                                    below[i] = Math.min(below[i + 1], recs.get(i).offset());
                                }
                                long high = -1;
                                for (int i = 0; i < recs.size(); i++) {
                                    ConsumerRecord<byte[], byte[]> r = recs.get(i);
                                    String v = new String(r.value(), StandardCharsets.UTF_8);
                                    int at = v.indexOf(':');
                                    long producer = Long.parseLong(v.substring(0, at));
                                    long seq = Long.parseLong(v.substring(at + 1));
                                    seen.put(producer << 32 | seq, Boolean.TRUE);
                                    String stream = producer + "/" + new String(r.key(), StandardCharsets.UTF_8);
                                    Long before = highest.put(stream, seq);
                                    if (before != null && before > seq) {
                                        violations.incrementAndGet();
                                    }
                                    high = Math.max(high, r.offset() + 1);
                                    done.put(tp, new OffsetAndMetadata(Math.min(high, below[i + 1])));
                                    // The Rust test's pace: members stall at different rates, so partitions lag.
                                    if (++processed % every == 0) {
                                        if (PROGRESS_PER_RECORD) {
                                            // As the Rust member's recv() does per record: what is processed is
                                            // said before the stall, not at the next poll.
                                            consumer.commitAsync(done, null);
                                        }
                                        Thread.sleep(150);
                                    }
                                }
                            }
                            consumer.commitSync();
                        }
                        // The histogram is filled by the poll's housekeeping (every 100 ms): read it after the
                        // last polls, on this thread.
                        synchronized (buckets) {
                            for (int i = 0; i < LE.length; i++) {
                                Double b = Broker.metric(consumer.metrics(), DkgMetrics.CONSUMER_HOLD_SECONDS_BUCKET,
                                        "topic", topic, "le", LE[i]);
                                buckets[i] += b == null ? 0 : b.longValue();
                            }
                            Double n = Broker.metric(consumer.metrics(), DkgMetrics.CONSUMER_HOLD_SECONDS_COUNT,
                                    "topic", topic);
                            count[0] += n == null ? 0 : n.longValue();
                            Double s = Broker.metric(consumer.metrics(), DkgMetrics.CONSUMER_HOLD_SECONDS_SUM,
                                    "topic", topic);
                            sum[0] += s == null ? 0 : s;
                        }
                    } catch (Throwable e) {
                        synchronized (errors) {
                            errors.add(e);
                        }
                    }
                }, "bench-hold-member-" + m);
                t.start();
                members.add(t);
            }
            // Every member owns partitions before records flow (the Rust test waits for the group too).
            Broker.waitUntil("the group of " + MEMBERS, Duration.ofSeconds(60), () -> owned.size() == MEMBERS
                    && owned.values().stream().allMatch(n -> n > 0)
                    && owned.values().stream().mapToInt(Integer::intValue).sum() == PARTITIONS);
            List<DkgKafkaProducer<byte[], byte[]>> producers = new ArrayList<>();
            for (int y = 0; y < 2; y++) {
                Map<String, Object> config = Broker.orderingProducerConfig(control, handoff, topic);
                config.put(ProducerConfig.LINGER_MS_CONFIG, "5");
                config.put(DkgConfig.LEASE_MS_CONFIG, "3000");
                producers.add(Broker.orderingProducer(config));
            }
            Map<Long, Boolean> acked = new ConcurrentHashMap<>();
            List<Thread> senders = new ArrayList<>();
            for (int y = 0; y < producers.size(); y++) {
                DkgKafkaProducer<byte[], byte[]> p = producers.get(y);
                long id = y;
                Thread t = new Thread(() -> {
                    Zipf zipf = new Zipf(HOLD_KEYS, 1.1, id * 7919 + 1 + 1000L * run);
                    long start = System.nanoTime();
                    for (long seq = 0; seq < PER_PRODUCER; seq++) {
                        if (seq % 50 == 0) {
                            long due = start + (long) (seq / RATE * 1e9);
                            long wait = due - System.nanoTime();
                            if (wait > 0) {
                                try {
                                    Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                                } catch (InterruptedException e) {
                                    return;
                                }
                            }
                        }
                        long s = seq;
                        byte[] value = (id + ":" + seq).getBytes(StandardCharsets.UTF_8);
                        p.send(new ProducerRecord<>(topic, holdKey(zipf.nextRank()), value), (md, e) -> {
                            if (e == null) {
                                acked.put(id << 32 | s, Boolean.TRUE);
                            }
                        });
                    }
                }, "bench-hold-producer-" + y);
                t.start();
                senders.add(t);
            }
            for (int e = 2; e <= 6; e++) {
                Thread.sleep(1_300);
                Broker.publish(publisher, control, holdDoc(topic, e));
            }
            for (Thread t : senders) {
                t.join();
            }
            for (DkgKafkaProducer<byte[], byte[]> p : producers) {
                p.close();
            }
            Broker.waitUntil("every acknowledged record processed", Duration.ofSeconds(90),
                    () -> seen.keySet().containsAll(acked.keySet()) || !errors.isEmpty());
            // A few more polls: the last releases reach the histogram.
            Thread.sleep(500);
            consuming.set(false);
            for (Thread t : members) {
                t.join(60_000);
            }
            synchronized (errors) {
                if (!errors.isEmpty()) {
                    throw new IllegalStateException("a member failed", errors.get(0));
                }
            }
            return new HoldRun(acked.size(), seen.size(), violations.get(), buckets, count[0], sum[0]);
        } finally {
            consuming.set(false);
        }
    }

    private static double median(double[] sorted) {
        int n = sorted.length;
        return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    }
}
