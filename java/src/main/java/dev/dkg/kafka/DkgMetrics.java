package dev.dkg.kafka;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.metrics.JmxReporter;
import org.apache.kafka.common.metrics.KafkaMetricsContext;
import org.apache.kafka.common.metrics.Measurable;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.utils.Time;

/**
 * Names of the metrics a {@link DkgRouter} registers (group {@code plugins}, with the tags
 * {@code config=partitioner.class} and {@code class=DkgPartitioner}), and where they go ({@link Registrar}): the
 * plug-in's own registry with a {@code JmxReporter} in the client's JMX domain ({@link #ownRegistry}, every client
 * version) or the client's metrics through KIP-877's {@code PluginMetrics}
 * ({@link dev.dkg.kafka.kip877.DkgPartitioner}, kafka-clients 4.1+). Each name matches a Rust producer metric
 * ({@code partitioner/src/kafka/metrics.rs}): {@code dkg_producer_X} there is {@code dkg-producer-X} here.
 */
public final class DkgMetrics {
    /** The metric group, as KIP-877 names plug-in metrics. */
    public static final String GROUP = "plugins";

    /**
     * Where a router's metrics are registered. Implementations need only the kafka-clients classes every
     * supported version has (3.0+), so that the registrar a client cannot load is never loaded on it.
     */
    public interface Registrar {
        /**
         * Registers one metric, best effort: a failure (a duplicate, closed metrics) is logged, never thrown.
         *
         * @param name the metric name (one of this class's constants)
         * @param description what it measures
         * @param tags the metric's own tags (e.g. {@code topic}), in order
         * @param value its current value
         */
        void add(String name, String description, Map<String, String> tags, Measurable value);
    }

    /**
     * A registry of the plug-in's own: its metrics in group {@value #GROUP} with {@code fixedTags} (e.g.
     * {@code config}, {@code class}, {@code client-id}) before each metric's tags, reported to JMX in
     * {@code jmxDomain} ({@code kafka.producer}: {@code kafka.producer:type=plugins,config=...,class=...,
     * client-id=...,topic=...}). Close it with the client.
     */
    public static OwnRegistry ownRegistry(String jmxDomain, Map<String, String> fixedTags) {
        return new OwnRegistry(jmxDomain, fixedTags);
    }

    /** The plug-in's own metrics registry ({@link #ownRegistry}). */
    public static final class OwnRegistry implements Registrar, AutoCloseable {
        private final Metrics metrics;
        private final Map<String, String> fixedTags;

        private OwnRegistry(String jmxDomain, Map<String, String> fixedTags) {
            this.metrics = new Metrics(new MetricConfig(), List.of(new JmxReporter()), Time.SYSTEM,
                    new KafkaMetricsContext(jmxDomain));
            this.fixedTags = new LinkedHashMap<>(fixedTags);
        }

        @Override
        public void add(String name, String description, Map<String, String> tags, Measurable value) {
            try {
                LinkedHashMap<String, String> all = new LinkedHashMap<>(fixedTags);
                all.putAll(tags);
                MetricName metricName = metrics.metricName(name, GROUP, description, all);
                metrics.addMetric(metricName, value);
            } catch (RuntimeException e) {
                DkgRouter.metricNotAdded(name, tags, e);
            }
        }

        /** The registry's metrics (a live view). */
        public Map<MetricName, ? extends org.apache.kafka.common.Metric> metrics() {
            return metrics.metrics();
        }

        /** Unregisters every metric (and its MBeans). */
        @Override
        public void close() {
            metrics.close();
        }
    }

    /**
     * Records placed, by {@code topic} and {@code route} (heavy, bucket, split, fallback, keyless); a counter. Exact:
     * per-thread cells without atomic read-modify-write ({@code RouteCounters}); a read may miss only increments still
     * in flight.
     */
    public static final String RECORDS_TOTAL = "dkg-producer-records-total";
    /** Epoch of the topic's current assignment, 0 = none; by {@code topic}. */
    public static final String EPOCH = "dkg-producer-epoch";
    /**
     * 1 while the topic's assignment routes records, 0 while there is none or its partition count differs
     * from the one the producer last saw; by {@code topic}.
     */
    public static final String ASSIGNMENT_IN_EFFECT = "dkg-producer-assignment-in-effect";
    /** Seconds since the assignment's {@code created_at_ms} (publisher's clock), NaN without one; by {@code topic}. */
    public static final String ASSIGNMENT_AGE_SECONDS = "dkg-producer-assignment-age-seconds";
    /**
     * Control-topic records rejected, by {@code topic} and {@code reason} (the {@link RejectReason} labels); a
     * counter. {@code topic} is the record's topic when it is one of the producer's (routed or assigned, as for the
     * other per-topic metrics), else {@link #OTHER_TOPIC}.
     */
    public static final String ASSIGNMENTS_REJECTED_TOTAL = "dkg-producer-assignments-rejected-total";
    /**
     * The {@code topic} tag of rejected control records that name no topic of the producer (another producer's
     * topic, or none): not a legal topic name, so it never collides with one. Kafka's plug-in metrics quote it for
     * JMX ({@code "(other)"}); the shipped JMX exporter rules drop the quotes, as the other producers write it.
     */
    public static final String OTHER_TOPIC = "(other)";
    /** Unexpected failures inside {@code partition()} answered by the fallback placement; a counter. */
    public static final String PARTITIONER_ERRORS_TOTAL = "dkg-producer-partitioner-errors-total";

    /** {@link DkgKafkaProducer}: offset markers written to the handoff topic, by {@code topic}; a counter. */
    public static final String MARKERS_WRITTEN_TOTAL = "dkg-producer-markers-written-total";
    /**
     * {@link DkgKafkaProducer}: stamp windows closed, by {@code topic} and {@code reason} ({@code settled},
     * {@code timed_out}); a counter (Rust: {@code dkg_producer_stamp_windows_closed_total}).
     */
    public static final String STAMP_WINDOWS_CLOSED_TOTAL = "dkg-producer-stamp-windows-closed-total";
    /**
     * {@link DkgKafkaProducer}: changes of a topic's partition count seen, by {@code topic}; a counter (Rust:
     * {@code dkg_producer_partition_count_changes_total}).
     */
    public static final String PARTITION_COUNT_CHANGES_TOTAL = "dkg-producer-partition-count-changes-total";

    /** {@link DkgKafkaConsumer}: records handed to the application, by {@code topic} and {@code partition}; a counter. */
    public static final String CONSUMER_RECORDS_TOTAL = "dkg-consumer-records-total";
    /** {@link DkgKafkaConsumer}: records handed to the application, by {@code topic}; a counter. */
    public static final String CONSUMER_MEMBER_RECORDS_TOTAL = "dkg-consumer-member-records-total";
    /** {@link DkgKafkaConsumer}: end minus lowest unprocessed offset, by {@code topic} and {@code partition}. */
    public static final String CONSUMER_LAG_RECORDS = "dkg-consumer-lag-records";
    /** {@link DkgKafkaConsumer}: records of moved keys held now, by {@code topic} and {@code partition}. */
    public static final String CONSUMER_HELD_RECORDS = "dkg-consumer-held-records";
    /**
     * {@link DkgKafkaConsumer}: the hold-time histogram (Rust {@code dkg_consumer_hold_seconds}) as cumulative bucket
     * counters by {@code topic} and {@code le}; with {@link #CONSUMER_HOLD_SECONDS_SUM} and
     * {@link #CONSUMER_HOLD_SECONDS_COUNT}.
     */
    public static final String CONSUMER_HOLD_SECONDS_BUCKET = "dkg-consumer-hold-seconds-bucket";
    /** {@link DkgKafkaConsumer}: seconds records of moved keys were held, summed, by {@code topic}. */
    public static final String CONSUMER_HOLD_SECONDS_SUM = "dkg-consumer-hold-seconds-sum";
    /** {@link DkgKafkaConsumer}: records released from hold, by {@code topic}; a counter. */
    public static final String CONSUMER_HOLD_SECONDS_COUNT = "dkg-consumer-hold-seconds-count";
    /** {@link DkgKafkaConsumer}: records handed out whose key is split in their epoch, by {@code topic}; a counter. */
    public static final String CONSUMER_SPLIT_RECORDS_TOTAL = "dkg-consumer-split-records-total";
    /**
     * {@link DkgKafkaConsumer}: records whose {@code dkg-*} headers could not be trusted, by {@code topic} and
     * {@code reason} ({@code unknown_epoch}, spec 9.3 C19); a counter.
     */
    public static final String CONSUMER_UNTRUSTED_RECORDS_TOTAL = "dkg-consumer-untrusted-records-total";
    /** {@link DkgKafkaConsumer}: leases clamped to the consumer's max lease (C2), by {@code topic}; a counter. */
    public static final String CONSUMER_CLAMPED_LEASES_TOTAL = "dkg-consumer-clamped-leases-total";
    /**
     * {@link DkgKafkaConsumer}: offset commits whose metadata left out the skip window because it did not fit the
     * broker's metadata limit (C7: a next owner re-processes what was processed above the committed offset), by
     * {@code topic}; a counter.
     */
    public static final String CONSUMER_COMMIT_WINDOWS_LEFT_OUT_TOTAL = "dkg-consumer-commit-windows-left-out-total";
    /** {@link DkgKafkaConsumer}: marker records skipped, by {@code topic} and {@code reason} (spec 9.1); a counter. */
    public static final String CONSUMER_MARKERS_REJECTED_TOTAL = "dkg-consumer-markers-rejected-total";

    private DkgMetrics() {}
}
