package dev.dkg.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetCommitCallback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link Consumer} that keeps per-key order across DKG epoch switches: a decorator over a {@link KafkaConsumer}
 * (or any {@code Consumer}, e.g. one a Spring Kafka consumer factory made) that implements the consumer side of the
 * ordering protocol, {@code docs/spec.md} 9.3 (rules C1-C19), as the Rust {@code DkgConsumer} does. It replays
 * every conformance trace of {@code spec/traces}.
 *
 * <p><b>What changes for the application.</b> {@link #poll} returns only the records the protocol lets out: a
 * record of a key that an epoch switch moved waits (is <i>held</i>) until every record of that key on its old
 * partitions was processed and committed by their owners, then comes out in order; everything else comes out at
 * once. Within a partition, released records come in release order, which is per-key order but not always offset
 * order. The records a poll returned count as <i>processed</i> when the application polls again, commits or
 * closes; {@code commitSync(offsets)} and {@code commitAsync(offsets, ...)} count the records below the given offsets
 * as processed. Every commit carries only what is safe: the offset of a partition is its lowest unprocessed record
 * (a held record is never skipped), with the protocol's metadata (C7), whatever offsets the application asked for.
 * A crash therefore loses nothing and re-delivers only what the crashed member processed after its last commit.
 *
 * <p><b>Requirements.</b> The inner client's {@code enable.auto.commit=false} (the constructors that create the
 * client set it; a wrapped client must have it: auto-commits would skip held records). A client these constructors
 * create keeps Kafka's auto-commit as the application configured it ({@code enable.auto.commit}, true by default;
 * {@code auto.commit.interval.ms}): every interval a poll commits what is safe, asynchronously, as
 * {@code commitAsync()} does. Further a {@code group.id}, and the
 * {@link ConsumerRebalanceListener} given to {@code subscribe} (if any) is still called: after the protocol loaded
 * newly assigned partitions, and before it makes its final commit of revoked ones. The control topic
 * ({@value DkgConfig#CONTROL_TOPIC_CONFIG}) and the handoff topic ({@value DkgConfig#HANDOFF_TOPIC_CONFIG}) are read
 * from the same cluster; both group protocols ({@code classic}, {@code consumer}) and kafka-clients 3.0+ work.
 * State hooks: {@link DkgConsumerListener}; metrics: {@code dkg-consumer-*} (see {@link DkgMetrics}) in
 * {@link #metrics()} and JMX ({@code kafka.consumer:type=plugins,config=dkg,class=DkgKafkaConsumer,...}).
 *
 * <p>Like {@code KafkaConsumer}, not thread-safe but for {@link #wakeup()}.
 *
 * @param <K> key type
 * @param <V> value type
 */
public final class DkgKafkaConsumer<K, V> extends DelegatingConsumer<K, V> {
    private static final Logger LOG = LoggerFactory.getLogger(DkgKafkaConsumer.class);

    /** Held records per partition above which it is paused (C13; the Rust default). */
    public static final String MAX_HELD_RECORDS_CONFIG = "dkg.ordering.max.held.records";
    /** A paused partition that released nothing for this long is resumed anyway (C13), ms; default 5000. */
    public static final String STALL_TIMEOUT_MS_CONFIG = "dkg.ordering.stall.timeout.ms";
    /** A record of an epoch this member does not know is released after this long (C19), ms; default 10000. */
    public static final String UNKNOWN_EPOCH_WAIT_MS_CONFIG = "dkg.ordering.unknown.epoch.wait.ms";
    /** A lease counts as expiring this long after it was read at the latest (C2), ms; default 120000. */
    public static final String MAX_LEASE_MS_CONFIG = "dkg.ordering.max.lease.ms";
    /** The broker's {@code offset.metadata.max.bytes} (C7), default 4096. */
    public static final String MAX_METADATA_BYTES_CONFIG = "dkg.ordering.max.metadata.bytes";

    private static final long HOUSEKEEPING_NANOS = 100_000_000L;
    /** How often the member owning a topic's partition 0 collects the handoff topic's garbage (as Rust and Python). */
    private static final long GC_EVERY_NANOS = 60_000_000_000L;
    /** Longest one inner poll lasts while records are held: released records come out within this. */
    private static final long SLICE_MS = 100;

    private final boolean ownsDelegate;
    private final String group;
    private final String controlTopic;
    private final String handoffTopic;
    private final CoreTypes.Config coreConfig;
    private final TopicTail control;
    private final TopicTail handoff;
    private final KafkaProducer<byte[], byte[]> writer;
    private final DkgMetrics.OwnRegistry ownMetrics;
    private final Map<String, ConsumerDriver<ConsumerRecord<K, V>>> drivers = new HashMap<>();
    private final Map<String, ConsumerMetrics> topicMetrics = new HashMap<>();
    /** Control and handoff records read before the topic's driver existed: replayed into new drivers. */
    private final List<TopicTail.Entry> controlLog = new ArrayList<>();
    private final List<TopicTail.Entry> handoffLog = new ArrayList<>();
    private volatile DkgConsumerListener listener = new DkgConsumerListener() {};
    private ConsumerRebalanceListener userListener;
    private final Map<ConsumerRecord<K, V>, Integer> labels = new IdentityHashMap<>();
    private long nextHousekeeping = System.nanoTime();
    private long nextGc = System.nanoTime() + GC_EVERY_NANOS;
    /** The periodic commit's interval (ns), -1 for none: see {@link #autoCommitNanos}. */
    private long autoCommitNanos = -1;
    private long nextAutoCommit = System.nanoTime();
    private RuntimeException finalCommitFailure;
    private boolean closed;

    /**
     * Creates the client from {@code configs} (deserializers from {@code key.deserializer} and
     * {@code value.deserializer}), with {@code enable.auto.commit=false} (Kafka's auto-commit becomes this consumer's
     * periodic commit of what is safe; see the class comment).
     *
     * @param configs the consumer configuration plus the {@code dkg.*} settings
     */
    public DkgKafkaConsumer(Map<String, Object> configs) {
        this(configs, null, null);
    }

    /**
     * Creates the client from {@code configs} and the deserializers, with {@code enable.auto.commit=false} (Kafka's
     * auto-commit becomes this consumer's periodic commit of what is safe; see the class comment).
     *
     * @param configs the consumer configuration plus the {@code dkg.*} settings
     * @param keyDeserializer the key deserializer (null: from {@code configs})
     * @param valueDeserializer the value deserializer (null: from {@code configs})
     */
    public DkgKafkaConsumer(Map<String, Object> configs, Deserializer<K> keyDeserializer,
            Deserializer<V> valueDeserializer) {
        this(new KafkaConsumer<>(withoutAutoCommit(configs), keyDeserializer, valueDeserializer), configs, true);
        this.autoCommitNanos = autoCommitNanos(configs);
    }

    /**
     * What the application asked of Kafka's auto-commit ({@code enable.auto.commit}, true unless set false;
     * {@code auto.commit.interval.ms}, 5000): the interval of this consumer's own periodic commit of what is safe, in
     * nanoseconds, or -1 for none. The inner client's auto-commit is off (it would commit past held records).
     */
    private static long autoCommitNanos(Map<String, Object> configs) {
        Object enabled = configs.get(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG);
        if (enabled != null && !Boolean.parseBoolean(enabled.toString().trim())) {
            return -1;
        }
        // The inner client has validated it (an integer >= 0).
        return DkgRouter.longConfig(configs, ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, 5_000) * 1_000_000;
    }

    private static Map<String, Object> withoutAutoCommit(Map<String, Object> configs) {
        Map<String, Object> out = new HashMap<>();
        for (Map.Entry<String, Object> e : configs.entrySet()) {
            if (!e.getKey().startsWith("dkg.")) {
                out.put(e.getKey(), e.getValue());
            }
        }
        out.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        return out;
    }

    /**
     * Wraps a consumer created elsewhere (a Spring Kafka {@code DefaultKafkaConsumerFactory}'s post-processor:
     * {@code factory.addPostProcessor(c -> DkgKafkaConsumer.wrap(c, factory.getConfigurationProperties()))}). It must
     * not be subscribed yet and must have {@code enable.auto.commit=false} (Spring's containers set it); its group is
     * {@code group.id} of {@code configs}, else the consumer's own; closing the wrapper closes it.
     *
     * @param delegate the consumer
     * @param configs its configuration (connection settings, {@code group.id}) plus the {@code dkg.*} settings
     * @param <K> key type
     * @param <V> value type
     * @return the decorator
     * @throws KafkaException if {@code enable.auto.commit} is true in {@code configs}, there is no group, or the control and handoff
     *     topics cannot be read in time
     */
    public static <K, V> DkgKafkaConsumer<K, V> wrap(Consumer<K, V> delegate, Map<String, ?> configs) {
        Object auto = configs.get(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG);
        if (auto != null && Boolean.parseBoolean(auto.toString())) {
            throw new KafkaException("DKG: DkgKafkaConsumer needs enable.auto.commit=false (auto-commits would skip "
                    + "held records)");
        }
        if (auto == null) {
            // Spring Kafka's containers set it false themselves, outside the factory's properties.
            LOG.info("DKG: enable.auto.commit is not in the configuration given to DkgKafkaConsumer.wrap: the wrapped "
                    + "consumer must have it false (auto-commits would skip held records)");
        }
        return new DkgKafkaConsumer<>(delegate, configs, true);
    }

    private DkgKafkaConsumer(Consumer<K, V> delegate, Map<String, ?> configs, boolean ownsDelegate) {
        super(delegate);
        this.ownsDelegate = ownsDelegate;
        Object g = configs.get(ConsumerConfig.GROUP_ID_CONFIG);
        if (g == null || g.toString().isEmpty()) {
            // A group given to the client directly (Spring Kafka's listener groupId), not in the factory's properties.
            try {
                g = delegate.groupMetadata().groupId();
            } catch (RuntimeException e) {
                g = null;
            }
        }
        if (g == null || g.toString().isEmpty()) {
            closeDelegateQuietly();
            throw new KafkaException("DKG: DkgKafkaConsumer needs a group.id (progress is announced per group)");
        }
        this.group = g.toString();
        this.controlTopic = DkgRouter.stringConfig(configs, DkgConfig.CONTROL_TOPIC_CONFIG,
                DkgConfig.CONTROL_TOPIC_DEFAULT);
        this.handoffTopic = DkgRouter.stringConfig(configs, DkgConfig.HANDOFF_TOPIC_CONFIG,
                DkgConfig.HANDOFF_TOPIC_DEFAULT);
        long startupMs = DkgRouter.longConfig(configs, DkgConfig.STARTUP_TIMEOUT_MS_CONFIG,
                DkgConfig.STARTUP_TIMEOUT_MS_DEFAULT);
        this.coreConfig = new CoreTypes.Config(
                (int) DkgRouter.longConfig(configs, MAX_HELD_RECORDS_CONFIG, 10_000),
                DkgRouter.longConfig(configs, STALL_TIMEOUT_MS_CONFIG, 5_000) * 1_000_000,
                (int) DkgRouter.longConfig(configs, MAX_METADATA_BYTES_CONFIG, CommitMeta.DEFAULT_MAX_METADATA_BYTES),
                EpochHistory.DEFAULT_KEEP,
                DkgRouter.longConfig(configs, UNKNOWN_EPOCH_WAIT_MS_CONFIG, 10_000) * 1_000_000,
                DkgRouter.longConfig(configs, MAX_LEASE_MS_CONFIG, 120_000));
        Map<String, Object> connection = ControlFollower.connectionSettings(configs);
        String base = clientId(delegate, configs);
        TopicTail createdControl = null;
        TopicTail createdHandoff = null;
        KafkaProducer<byte[], byte[]> createdWriter = null;
        try {
            try (Admin admin = Admin.create(connection)) {
                Handoff.ensureTopic(admin, handoffTopic, startupMs);
            }
            Map<String, Object> producer = new HashMap<>(connection);
            producer.put(ProducerConfig.CLIENT_ID_CONFIG, base + "-dkg-progress");
            producer.put(ProducerConfig.ACKS_CONFIG, "all");
            createdWriter = new KafkaProducer<>(producer, new ByteArraySerializer(), new ByteArraySerializer());
            createdControl = new TopicTail(controlTopic, TopicTail.config(connection, base + "-dkg-control"),
                    "dkg-consumer-control-" + group);
            createdHandoff = new TopicTail(handoffTopic, TopicTail.config(connection, base + "-dkg-handoff"),
                    "dkg-consumer-handoff-" + group);
            long deadline = System.nanoTime() + startupMs * 1_000_000;
            if (!createdControl.awaitCaughtUp(startupMs)
                    || !createdHandoff.awaitCaughtUp(Math.max(1, (deadline - System.nanoTime()) / 1_000_000))) {
                throw new KafkaException("DKG: control topic " + controlTopic + " or handoff topic " + handoffTopic
                        + " not read to its end within " + startupMs + " ms (" + DkgConfig.STARTUP_TIMEOUT_MS_CONFIG
                        + ")");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            closeAll(createdControl, createdHandoff, createdWriter);
            throw new KafkaException("DKG: interrupted while starting the consumer", e);
        } catch (RuntimeException e) {
            closeAll(createdControl, createdHandoff, createdWriter);
            throw e;
        }
        this.control = createdControl;
        this.handoff = createdHandoff;
        this.writer = createdWriter;
        Map<String, String> tags = new LinkedHashMap<>();
        tags.put("config", "dkg");
        tags.put("class", "DkgKafkaConsumer");
        tags.put("client-id", base);
        this.ownMetrics = DkgMetrics.ownRegistry("kafka.consumer", tags);
        drainFollowers(System.nanoTime());
        LOG.info("DKG: ordering consumer of group {} (control topic {}, handoff topic {})", group, controlTopic,
                handoffTopic);
    }

    /**
     * The base of its own clients' ids and of its metrics' {@code client-id} tag: the wrapped client's own id (Kafka's
     * {@code consumer-<group>-<n>} when none is set; a Spring container's per-member suffix), read from its metrics'
     * tags, else {@code client.id} of {@code configs}, else one of this instance's own. Several members of a group
     * may share a JVM and one configuration: their clients' ids must differ (metrics and JMX beans are per id).
     */
    private static String clientId(Consumer<?, ?> delegate, Map<String, ?> configs) {
        try {
            for (MetricName m : delegate.metrics().keySet()) {
                String id = m.tags().get("client-id");
                if (id != null && !id.isEmpty() && m.group().startsWith("consumer")) {
                    return id;
                }
            }
        } catch (RuntimeException e) {
            LOG.debug("DKG: the wrapped consumer's metrics were not readable: {}", e.toString());
        }
        Object clientId = configs.get(ConsumerConfig.CLIENT_ID_CONFIG);
        return clientId == null || clientId.toString().isEmpty()
                ? "dkg-consumer-" + Handoff.newProducerId().substring(0, 8) : clientId.toString();
    }

    private void closeAll(TopicTail c, TopicTail h, KafkaProducer<byte[], byte[]> w) {
        if (c != null) {
            c.close();
        }
        if (h != null) {
            h.close();
        }
        if (w != null) {
            w.close(Duration.ofSeconds(5));
        }
        closeDelegateQuietly();
    }

    @SuppressWarnings("deprecation")
    private void closeDelegateQuietly() {
        if (ownsDelegate) {
            try {
                delegate.close(Duration.ofSeconds(5));
            } catch (RuntimeException e) {
                LOG.debug("DKG: closing the inner consumer: {}", e.toString());
            }
        }
    }

    // ---------------------------------------------------------------------------------------------------- DKG API

    /**
     * Sets the state hooks (none by default). Call before the first poll.
     *
     * @param listener the hooks
     * @return this
     */
    public DkgKafkaConsumer<K, V> listener(DkgConsumerListener listener) {
        this.listener = listener == null ? new DkgConsumerListener() {} : listener;
        return this;
    }

    /**
     * Over how many partitions a record of the last poll's batch is split (its key is a split heavy key in its
     * epoch, spec 4.6: no per-key order across the parts), 0 if whole or not of that batch.
     *
     * @param record a record the last {@link #poll} returned
     * @return the number of parts, 0 for a whole key
     */
    public int splitParts(ConsumerRecord<?, ?> record) {
        Integer n = labels.get(record);
        return n == null ? 0 : n;
    }

    /**
     * Records held now, over every owned partition.
     *
     * @return the count
     */
    public int heldRecords() {
        int n = 0;
        for (ConsumerDriver<ConsumerRecord<K, V>> d : drivers.values()) {
            n += d.core().heldTotal();
        }
        return n;
    }

    /**
     * The lowest epoch every partition of {@code topic} drained, as this member knows it: records of epochs up to it
     * are never held (0: none, or not a topic of this consumer).
     *
     * @param topic a subscribed topic
     * @return the settled epoch
     */
    public long settledEpoch(String topic) {
        ConsumerDriver<ConsumerRecord<K, V>> d = drivers.get(topic);
        return d == null ? 0 : d.core().settled();
    }

    // ---------------------------------------------------------------------------------------------------- drivers

    private ConsumerDriver<ConsumerRecord<K, V>> driver(String topic) {
        ConsumerDriver<ConsumerRecord<K, V>> d = drivers.get(topic);
        if (d != null) {
            return d;
        }
        List<PartitionInfo> infos = delegate.partitionsFor(topic);
        int partitions = infos == null ? 0 : infos.size();
        long now = System.nanoTime();
        ConsumerMetrics m = new ConsumerMetrics(ownMetrics, topic);
        topicMetrics.put(topic, m);
        d = new ConsumerDriver<>(topic, group, partitions, coreConfig, new Sink(topic), now,
                System.currentTimeMillis());
        drivers.put(topic, d);
        for (TopicTail.Entry e : controlLog) {
            d.control(e.key, e.value, now);
        }
        for (TopicTail.Entry e : handoffLog) {
            d.handoff(e.key, e.value, now);
        }
        return d;
    }

    /** Applies what the followers read since the last call. */
    private void drainFollowers(long now) {
        for (TopicTail.Entry e = control.poll(); e != null; e = control.poll()) {
            controlLog.add(e);
            for (ConsumerDriver<ConsumerRecord<K, V>> d : drivers.values()) {
                d.control(e.key, e.value, now);
            }
        }
        for (TopicTail.Entry e = handoff.poll(); e != null; e = handoff.poll()) {
            // Kept for topics seen later: leases, markers, history and progress are compacted state.
            handoffLog.add(e);
            for (ConsumerDriver<ConsumerRecord<K, V>> d : drivers.values()) {
                d.handoff(e.key, e.value, now);
            }
        }
        trimLogs();
    }

    /** The replay logs keep the latest value per key (the topics are compacted: that is their state). */
    private void trimLogs() {
        TopicTail.keepLatest(controlLog, 4096);
        TopicTail.keepLatest(handoffLog, 16384);
    }

    /** Every housekeeping interval: leases expire, flow control, gauges. */
    private void housekeeping(long now) {
        if (now - nextHousekeeping < 0) {
            return;
        }
        nextHousekeeping = now + HOUSEKEEPING_NANOS;
        long nowMs = System.currentTimeMillis();
        for (Map.Entry<String, ConsumerDriver<ConsumerRecord<K, V>>> e : drivers.entrySet()) {
            ConsumerDriver<ConsumerRecord<K, V>> d = e.getValue();
            d.tick(now, nowMs);
            ConsumerMetrics m = topicMetrics.get(e.getKey());
            m.anomalies(d.core().takeAnomalies());
            for (long t : d.core().takeHoldTimes()) {
                m.holdTime(t);
            }
            for (Map.Entry<Integer, Integer> h : d.core().heldCounts().entrySet()) {
                m.held(h.getKey(), h.getValue());
            }
            for (Map.Entry<Integer, Long> p : d.core().positions().entrySet()) {
                if (p.getValue() == null) {
                    continue;
                }
                TopicPartition tp = new TopicPartition(e.getKey(), p.getKey());
                try {
                    OptionalLong lag = delegate.currentLag(tp);
                    if (lag.isPresent()) {
                        // The client's lag counts from its position; held and unprocessed records lie below it.
                        long position = d.core().fetchPosition(p.getKey());
                        m.lag(p.getKey(), lag.getAsLong() + Math.max(0, position - p.getValue()));
                    }
                } catch (RuntimeException ex) {
                    LOG.debug("DKG: lag of {}: {}", tp, ex.toString());
                }
            }
        }
        if (now - nextGc >= 0 && drivers.values().stream().anyMatch(d -> d.core().owns(0))) {
            // As Rust and Python: the interval starts when a member owning partition 0 collected.
            nextGc = now + GC_EVERY_NANOS;
            collectGarbage(nowMs);
        }
    }

    /**
     * Tombstones what {@link ConsumerDriver#garbage} names on the handoff topic: leases expired long ago with their
     * markers, history no member needs (spec 9.1). Without it the topic keeps every producer instance's lease and
     * marker forever, and every consumer reads them all at start-up.
     */
    private void collectGarbage(long nowMs) {
        for (ConsumerDriver<ConsumerRecord<K, V>> d : drivers.values()) {
            for (byte[] key : d.garbage(nowMs)) {
                String k = new String(key, java.nio.charset.StandardCharsets.UTF_8);
                LOG.debug("DKG: handoff garbage collection: {}", k);
                writer.send(new ProducerRecord<>(handoffTopic, 0, key, null), (md, e) -> {
                    if (e != null) {
                        LOG.warn("DKG: handoff garbage collection of {} failed: {}", k, e.toString());
                    }
                });
            }
        }
    }

    /** Where a driver's effects go: the inner client, the handoff topic, the hooks. */
    private final class Sink implements ConsumerDriver.Sink {
        private final String topic;

        Sink(String topic) {
            this.topic = topic;
        }

        @Override
        public void commitSync(List<ConsumerDriver.Commit> commits) {
            delegate.commitSync(offsets(topic, commits));
        }

        @Override
        public void announce(HandoffRecords.Progress p) {
            byte[] key = p.key().getBytes(java.nio.charset.StandardCharsets.UTF_8);
            byte[] value = p.encode().getBytes(java.nio.charset.StandardCharsets.UTF_8);
            writer.send(new ProducerRecord<>(handoffTopic, 0, key, value), (md, e) -> {
                if (e != null) {
                    LOG.warn("DKG: progress announcement {} not sent: {}", p.key(), e.toString());
                }
            });
        }

        @Override
        public void assigned(List<Integer> partitions) {
            listener.onPartitionsAssigned(topic, partitions);
        }

        @Override
        public void revoked(List<Integer> partitions) {
            listener.onPartitionsRevoked(topic, partitions);
        }

        @Override
        public void epoch(CoreTypes.Drained d, List<Integer> owned, int partitions) {
            listener.onEpoch(new EpochChange(topic, d.prev, d.next, d.partition, owned, partitions));
        }

        @Override
        public void split(CoreTypes.SplitChange c) {
            listener.onSplitChange(new SplitChange(topic, c.key.bytes(), c.epoch, c.parts, c.partition));
        }

        @Override
        public void pause(int partition) {
            delegate.pause(List.of(new TopicPartition(topic, partition)));
        }

        @Override
        public void resume(int partition) {
            delegate.resume(List.of(new TopicPartition(topic, partition)));
        }
    }

    private static Map<TopicPartition, OffsetAndMetadata> offsets(String topic, List<ConsumerDriver.Commit> commits) {
        Map<TopicPartition, OffsetAndMetadata> out = new LinkedHashMap<>();
        for (ConsumerDriver.Commit c : commits) {
            out.put(new TopicPartition(topic, c.partition), new OffsetAndMetadata(c.offset, c.metadata));
        }
        return out;
    }

    // ---------------------------------------------------------------------------------------------------- rebalances

    /** The protocol's side of rebalances, then the application's listener. */
    private final class Rebalance implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            assigned(partitions);
            if (userListener != null) {
                userListener.onPartitionsAssigned(partitions);
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            // The application's listener first: what it commits there goes through this consumer's commits.
            if (userListener != null) {
                userListener.onPartitionsRevoked(partitions);
            }
            revoked(partitions, false);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            if (userListener != null) {
                userListener.onPartitionsLost(partitions);
            }
            revoked(partitions, true);
        }
    }

    private static Map<String, List<Integer>> byTopic(Collection<TopicPartition> partitions) {
        Map<String, List<Integer>> out = new TreeMap<>();
        for (TopicPartition tp : partitions) {
            out.computeIfAbsent(tp.topic(), t -> new ArrayList<>()).add(tp.partition());
        }
        for (List<Integer> ps : out.values()) {
            Collections.sort(ps);
        }
        return out;
    }

    private void assigned(Collection<TopicPartition> partitions) {
        if (partitions.isEmpty() || closed) {
            return;
        }
        long now = System.nanoTime();
        drainFollowers(now);
        Map<TopicPartition, OffsetAndMetadata> committed = delegate.committed(new HashSet<>(partitions));
        for (Map.Entry<String, List<Integer>> e : byTopic(partitions).entrySet()) {
            ConsumerDriver<ConsumerRecord<K, V>> d = driver(e.getKey());
            List<ConsumerDriver.Assigned> parts = new ArrayList<>();
            for (int p : e.getValue()) {
                OffsetAndMetadata o = committed.get(new TopicPartition(e.getKey(), p));
                parts.add(new ConsumerDriver.Assigned(p, o == null ? null : o.offset(), o == null ? "" : o.metadata()));
            }
            d.assign(parts, now, System.currentTimeMillis());
        }
    }

    private void revoked(Collection<TopicPartition> partitions, boolean lost) {
        long now = System.nanoTime();
        for (Map.Entry<String, List<Integer>> e : byTopic(partitions).entrySet()) {
            ConsumerDriver<ConsumerRecord<K, V>> d = drivers.get(e.getKey());
            if (d != null) {
                RuntimeException failed = d.revoke(e.getValue(), lost, now);
                if (failed != null) {
                    finalCommitFailure = failed;
                }
            }
        }
        labels.keySet().removeIf(r -> partitions.contains(new TopicPartition(r.topic(), r.partition())));
    }

    @Override
    public void subscribe(Collection<String> topics, ConsumerRebalanceListener callback) {
        userListener = callback;
        delegate.subscribe(topics, new Rebalance());
    }

    @Override
    public void subscribe(Collection<String> topics) {
        subscribe(topics, null);
    }

    @Override
    public void subscribe(Pattern pattern, ConsumerRebalanceListener callback) {
        userListener = callback;
        delegate.subscribe(pattern, new Rebalance());
    }

    @Override
    public void subscribe(Pattern pattern) {
        subscribe(pattern, (ConsumerRebalanceListener) null);
    }

    // No @Override on methods some supported client versions lack in Consumer (compiled against the pinned 4.x, this
    // class must load and link on 3.0+): SubscriptionPattern (4.0+), poll(long) and committed(TopicPartition)
    // (removed in 4.0), clientInstanceId (3.7+), the metric subscriptions (4.0+), close(CloseOptions) (4.1+).

    /**
     * KIP-848's broker-side patterns (kafka-clients 4.0+), with the protocol's rebalance handling.
     *
     * @param pattern the pattern
     * @param callback the application's listener (may be null)
     */
    public void subscribe(org.apache.kafka.clients.consumer.SubscriptionPattern pattern,
            ConsumerRebalanceListener callback) {
        userListener = callback;
        delegate.subscribe(pattern, new Rebalance());
    }

    /**
     * KIP-848's broker-side patterns (kafka-clients 4.0+).
     *
     * @param pattern the pattern
     */
    public void subscribe(org.apache.kafka.clients.consumer.SubscriptionPattern pattern) {
        subscribe(pattern, null);
    }

    /**
     * Manual assignment: partitions newly taken are loaded with their committed progress, partitions given up get
     * their final commit (no group rebalance runs for them).
     */
    @Override
    public void assign(Collection<TopicPartition> partitions) {
        Set<TopicPartition> before = delegate.assignment();
        Set<TopicPartition> gone = new HashSet<>(before);
        gone.removeAll(partitions);
        if (!gone.isEmpty()) {
            revoked(gone, false);
        }
        delegate.assign(partitions);
        Set<TopicPartition> added = new HashSet<>(partitions);
        added.removeAll(before);
        assigned(added);
    }

    @Override
    public void unsubscribe() {
        drivers.values().forEach(d -> d.core().processed());
        Set<TopicPartition> manual = delegate.subscription().isEmpty() ? delegate.assignment() : Set.of();
        if (!manual.isEmpty()) {
            revoked(manual, false);
        }
        delegate.unsubscribe();
    }

    // ---------------------------------------------------------------------------------------------------- poll

    @Override
    public ConsumerRecords<K, V> poll(Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        labels.clear();
        Map<TopicPartition, List<ConsumerRecord<K, V>>> batch = new LinkedHashMap<>();
        long now = System.nanoTime();
        drainFollowers(now);
        if (autoCommitNanos >= 0 && now - nextAutoCommit >= 0) {
            // Kafka's auto-commit, as KafkaConsumer does it in poll: what the previous polls returned is processed.
            // Before the prelude: records it releases into this poll's batch are not processed yet.
            nextAutoCommit = now + autoCommitNanos;
            commitAsync(AUTO_COMMIT_CALLBACK);
        }
        // The previous batch is processed now; progress due is committed; released records go out first.
        for (ConsumerDriver<ConsumerRecord<K, V>> d : drivers.values()) {
            add(batch, d, d.prelude(now, false));
        }
        while (true) {
            now = System.nanoTime();
            housekeeping(now);
            long left = Math.max(0, (deadline - now) / 1_000_000);
            boolean holding = heldRecords() > 0;
            boolean wasEmpty = batch.isEmpty();
            long slice = !batch.isEmpty() ? 0 : holding ? Math.min(left, SLICE_MS) : left;
            ConsumerRecords<K, V> fetched = delegate.poll(Duration.ofMillis(slice));
            now = System.nanoTime();
            // A rebalance inside that poll revoked partitions: their records of this batch were not processed (the
            // final commit lies below them), so they go to the next owner, not to the application.
            batch.keySet().removeIf(tp -> {
                ConsumerDriver<ConsumerRecord<K, V>> d = drivers.get(tp.topic());
                return d == null || !d.core().owns(tp.partition());
            });
            drainFollowers(now);
            // Whether the batch is exactly what the inner client fetched: then it goes out as it came.
            boolean asFetched = wasEmpty;
            for (TopicPartition tp : fetched.partitions()) {
                List<ConsumerRecord<K, V>> recs = fetched.records(tp);
                int size = recs.size();
                if (size == 0) {
                    continue;
                }
                ConsumerDriver<ConsumerRecord<K, V>> d = drivers.get(tp.topic());
                if (d == null) {
                    d = driver(tp.topic());
                }
                int partition = tp.partition();
                int i = fast(d.core(), partition, recs);
                if (i == size && !batch.containsKey(tp)) {
                    // Every record passed the fast path: the inner client's list is handed on, not copied.
                    batch.put(tp, recs);
                    continue;
                }
                asFetched = false;
                if (i > 0) {
                    own(batch, tp).addAll(i == size ? recs : recs.subList(0, i));
                }
                for (; i < size; i++) {
                    ConsumerRecord<K, V> r = recs.get(i);
                    ConsumerDriver.Labelled<ConsumerRecord<K, V>> l = d.record(partition, r.offset(), keyBytes(r),
                            epochOf(r), r, now, null);
                    if (l != null) {
                        add(batch, d, List.of(l));
                    }
                }
            }
            int before = asFetched ? batchSize(batch) : -1;
            for (ConsumerDriver<ConsumerRecord<K, V>> d : drivers.values()) {
                // Released meanwhile (progress read by the followers), or queued behind released records.
                d.commitProgress(now);
                add(batch, d, d.drainReady());
                if (!asFetched) {
                    // Something was held or released: flow control now, not at the next housekeeping (C13).
                    d.flow(now);
                }
            }
            if (asFetched && batchSize(batch) == before && !batch.isEmpty()) {
                // Nothing released meanwhile: the inner client's batch itself (its next offsets included).
                count(batch);
                return fetched;
            }
            if (!batch.isEmpty() || System.nanoTime() - deadline >= 0) {
                break;
            }
        }
        count(batch);
        return records(batch);
    }

    /**
     * Counted per partition of the batch, not per record (a map lookup and two atomics per record showed in
     * ConsumerBench's profile).
     */
    private void count(Map<TopicPartition, List<ConsumerRecord<K, V>>> batch) {
        for (Map.Entry<TopicPartition, List<ConsumerRecord<K, V>>> e : batch.entrySet()) {
            int split = labels.isEmpty() ? 0 : (int) e.getValue().stream().filter(r -> splitParts(r) > 0).count();
            topicMetrics.get(e.getKey().topic()).records(e.getKey().partition(), e.getValue().size(), split);
        }
    }

    private static int batchSize(Map<TopicPartition, ? extends List<?>> batch) {
        int n = 0;
        for (List<?> l : batch.values()) {
            n += l.size();
        }
        return n;
    }

    /**
     * The fast path ({@link ConsumerCore#lane}): how many of {@code recs} (one partition's fetched records, in offset
     * order) went to the application without the core deciding each: a prefix, all of them when the partition is
     * quiet. Per record: the epoch header's lookup, the gate's two comparisons, its offset noted; the key's bytes and
     * label only while some key is split.
     */
    private int fast(ConsumerCore<ConsumerDriver.Labelled<ConsumerRecord<K, V>>> core, int partition,
            List<ConsumerRecord<K, V>> recs) {
        OwnedPartition<ConsumerDriver.Labelled<ConsumerRecord<K, V>>> lane = core.lane(partition);
        if (lane == null) {
            return 0;
        }
        // ConsumerCore.admits and take, record by record, with the state they read in locals and what they write
        // written once after the loop (nothing else runs on the core meanwhile).
        long settled = core.settled();
        long position = lane.position;
        boolean splits = core.hasSplits();
        int size = recs.size();
        long[] offsets = lane.laneReserve(size);
        int base = lane.laneCount;
        boolean keyed = false;
        int i = 0;
        for (; i < size; i++) {
            ConsumerRecord<K, V> r = recs.get(i);
            long offset = r.offset();
            long epoch = epochOf(r);
            if (epoch > settled || offset < position) {
                break;
            }
            if (splits) {
                int split = core.splitLabel(partition, keyBytes(r), epoch);
                if (split > 0) {
                    labels.put(r, split);
                }
            }
            keyed |= r.key() != null || r.serializedKeySize() >= 0;
            offsets[base + i] = offset;
            position = offset + 1;
        }
        core.took(lane, i, position, keyed);
        return i;
    }

    /** C1: the record's last well-formed {@code dkg-epoch}, {@link EpochHeader#NONE} if none. */
    private static long epochOf(ConsumerRecord<?, ?> r) {
        Headers headers = r.headers();
        if (headers.lastHeader(DkgKafkaProducer.EPOCH_HEADER) == null) {
            // No epoch header at all (the common case): no iterator, no parse.
            return EpochHeader.NONE;
        }
        long epoch = EpochHeader.NONE;
        for (Header h : headers) {
            epoch = EpochHeader.fold(epoch, h.key(), h.value());
        }
        return epoch;
    }

    /** The batch's list of {@code tp}, one of this consumer's own (a list handed on from the inner client is copied). */
    private static <K, V> List<ConsumerRecord<K, V>> own(Map<TopicPartition, List<ConsumerRecord<K, V>>> batch,
            TopicPartition tp) {
        List<ConsumerRecord<K, V>> l = batch.get(tp);
        if (l instanceof Own) {
            return l;
        }
        Own<ConsumerRecord<K, V>> mine = l == null ? new Own<>() : new Own<>(l);
        batch.put(tp, mine);
        return mine;
    }

    /** A list of the batch that this consumer made (appendable), unlike the inner client's lists it hands on. */
    private static final class Own<T> extends ArrayList<T> {
        private static final long serialVersionUID = 1L;

        Own() {
        }

        Own(Collection<T> c) {
            super(c);
        }
    }

    @SuppressWarnings("deprecation")
    private static <K, V> ConsumerRecords<K, V> records(Map<TopicPartition, List<ConsumerRecord<K, V>>> batch) {
        // The one constructor every supported client has (3.0+; deprecated in 4.x for one with next offsets).
        return batch.isEmpty() ? ConsumerRecords.empty() : new ConsumerRecords<>(batch);
    }

    private void add(Map<TopicPartition, List<ConsumerRecord<K, V>>> batch, ConsumerDriver<ConsumerRecord<K, V>> d,
            List<ConsumerDriver.Labelled<ConsumerRecord<K, V>>> records) {
        if (records.isEmpty()) {
            return;
        }
        for (ConsumerDriver.Labelled<ConsumerRecord<K, V>> l : records) {
            ConsumerRecord<K, V> r = l.msg;
            own(batch, new TopicPartition(r.topic(), r.partition())).add(r);
            if (l.split > 0) {
                labels.put(r, l.split);
            }
        }
    }

    /**
     * The key's bytes as the producer hashed them: the serialized key. Records keep only the deserialized key, so
     * the raw bytes are recovered from the common deserializations; anything else needs {@code byte[]} keys.
     */
    private static byte[] keyBytes(ConsumerRecord<?, ?> r) {
        Object k = r.key();
        if (k == null) {
            return r.serializedKeySize() >= 0 ? new byte[0] : null;
        }
        if (k instanceof byte[]) {
            return (byte[]) k;
        }
        if (k instanceof String) {
            return ((String) k).getBytes(java.nio.charset.StandardCharsets.UTF_8);
        }
        if (k instanceof org.apache.kafka.common.utils.Bytes) {
            return ((org.apache.kafka.common.utils.Bytes) k).get();
        }
        if (k instanceof java.nio.ByteBuffer) {
            java.nio.ByteBuffer b = ((java.nio.ByteBuffer) k).duplicate();
            byte[] out = new byte[b.remaining()];
            b.get(out);
            return out;
        }
        if (k instanceof Integer) {
            return java.nio.ByteBuffer.allocate(4).putInt((Integer) k).array();
        }
        if (k instanceof Long) {
            return java.nio.ByteBuffer.allocate(8).putLong((Long) k).array();
        }
        throw new KafkaException("DKG: DkgKafkaConsumer cannot recover the serialized key of a " + k.getClass().getName()
                + " (use byte[], String, Bytes, ByteBuffer, Integer or Long keys)");
    }

    /**
     * {@code Consumer.poll(long)} for kafka-clients 3.x callers (removed from the interface in 4.0).
     *
     * @param timeoutMs the timeout
     * @return the records the protocol lets out
     */
    public ConsumerRecords<K, V> poll(long timeoutMs) {
        return poll(Duration.ofMillis(timeoutMs));
    }

    // ---------------------------------------------------------------------------------------------------- commits

    /** The periodic commit's failures (a rebalance in progress, typically) wait for the next one. */
    private static final OffsetCommitCallback AUTO_COMMIT_CALLBACK = (offsets, e) -> {
        if (e != null) {
            LOG.debug("DKG: periodic commit failed (the next one retries): {}", e.toString());
        }
    };

    @Override
    public void commitSync() {
        long now = System.nanoTime();
        for (ConsumerDriver<ConsumerRecord<K, V>> d : drivers.values()) {
            d.commit(now);
        }
    }

    @Override
    public void commitSync(Duration timeout) {
        commitSync();
    }

    /** The application's offsets: what lies below them is processed; what is committed is what is safe. */
    private Map<TopicPartition, OffsetAndMetadata> safe(Map<TopicPartition, OffsetAndMetadata> offsets) {
        long now = System.nanoTime();
        Map<TopicPartition, OffsetAndMetadata> out = new LinkedHashMap<>();
        Map<String, List<Integer>> touched = new TreeMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            ConsumerDriver<ConsumerRecord<K, V>> d = drivers.get(e.getKey().topic());
            if (d == null) {
                out.put(e.getKey(), e.getValue());
                continue;
            }
            d.core().processedBelow(e.getKey().partition(), e.getValue().offset());
            touched.computeIfAbsent(e.getKey().topic(), t -> new ArrayList<>()).add(e.getKey().partition());
        }
        for (Map.Entry<String, List<Integer>> e : touched.entrySet()) {
            ConsumerDriver<ConsumerRecord<K, V>> d = drivers.get(e.getKey());
            d.commitProgress(now);
            for (ConsumerDriver.Commit c : d.commitAll()) {
                if (e.getValue().contains(c.partition)) {
                    out.put(new TopicPartition(e.getKey(), c.partition), new OffsetAndMetadata(c.offset, c.metadata));
                }
            }
        }
        return out;
    }

    @Override
    public void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets) {
        Map<TopicPartition, OffsetAndMetadata> safe = safe(offsets);
        if (!safe.isEmpty()) {
            delegate.commitSync(safe);
        }
    }

    @Override
    public void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets, Duration timeout) {
        Map<TopicPartition, OffsetAndMetadata> safe = safe(offsets);
        if (!safe.isEmpty()) {
            delegate.commitSync(safe, timeout);
        }
    }

    @Override
    public void commitAsync() {
        commitAsync(null);
    }

    @Override
    public void commitAsync(OffsetCommitCallback callback) {
        long now = System.nanoTime();
        Map<TopicPartition, OffsetAndMetadata> all = new LinkedHashMap<>();
        for (ConsumerDriver<ConsumerRecord<K, V>> d : drivers.values()) {
            d.core().processed();
            d.commitProgress(now);
            for (ConsumerDriver.Commit c : d.commitAll()) {
                all.put(new TopicPartition(d.topic(), c.partition), new OffsetAndMetadata(c.offset, c.metadata));
            }
        }
        delegate.commitAsync(all, callback);
    }

    @Override
    public void commitAsync(Map<TopicPartition, OffsetAndMetadata> offsets, OffsetCommitCallback callback) {
        delegate.commitAsync(safe(offsets), callback);
    }

    // ---------------------------------------------------------------------------------------------------- close

    @Override
    public void close() {
        close(Duration.ofSeconds(30));
    }

    /**
     * Leaves the group cleanly: the last batch counts as processed, everything is committed, then the inner client
     * closes (its final revocation runs the hooks and commits the final offsets and progress).
     */
    // close(Duration) is deprecated from 4.1 for close(CloseOptions), which a 3.x or 4.0 client does not have.
    @SuppressWarnings("deprecation")
    @Override
    public void close(Duration timeout) {
        if (!beginClose()) {
            return;
        }
        try {
            delegate.close(timeout);
        } finally {
            endClose();
        }
    }

    /**
     * {@code Consumer.close(CloseOptions)} (kafka-clients 4.1+), as {@link #close(Duration)}.
     *
     * @param option the inner client's close options
     */
    public void close(org.apache.kafka.clients.consumer.CloseOptions option) {
        if (!beginClose()) {
            return;
        }
        try {
            delegate.close(option);
        } finally {
            endClose();
        }
    }

    private boolean beginClose() {
        if (closed) {
            return false;
        }
        try {
            commitSync();
        } catch (RuntimeException e) {
            // A rebalance in progress, typically: the final revocation commits again.
            LOG.debug("DKG: commit before close failed: {}", e.toString());
        }
        return true;
    }

    private void endClose() {
        closed = true;
        control.close();
        handoff.close();
        writer.close(Duration.ofSeconds(5));
        ownMetrics.close();
        if (finalCommitFailure != null) {
            LOG.warn("DKG: the final commit failed: records processed since the previous commit will be delivered "
                    + "again to the partitions' next owners: {}", finalCommitFailure.toString());
        }
    }

    /** The inner client's metrics and this consumer's own ({@code dkg-consumer-*}). */
    @Override
    public Map<MetricName, ? extends Metric> metrics() {
        Map<MetricName, Metric> all = new HashMap<>(delegate.metrics());
        all.putAll(ownMetrics.metrics());
        return all;
    }
}
