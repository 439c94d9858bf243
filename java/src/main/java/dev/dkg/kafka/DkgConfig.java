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

    /** {@link DkgKafkaProducer}: the handoff topic its leases, markers and assignment history go to. */
    public static final String HANDOFF_TOPIC_CONFIG = "dkg.handoff.topic";
    /** Default of {@link #HANDOFF_TOPIC_CONFIG} (the Rust {@code DEFAULT_HANDOFF_TOPIC}). */
    public static final String HANDOFF_TOPIC_DEFAULT = "_dkg.handoff";

    /**
     * {@link DkgKafkaProducer}: how long its lease lasts (milliseconds); renewed every third of it. Consumers stop
     * waiting for a producer that stopped renewing once it expires. Must stay below the consumers' maximum lease
     * (120 s in the Rust consumer).
     */
    public static final String LEASE_MS_CONFIG = "dkg.lease.ms";
    /** Default of {@link #LEASE_MS_CONFIG}: 30 s, as the Rust producer (above a broker failover). */
    public static final long LEASE_MS_DEFAULT = 30_000;

    /**
     * {@link DkgKafkaProducer}: how long after an epoch switch the placed records carry {@code dkg-epoch} and
     * {@code dkg-producer} (the stamp window, docs/spec.md 9.2.2), in milliseconds. The window closes at this bound
     * once the switch's marker is written.
     */
    public static final String STAMP_WINDOW_MS_CONFIG = "dkg.stamp.window.ms";
    /** Default of {@link #STAMP_WINDOW_MS_CONFIG}: 60 s, the Rust producer's bound. */
    public static final long STAMP_WINDOW_MS_DEFAULT = 60_000;

    /**
     * {@link DkgKafkaProducer}: the topics (comma-separated) it registers at construction, with the epoch then in
     * effect as its first epoch. Other topics are registered on first use, with first epoch 0, and their marker of
     * the current epoch follows at once.
     */
    public static final String TOPICS_CONFIG = "dkg.topics";

    private DkgConfig() {}
}
