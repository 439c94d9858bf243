package dev.dkg.kafka;

/**
 * Names of the metrics a {@link DkgRouter} registers in the client's metrics (through
 * {@link org.apache.kafka.common.metrics.PluginMetrics}: group {@code plugins}, with the client's tags
 * {@code config=partitioner.class} and {@code class=DkgPartitioner}). Each matches a Rust producer metric
 * ({@code partitioner/src/kafka/metrics.rs}): {@code dkg_producer_X} there is {@code dkg-producer-X} here.
 */
public final class DkgMetrics {
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
    /** Control-topic records rejected, by {@code reason} (the {@link RejectReason} labels); a counter. */
    public static final String ASSIGNMENTS_REJECTED_TOTAL = "dkg-producer-assignments-rejected-total";
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

    private DkgMetrics() {}
}
