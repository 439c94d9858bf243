package dev.dkg.kafka;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The metrics of one topic of a {@link DkgKafkaConsumer}, with the Rust consumer's names and meanings
 * ({@code partitioner/src/kafka/consumer/metrics.rs}: {@code dkg_consumer_X} there is {@code dkg-consumer-X} here),
 * registered through a {@link DkgMetrics.Registrar}. The consumer's thread writes them, JMX reads them: atomics.
 */
final class ConsumerMetrics {
    /** The Rust consumer's hold-time buckets (seconds). */
    static final double[] HOLD_BUCKETS = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3,
        0.4, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0, 30.0};

    private final DkgMetrics.Registrar registrar;
    private final String topic;
    private final AtomicLong records = new AtomicLong();
    private final AtomicLong splitRecords = new AtomicLong();
    private final AtomicLong unknownEpoch = new AtomicLong();
    private final AtomicLong clampedLeases = new AtomicLong();
    private final AtomicLong windowsLeftOut = new AtomicLong();
    private final AtomicLong[] rejected = new AtomicLong[HandoffRecords.MarkerReject.values().length];
    private final AtomicLong[] holdBuckets = new AtomicLong[HOLD_BUCKETS.length];
    private final AtomicLong holdCount = new AtomicLong();
    /** Sum of hold times in nanoseconds. */
    private final AtomicLong holdSumNanos = new AtomicLong();
    private final Map<Integer, AtomicLong[]> perPartition = new ConcurrentHashMap<>();

    ConsumerMetrics(DkgMetrics.Registrar registrar, String topic) {
        this.registrar = registrar;
        this.topic = topic;
        add(DkgMetrics.CONSUMER_MEMBER_RECORDS_TOTAL, "Records handed to the application by the DKG consumer.",
                tags(), records);
        add(DkgMetrics.CONSUMER_SPLIT_RECORDS_TOTAL, "Records handed to the application whose key is split over "
                + "several partitions in their epoch (no per-key order across the parts).", tags(), splitRecords);
        LinkedHashMap<String, String> unknown = tags();
        unknown.put("reason", "unknown_epoch");
        add(DkgMetrics.CONSUMER_UNTRUSTED_RECORDS_TOTAL, "Records whose dkg-* headers the ordering protocol could not "
                + "trust, handed to the application as data, by reason.", unknown, unknownEpoch);
        add(DkgMetrics.CONSUMER_CLAMPED_LEASES_TOTAL, "Producer leases read with an expiry beyond the consumer's "
                + "max lease from now (clamped to it).", tags(), clampedLeases);
        add(DkgMetrics.CONSUMER_COMMIT_WINDOWS_LEFT_OUT_TOTAL, "Offset commits whose metadata left out the skip "
                + "window (unprocessed offsets over the metadata limit): a next owner re-processes the records "
                + "processed above the committed offset.", tags(), windowsLeftOut);
        for (HandoffRecords.MarkerReject r : HandoffRecords.MarkerReject.values()) {
            rejected[r.ordinal()] = new AtomicLong();
            LinkedHashMap<String, String> t = tags();
            t.put("reason", r.label);
            add(DkgMetrics.CONSUMER_MARKERS_REJECTED_TOTAL, "Marker records on the handoff topic skipped by the "
                    + "consumer, by reason.", t, rejected[r.ordinal()]);
        }
        for (int i = 0; i < HOLD_BUCKETS.length; i++) {
            holdBuckets[i] = new AtomicLong();
            LinkedHashMap<String, String> t = tags();
            t.put("le", Double.toString(HOLD_BUCKETS[i]));
            add(DkgMetrics.CONSUMER_HOLD_SECONDS_BUCKET, "How long records of moved keys were held: records held at "
                    + "most le seconds (cumulative, as a Prometheus histogram bucket).", t, holdBuckets[i]);
        }
        add(DkgMetrics.CONSUMER_HOLD_SECONDS_COUNT, "How long records of moved keys were held: records released.",
                tags(), holdCount);
        registrar.add(DkgMetrics.CONSUMER_HOLD_SECONDS_SUM, "How long records of moved keys were held: seconds, "
                + "summed.", tags(), (config, now) -> holdSumNanos.get() / 1e9);
    }

    private LinkedHashMap<String, String> tags() {
        LinkedHashMap<String, String> t = new LinkedHashMap<>();
        t.put("topic", topic);
        return t;
    }

    private void add(String name, String description, LinkedHashMap<String, String> tags, AtomicLong value) {
        DkgRouter.add(registrar, name, description, tags, (config, now) -> value.get());
    }

    /** {records, held, lag} of a partition, registered on first use. */
    private AtomicLong[] partition(int p) {
        return perPartition.computeIfAbsent(p, q -> {
            AtomicLong[] a = {new AtomicLong(), new AtomicLong(), new AtomicLong()};
            LinkedHashMap<String, String> t = tags();
            t.put("partition", Integer.toString(q));
            add(DkgMetrics.CONSUMER_RECORDS_TOTAL, "Records handed to the application by the DKG consumer, per "
                    + "partition.", t, a[0]);
            add(DkgMetrics.CONSUMER_HELD_RECORDS, "Records of keys that an epoch moved, held back until the key's "
                    + "older records on its previous partition are processed.", t, a[1]);
            add(DkgMetrics.CONSUMER_LAG_RECORDS, "Records behind the end of the partition (end minus lowest "
                    + "unprocessed offset).", t, a[2]);
            return a;
        });
    }

    /** {@code n} records of one partition handed to the application, {@code split} of them of split keys. */
    void records(int partition, int n, int split) {
        records.addAndGet(n);
        partition(partition)[0].addAndGet(n);
        if (split > 0) {
            splitRecords.addAndGet(split);
        }
    }

    void held(int partition, long held) {
        partition(partition)[1].set(held);
    }

    void lag(int partition, long lag) {
        partition(partition)[2].set(lag);
    }

    void holdTime(long nanos) {
        holdCount.incrementAndGet();
        holdSumNanos.addAndGet(nanos);
        double s = nanos / 1e9;
        for (int i = 0; i < HOLD_BUCKETS.length; i++) {
            if (s <= HOLD_BUCKETS[i]) {
                holdBuckets[i].incrementAndGet();
            }
        }
    }

    void anomalies(CoreTypes.Anomalies a) {
        unknownEpoch.addAndGet(a.unknownEpochRecords);
        clampedLeases.addAndGet(a.clampedLeases);
        windowsLeftOut.addAndGet(a.windowsLeftOut);
        for (int i = 0; i < rejected.length; i++) {
            rejected[i].addAndGet(a.rejectedMarkers[i]);
        }
    }

    /** Current value of a counter, for tests: records handed out. */
    long records() {
        return records.get();
    }

    /** Current value of a counter, for tests: commits that left out their skip window. */
    long windowsLeftOut() {
        return windowsLeftOut.get();
    }
}
