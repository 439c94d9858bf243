package dev.dkg.kafka;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads the control topic into a {@link DkgRouter}: partition 0 from the beginning to its end during startup
 * (bounded), then live in a daemon thread. A consumer without a group (manual assignment, no commits), reading
 * committed records only, with {@code fetch.max.wait.ms=100} so a publication arrives within about 100 ms. The
 * Java counterpart of the Rust {@code ControlTopicReader} ({@code partitioner/src/kafka/control.rs}).
 */
final class ControlFollower implements Runnable {
    private static final Logger LOG = LoggerFactory.getLogger(ControlFollower.class);
    private static final Duration POLL = Duration.ofMillis(500);
    /** How often a control topic that does not exist yet is looked for. */
    private static final long MISSING_TOPIC_RETRY_MS = 1000;

    /** Connection settings reused from the producer configuration (exact keys). */
    private static final List<String> CONNECTION_KEYS = List.of(
            "bootstrap.servers", "client.dns.lookup", "client.rack", "connections.max.idle.ms",
            "socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms", "reconnect.backoff.ms",
            "reconnect.backoff.max.ms", "retry.backoff.ms", "retry.backoff.max.ms", "request.timeout.ms",
            "metadata.max.age.ms", "metadata.recovery.strategy", "metadata.recovery.rebootstrap.trigger.ms");
    /** Connection settings reused from the producer configuration (prefixes). */
    private static final List<String> CONNECTION_PREFIXES = List.of("security.", "sasl.", "ssl.");
    /** Numbers the internal clients of applications that set no {@code client.id}, as Kafka numbers its own. */
    private static final AtomicInteger INTERNAL_CLIENTS = new AtomicInteger();

    private final DkgRouter router;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final String topic;
    private final TopicPartition partition;
    private final Object sleeper = new Object();
    private volatile boolean running = true;
    private boolean assigned;
    private Thread thread;

    private ControlFollower(DkgRouter router, KafkaConsumer<byte[], byte[]> consumer, String topic) {
        this.router = router;
        this.consumer = consumer;
        this.topic = topic;
        this.partition = new TopicPartition(topic, 0);
    }

    /**
     * The {@code client.id} of one of our internal clients ({@code role}: control, handoff): the
     * application's {@code client.id} with {@code -dkg-<role>}, else {@code dkg-<role>-<n>}, numbered per JVM, so
     * that clients of several producers or consumers in one JVM never share an id (their metrics and JMX app-info
     * beans would collide).
     */
    static String internalClientId(Object clientId, String role) {
        if (clientId == null || clientId.toString().isEmpty()) {
            return "dkg-" + role + "-" + INTERNAL_CLIENTS.incrementAndGet();
        }
        return clientId + "-dkg-" + role;
    }

    /** The control-topic consumer's configuration: connection settings, then our fixed ones, then dkg.consumer.*. */
    static Map<String, Object> consumerConfig(Map<String, ?> configs) {
        Map<String, Object> out = connectionSettings(configs);
        out.put(ConsumerConfig.CLIENT_ID_CONFIG,
                internalClientId(configs.get(ConsumerConfig.CLIENT_ID_CONFIG), "control"));
        out.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        out.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        out.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        out.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        out.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        out.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, false);
        out.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 100);
        // One document fits one fetch (the broker returns an oversized first batch anyway; this avoids the retry).
        out.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, Assignment.MAX_ASSIGNMENT_BYTES + 1024 * 1024);
        for (Map.Entry<String, ?> e : configs.entrySet()) {
            if (e.getKey().startsWith(DkgConfig.CONSUMER_PREFIX) && e.getValue() != null) {
                out.put(e.getKey().substring(DkgConfig.CONSUMER_PREFIX.length()), e.getValue());
            }
        }
        return out;
    }

    /** The connection settings of a client configuration (bootstrap servers, timeouts, security, SASL, SSL). */
    static Map<String, Object> connectionSettings(Map<String, ?> configs) {
        Map<String, Object> out = new HashMap<>();
        for (Map.Entry<String, ?> e : configs.entrySet()) {
            String key = e.getKey();
            if (e.getValue() != null
                    && (CONNECTION_KEYS.contains(key) || CONNECTION_PREFIXES.stream().anyMatch(key::startsWith))) {
                out.put(key, e.getValue());
            }
        }
        return out;
    }

    /** Creates the consumer, reads the control topic to its end within {@code timeoutMs}, starts the thread. */
    static ControlFollower start(DkgRouter router, Map<String, Object> consumerConfig, String topic, long timeoutMs) {
        // Log where, never the whole configuration (it holds secrets).
        LOG.info("DKG: reading control topic {} from {}", topic, consumerConfig.get("bootstrap.servers"));
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerConfig);
        ControlFollower f = new ControlFollower(router, consumer, topic);
        try {
            int read = f.catchUp(System.nanoTime() + Duration.ofMillis(timeoutMs).toNanos(), timeoutMs);
            LOG.info("DKG: read {} control records from {}; {} topics assigned", read, topic,
                    router.assignments().size());
        } catch (RuntimeException e) {
            closeQuietly(consumer);
            // Name the setting: the consumer's own message ("Timeout expired while fetching topic metadata") does not.
            throw new KafkaException("DKG: could not read control topic " + topic + " to its end within " + timeoutMs
                    + " ms (" + DkgConfig.STARTUP_TIMEOUT_MS_CONFIG + "): " + e.getMessage(), e);
        }
        Thread t = new Thread(f, "dkg-control-follower-" + topic);
        t.setDaemon(true);
        f.thread = t;
        t.start();
        return f;
    }

    /** Reads partition 0 up to its end offset as of now; returns the record count. */
    private int catchUp(long deadlineNanos, long timeoutMs) {
        List<PartitionInfo> parts = consumer.partitionsFor(topic, remaining(deadlineNanos, timeoutMs));
        if (parts == null || parts.isEmpty()) {
            LOG.warn("DKG: control topic {} does not exist yet: no assignments; following it until it does", topic);
            return 0;
        }
        assign(parts);
        long end = consumer.endOffsets(List.of(partition), remaining(deadlineNanos, timeoutMs)).get(partition);
        int read = 0;
        // The position (which also moves past transaction markers) decides, not the last record's offset.
        while (consumer.position(partition, remaining(deadlineNanos, timeoutMs)) < end) {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(remaining(deadlineNanos, timeoutMs));
            read += applyAll(records);
        }
        return read;
    }

    /**
     * Applies a batch in order; a document of another control topic generation (spec 6.4) dropped the state, so
     * the rest of the batch is skipped and the topic re-read from its beginning. Returns the records applied.
     */
    private int applyAll(ConsumerRecords<byte[], byte[]> records) {
        int applied = 0;
        for (ConsumerRecord<byte[], byte[]> r : records) {
            applied++;
            if (router.apply(r.key(), r.value()).reread()) {
                consumer.seekToBeginning(List.of(partition));
                break;
            }
        }
        return applied;
    }

    private static Duration remaining(long deadlineNanos, long timeoutMs) {
        long left = deadlineNanos - System.nanoTime();
        if (left <= 0) {
            throw new org.apache.kafka.common.errors.TimeoutException(
                    "DKG: control topic not read to its end within " + timeoutMs + " ms ("
                            + DkgConfig.STARTUP_TIMEOUT_MS_CONFIG + ")");
        }
        return Duration.ofNanos(left);
    }

    private void assign(List<PartitionInfo> parts) {
        if (parts.size() != 1) {
            LOG.warn("DKG: control topic {} has {} partitions, the protocol needs exactly 1; reading partition 0 only",
                    topic, parts.size());
        }
        consumer.assign(List.of(partition));
        consumer.seekToBeginning(List.of(partition));
        assigned = true;
    }

    @Override
    public void run() {
        long lastErrorLog = 0;
        try {
            while (running) {
                try {
                    if (!assigned) {
                        List<PartitionInfo> parts = consumer.partitionsFor(topic, Duration.ofMillis(MISSING_TOPIC_RETRY_MS));
                        if (parts != null && !parts.isEmpty()) {
                            LOG.info("DKG: control topic {} now exists; reading it", topic);
                            assign(parts);
                        } else {
                            pause(MISSING_TOPIC_RETRY_MS);
                        }
                        continue;
                    }
                    applyAll(consumer.poll(POLL));
                } catch (WakeupException e) {
                    // close() woke us: the loop condition decides.
                } catch (RuntimeException e) {
                    // The consumer retries by itself; note it at most every 10 s, back off so it cannot spin.
                    long now = System.nanoTime();
                    if (now - lastErrorLog > Duration.ofSeconds(10).toNanos() || lastErrorLog == 0) {
                        LOG.warn("DKG: control topic {} consumer error (retrying): {}", topic, e.toString());
                        lastErrorLog = now;
                    }
                    pause(100);
                }
            }
        } finally {
            closeQuietly(consumer);
        }
    }

    private void pause(long ms) {
        synchronized (sleeper) {
            if (!running) {
                return;
            }
            try {
                sleeper.wait(ms);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                running = false;
            }
        }
    }

    /** Stops the thread and waits up to 10 s for it to close the consumer. */
    void close() {
        running = false;
        synchronized (sleeper) {
            sleeper.notifyAll();
        }
        consumer.wakeup();
        Thread t = thread;
        if (t != null && t != Thread.currentThread()) {
            try {
                t.join(10_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    // close(Duration) is deprecated from 4.1 for close(CloseOptions), which a 3.x or 4.0 client does not have.
    @SuppressWarnings("deprecation")
    private static void closeQuietly(KafkaConsumer<?, ?> c) {
        try {
            c.close(Duration.ofSeconds(5));
        } catch (RuntimeException e) {
            LOG.debug("DKG: closing the control-topic consumer: {}", e.toString());
        }
    }
}
