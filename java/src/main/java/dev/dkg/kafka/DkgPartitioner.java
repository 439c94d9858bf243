package dev.dkg.kafka;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;
import org.apache.kafka.clients.producer.Partitioner;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.config.ConfigException;

/**
 * A Kafka producer partitioner that places every keyed record exactly where the Rust {@code DkgProducer} does.
 * Enable it with {@code partitioner.class=dev.dkg.kafka.DkgPartitioner}; the optional {@code dkg.*} settings are
 * in {@link DkgConfig}.
 *
 * <p>Keyed records: the topic's DKG assignment from the control topic if one is in effect with the topic's
 * partition count (from the {@code Cluster} the producer passes), else Kafka's default
 * {@code toPositive(murmur2(key)) % numPartitions} (no assignment yet, after a tombstone, or while the partition
 * counts differ). Keyless records: sticky placement like the built-in partitioner (see {@link StickyPartition}).
 * {@code partition()} never blocks, never throws and always returns an existing partition: an unexpected failure
 * is counted ({@link DkgMetrics#PARTITIONER_ERRORS_TOTAL}) and answered by the default placement. With no known
 * partition (an unknown topic or an empty {@code Cluster}, which {@code KafkaProducer} never passes: it waits for
 * the topic's metadata first) it returns 0.
 *
 * <p>Loads on every kafka-clients from 3.0 (it uses no class a 3.x client lacks). Its metrics (names in
 * {@link DkgMetrics}) go to a registry of its own reported to JMX in the producer's domain:
 * {@code kafka.producer:type=plugins,config=partitioner.class,class=DkgPartitioner,client-id=<client.id>,...}.
 * On kafka-clients 4.1+, {@link dev.dkg.kafka.kip877.DkgPartitioner} puts the same metrics into the producer's
 * own metrics instead (KIP-877: its {@code metrics()} and {@code metric.reporters}).
 */
public class DkgPartitioner implements Partitioner {
    /** Kafka's default {@code batch.size}. */
    static final int DEFAULT_BATCH_SIZE = 16384;

    private DkgRouter router;
    private boolean ownsRouter;
    /** Whether the client hands this instance its metrics (KIP-877 subclass): then no own registry is made. */
    private final boolean clientMetrics;
    private DkgMetrics.OwnRegistry ownMetrics;
    private int batchSize = DEFAULT_BATCH_SIZE;
    private final ConcurrentHashMap<String, StickyPartition> sticky = new ConcurrentHashMap<>();
    /**
     * The first topic this partitioner placed a record of, under the caller's {@code String} instance: most
     * producers write one topic, and then the state is one field read and an identity compare away. Set once (a
     * producer of many topics would otherwise rewrite a shared field on every switch); other topics go through
     * {@link DkgRouter#state}'s index.
     */
    private DkgRouter.IndexEntry first;
    /**
     * Whether the client calls {@link #onNewBatch} (kafka-clients 3.x; 4.0 removed it from {@code Partitioner}). A
     * 3.x {@code KafkaProducer} then calls {@code partition()} again for the record that needed a new batch; that
     * repeat gets the first answer and is not counted again (else such records would be counted twice, advance a
     * split key's schedule twice and count twice towards the keyless run). A constant: on 4.x the JIT drops it all.
     */
    private static final boolean NEW_BATCH_REPEATS = clientCallsOnNewBatch();
    /**
     * Threads whose {@link #onNewBatch} has not been followed by a {@code partition()} call yet: 0 nearly always
     * (the repeat comes right after, on the same thread), so the hot path only reads it.
     */
    private volatile int pendingRepeats;
    /** Updates {@link #pendingRepeats} atomically; a field of its own so that the hot path reads one int. */
    private static final AtomicIntegerFieldUpdater<DkgPartitioner> PENDING =
            AtomicIntegerFieldUpdater.newUpdater(DkgPartitioner.class, "pendingRepeats");
    private final ThreadLocal<Pending> pending = ThreadLocal.withInitial(Pending::new);

    /** A thread's onNewBatch waiting for its repeat: the record's topic and the partition it was given. */
    private static final class Pending {
        boolean set;
        String topic;
        int partition;
    }

    /** The instance Kafka creates from {@code partitioner.class}; {@link #configure} starts it. */
    public DkgPartitioner() {
        this(false);
    }

    /**
     * For {@link dev.dkg.kafka.kip877.DkgPartitioner}: {@code clientMetrics} = the client binds the router's
     * metrics (through {@link #bindRouterMetrics}), so {@link #configure} makes no registry of its own.
     */
    protected DkgPartitioner(boolean clientMetrics) {
        this.clientMetrics = clientMetrics;
    }

    /** A partitioner over an existing router (not closed by {@link #close()}) with the given {@code batch.size}. */
    public DkgPartitioner(DkgRouter router, int batchSize) {
        this.clientMetrics = false;
        this.router = router;
        this.batchSize = Math.max(1, batchSize);
    }

    /**
     * Reads {@code batch.size} and the {@code dkg.*} settings, then starts following the control topic (or uses
     * the router given as {@link DkgConfig#ROUTER_INSTANCE_CONFIG}).
     *
     * @throws ConfigException on a bad setting
     * @throws org.apache.kafka.common.KafkaException if the control topic is not read to its end in time
     */
    @Override
    public void configure(Map<String, ?> configs) {
        long batch = DkgRouter.longConfig(configs, ProducerConfig.BATCH_SIZE_CONFIG, DEFAULT_BATCH_SIZE);
        // batch.size=0 (no batching) still needs a positive stickiness bound; the built-in uses at least 1 byte too.
        batchSize = (int) Math.max(1, Math.min(batch, Integer.MAX_VALUE));
        Object given = configs.get(DkgConfig.ROUTER_INSTANCE_CONFIG);
        if (given != null) {
            if (!(given instanceof DkgRouter)) {
                throw new ConfigException(DkgConfig.ROUTER_INSTANCE_CONFIG, given.getClass().getName(),
                        "must be a dev.dkg.kafka.DkgRouter instance");
            }
            router = (DkgRouter) given;
            ownsRouter = false;
        } else {
            router = DkgRouter.start(configs);
            ownsRouter = true;
            if (!clientMetrics) {
                Object clientId = configs.get(ProducerConfig.CLIENT_ID_CONFIG);
                LinkedHashMap<String, String> tags = new LinkedHashMap<>();
                tags.put("config", ProducerConfig.PARTITIONER_CLASS_CONFIG);
                tags.put("class", "DkgPartitioner");
                tags.put("client-id", clientId == null ? "" : clientId.toString());
                ownMetrics = DkgMetrics.ownRegistry("kafka.producer", tags);
                router.bindMetrics(ownMetrics);
            }
        }
    }

    /** Binds the router's metrics to {@code registrar} if this partitioner started the router (KIP-877 path). */
    protected final void bindRouterMetrics(DkgMetrics.Registrar registrar) {
        if (ownsRouter && router != null) {
            router.bindMetrics(registrar);
        }
    }

    @Override
    public int partition(String topic, Object key, byte[] keyBytes, Object value, byte[] valueBytes,
            Cluster cluster) {
        if (NEW_BATCH_REPEATS && pendingRepeats != 0) {
            int first = repeated(topic, keyBytes, cluster);
            if (first >= 0) {
                return first;
            }
        }
        return place(topic, keyBytes, valueBytes, cluster);
    }

    /**
     * kafka-clients 3.x calls this when the record just placed needs a new batch, then calls {@link #partition}
     * again for it (4.0 removed both the method and the second call, hence no {@code @Override}): that call gets
     * this partition again, uncounted (see {@link #repeated}). The keyless sticky run is kept (it is counted in
     * bytes, not batches).
     *
     * @param topic the record's topic
     * @param cluster the producer's cluster
     * @param prevPartition the partition the record was placed on
     */
    public void onNewBatch(String topic, Cluster cluster, int prevPartition) {
        if (NEW_BATCH_REPEATS) {
            Pending p = pending.get();
            if (!p.set) {
                p.set = true;
                PENDING.incrementAndGet(this);
            }
            p.topic = topic;
            p.partition = prevPartition;
        }
    }

    /**
     * After this thread's {@link #onNewBatch}: the partition it named if this call is the repeat of that record,
     * else -1 (place it as usual). A record is taken for the repeat when its topic is the same and that partition
     * is where it goes now (for a split key: one of its parts; a keyless record: any), found without counting or
     * advancing anything. The record that needed the batch may instead have had an explicit partition (no
     * partition() call of ours before it): then the next record of the same topic on this thread, if it goes to
     * that partition, is taken for the repeat and not counted (its placement is still right; a split key's record
     * gets that part out of its schedule's turn, a keyless one that partition).
     */
    private int repeated(String topic, byte[] keyBytes, Cluster cluster) {
        Pending p = pending.get();
        if (!p.set) {
            return -1;
        }
        p.set = false;
        PENDING.decrementAndGet(this);
        if (!topic.equals(p.topic)) {
            return -1;
        }
        int prev = p.partition;
        if (keyBytes == null) {
            return prev;
        }
        try {
            DkgRouter.TopicState s = router.state(topic);
            return s.places(keyBytes, s.partitionCount(cluster), prev) ? prev : -1;
        } catch (RuntimeException e) {
            return -1;
        }
    }


    /** Whether this kafka-clients' {@code Partitioner} has {@code onNewBatch} (3.x), which its producer calls. */
    private static boolean clientCallsOnNewBatch() {
        try {
            Partitioner.class.getMethod("onNewBatch", String.class, Cluster.class, int.class);
            return true;
        } catch (NoSuchMethodException e) {
            return false;
        }
    }

    private int place(String topic, byte[] keyBytes, byte[] valueBytes, Cluster cluster) {
        int n = 0;
        try {
            DkgRouter.IndexEntry e = first;
            DkgRouter.TopicState s;
            if (e != null && e.key == topic) {
                s = e.state;
            } else {
                s = router.state(topic);
                if (e == null) {
                    // A plain write: IndexEntry's fields are final, so any thread that sees it sees them.
                    first = new DkgRouter.IndexEntry(topic, s, 0);
                }
            }
            n = s.partitionCount(cluster);
            if (keyBytes == null) {
                return keyless(s, valueBytes, cluster, n);
            }
            return s.route(keyBytes, n);
        } catch (RuntimeException e) {
            // Never fail a send over placement: count it and answer like Kafka's default partitioner would.
            try {
                router.countError();
            } catch (RuntimeException ignored) {
                // Not even counting works (no router): the answer below still stands.
            }
            return keyBytes == null || n <= 0 ? 0 : Murmur2.kafkaPartition(keyBytes, n);
        }
    }

    private int keyless(DkgRouter.TopicState state, byte[] valueBytes, Cluster cluster, int n) {
        router.countKeyless(state);
        if (n <= 0) {
            return 0;
        }
        StickyPartition s = sticky.get(state.topic);
        if (s == null) {
            s = sticky.computeIfAbsent(state.topic, StickyPartition::new);
        }
        return s.next(cluster, n, StickyPartition.recordBytes(valueBytes == null ? -1 : valueBytes.length), batchSize);
    }

    /** The router this partitioner routes with. */
    public DkgRouter router() {
        return router;
    }

    /** Stops the control-topic follower (unless the router was given by the application). */
    @Override
    public void close() {
        if (ownsRouter && router != null) {
            router.close();
        }
        if (ownMetrics != null) {
            ownMetrics.close();
        }
    }
}
