package dev.dkg.kafka;

/**
 * The {@code dkg.*} settings of {@link DkgPartitioner} (read from the producer configuration in
 * {@code configure}) and of {@link DkgRouter#start}. Everything else the control-topic consumer needs (bootstrap
 * servers, {@code security.*}, {@code sasl.*}, {@code ssl.*}, ...) is reused from the producer configuration.
 */
public final class DkgConfig {
    /** The control topic the assignments are read from. */
    public static final String CONTROL_TOPIC_CONFIG = "dkg.control.topic";
    /** Default of {@link #CONTROL_TOPIC_CONFIG} (the Rust {@code DEFAULT_CONTROL_TOPIC}). */
    public static final String CONTROL_TOPIC_DEFAULT = "_dkg.assignments";

    /**
     * How long {@code configure} may take to read the control topic to its end; past it the producer's
     * construction fails (as the Rust {@code DkgProducerBuilder::build} does). Milliseconds.
     */
    public static final String STARTUP_TIMEOUT_MS_CONFIG = "dkg.startup.timeout.ms";
    /** Default of {@link #STARTUP_TIMEOUT_MS_CONFIG}: 30 s, as the Rust builder. */
    public static final long STARTUP_TIMEOUT_MS_DEFAULT = 30_000;

    /** Largest control-topic value accepted (bytes); capped at {@link Assignment#MAX_ASSIGNMENT_BYTES}. */
    public static final String MAX_ASSIGNMENT_BYTES_CONFIG = "dkg.max.assignment.bytes";

    /**
     * The plug-in's metrics recording level, {@code INFO} (default), {@code DEBUG} or {@code TRACE}; without it the
     * client's own {@code metrics.recording.level} applies. At {@code INFO} records placed by the assignment count
     * as one route, {@code dkg-producer-records-total{route="assigned"}}; from {@code DEBUG} on they count as
     * {@code route="heavy"} and {@code route="bucket"} instead (the labels of the Rust and Python producers). Telling
     * the two apart costs about 1.5 ns per keyed record (the counter then depends on the lookup's answer), a third of
     * the lookup of a 6-byte key: the same trade Kafka makes with its own {@code DEBUG} metrics.
     */
    public static final String METRICS_RECORDING_LEVEL_CONFIG = "dkg.metrics.recording.level";

    /**
     * Settings with this prefix go, without it, to the control-topic consumer and override what it would
     * otherwise use (for example {@code dkg.consumer.request.timeout.ms}).
     */
    public static final String CONSUMER_PREFIX = "dkg.consumer.";

    /**
     * An existing {@link DkgRouter} object (not a string) for {@link DkgPartitioner} to use instead of starting
     * its own, so a producer and a {@code DkgStreamPartitioner} can share one control-topic follower. The
     * partitioner then does not close it: its creator does.
     */
    public static final String ROUTER_INSTANCE_CONFIG = "dkg.router.instance";

    private DkgConfig() {}
}
