package dev.dkg.kafka;

/**
 * Which rule placed a record: the {@code route} tag of {@code dkg-producer-records-total}. The order matters:
 * {@code DkgRouter} derives HEAVY (= BUCKET - 1) from the sign of the encoded lookup without a branch.
 */
public enum Route {
    /** The key is a heavy hitter of the current assignment. */
    HEAVY("heavy"),
    /** The key went through the current assignment's bucket table. */
    BUCKET("bucket"),
    /**
     * The key is a split heavy key of the current assignment (version 2): spread over its parts by its schedule,
     * without per-key order.
     */
    SPLIT("split"),
    /**
     * No assignment in effect (none, retracted, or its partition count differs from the topic's): Kafka's
     * default placement {@code toPositive(murmur2(key)) % partitions}.
     */
    FALLBACK("fallback"),
    /** A record without a key: sticky placement, like Kafka's built-in partitioner. */
    KEYLESS("keyless"),
    /**
     * The key went through the current assignment, as a heavy key or by bucket: {@link #HEAVY} and {@link #BUCKET}
     * counted together, which is what the router counts unless the metrics recording level is {@code DEBUG}
     * ({@link DkgConfig#METRICS_RECORDING_LEVEL_CONFIG}).
     */
    ASSIGNED("assigned");

    private final String label;

    Route(String label) {
        this.label = label;
    }

    /** The metric label, e.g. {@code "heavy"}. */
    public String label() {
        return label;
    }

    /** The label. */
    @Override
    public String toString() {
        return label;
    }
}
