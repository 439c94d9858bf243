package dev.dkg.kafka.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.dkg.kafka.DkgConfig;
import dev.dkg.kafka.DkgKafkaProducer;
import dev.dkg.kafka.DkgPartitioner;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeTopicsResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.Utils;

/**
 * The real broker for the integration tests: reachability check, unique topics, control-topic publication,
 * reading a topic back, the plug-in's metrics. The Java counterpart of {@code partitioner/tests/common/broker.rs}
 * and {@code producer.rs}: tests run against the single broker of {@code scripts/kafka start} (or
 * {@code DKG_TEST_BOOTSTRAP}) and FAIL, never skip, when it does not answer.
 */
public final class Broker {
    /** Broker address when {@code DKG_TEST_BOOTSTRAP} is not set: the default of {@code scripts/kafka}. */
    public static final String DEFAULT_BOOTSTRAP = "127.0.0.1:9092";

    /** How long {@link #bootstrap()} waits for the broker to answer. */
    public static final Duration BROKER_CHECK_TIMEOUT = Duration.ofSeconds(10);

    /** Largest control-topic record the tests publish (the plug-in's document limit is 8 MiB). */
    public static final int CONTROL_MAX_MESSAGE_BYTES = 9 * 1024 * 1024;

    private static final AtomicLong SEQ = new AtomicLong();
    private static volatile String checked;

    private Broker() {}

    /**
     * The bootstrap address of the test broker ({@code DKG_TEST_BOOTSTRAP}, default {@value #DEFAULT_BOOTSTRAP}).
     * Fails the calling test when no broker answers within {@link #BROKER_CHECK_TIMEOUT}; checked once per JVM.
     */
    public static synchronized String bootstrap() {
        if (checked != null) {
            return checked;
        }
        String env = System.getenv("DKG_TEST_BOOTSTRAP");
        String addr = env == null || env.isBlank() ? DEFAULT_BOOTSTRAP : env.trim();
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, addr);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) BROKER_CHECK_TIMEOUT.toMillis());
        try (Admin admin = Admin.create(p)) {
            int brokers = admin.describeCluster().nodes().get(BROKER_CHECK_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)
                    .size();
            assertTrue(brokers > 0, "metadata of " + addr + " lists no broker");
        } catch (InterruptedException | ExecutionException | TimeoutException e) {
            fail("no Kafka broker answered at " + addr + " within " + BROKER_CHECK_TIMEOUT + " (" + e
                    + "). These tests need the real broker: start it with scripts/kafka start (or run them with "
                    + "scripts/test), or point DKG_TEST_BOOTSTRAP at one.");
        }
        checked = addr;
        return addr;
    }

    /** A topic name no other test or run uses: {@code dkg-it-<name>-<nanotime>-<n>}. */
    public static String uniqueTopic(String name) {
        return "dkg-it-" + name + "-" + System.nanoTime() + "-" + SEQ.incrementAndGet();
    }

    /** An Admin client for the test broker (close it). */
    public static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        return Admin.create(p);
    }

    /** Creates {@code name} (replication 1, the given configs) and waits until every partition has a leader. */
    public static void createTopic(String name, int partitions, Map<String, String> configs) {
        try (Admin admin = admin()) {
            admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1).configs(configs))).all()
                    .get(30, TimeUnit.SECONDS);
            waitForPartitions(admin, name, partitions);
        } catch (InterruptedException | ExecutionException | TimeoutException e) {
            throw new AssertionError("CreateTopics " + name + " failed", e);
        }
    }

    /** Creates a data topic with {@code partitions} partitions. */
    public static void createTopic(String name, int partitions) {
        createTopic(name, partitions, Map.of());
    }

    /** Creates a data topic of {@code partitions} partitions named after {@code name}; returns its unique name. */
    public static String newTopic(String name, int partitions) {
        String topic = uniqueTopic(name);
        createTopic(topic, partitions);
        return topic;
    }

    /** Creates a control topic as the protocol wants it: 1 partition, compacted, room for large documents. */
    public static String createControlTopic(String name) {
        String topic = uniqueTopic(name + "-control");
        createTopic(topic, 1, Map.of("cleanup.policy", "compact", "max.message.bytes",
                Integer.toString(CONTROL_MAX_MESSAGE_BYTES)));
        return topic;
    }

    /** Grows {@code topic} to {@code partitions} partitions and waits for their leaders. */
    public static void growTopic(String topic, int partitions) {
        try (Admin admin = admin()) {
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(partitions))).all().get(30,
                    TimeUnit.SECONDS);
            waitForPartitions(admin, topic, partitions);
        } catch (InterruptedException | ExecutionException | TimeoutException e) {
            throw new AssertionError("CreatePartitions " + topic + " -> " + partitions + " failed", e);
        }
    }

    /**
     * {@code describeTopics(topic)} by name: {@code allTopicNames()} (kafka-clients 3.1+), else {@code all()} (3.0;
     * removed in 4.0), so that the tests run on every client of the range.
     */
    @SuppressWarnings("unchecked")
    static KafkaFuture<Map<String, TopicDescription>> describe(Admin admin, String topic) {
        DescribeTopicsResult r = admin.describeTopics(List.of(topic));
        for (String method : new String[] {"allTopicNames", "all"}) {
            try {
                return (KafkaFuture<Map<String, TopicDescription>>) DescribeTopicsResult.class.getMethod(method)
                        .invoke(r);
            } catch (NoSuchMethodException e) {
                // The other one.
            } catch (ReflectiveOperationException e) {
                throw new AssertionError(e);
            }
        }
        throw new AssertionError("DescribeTopicsResult has neither allTopicNames() nor all()");
    }

    private static void waitForPartitions(Admin admin, String topic, int partitions) {
        waitUntil("topic " + topic + " to have " + partitions + " partitions with leaders", Duration.ofSeconds(30),
                () -> {
                    try {
                        TopicDescription d = describe(admin, topic).get(5,
                                TimeUnit.SECONDS).get(topic);
                        return d.partitions().size() == partitions
                                && d.partitions().stream().allMatch(p -> p.leader() != null);
                    } catch (InterruptedException | ExecutionException | TimeoutException e) {
                        return false;
                    }
                });
    }

    /** Polls {@code cond} every 5 ms until it holds; fails with {@code what} after {@code timeout}. */
    public static Duration waitUntil(String what, Duration timeout, BooleanSupplier cond) {
        long start = System.nanoTime();
        while (!cond.getAsBoolean()) {
            Duration waited = Duration.ofNanos(System.nanoTime() - start);
            if (waited.compareTo(timeout) > 0) {
                fail("timed out after " + timeout + " waiting for " + what);
            }
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted waiting for " + what, e);
            }
        }
        return Duration.ofNanos(System.nanoTime() - start);
    }

    /** Producer settings with the plug-in: byte-array serializers, {@code partitioner.class} and the control topic. */
    public static Properties dkgProducerConfig(String controlTopic) {
        Properties p = plainProducerConfig();
        p.put(ProducerConfig.PARTITIONER_CLASS_CONFIG, DkgPartitioner.class.getName());
        p.put("dkg.control.topic", controlTopic);
        p.put("dkg.startup.timeout.ms", "10000");
        return p;
    }

    /**
     * Settings of an ordering producer ({@link DkgKafkaProducer}, byte-array serializers given to its constructor)
     * writing {@code topic}: following {@code controlTopic}, its leases and markers on {@code handoffTopic}.
     */
    public static Map<String, Object> orderingProducerConfig(String controlTopic, String handoffTopic, String topic) {
        Map<String, Object> config = new HashMap<>();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        config.put(DkgConfig.CONTROL_TOPIC_CONFIG, controlTopic);
        config.put(DkgConfig.HANDOFF_TOPIC_CONFIG, handoffTopic);
        config.put(DkgConfig.TOPICS_CONFIG, topic);
        config.put(DkgConfig.STARTUP_TIMEOUT_MS_CONFIG, "10000");
        return config;
    }

    /** An ordering producer of byte-array keys and values with {@code config} (close it). */
    public static DkgKafkaProducer<byte[], byte[]> orderingProducer(Map<String, Object> config) {
        return new DkgKafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer());
    }

    /** Producer settings without the plug-in (the client's own placement). */
    /**
     * Starts a thread that sends through {@code p} to {@code topic} until {@code producing} turns false: keys
     * {@code key-0 .. key-(keys-1)} in turn, each record's value {@code p<id>/key-<k>:<seq>} numbered per key, 20
     * records then a 20 ms pause; the value of every acknowledged record goes into {@code acked}.
     */
    public static Thread numberedSender(DkgKafkaProducer<byte[], byte[]> p, int id, String topic, int keys,
            java.util.concurrent.atomic.AtomicBoolean producing, java.util.Set<String> acked, String threadName) {
        Thread t = new Thread(() -> {
            long[] seq = new long[keys];
            int i = 0;
            while (producing.get()) {
                int k = i++ % keys;
                String stream = "p" + id + "/key-" + k;
                long s = seq[k]++;
                byte[] key = ("key-" + k).getBytes(java.nio.charset.StandardCharsets.UTF_8);
                byte[] value = (stream + ":" + s).getBytes(java.nio.charset.StandardCharsets.UTF_8);
                p.send(new org.apache.kafka.clients.producer.ProducerRecord<>(topic, key, value), (md, e) -> {
                    if (e == null) {
                        acked.add(stream + ":" + s);
                    }
                });
                if (i % 20 == 0) {
                    try {
                        Thread.sleep(20);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }
        }, threadName);
        t.start();
        return t;
    }

    public static Properties plainProducerConfig() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return p;
    }

    /** A producer for raw control-topic records (large values allowed). */
    public static KafkaProducer<byte[], byte[]> publisher() {
        Properties p = plainProducerConfig();
        p.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, Integer.toString(CONTROL_MAX_MESSAGE_BYTES));
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        return new KafkaProducer<>(p);
    }

    /** Publishes raw {@code value} (null = tombstone) under {@code key} on the control topic, waiting for the ack. */
    public static void publishRaw(KafkaProducer<byte[], byte[]> publisher, String controlTopic, byte[] key,
            byte[] value) {
        ack(publisher.send(new ProducerRecord<>(controlTopic, 0, key, value)), "control record to " + controlTopic);
    }

    /**
     * Writes, as a {@code DkgConsumer} group would after committing, that {@code group} drained {@code drained} on
     * every partition of {@code topic} ({@code progress/<group>/<topic>/<partition>} on the handoff topic, spec
     * 9.1): what ordering producers read to close their stamp windows.
     */
    public static void announceProgress(KafkaProducer<byte[], byte[]> publisher, String handoff, String group,
            String topic, int partitions, long drained) {
        for (int p = 0; p < partitions; p++) {
            String key = "progress/" + group + "/" + topic + "/" + p;
            String value = "{\"group\":\"" + group + "\",\"topic\":\"" + topic + "\",\"partition\":" + p
                    + ",\"drained\":" + drained + ",\"passed\":{},\"committed_offset\":0,\"updated_at_ms\":0}";
            publishRaw(publisher, handoff, Utils.utf8(key), Utils.utf8(value));
        }
    }

    /** Waits (at most 30 s) for a send's acknowledgement; fails the test naming {@code what} if it fails. */
    public static RecordMetadata ack(Future<RecordMetadata> send, String what) {
        try {
            return send.get(30, TimeUnit.SECONDS);
        } catch (InterruptedException | ExecutionException | TimeoutException e) {
            throw new AssertionError("send of " + what + " failed", e);
        }
    }

    /** Publishes an assignment document for its topic (key = the topic name). */
    public static void publish(KafkaProducer<byte[], byte[]> publisher, String controlTopic, Doc doc) {
        publishRaw(publisher, controlTopic, Utils.utf8(doc.topic()), Utils.utf8(doc.json()));
    }

    /** Retracts {@code topic}'s assignment (tombstone). */
    public static void retract(KafkaProducer<byte[], byte[]> publisher, String controlTopic, String topic) {
        publishRaw(publisher, controlTopic, Utils.utf8(topic), null);
    }

    /** Kafka's own keyed placement: {@code toPositive(murmur2(key)) % n}. */
    public static int kafkaPartition(byte[] key, int partitions) {
        return Utils.toPositive(Utils.murmur2(key)) % partitions;
    }

    /**
     * Reads every partition of {@code topic} from the beginning until {@code expected} records were seen, calling
     * {@code sink} per record, then on to the end of the log, so records past {@code expected} (duplicates) are
     * passed and counted too; fails after {@code timeout}. Returns the number read.
     */
    public static long consumeAll(String topic, long expected, Duration timeout,
            Consumer<ConsumerRecord<byte[], byte[]>> sink) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "20000");
        p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, Integer.toString(8 * 1024 * 1024));
        p.put(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, Integer.toString(64 * 1024 * 1024));
        long read = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = consumer.partitionsFor(topic, Duration.ofSeconds(10)).stream()
                    .map(i -> new TopicPartition(topic, i.partition())).collect(Collectors.toList());
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.nanoTime() + timeout.toNanos();
            while (read < expected) {
                if (System.nanoTime() > deadline) {
                    fail("read " + read + " of " + expected + " records of " + topic + " within " + timeout);
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    sink.accept(r);
                    read++;
                }
            }
            // Whatever is still in the log past `expected` is read too, so extra (duplicate) records are counted.
            Map<TopicPartition, Long> end = consumer.endOffsets(tps);
            while (tps.stream().anyMatch(tp -> consumer.position(tp) < end.get(tp))) {
                if (System.nanoTime() > deadline) {
                    fail("could not read " + topic + " to its end within " + timeout);
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    sink.accept(r);
                    read++;
                }
            }
        }
        return read;
    }

    /** The end offset of every partition of {@code topic}, by partition number. */
    public static long[] endOffsets(String topic) {
        try (Admin admin = admin()) {
            int n = describe(admin, topic).get(10, TimeUnit.SECONDS).get(topic)
                    .partitions().size();
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (int i = 0; i < n; i++) {
                latest.put(new TopicPartition(topic, i), OffsetSpec.latest());
            }
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> end = admin.listOffsets(latest).all()
                    .get(10, TimeUnit.SECONDS);
            return IntStream.range(0, n).mapToLong(i -> end.get(new TopicPartition(topic, i)).offset()).toArray();
        } catch (InterruptedException | ExecutionException | TimeoutException e) {
            throw new AssertionError("ListOffsets " + topic + " failed", e);
        }
    }

    /** {@code max/mean - 1} of the per-partition counts {@code after - before}. */
    public static double imbalance(long[] before, long[] after) {
        assertEquals(before.length, after.length, "partition counts differ");
        double max = 0;
        double sum = 0;
        for (int i = 0; i < after.length; i++) {
            long n = after[i] - before[i];
            max = Math.max(max, n);
            sum += n;
        }
        assertTrue(sum > 0, "no records between the two offset snapshots");
        return max / (sum / after.length) - 1;
    }

    /**
     * The value of the metric named {@code name} whose tags include all of {@code tags} (alternating keys and values),
     * among {@code metrics} (e.g. {@code producer.metrics()}); null when there is none. Fails when several match.
     */
    public static Double metric(Map<MetricName, ? extends Metric> metrics, String name, String... tags) {
        Map<String, String> want = new HashMap<>();
        for (int i = 0; i + 1 < tags.length; i += 2) {
            want.put(tags[i], tags[i + 1]);
        }
        List<Metric> found = new ArrayList<>();
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            if (e.getKey().name().equals(name) && e.getKey().tags().entrySet().containsAll(want.entrySet())) {
                found.add(e.getValue());
            }
        }
        assertTrue(found.size() <= 1, () -> found.size() + " metrics named " + name + " with tags " + want);
        return found.isEmpty() ? null : ((Number) found.get(0).metricValue()).doubleValue();
    }
}
