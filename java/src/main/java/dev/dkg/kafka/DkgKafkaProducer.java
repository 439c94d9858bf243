package dev.dkg.kafka;

import static dev.dkg.kafka.ProducerSettings.configured;
import static dev.dkg.kafka.ProducerSettings.handoffConfig;
import static dev.dkg.kafka.ProducerSettings.innerConfig;
import static dev.dkg.kafka.ProducerSettings.positiveLong;
import static dev.dkg.kafka.ProducerSettings.propertiesToMap;
import static dev.dkg.kafka.ProducerSettings.topicList;
import static dev.dkg.kafka.ProducerSettings.validate;
import static dev.dkg.kafka.ProducerSettings.withByteSerializersIfMissing;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.StampedLock;
import java.util.function.ToLongFunction;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Serializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link Producer} that places keyed records by the DKG assignment and takes part in the consumers' ordering
 * protocol (docs/spec.md 9.2, 9.2.1 and 9.2.2), the Java counterpart of the Rust
 * {@code DkgProducer::builder(..).ordering(true)}: {@code DkgConsumer} groups then process each key's records in
 * this producer's send order across epoch switches, as they do for Rust producers on the same topic.
 *
 * <p>Why a decorator and not {@link DkgPartitioner} plus an interceptor: a marker says "every record this producer
 * routed under an epoch below E lies below these offsets", so the producer must know, for every record, the epoch
 * it was routed under and its outcome. {@code KafkaProducer} calls a partitioner before it may block for buffer
 * space, and nothing after the append, so no plug-in can tell when the last record routed by the old epoch has
 * reached the client (spec 9.2.1). Here {@link #send} routes the record itself, counts it in its epoch's
 * {@link EpochLedger} inside a gate, and hands it to a plain {@code KafkaProducer} with its partition set; the
 * delivery callback records its offset.
 *
 * <p>Per adopted epoch {@code E} of a topic (a background thread, {@code dkg-ordering}): the gate is closed once
 * (every send that routed by the older state has counted its record), the thread waits until every record routed
 * under an epoch below {@code E} has an outcome, reads the broker's end of each partition where a delivery failed
 * (the record may be in the log), then writes {@code assignment/<topic>/<E>} and
 * {@code marker/<topic>/<producer>} to the handoff topic. A lease {@code lease2/<topic>/<producer>} is written at
 * construction for the topics of {@link DkgConfig#TOPICS_CONFIG} (first epoch: the one in effect then) and on first
 * use for others (first epoch 0), renewed every third of {@link DkgConfig#LEASE_MS_CONFIG} by a thread of its own,
 * and marked closed by {@link #close()}.
 *
 * <p>Stamps (spec 9.2.2): a record placed by epoch {@code E} (heavy key or bucket, not a split key's part) carries
 * {@code dkg-epoch: E} and {@code dkg-producer: <id>} while {@code E}'s stamp window is open and its key's home
 * differs from its home under a placement the open windows compare against ({@link Transition}: the predecessor of
 * each open window; every key at start-up, after a retraction or a skipped epoch). A reader thread follows the
 * consumer groups' progress on the handoff topic ({@link StampWindows}); a window closes once this producer
 * announced the epoch and every followed group settled it, or at its bound ({@link DkgConfig#STAMP_WINDOW_MS_CONFIG}).
 * Records without a key, and records with an explicit partition, pass through unplaced and uncounted, as in the
 * Rust producer.
 *
 * <p>Settings: every {@code KafkaProducer} setting, plus {@link DkgConfig}'s. Refused, with a
 * {@link ConfigException} naming the key: {@code acks} other than {@code all}/{@code -1},
 * {@code enable.idempotence=false} (retries could reorder records against a marker's offsets),
 * {@code transactional.id} (not supported with ordering), {@code partitioner.class} (this producer places records)
 * and {@code interceptor.classes} (the inner client sees serialized records only). Thread-safe, as
 * {@code KafkaProducer}.
 */
public final class DkgKafkaProducer<K, V> implements Producer<K, V> {
    private static final Logger LOG = LoggerFactory.getLogger(DkgKafkaProducer.class);
    /** The header carrying the epoch that placed a record (decimal ASCII), spec section 8. */
    public static final String EPOCH_HEADER = "dkg-epoch";
    /** The header naming the producer of a stamped record (its 32-hex-digit id), spec section 8. */
    public static final String PRODUCER_HEADER = "dkg-producer";
    /** How long one marker may wait for acknowledgements before the attempt is given up and retried (as Rust). */
    static final long MARKER_TIMEOUT_MS = 30_000;
    /** How often the ordering thread looks for adoptions, new topics and windows to close. */
    private static final long SCAN_MS = 20;
    /** Timeout of each handoff write and admin call. */
    private static final long IO_TIMEOUT_MS = 30_000;

    private final KafkaProducer<byte[], byte[]> inner;
    private final Serializer<K> keySerializer;
    private final Serializer<V> valueSerializer;
    /** The serializers made from the configuration are closed with the producer (as KafkaProducer does). */
    private final boolean ownsKeySerializer;
    private final boolean ownsValueSerializer;
    private final DkgRouter router;
    private final boolean ownsRouter;
    private final String id;
    private final byte[] idBytes;
    private final String handoffTopic;
    private final KafkaProducer<byte[], byte[]> handoff;
    private final Admin admin;
    private final long leaseMs;
    private final long stampWindowMs;
    /** Sends hold the read side while they route and count; the ordering thread takes the write side (grace). */
    private final StampedLock gate = new StampedLock();
    private final StampWindows windows;
    private final ConcurrentHashMap<String, TopicOrdering> topics = new ConcurrentHashMap<>();
    /**
     * The topic the last send used, compared by identity with the caller's {@code String}: an application sends to
     * the same instance record after record, so the map lookup is skipped. A plain field: a stale read only costs it.
     */
    private TopicOrdering lastTopic;
    /** Held across each lease write, so that lease records land in the order they were made. */
    private final Object leaseLock = new Object();
    private final Thread orderingThread;
    private final Thread renewalThread;
    private final Thread handoffThread;
    /** Follows the groups' progress on the handoff topic, on {@link #handoffThread}. */
    private final HandoffProgressReader handoffReader;
    private final AtomicBoolean closed = new AtomicBoolean();
    private volatile boolean stopping;
    /**
     * Its own metrics (the router's and the protocol's), reported to JMX under the client's domain
     * ({@code kafka.producer:type=plugins,class=DkgKafkaProducer,client-id=...}) and returned by {@link #metrics()}
     * with the inner client's. A decorator is not a plug-in: no client hands it {@code PluginMetrics}.
     */
    private final DkgMetrics.OwnRegistry ownMetrics;
    /** Where the protocol's per-topic counters are added as topics appear (the client's tags). */
    private final DkgMetrics.Registrar protocolMetrics;

    /**
     * A producer with the serializers named in {@code configs} ({@code key.serializer}, {@code value.serializer}).
     *
     * @throws ConfigException on a refused or bad setting (see the class comment)
     * @throws KafkaException if the control topic cannot be read or the handoff topic created or checked in time
     */
    public DkgKafkaProducer(Map<String, Object> configs) {
        this(configs, null, null);
    }

    /** {@link #DkgKafkaProducer(Map, Serializer, Serializer)} from {@code Properties}. */
    public DkgKafkaProducer(Properties properties, Serializer<K> keySerializer, Serializer<V> valueSerializer) {
        this(propertiesToMap(properties), keySerializer, valueSerializer);
    }

    /**
     * A producer with the given serializers (null: the class named in {@code configs}, configured from it).
     *
     * @throws ConfigException on a refused or bad setting (see the class comment)
     * @throws KafkaException if the control topic cannot be read or the handoff topic created or checked in time
     */
    @SuppressWarnings("unchecked")
    public DkgKafkaProducer(Map<String, Object> configs, Serializer<K> keySerializer, Serializer<V> valueSerializer) {
        Map<String, Object> settings = new HashMap<>(configs);
        validate(settings);
        this.leaseMs = positiveLong(settings, DkgConfig.LEASE_MS_CONFIG, DkgConfig.LEASE_MS_DEFAULT);
        this.stampWindowMs = positiveLong(settings, DkgConfig.STAMP_WINDOW_MS_CONFIG,
                DkgConfig.STAMP_WINDOW_MS_DEFAULT);
        this.handoffTopic = DkgRouter.stringConfig(settings, DkgConfig.HANDOFF_TOPIC_CONFIG,
                DkgConfig.HANDOFF_TOPIC_DEFAULT);
        List<String> declared = topicList(settings.get(DkgConfig.TOPICS_CONFIG));
        ProducerConfig parsed = new ProducerConfig(withByteSerializersIfMissing(settings, keySerializer,
                valueSerializer));
        this.keySerializer = keySerializer != null ? keySerializer
                : configured(parsed, ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, settings, true);
        this.valueSerializer = valueSerializer != null ? valueSerializer
                : configured(parsed, ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, settings, false);
        this.ownsKeySerializer = keySerializer == null;
        this.ownsValueSerializer = valueSerializer == null;
        this.windows = new StampWindows(TimeUnit.MILLISECONDS.toNanos(stampWindowMs));
        this.id = Handoff.newProducerId();
        this.idBytes = id.getBytes(StandardCharsets.US_ASCII);

        Object shared = settings.get(DkgConfig.ROUTER_INSTANCE_CONFIG);
        Admin createdAdmin = null;
        KafkaProducer<byte[], byte[]> createdHandoff = null;
        KafkaProducer<byte[], byte[]> createdInner = null;
        DkgRouter createdRouter = null;
        try {
            createdRouter = shared instanceof DkgRouter ? (DkgRouter) shared : DkgRouter.start(settings);
            Map<String, Object> connection = ControlFollower.connectionSettings(settings);
            createdAdmin = Admin.create(connection);
            Handoff.ensureTopic(createdAdmin, handoffTopic, IO_TIMEOUT_MS);
            createdHandoff = new KafkaProducer<>(handoffConfig(connection, settings), new ByteArraySerializer(),
                    new ByteArraySerializer());
            createdInner = new KafkaProducer<>(innerConfig(settings), new ByteArraySerializer(),
                    new ByteArraySerializer());
        } catch (RuntimeException e) {
            closeQuietly(createdInner);
            closeQuietly(createdHandoff);
            if (createdAdmin != null) {
                createdAdmin.close(Duration.ZERO);
            }
            if (createdRouter != null && !(shared instanceof DkgRouter)) {
                createdRouter.close();
            }
            throw e;
        }
        this.router = createdRouter;
        if (!router.trackWindows()) {
            closeQuietly(createdInner);
            closeQuietly(createdHandoff);
            createdAdmin.close(Duration.ZERO);
            // Stamp windows live in the router and close by one producer's announcements: a second ordering
            // producer's would close the first's before its markers are written.
            throw new ConfigException(DkgConfig.ROUTER_INSTANCE_CONFIG, shared,
                    "this router already serves another DkgKafkaProducer (share it with partitioners only)");
        }
        this.ownsRouter = !(shared instanceof DkgRouter);
        Object clientId = settings.get(ProducerConfig.CLIENT_ID_CONFIG);
        Map<String, String> metricTags = new LinkedHashMap<>();
        metricTags.put("config", "dkg");
        metricTags.put("class", "DkgKafkaProducer");
        metricTags.put("client-id", clientId == null || clientId.toString().isEmpty() ? "dkg-" + id.substring(0, 8)
                : clientId.toString());
        DkgMetrics.OwnRegistry pluginMetrics = DkgMetrics.ownRegistry("kafka.producer", metricTags);
        this.ownMetrics = pluginMetrics;
        if (!(shared instanceof DkgRouter)) {
            router.bindMetrics(pluginMetrics);
        }
        this.protocolMetrics = pluginMetrics;
        Map<String, Object> reader = ControlFollower.consumerConfig(settings);
        reader.put(ProducerConfig.CLIENT_ID_CONFIG, ControlFollower.internalClientId(clientId, "handoff"));
        reader.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
        this.handoffReader =
                new HandoffProgressReader(id, handoffTopic, reader, windows, IO_TIMEOUT_MS, () -> stopping);
        this.admin = createdAdmin;
        this.handoff = createdHandoff;
        this.inner = createdInner;
        try {
            for (String topic : declared) {
                TopicOrdering t = topic(topic);
                long epoch = epochInEffect(t, inner.partitionsFor(topic).size());
                register(t, Math.max(0, epoch));
            }
        } catch (RuntimeException e) {
            closeAll(Duration.ZERO);
            throw e;
        }
        this.orderingThread = new Thread(this::runOrdering, "dkg-ordering-" + id.substring(0, 8));
        this.orderingThread.setDaemon(true);
        this.renewalThread = new Thread(this::runRenewal, "dkg-lease-renewal-" + id.substring(0, 8));
        this.renewalThread.setDaemon(true);
        this.handoffThread = new Thread(handoffReader, "dkg-handoff-reader-" + id.substring(0, 8));
        this.handoffThread.setDaemon(true);
        handoffThread.start();
        orderingThread.start();
        renewalThread.start();
        LOG.info("DKG: ordering producer {} on handoff topic {} (lease {} ms, stamp window {} ms, declared topics {})",
                id, handoffTopic, leaseMs, stampWindowMs, declared);
    }

    // ------------------------------------------------------------------------------------------------------------
    // Configuration.

    /** A stamp header (Kafka's own {@code Header} implementation is internal). */
    private static final class StampHeader implements Header {
        private final String key;
        private final byte[] value;

        StampHeader(String key, byte[] value) {
            this.key = key;
            this.value = value;
        }

        @Override
        public String key() {
            return key;
        }

        @Override
        public byte[] value() {
            return value;
        }
    }

    // ------------------------------------------------------------------------------------------------------------
    // Sending.

    @Override
    public Future<RecordMetadata> send(ProducerRecord<K, V> record) {
        return send(record, null);
    }

    /**
     * Serializes the record, places it (keyed records without an explicit partition: by the topic's assignment in
     * effect, else Kafka's default placement), stamps it inside a stamp window, and hands it to the inner client.
     * Errors are reported as {@code KafkaProducer.send} reports them.
     */
    @Override
    public Future<RecordMetadata> send(ProducerRecord<K, V> record, Callback callback) {
        if (closed.get()) {
            throw new IllegalStateException("Cannot perform operation after producer has been closed");
        }
        String topic = record.topic();
        Headers headers = record.headers();
        byte[] key = keySerializer.serialize(topic, headers, record.key());
        byte[] value = valueSerializer.serialize(topic, headers, record.value());
        if (record.partition() != null || key == null) {
            return inner.send(new ProducerRecord<>(topic, record.partition(), record.timestamp(), key, value,
                    headers), callback);
        }
        TopicOrdering t = lastTopic;
        if (t == null || t.topic != topic) {
            t = topics.get(topic);
        }
        if (t == null || t.sendCount <= 0) {
            int known;
            try {
                // Waits for the topic's metadata as KafkaProducer.send would (bounded by max.block.ms). Only a topic
                // that exists gets ordering state (and a lease).
                known = inner.partitionsFor(topic).size();
            } catch (ApiException e) {
                if (callback != null) {
                    callback.onCompletion(null, e);
                }
                return CompletableFuture.failedFuture(e);
            }
            t = topic(topic);
            t.firstCount(known);
        }
        lastTopic = t;
        DkgRouter.TopicState s = router.state(topic);
        EpochLedger ledger;
        int partition;
        long epoch;
        boolean stamp;
        long entered = gate.readLock();
        try {
            // Inside the gate: the ordering thread updates the count before its grace step, so a send routed by an
            // older count is counted before the marker looks.
            int n = t.sendCount;
            Assignment a = s.assignment;
            // Read after the assignment (the router writes it first): a newer one than a's counts every key as moved.
            Transition tr = s.transition;
            s.seen(n);
            int routed = s.route(a, key, n);
            partition = routed ^ (routed >> 31);
            boolean placed = a != null && a.partitions() == n;
            epoch = placed ? a.epoch() : 0;
            stamp = placed && routed >= 0 && (tr == null || tr.moved(epoch, key, partition, n));
            ledger = t.ledger(epoch, n);
            ledger.sent();
        } finally {
            gate.unlockRead(entered);
        }
        Header[] own = headers.toArray();
        Iterable<Header> out = own.length == 0 ? null : headers;
        if (stamp) {
            // A copy: the caller's record keeps its own headers.
            List<Header> stamped = new ArrayList<>(own.length + 2);
            Collections.addAll(stamped, own);
            stamped.add(new StampHeader(EPOCH_HEADER, Long.toUnsignedString(epoch).getBytes(StandardCharsets.US_ASCII)));
            stamped.add(new StampHeader(PRODUCER_HEADER, idBytes));
            out = stamped;
        }
        Outcome outcome = new Outcome(ledger, partition, callback);
        try {
            // Null headers when there are none: ProducerRecord copies any it is given (a list per record).
            return inner.send(new ProducerRecord<>(topic, partition, record.timestamp(), key, value, out), outcome);
        } catch (RuntimeException e) {
            outcome.withdrawn();
            throw e;
        }
    }

    /**
     * Counts a record's outcome in its ledger, then calls the application's callback. {@code KafkaProducer.send}
     * either calls the callback (an outcome, also for errors before the append, after which it returns) or throws
     * without calling it (never appended: {@link #withdrawn}), never both, so no guard is needed.
     */
    private static final class Outcome implements Callback {
        private final EpochLedger ledger;
        private final int partition;
        private final Callback callback;

        Outcome(EpochLedger ledger, int partition, Callback callback) {
            this.ledger = ledger;
            this.partition = partition;
            this.callback = callback;
        }

        @Override
        public void onCompletion(RecordMetadata metadata, Exception exception) {
            if (exception == null && metadata != null && metadata.hasOffset()) {
                ledger.acked(metadata.partition(), metadata.offset());
            } else {
                ledger.unknown(partition);
            }
            if (callback != null) {
                callback.onCompletion(metadata, exception);
            }
        }

        /** The client threw before appending the record: it is not in the log. */
        void withdrawn() {
            ledger.withdrawn();
        }
    }

    private TopicOrdering topic(String topic) {
        TopicOrdering t = topics.get(topic);
        return t != null ? t : topics.computeIfAbsent(topic, name -> {
            TopicOrdering created = new TopicOrdering(name);
            bindTopicMetrics(created);
            return created;
        });
    }

    // ------------------------------------------------------------------------------------------------------------
    // The ordering thread: registration, markers, stamp windows.

    private void runOrdering() {
        while (!stopping) {
            try {
                step();
            } catch (RuntimeException e) {
                LOG.warn("DKG: ordering producer {}: {} (retrying)", id, e.toString());
            }
            sleep(SCAN_MS);
        }
    }

    /** One round: register new topics, announce the epochs due, close the windows due. */
    private synchronized void step() {
        List<TopicOrdering> due = new ArrayList<>();
        for (TopicOrdering t : topics.values()) {
            try {
                if (due(t)) {
                    due.add(t);
                }
            } catch (RuntimeException e) {
                // One topic's failure (deleted, no access) must not hold the others' markers back.
                LOG.warn("DKG: ordering producer {}: topic {}: {} (retrying)", id, t.topic, e.toString());
            }
        }
        if (!due.isEmpty()) {
            // Grace: once the write side is had, every send that routed by an older state has counted its record.
            gate.unlockWrite(gate.writeLock());
            for (TopicOrdering t : due) {
                try {
                    marker(t, t.current, t.partitions);
                } catch (RuntimeException e) {
                    LOG.warn("DKG: ordering producer {}: announcing epoch {} of {} failed: {} (retrying)", id,
                            Long.toUnsignedString(t.current), t.topic, e.toString());
                }
            }
        }
        for (TopicOrdering t : topics.values()) {
            closeWindows(t, System.nanoTime());
        }
    }

    /**
     * Registers the topic if it is new, refreshes its partition count (before the grace step, which makes sends
     * route by it) and says whether its epoch in effect is due for a marker.
     */
    private boolean due(TopicOrdering t) {
        if (!t.registered) {
            // Records may already have been routed under any epoch: first epoch 0; the marker of the current epoch
            // follows at once.
            register(t, 0);
        }
        int n = inner.partitionsFor(t.topic).size();
        if (t.partitions > 0 && n != t.partitions) {
            t.countChanges.incrementAndGet();
            LOG.warn("DKG: topic {} went from {} to {} partitions: keys move to Kafka's placement over the new count "
                    + "without an epoch switch (the ordering guarantee does not cover them)", t.topic, t.partitions,
                    n);
        }
        t.partitions = n;
        t.sendCount = n;
        long epoch = epochInEffect(t, n);
        if (epoch > 0) {
            t.current = epoch;
        }
        return epoch > 0 && Long.compareUnsigned(epoch, t.announced) > 0;
    }

    /** The epoch of the topic's assignment if it is in effect with {@code partitions} partitions, else -1. */
    private long epochInEffect(TopicOrdering t, int partitions) {
        Assignment a = router.assignment(t.topic);
        return a != null && a.partitions() == partitions ? a.epoch() : -1;
    }

    /** Writes the topic's lease with {@code firstEpoch} and counts it registered. */
    private void register(TopicOrdering t, long firstEpoch) {
        synchronized (leaseLock) {
            write(Handoff.leaseKey(t.topic, id), Handoff.lease(id, t.topic, firstEpoch, leaseMs,
                    System.currentTimeMillis() + leaseMs, -1));
            t.firstEpoch = firstEpoch;
            t.announced = firstEpoch;
            t.registered = true;
        }
        if (firstEpoch > 0) {
            t.current = firstEpoch;
        }
        LOG.debug("DKG: ordering producer {} registered topic {} at first epoch {}", id, t.topic, firstEpoch);
    }

    /**
     * Waits until every record routed to the topic under an epoch below {@code epoch} has an outcome (at most
     * {@link #MARKER_TIMEOUT_MS}), then writes the history and the marker of {@code epoch}.
     */
    private void marker(TopicOrdering t, long epoch, int partitions) {
        List<EpochLedger> older = new ArrayList<>(t.ledgers.headMap(epoch).values());
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(MARKER_TIMEOUT_MS);
        for (EpochLedger l : older) {
            while (l.outstanding() > 0) {
                if (Thread.currentThread().isInterrupted()) {
                    throw new KafkaException("interrupted waiting for acknowledgements (closing)");
                }
                if (System.nanoTime() > deadline) {
                    throw new KafkaException("acknowledgements before the marker of epoch "
                            + Long.toUnsignedString(epoch) + " on " + t.topic + " did not come within "
                            + MARKER_TIMEOUT_MS + " ms");
                }
                sleep(2);
            }
        }
        long[] ends = Arrays.copyOf(t.base, partitions);
        for (EpochLedger l : older) {
            long[] acked = l.snapshot(partitions);
            for (int p = 0; p < partitions; p++) {
                ends[p] = Math.max(ends[p], acked[p]);
            }
            // Records whose delivery failed may be in the log at offsets nobody reports: above them is the end of
            // the partition, read now that every outcome is in.
            for (int p : l.unknownPartitions()) {
                if (p < 0 || p >= partitions) {
                    for (int q = 0; q < partitions; q++) {
                        ends[q] = Math.max(ends[q], logEnd(t.topic, q));
                    }
                } else {
                    ends[p] = Math.max(ends[p], logEnd(t.topic, p));
                }
            }
        }
        byte[] document = router.document(t.topic, epoch);
        if (document != null) {
            // History first: a failure fails the whole step, which the next round retries.
            write(Handoff.historyKey(t.topic, epoch), document);
        }
        write(Handoff.markerKey(t.topic, id), Handoff.marker(id, t.topic, epoch, ends));
        t.base = ends;
        t.announced = epoch;
        // Ledgers of older epochs (but Kafka's placement, epoch 0, which a retraction can bring back) get no more
        // records: every send routes by this epoch or a later one since the grace period.
        for (EpochLedger l : older) {
            if (l.epoch() != 0) {
                t.ledgers.remove(l.epoch(), l);
            }
        }
        t.markers.incrementAndGet();
        LOG.debug("DKG: ordering producer {} wrote the marker of epoch {} on {}: {}", id,
                Long.toUnsignedString(epoch), t.topic, Arrays.toString(ends));
    }

    /**
     * Closes the topic's stamp windows that are due (spec 9.2.2, {@link StampWindows}): none before the handoff topic
     * was read to its end once, none of a topic without lease.
     */
    private void closeWindows(TopicOrdering t, long nowNanos) {
        Transition tr = router.transition(t.topic);
        if (!t.registered || !handoffReader.caughtUp() || tr == null || tr.open.isEmpty()) {
            return;
        }
        StampWindows.Closing c = windows.due(t.topic, tr.open, t.announced, Math.max(0, t.partitions), nowNanos);
        if (c != null && router.closeWindows(t.topic, tr, c.upto)) {
            windows.forget(t.topic, c.upto);
            (c.reason == StampWindows.Reason.SETTLED ? t.windowsSettled : t.windowsTimedOut).incrementAndGet();
            LOG.debug("DKG: ordering producer {} closed the stamp windows of {} up to epoch {} ({})", id, t.topic,
                    Long.toUnsignedString(c.upto), c.reason.label);
        }
    }

    /** The end (high watermark) of a partition, from the broker. */
    private long logEnd(String topic, int partition) {
        TopicPartition tp = new TopicPartition(topic, partition);
        return await(admin.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp),
                "reading the end of " + tp).offset();
    }

    /** One handoff record, written and acknowledged. */
    private void write(byte[] key, byte[] value) {
        await(handoff.send(new ProducerRecord<>(handoffTopic, 0, key, value)),
                "writing to handoff topic " + handoffTopic);
    }

    /**
     * The result of {@code future} within {@link #IO_TIMEOUT_MS}; its failure (the cause), the timeout or an
     * interrupt as a {@link KafkaException} that says what it was {@code doing}.
     */
    private static <T> T await(Future<T> future, String doing) {
        try {
            return future.get(IO_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new KafkaException("interrupted " + doing, e);
        } catch (ExecutionException | TimeoutException e) {
            Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
            throw new KafkaException("failed " + doing + ": " + cause, cause);
        }
    }

    /** Renews every lease each third of the lease duration, apart from the marker work (which may wait). */
    private void runRenewal() {
        while (!stopping) {
            sleep(Math.max(1, leaseMs / 3));
            if (stopping) {
                return;
            }
            try {
                writeLeases(-1);
            } catch (RuntimeException e) {
                LOG.warn("DKG: ordering producer {}: renewing its leases failed: {} (retrying)", id, e.toString());
            }
        }
    }

    /** Every registered topic's lease, renewed; {@code closing} marks them closed at their announced epoch. */
    private void writeLeases(int closing) {
        synchronized (leaseLock) {
            long expires = System.currentTimeMillis() + leaseMs;
            for (TopicOrdering t : topics.values()) {
                if (t.registered) {
                    write(Handoff.leaseKey(t.topic, id), Handoff.lease(id, t.topic, t.firstEpoch, leaseMs, expires,
                            closing >= 0 ? t.announced : -1));
                }
            }
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * The protocol's counters of one topic (docs/spec.md section 10, tagged by {@code topic} as the Rust producer's
     * are; Kafka's naming, as the plug-in's), added once when the topic first appears, best effort as the router's
     * (a failed registration, e.g. racing {@link #close}, must not fail the send that met the topic).
     */
    private void bindTopicMetrics(TopicOrdering t) {
        DkgRouter.add(protocolMetrics, DkgMetrics.MARKERS_WRITTEN_TOTAL,
                "Offset markers written to the handoff topic (one per announced epoch switch).",
                DkgRouter.tags("topic", t.topic), (config, now) -> t.markers.get());
        for (StampWindows.Reason r : StampWindows.Reason.values()) {
            AtomicLong counter = r == StampWindows.Reason.SETTLED ? t.windowsSettled : t.windowsTimedOut;
            LinkedHashMap<String, String> tags = DkgRouter.tags("topic", t.topic);
            tags.put("reason", r.label);
            DkgRouter.add(protocolMetrics, DkgMetrics.STAMP_WINDOWS_CLOSED_TOTAL,
                    "Stamp windows closed: settled (every followed consumer group drained the switch) or timed_out "
                            + "(open for dkg.stamp.window.ms).", tags, (config, now) -> counter.get());
        }
        DkgRouter.add(protocolMetrics, DkgMetrics.PARTITION_COUNT_CHANGES_TOTAL,
                "Changes of the topic's partition count seen: each moves keys outside the ordering guarantee.",
                DkgRouter.tags("topic", t.topic), (config, now) -> t.countChanges.get());
    }

    /** {@code counter} summed over the topics. */
    private long total(ToLongFunction<TopicOrdering> counter) {
        long sum = 0;
        for (TopicOrdering t : topics.values()) {
            sum += counter.applyAsLong(t);
        }
        return sum;
    }

    // ------------------------------------------------------------------------------------------------------------
    // Inspection.

    /** This producer instance's id (32 lowercase hex digits): the {@code <producer>} of its handoff records. */
    public String producerId() {
        return id;
    }

    /** The router placing this producer's records (its assignments and route counters). */
    public DkgRouter router() {
        return router;
    }

    /** Markers written so far. */
    public long markersWritten() {
        return total(t -> t.markers.get());
    }

    /** Stamp windows closed so far because the consumer groups settled the switch ({@code reason="settled"}). */
    public long stampWindowsSettled() {
        return total(t -> t.windowsSettled.get());
    }

    /** Stamp windows closed so far at their bound ({@link DkgConfig#STAMP_WINDOW_MS_CONFIG}, {@code timed_out}). */
    public long stampWindowsTimedOut() {
        return total(t -> t.windowsTimedOut.get());
    }

    /** Changes of a topic's partition count seen so far (each moves keys outside the guarantee). */
    public long partitionCountChanges() {
        return total(t -> t.countChanges.get());
    }

    // ------------------------------------------------------------------------------------------------------------
    // The rest of Producer: the inner client's.

    @Override
    public void flush() {
        inner.flush();
    }

    @Override
    public List<PartitionInfo> partitionsFor(String topic) {
        return inner.partitionsFor(topic);
    }

    /** The inner client's metrics and this producer's own ({@code dkg-producer-*}, group {@code plugins}). */
    @Override
    public Map<MetricName, ? extends Metric> metrics() {
        Map<MetricName, Metric> all = new HashMap<>(inner.metrics());
        all.putAll(ownMetrics.metrics());
        return Collections.unmodifiableMap(all);
    }

    // No @Override on the methods below that some supported client versions lack in Producer (this class is
    // compiled against the pinned 4.x and must load and link on 3.0+): KIP-714's clientInstanceId (3.7+) and
    // KIP-1076's metric subscription (4.0+) exist on the inner client only where the caller's Producer has them.

    /** The inner client's ({@code Producer.clientInstanceId}, kafka-clients 3.7+). */
    public Uuid clientInstanceId(Duration timeout) {
        return inner.clientInstanceId(timeout);
    }

    /** The inner client's ({@code Producer.registerMetricForSubscription}, kafka-clients 4.0+). */
    public void registerMetricForSubscription(KafkaMetric metric) {
        inner.registerMetricForSubscription(metric);
    }

    /** The inner client's ({@code Producer.unregisterMetricFromSubscription}, kafka-clients 4.0+). */
    public void unregisterMetricFromSubscription(KafkaMetric metric) {
        inner.unregisterMetricFromSubscription(metric);
    }

    /** Refused at construction ({@code transactional.id}); the inner client throws. */
    @Override
    public void initTransactions() {
        inner.initTransactions();
    }

    @Override
    public void beginTransaction() throws ProducerFencedException {
        inner.beginTransaction();
    }

    @Override
    public void sendOffsetsToTransaction(Map<TopicPartition, OffsetAndMetadata> offsets,
            ConsumerGroupMetadata groupMetadata) throws ProducerFencedException {
        inner.sendOffsetsToTransaction(offsets, groupMetadata);
    }

    /**
     * The 3.x {@code Producer} method 4.0 removed, kept so that 3.x callers link against this class: the inner
     * client's {@code sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(consumerGroupId))}, which is what
     * {@code KafkaProducer} 3.x does with it. Transactions are refused at construction, so the inner client throws.
     *
     * @deprecated as in kafka-clients 3.x: use {@link #sendOffsetsToTransaction(Map, ConsumerGroupMetadata)}
     */
    @Deprecated
    @SuppressWarnings("removal") // ConsumerGroupMetadata(String), as the 3.x client itself did
    public void sendOffsetsToTransaction(Map<TopicPartition, OffsetAndMetadata> offsets, String consumerGroupId)
            throws ProducerFencedException {
        inner.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(consumerGroupId));
    }

    @Override
    public void commitTransaction() throws ProducerFencedException {
        inner.commitTransaction();
    }

    @Override
    public void abortTransaction() throws ProducerFencedException {
        inner.abortTransaction();
    }

    @Override
    public void close() {
        close(Duration.ofMillis(Long.MAX_VALUE));
    }

    /**
     * Flushes, announces what is due (the markers of the epochs in effect), marks every lease closed at its last
     * marker's epoch (consumers then stop waiting for this producer for newer epochs at once), and closes the
     * clients. If an announcement or a closed lease cannot be written, consumers wait for this producer until its
     * lease expires (logged). {@code Duration.ZERO} skips the flush and the announcements (records still in flight
     * may be lost, as with {@code KafkaProducer.close(Duration.ZERO)}); other timeouts bound the clients' close.
     */
    @Override
    public void close(Duration timeout) {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        stopping = true;
        orderingThread.interrupt();
        renewalThread.interrupt();
        handoffReader.wakeup();
        join(orderingThread);
        join(renewalThread);
        join(handoffThread);
        if (!timeout.isZero()) {
            try {
                inner.flush();
                step();
            } catch (RuntimeException e) {
                LOG.warn("DKG: ordering producer {}: announcing its last epochs failed: {}; consumers wait for it "
                        + "until its lease expires", id, e.toString());
            }
        }
        try {
            writeLeases(1);
            LOG.info("DKG: ordering producer {} closed ({} markers written)", id, markersWritten());
        } catch (RuntimeException e) {
            LOG.warn("DKG: ordering producer {}: closing its leases failed: {}; consumers wait for it until its "
                    + "lease expires", id, e.toString());
        }
        closeAll(timeout);
    }

    private void closeAll(Duration timeout) {
        closeQuietly(inner, timeout);
        closeQuietly(handoff, timeout);
        admin.close(timeout.compareTo(Duration.ofSeconds(30)) > 0 ? Duration.ofSeconds(30) : timeout);
        if (ownsRouter) {
            router.close();
        }
        ownMetrics.close();
        if (ownsKeySerializer) {
            keySerializer.close();
        }
        if (ownsValueSerializer) {
            valueSerializer.close();
        }
    }

    private static void join(Thread t) {
        try {
            t.join(MARKER_TIMEOUT_MS + IO_TIMEOUT_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static void closeQuietly(KafkaProducer<?, ?> p) {
        closeQuietly(p, Duration.ZERO);
    }

    private static void closeQuietly(KafkaProducer<?, ?> p, Duration timeout) {
        if (p != null) {
            try {
                p.close(timeout);
            } catch (RuntimeException e) {
                LOG.debug("DKG: closing a client: {}", e.toString());
            }
        }
    }

    @Override
    public String toString() {
        return String.format(Locale.ROOT, "DkgKafkaProducer{id=%s, handoff=%s, topics=%s}", id, handoffTopic,
                topics.keySet());
    }
}
