package dev.dkg.kafka;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
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
     * Whether the client calls {@link #onNewBatch} (kafka-clients 3.x; 4.0 removed it from {@code Partitioner}): then
     * each thread's last answer is kept, so that the second {@code partition()} call a 3.x {@code KafkaProducer}
     * makes for the same record once it needs a new batch returns the first call's answer, uncounted (else every
     * such record would be counted twice, advance a split key's schedule twice and count twice towards the sticky
     * run). A constant: on 4.x the JIT drops the branch.
     */
    private static final boolean NEW_BATCH_REPEATS = clientCallsOnNewBatch();
    /**
     * Each thread's {@link LastCall} (3.x clients only), direct-mapped by thread id like {@link RouteCounters}: a
     * slot is claimed once by compare-and-set and then read and written by its owner only (plain accesses, no
     * fence). A thread whose slot another owns uses {@link #lastCallFallback}.
     */
    private final LastCall[] lastCalls = NEW_BATCH_REPEATS ? new LastCall[LAST_CALL_SLOTS] : null;
    private final ThreadLocal<LastCall> lastCallFallback = ThreadLocal.withInitial(() -> new LastCall(-1));
    private static final int LAST_CALL_SLOTS = 64;
    private static final VarHandle SLOT = MethodHandles.arrayElementVarHandle(LastCall[].class);

    /** A thread's last placement (identity of the record's serialized key and value) and a pending repeat. */
    private static final class LastCall {
        final long owner;
        String topic;
        byte[] key;
        byte[] value;
        int partition;
        boolean repeatPending;
        /** Keeps two threads' slots off one cache line (the object header and fields above are about 40 bytes). */
        long pad0;
        long pad1;
        long pad2;
        long pad3;
        long pad4;

        LastCall(long owner) {
            this.owner = owner;
        }
    }

    /** The calling thread's {@link LastCall}. */
    private LastCall lastCall() {
        long tid = Thread.currentThread().getId();
        int at = (int) tid & (LAST_CALL_SLOTS - 1);
        LastCall l = lastCalls[at];
        if (l != null && l.owner == tid) {
            return l;
        }
        if (l == null) {
            LastCall mine = new LastCall(tid);
            if (SLOT.compareAndSet(lastCalls, at, (LastCall) null, mine)) {
                return mine;
            }
            l = (LastCall) SLOT.getVolatile(lastCalls, at);
            if (l.owner == tid) {
                return l;
            }
        }
        return lastCallFallback.get();
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
        if (!NEW_BATCH_REPEATS) {
            return place(topic, keyBytes, valueBytes, cluster);
        }
        LastCall last = lastCall();
        if (last.repeatPending) {
            last.repeatPending = false;
            // The same record again (KafkaProducer 3.x passes the same arrays): the answer it already has.
            if (last.topic == topic && last.key == keyBytes && last.value == valueBytes) {
                return last.partition;
            }
        }
        int p = place(topic, keyBytes, valueBytes, cluster);
        last.topic = topic;
        last.key = keyBytes;
        last.value = valueBytes;
        last.partition = p;
        return p;
    }

    /**
     * kafka-clients 3.x calls this when the record just placed needs a new batch, then calls {@link #partition}
     * again for it (4.0 removed both the method and the second call, hence no {@code @Override}). The second call
     * answers the first's partition without counting again (see {@code NEW_BATCH_REPEATS}); the keyless sticky run is
     * kept (its length is counted in bytes, not batches).
     *
     * @param topic the record's topic
     * @param cluster the producer's cluster
     * @param prevPartition the partition the record was placed on
     */
    public void onNewBatch(String topic, Cluster cluster, int prevPartition) {
        if (NEW_BATCH_REPEATS) {
            LastCall last = lastCall();
            // Else the record that needed the batch had an explicit partition (no partition() call of ours).
            last.repeatPending = last.topic == topic && last.partition == prevPartition;
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
