package dev.dkg.kafka;

import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.metrics.Measurable;
import org.apache.kafka.common.metrics.Sensor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The routing state shared by {@link DkgPartitioner} and {@link dev.dkg.kafka.streams.DkgStreamPartitioner}: the
 * current assignment per topic, kept current by a background follower of the control topic, and the lock-free
 * keyed lookup ({@link #partition}). The Java counterpart of the Rust {@code DkgRouter}
 * ({@code partitioner/src/kafka/router.rs}).
 *
 * <p>Hot path: one array read and an identity compare for the topic's state (a direct-mapped index over the
 * {@link ConcurrentHashMap} of topics), one volatile read of its assignment, the O(1), branch-free
 * {@link Assignment} lookup, and one plain increment of the calling thread's own route counter
 * ({@link RouteCounters}: exact, no atomic read-modify-write) at a place fixed per route. Heavy and bucket records
 * are counted together ({@link Route#ASSIGNED}) unless the metrics recording level is {@code DEBUG}
 * ({@link DkgConfig#METRICS_RECORDING_LEVEL_CONFIG}): a counter chosen by the lookup's answer waits for the whole
 * lookup, about 1.5 ns more per record, a third of the lookup of a 6-byte key. No lock, no allocation (except the first record of a
 * topic never seen before, or of a thread never seen for it), no I/O, never throws. An assignment routes only while its partition count equals
 * the count the caller passes (from the producer's {@code Cluster}); otherwise, and without an assignment, keys go
 * where Kafka's default partitioner puts them: {@code toPositive(murmur2(key)) % numPartitions}.
 */
public final class DkgRouter implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(DkgRouter.class);
    private static final Route[] ROUTES = Route.values();
    private static final RejectReason[] REASONS = RejectReason.values();
    private static final int FALLBACK = Route.FALLBACK.ordinal();
    private static final int KEYLESS = Route.KEYLESS.ordinal();
    private static final int SPLIT = Route.SPLIT.ordinal();
    private static final int ASSIGNED = Route.ASSIGNED.ordinal();
    /** HEAVY is BUCKET - 1, so the route of an encoded lookup {@code r} is this minus (1 if heavy, else 0). */
    private static final int HEAVY_OR_BUCKET = Route.BUCKET.ordinal();
    /** Most slots of the direct-mapped topic index ({@link #index}). */
    private static final int MAX_INDEX_SLOTS = 4096;
    /** Times an {@link #index} slot follows a caller to a new {@code String} instance of its topic. */
    private static final int MAX_REKEYS = 16;

    /**
     * One data topic: its assignment (swapped atomically by the follower), the partition count of the last
     * {@code Cluster} seen, and its counters. {@link #partition(byte[], int)} is the keyed hot path.
     */
    static final class TopicState {
        final String topic;
        volatile Assignment assignment;
        /**
         * The stamp windows' transition to the current assignment (written before it), while the router tracks
         * windows ({@link DkgRouter#trackWindows()}); null otherwise, or before the first adoption tracked.
         */
        volatile Transition transition;
        /** The partition count the producer last routed with (for the in-effect gauge); 0 = none yet. */
        volatile int lastPartitions;
        /** The partition count of the last {@code Cluster} passed to {@link #partitionCount}; see there. */
        private ClusterCount clusterCount;
        final RouteCounters records = new RouteCounters();
        /** Control records naming this topic that were rejected, by {@link RejectReason#ordinal()}. */
        final LongAdder[] rejected = newAdders();
        /** Heavy and bucket records counted apart (recording level DEBUG), else together as ASSIGNED. */
        final boolean routeDetail;
        boolean registered;

        TopicState(String topic, boolean routeDetail) {
            this.topic = topic;
            this.routeDetail = routeDetail;
        }

        /**
         * {@code cluster.partitionsForTopic(topic).size()}, remembered for the {@code Cluster} instance it was read
         * from. A {@code Cluster} is immutable and the producer passes the same instance until its metadata
         * changes, so the answer is exact and the map lookup is paid once per metadata update, not per record.
         */
        int partitionCount(Cluster cluster) {
            ClusterCount c = clusterCount;
            if (c != null && c.cluster == cluster) {
                return c.partitions;
            }
            int n = cluster.partitionsForTopic(topic).size();
            // A plain write: ClusterCount's fields are final, so any thread that sees it sees them.
            clusterCount = new ClusterCount(cluster, n);
            seen(n);
            return n;
        }

        /** Notes the partition count the producer routes with (for the in-effect gauge). */
        void seen(int numPartitions) {
            if (lastPartitions != numPartitions) {
                lastPartitions = numPartitions;
            }
        }

        /** {@link DkgRouter#partition(String, byte[], int)} for this topic. */
        int partition(byte[] key, int numPartitions) {
            seen(numPartitions);
            return route(key, numPartitions);
        }

        /**
         * Whether {@code key} goes to {@code partition} now, without counting or advancing anything (for a split key:
         * whether {@code partition} is one of its parts): how {@link DkgPartitioner} recognises kafka-clients 3.x's
         * repeated call for a record.
         */
        boolean places(byte[] key, int numPartitions, int partition) {
            if (numPartitions <= 0) {
                return partition == 0;
            }
            Assignment a = assignment;
            if (a != null && a.partitions() == numPartitions) {
                int r = a.lookup(key);
                int p = r ^ (r >> 31);
                if (p < numPartitions) {
                    return p == partition;
                }
                if (p >= Assignment.SPLIT_BASE) {
                    return a.splitHasPart(p, partition);
                }
            }
            return Murmur2.kafkaPartition(key, numPartitions) == partition;
        }

        /**
         * {@link #partition(byte[], int)} for a count already {@link #seen} (the partitioner's path: its count comes
         * from {@link #partitionCount}, which notes every new count).
         */
        int route(byte[] key, int numPartitions) {
            int p = route(assignment, key, numPartitions);
            return p ^ (p >> 31); // a split part's -1 - q back to q, without a branch
        }

        /**
         * {@link #route(byte[], int)} by assignment {@code a} (a snapshot of {@link #assignment} the caller took, so
         * that it knows which epoch placed the record), with a split key's part returned as {@code -1 - p}: the
         * ordering producer ({@link DkgKafkaProducer}) stamps placed records but never split ones.
         */
        int route(Assignment a, byte[] key, int numPartitions) {
            if (numPartitions <= 0 || key == null) {
                records.add(FALLBACK);
                return 0;
            }
            if (a != null && a.partitions() == numPartitions) {
                int r = a.lookup(key);
                // r is p (bucket route) or -1 - p (heavy): decoded without a branch on which, since heavy and light
                // keys interleave at random. Always in range (Assignment guarantees it); re-checked (one compare,
                // always true) so that no bug elsewhere can pick a missing partition.
                int p = r ^ (r >> 31);
                if (p < numPartitions) {
                    if (routeDetail) {
                        records.add(HEAVY_OR_BUCKET - (r >>> 31));
                    } else {
                        records.add(ASSIGNED);
                    }
                    return p;
                }
                // Off the hot path: a split key's answer is above every partition (see Assignment, "Split keys").
                if (p >= Assignment.SPLIT_BASE) {
                    int q = a.splitPartition(p);
                    if (q < numPartitions) {
                        records.add(SPLIT);
                        return -1 - q;
                    }
                }
            }
            records.add(FALLBACK);
            return Murmur2.kafkaPartition(key, numPartitions);
        }
    }

    /**
     * A slot of {@link #index}: a topic's state under the {@code String} instance a caller passed (producers pass
     * the same instance for every record of a topic, usually not the one the state was made with).
     */
    static final class IndexEntry {
        final String key;
        final TopicState state;
        /** How often this slot was re-keyed to a new instance of the same name (bounded, see {@link #state}). */
        final int rekeys;

        IndexEntry(String key, TopicState state, int rekeys) {
            this.key = key;
            this.state = state;
            this.rekeys = rekeys;
        }
    }

    /** A {@code Cluster} instance and the topic's partition count in it. */
    private static final class ClusterCount {
        final Cluster cluster;
        final int partitions;

        ClusterCount(Cluster cluster, int partitions) {
            this.cluster = cluster;
            this.partitions = partitions;
        }
    }

    private final String controlTopic;
    private final boolean routeDetail;
    private final ConcurrentHashMap<String, TopicState> topics = new ConcurrentHashMap<>();
    /** The control record each adopted assignment came in, by topic: what an ordering producer writes as history. */
    private final ConcurrentHashMap<String, Document> documents = new ConcurrentHashMap<>();
    /**
     * The topics again, direct-mapped by {@code String.hashCode()} (a power-of-two array, rebuilt on every new
     * topic): the hot path's lookup is one array read and an identity compare with the {@code String} instance the
     * caller used last for that topic, falling back to {@link #topics} on a miss (a topic not yet known, or two
     * topics in one slot).
     */
    private volatile IndexEntry[] index = new IndexEntry[16];
    /** Written only by the follower (under {@code this}); read by the metrics and {@link #assignments()}. */
    private final AssignmentBook book;
    /** Rejected control records naming no topic of this router ({@link DkgMetrics#OTHER_TOPIC}), by reason. */
    private final LongAdder[] rejected = newAdders();
    private final LongAdder errors = new LongAdder();
    private final Object metricsLock = new Object();
    private DkgMetrics.Registrar metrics;
    private volatile ControlFollower follower;
    /** Whether adoptions make stamp-window transitions ({@link TopicState#transition}): an ordering producer's. */
    private volatile boolean trackWindows;

    private DkgRouter(String controlTopic, int maxValueBytes, Sensor.RecordingLevel level) {
        this.controlTopic = controlTopic;
        this.routeDetail = Sensor.RecordingLevel.DEBUG.shouldRecord(level.id);
        this.book = new AssignmentBook(maxValueBytes);
    }

    private static LongAdder[] newAdders() {
        LongAdder[] adders = new LongAdder[REASONS.length];
        for (int i = 0; i < adders.length; i++) {
            adders[i] = new LongAdder();
        }
        return adders;
    }

    /**
     * Starts a router from a Kafka client configuration: reads {@link DkgConfig}'s settings and the connection
     * settings (bootstrap servers, security, SASL, SSL), reads the control topic to its end (bounded by
     * {@link DkgConfig#STARTUP_TIMEOUT_MS_CONFIG}) and then follows it in a daemon thread until {@link #close()}.
     * A control topic that does not exist yet reads as empty and is followed once it exists.
     *
     * @throws ConfigException on a bad {@code dkg.*} setting
     * @throws org.apache.kafka.common.KafkaException if the control topic cannot be read to its end in time
     */
    public static DkgRouter start(Map<String, ?> configs) {
        String topic = stringConfig(configs, DkgConfig.CONTROL_TOPIC_CONFIG, DkgConfig.CONTROL_TOPIC_DEFAULT);
        long timeoutMs = longConfig(configs, DkgConfig.STARTUP_TIMEOUT_MS_CONFIG, DkgConfig.STARTUP_TIMEOUT_MS_DEFAULT);
        if (timeoutMs < 0) {
            throw new ConfigException(DkgConfig.STARTUP_TIMEOUT_MS_CONFIG, timeoutMs, "must be >= 0");
        }
        long maxBytes = longConfig(configs, DkgConfig.MAX_ASSIGNMENT_BYTES_CONFIG, Assignment.MAX_ASSIGNMENT_BYTES);
        if (maxBytes < 0) {
            throw new ConfigException(DkgConfig.MAX_ASSIGNMENT_BYTES_CONFIG, maxBytes, "must be >= 0");
        }
        DkgRouter router = new DkgRouter(topic, (int) Math.min(maxBytes, Assignment.MAX_ASSIGNMENT_BYTES),
                recordingLevel(configs));
        router.follower = ControlFollower.start(router, ControlFollower.consumerConfig(configs), topic, timeoutMs);
        return router;
    }

    /** A router without a follower (tests, or callers that feed control records themselves via {@link #apply}). */
    public static DkgRouter detached(String controlTopic) {
        return detached(controlTopic, Sensor.RecordingLevel.INFO);
    }

    /**
     * {@link #detached(String)} with the given metrics recording level: {@code DEBUG} or {@code TRACE} count heavy
     * and bucket records apart (see {@link DkgConfig#METRICS_RECORDING_LEVEL_CONFIG}).
     */
    public static DkgRouter detached(String controlTopic, Sensor.RecordingLevel level) {
        return new DkgRouter(controlTopic, Assignment.MAX_ASSIGNMENT_BYTES, level);
    }

    /**
     * Whether heavy and bucket records are counted apart ({@link Route#HEAVY}, {@link Route#BUCKET}) rather than
     * together ({@link Route#ASSIGNED}).
     */
    public boolean countsRouteDetail() {
        return routeDetail;
    }

    /** The control topic followed. */
    public String controlTopic() {
        return controlTopic;
    }

    // ------------------------------------------------------------------------------------------------------------
    // Hot path.

    /**
     * The partition of a keyed record: the assignment's if one is in effect for {@code topic} with exactly
     * {@code numPartitions} partitions, else Kafka's default {@code toPositive(murmur2(key)) % numPartitions}.
     * Never blocks; always in {@code [0, numPartitions)}; 0 if {@code numPartitions <= 0} or for a null key
     * (keyless records are the caller's to place). {@code topic} must not be null.
     */
    public int partition(String topic, byte[] key, int numPartitions) {
        return state(topic).partition(key, numPartitions);
    }

    /** Counts a keyless record of {@code topic} (placed by the caller). */
    void countKeyless(TopicState s) {
        s.records.add(KEYLESS);
    }

    /** Counts an unexpected failure answered by the fallback placement. */
    void countError() {
        errors.increment();
    }

    /** The state of {@code topic}, created (and its metrics registered) on first use. */
    TopicState state(String topic) {
        IndexEntry[] slots = index;
        int at = topic.hashCode() & (slots.length - 1);
        IndexEntry e = slots[at];
        if (e != null) {
            if (e.key == topic) {
                return e.state;
            }
            if (e.key.equals(topic)) {
                // Re-key to this instance so that its next records hit by identity. Bounded: a caller that builds a
                // new String per record stays on the equals path instead of writing a shared slot every time.
                if (e.rekeys < MAX_REKEYS) {
                    slots[at] = new IndexEntry(topic, e.state, e.rekeys + 1);
                }
                return e.state;
            }
        }
        TopicState s = topics.get(topic);
        return s != null ? s : register(topic);
    }

    private TopicState register(String topic) {
        TopicState s = topics.computeIfAbsent(topic, t -> new TopicState(t, routeDetail));
        synchronized (metricsLock) {
            if (metrics != null && !s.registered) {
                registerTopic(metrics, s);
            }
            reindex();
        }
        return s;
    }

    /** Rebuilds {@link #index} from {@link #topics} (under {@code metricsLock}): at least 4 slots per topic. */
    private void reindex() {
        int want = Math.min(MAX_INDEX_SLOTS, Integer.highestOneBit(Math.max(4, topics.size() * 4 - 1)) << 1);
        IndexEntry[] old = index;
        IndexEntry[] slots = new IndexEntry[Math.max(want, old.length)];
        for (TopicState t : topics.values()) {
            int at = t.topic.hashCode() & (slots.length - 1);
            if (slots[at] == null) {
                slots[at] = new IndexEntry(t.topic, t, 0);
            }
        }
        // Keep the callers' instances of the topics already indexed (where they kept their slot).
        for (IndexEntry e : old) {
            if (e != null) {
                int at = e.key.hashCode() & (slots.length - 1);
                if (slots[at] != null && slots[at].state == e.state) {
                    slots[at] = e;
                }
            }
        }
        index = slots;
    }

    // ------------------------------------------------------------------------------------------------------------
    // Control records.

    /**
     * Applies one control-topic record (the follower calls this for every record, in log order). A rejection is
     * logged and counted; the topic's last good assignment stays.
     */
    public ControlUpdate apply(byte[] key, byte[] value) {
        ControlUpdate u;
        synchronized (book) {
            u = book.apply(key, value);
            switch (u.outcome()) {
                case ACCEPTED: {
                    documents.put(u.topic(), new Document(u.assignment().epoch(), value));
                    TopicState s = state(u.topic());
                    if (trackWindows) {
                        Assignment prev = s.assignment;
                        // No assignment before: Kafka's placement if records were routed by it, else not known.
                        Transition.Before before = prev != null ? Transition.Before.of(prev)
                                : s.lastPartitions != 0 ? Transition.Before.HASH : Transition.Before.UNKNOWN;
                        s.transition = Transition.tracked(u.assignment().epoch(), before, s.transition);
                    }
                    s.assignment = u.assignment();
                    LOG.debug("DKG: adopted assignment for topic {} epoch {} from {}", u.topic(),
                            Long.toUnsignedString(u.assignment().epoch()), controlTopic);
                    break;
                }
                case RETRACTED:
                    documents.remove(u.topic());
                    state(u.topic()).transition = null;
                    state(u.topic()).assignment = null;
                    LOG.info("DKG: assignment of topic {} retracted; Kafka's default placement until the next one",
                            u.topic());
                    break;
                case RESET:
                case REREAD:
                    documents.clear();
                    for (TopicState s : topics.values()) {
                        s.transition = null;
                        s.assignment = null;
                    }
                    LOG.warn("DKG: control topic {}: {}; every assignment dropped{}", controlTopic,
                            u.reread() ? "a document of another generation" : "new generation " + book.generation(),
                            u.reread() ? ", re-reading it from the beginning" : "");
                    break;
                case REJECTED: {
                    // Labelled by the record's topic only for a topic of this router (routed or assigned: its
                    // per-topic metrics exist), else OTHER_TOPIC: the series stay bounded.
                    TopicState s = u.topic() == null ? null : topics.get(u.topic());
                    (s != null ? s.rejected : rejected)[u.reason().ordinal()].increment();
                    LOG.warn("DKG: rejected a record of control topic {} (topic {}, reason {}): {}; the last good "
                            + "assignment stays", controlTopic, u.topic() == null ? "<none>" : u.topic(), u.reason(),
                            u.detail());
                    break;
                }
                default:
                    break;
            }
        }
        return u;
    }

    // ------------------------------------------------------------------------------------------------------------
    // Inspection.

    /** The assignment currently adopted for {@code topic} (in effect only while partition counts match), or null. */
    public Assignment assignment(String topic) {
        TopicState s = topics.get(topic);
        return s == null ? null : s.assignment;
    }

    /**
     * The control-topic value {@code topic}'s assignment of {@code epoch} was adopted from, while it is the adopted one
     * (else null): the bytes an ordering producer writes to the handoff topic as {@code assignment/<topic>/<epoch>}.
     */
    byte[] document(String topic, long epoch) {
        Document d = documents.get(topic);
        return d != null && d.epoch == epoch ? d.value : null;
    }

    /**
     * From now on, adoptions make stamp-window transitions (docs/spec.md 9.2.2) for {@link DkgKafkaProducer}; the
     * assignments adopted before get the start-up window (every key counts as moved until it closes). False (and
     * nothing changes) if windows are tracked already: one ordering producer per router.
     */
    boolean trackWindows() {
        synchronized (book) {
            if (trackWindows) {
                return false;
            }
            trackWindows = true;
            // Assignments adopted before (read at start-up): the first window, its predecessor not known.
            for (TopicState s : topics.values()) {
                Assignment a = s.assignment;
                if (a != null && s.transition == null) {
                    s.transition = Transition.tracked(a.epoch(), Transition.Before.UNKNOWN, null);
                }
            }
            return true;
        }
    }

    /** {@code topic}'s transition (null: none). */
    Transition transition(String topic) {
        TopicState s = topics.get(topic);
        return s == null ? null : s.transition;
    }

    /**
     * Closes {@code topic}'s stamp windows of epochs up to {@code upto}, if its transition is still {@code seen} (a
     * newer adoption made another, whose windows the caller has not judged yet). Returns whether it closed them.
     */
    boolean closeWindows(String topic, Transition seen, long upto) {
        synchronized (book) {
            TopicState s = topics.get(topic);
            if (s == null || s.transition != seen || seen == null) {
                return false;
            }
            s.transition = seen.closedUpTo(upto);
            return true;
        }
    }

    /** An adopted assignment's control-topic value. */
    private static final class Document {
        final long epoch;
        final byte[] value;

        Document(long epoch, byte[] value) {
            this.epoch = epoch;
            this.value = value;
        }
    }

    /** The adopted assignments by topic (an immutable snapshot). */
    public Map<String, Assignment> assignments() {
        synchronized (book) {
            return book.snapshot();
        }
    }

    /**
     * Records of {@code topic} placed by {@code route} so far. {@link Route#ASSIGNED} is every record the assignment
     * placed by heavy key or bucket, at every recording level; {@link Route#HEAVY} and {@link Route#BUCKET} are
     * counted only at {@code DEBUG} ({@link #countsRouteDetail()}), 0 otherwise.
     */
    public long records(String topic, Route route) {
        TopicState s = topics.get(topic);
        if (s == null) {
            return 0;
        }
        if (route == Route.ASSIGNED) {
            return s.records.sum(Route.ASSIGNED) + s.records.sum(Route.HEAVY) + s.records.sum(Route.BUCKET);
        }
        return s.records.sum(route);
    }

    /** Control records rejected for {@code reason} so far (every topic). */
    public long rejected(RejectReason reason) {
        long n = rejected[reason.ordinal()].sum();
        for (TopicState s : topics.values()) {
            n += s.rejected[reason.ordinal()].sum();
        }
        return n;
    }

    /**
     * Control records rejected for {@code reason} so far under the {@code topic} label: a topic of this router, or
     * {@link DkgMetrics#OTHER_TOPIC} for the others (and records naming no topic).
     */
    public long rejected(String topic, RejectReason reason) {
        if (DkgMetrics.OTHER_TOPIC.equals(topic)) {
            return rejected[reason.ordinal()].sum();
        }
        TopicState s = topics.get(topic);
        return s == null ? 0 : s.rejected[reason.ordinal()].sum();
    }

    /** Unexpected failures answered by the fallback placement so far. */
    public long errors() {
        return errors.sum();
    }

    // ------------------------------------------------------------------------------------------------------------
    // Metrics.

    /**
     * Registers this router's metrics (see {@link DkgMetrics}): in the plug-in's own registry
     * ({@link DkgMetrics#ownRegistry}, any client) or the client's ({@code dev.dkg.kafka.kip877.DkgPartitioner
     * .registrar(pluginMetrics)}, kafka-clients 4.1+). Per-topic metrics appear for every topic routed or assigned.
     * Call at most once.
     */
    public void bindMetrics(DkgMetrics.Registrar pluginMetrics) {
        synchronized (metricsLock) {
            if (metrics != null) {
                throw new IllegalStateException("DkgRouter metrics are already bound");
            }
            metrics = pluginMetrics;
            registerRejected(pluginMetrics, DkgMetrics.OTHER_TOPIC, rejected);
            add(pluginMetrics, DkgMetrics.PARTITIONER_ERRORS_TOTAL,
                    "Unexpected failures inside partition(), answered by Kafka's default placement.",
                    new LinkedHashMap<>(), (config, now) -> errors.sum());
            for (TopicState s : topics.values()) {
                if (!s.registered) {
                    registerTopic(pluginMetrics, s);
                }
            }
        }
    }

    /**
     * Whether {@code route} has a series: ASSIGNED without route detail, HEAVY and BUCKET with it, the others
     * always. One set per level, so that a sum over the routes counts every record once.
     */
    private static boolean exported(Route route, boolean routeDetail) {
        switch (route) {
            case ASSIGNED:
                return !routeDetail;
            case HEAVY:
            case BUCKET:
                return routeDetail;
            default:
                return true;
        }
    }

    /** The rejection counters of one {@code topic} label, one series per reason. */
    private static void registerRejected(DkgMetrics.Registrar m, String topic, LongAdder[] counters) {
        for (RejectReason r : REASONS) {
            LongAdder counter = counters[r.ordinal()];
            LinkedHashMap<String, String> tags = tags("topic", topic);
            tags.put("reason", r.label());
            add(m, DkgMetrics.ASSIGNMENTS_REJECTED_TOTAL,
                    "Control-topic records rejected, by topic (this producer's, else (other)) and reason; the last "
                            + "good assignment stays.",
                    tags, (config, now) -> counter.sum());
        }
    }

    private static void registerTopic(DkgMetrics.Registrar m, TopicState s) {
        s.registered = true;
        registerRejected(m, s.topic, s.rejected);
        for (Route route : ROUTES) {
            if (!exported(route, s.routeDetail)) {
                continue;
            }
            LinkedHashMap<String, String> tags = tags("topic", s.topic);
            tags.put("route", route.label());
            add(m, DkgMetrics.RECORDS_TOTAL, "Records placed by the DKG partitioner, by route.", tags,
                    (config, now) -> s.records.sum(route));
        }
        add(m, DkgMetrics.EPOCH, "Epoch of the topic's current DKG assignment (0 = none).", tags("topic", s.topic),
                (config, now) -> {
                    Assignment a = s.assignment;
                    return a == null ? 0 : unsignedToDouble(a.epoch());
                });
        add(m, DkgMetrics.ASSIGNMENT_IN_EFFECT,
                "1 while the topic's assignment routes records; 0 while there is none or its partition count "
                        + "differs from the topic's.",
                tags("topic", s.topic), (config, now) -> {
                    Assignment a = s.assignment;
                    return a != null && a.partitions() == s.lastPartitions ? 1 : 0;
                });
        add(m, DkgMetrics.ASSIGNMENT_AGE_SECONDS,
                "Seconds since the topic's assignment was created (its created_at_ms); NaN without one.",
                tags("topic", s.topic), (config, now) -> {
                    Assignment a = s.assignment;
                    if (a == null) {
                        return Double.NaN;
                    }
                    long created = a.createdAtMs();
                    // Clock skew between the publisher and this host can make it negative: clamp to 0.
                    return created < 0 || created > now ? 0.0 : (now - created) / 1000.0;
                });
    }

    /** Registers one metric, best effort (also used by {@link DkgKafkaProducer} for its protocol counters). */
    static void add(DkgMetrics.Registrar m, String name, String description, LinkedHashMap<String, String> tags,
            Measurable value) {
        try {
            m.add(name, description, tags, value);
        } catch (RuntimeException e) {
            metricNotAdded(name, tags, e);
        }
    }

    /** Closed metrics (the producer is closing) or a duplicate: metrics are best effort, routing is not. */
    static void metricNotAdded(String name, Map<String, String> tags, RuntimeException e) {
        LOG.debug("DKG: could not register metric {} {}: {}", name, tags, e.toString());
    }

    static LinkedHashMap<String, String> tags(String key, String value) {
        LinkedHashMap<String, String> tags = new LinkedHashMap<>();
        tags.put(key, value);
        return tags;
    }

    private static double unsignedToDouble(long v) {
        return v >= 0 ? v : (v >>> 1) * 2.0 + (v & 1);
    }

    // ------------------------------------------------------------------------------------------------------------
    // Config helpers.

    /**
     * {@link DkgConfig#METRICS_RECORDING_LEVEL_CONFIG}, else the client's own {@code metrics.recording.level}, else
     * {@code INFO}.
     */
    static Sensor.RecordingLevel recordingLevel(Map<String, ?> configs) {
        String key = configs.containsKey(DkgConfig.METRICS_RECORDING_LEVEL_CONFIG)
                ? DkgConfig.METRICS_RECORDING_LEVEL_CONFIG
                : CommonClientConfigs.METRICS_RECORDING_LEVEL_CONFIG;
        String name = stringConfig(configs, key, Sensor.RecordingLevel.INFO.name);
        try {
            return Sensor.RecordingLevel.forName(name.toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new ConfigException(key, name, "must be INFO, DEBUG or TRACE");
        }
    }

    static String stringConfig(Map<String, ?> configs, String key, String dflt) {
        Object v = configs.get(key);
        if (v == null) {
            return dflt;
        }
        String s = v.toString().trim();
        if (s.isEmpty()) {
            throw new ConfigException(key, v, "must not be empty");
        }
        return s;
    }

    static long longConfig(Map<String, ?> configs, String key, long dflt) {
        Object v = configs.get(key);
        if (v == null) {
            return dflt;
        }
        if (v instanceof Number) {
            return ((Number) v).longValue();
        }
        try {
            return Long.parseLong(v.toString().trim());
        } catch (NumberFormatException e) {
            throw new ConfigException(key, v, "must be an integer");
        }
    }

    /** Stops the follower (if any) and waits briefly for it; the router keeps routing by what it last knew. */
    @Override
    public void close() {
        ControlFollower f = follower;
        if (f != null) {
            follower = null;
            f.close();
        }
    }
}
