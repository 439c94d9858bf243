package dev.dkg.kafka.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dkg.kafka.DkgConfig;
import dev.dkg.kafka.DkgKafkaConsumer;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Kafka's auto-commit on a {@link DkgKafkaConsumer} its constructor created: the inner client's is off (it would
 * commit past held records), and the consumer commits what is safe every {@code auto.commit.interval.ms} from
 * {@code poll} instead, unless the application set {@code enable.auto.commit=false}. An application that never
 * commits then loses no more on a crash than with a plain {@code KafkaConsumer}.
 */
class ConsumerAutoCommitIT {
    private static final int PARTITIONS = 3;
    private static final int RECORDS = 300;

    @ParameterizedTest(name = "enable.auto.commit={0}")
    @CsvSource({"default", "true", "false"})
    void pollCommitsWhatIsSafeAtTheAutoCommitIntervalUnlessAutoCommitIsOff(String autoCommit) throws Exception {
        String topic = Broker.newTopic("auto-commit", PARTITIONS);
        String control = Broker.createControlTopic("auto-commit");
        String handoff = Broker.createControlTopic("auto-commit-handoff");
        String group = Broker.uniqueTopic("g-auto-commit");
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(Broker.plainProducerConfig())) {
            for (int i = 0; i < RECORDS; i++) {
                p.send(new ProducerRecord<>(topic, i % PARTITIONS, ("k" + i).getBytes(), new byte[10]));
            }
            p.flush();
        }
        Map<String, Object> c = new HashMap<>();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, Broker.bootstrap());
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, 200);
        if (!autoCommit.equals("default")) {
            c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, autoCommit);
        }
        c.put(DkgConfig.CONTROL_TOPIC_CONFIG, control);
        c.put(DkgConfig.HANDOFF_TOPIC_CONFIG, handoff);
        Set<TopicPartition> tps = IntStream.range(0, PARTITIONS).mapToObj(i -> new TopicPartition(topic, i))
                .collect(Collectors.toSet());
        Map<Integer, Long> committed = new TreeMap<>();
        long seen = 0;
        try (DkgKafkaConsumer<byte[], byte[]> consumer = new DkgKafkaConsumer<>(c, new ByteArrayDeserializer(),
                new ByteArrayDeserializer());
                Admin admin = Broker.admin()) {
            consumer.subscribe(List.of(topic));
            // Poll (never commit) until every record came and more than two intervals passed since, then read the
            // group's offsets while the member is still in it.
            long quietSince = 0;
            while (quietSince == 0 || System.nanoTime() - quietSince < 1_000_000_000L) {
                seen += consumer.poll(Duration.ofMillis(100)).count();
                if (seen >= RECORDS && quietSince == 0) {
                    quietSince = System.nanoTime();
                }
                assertTrue(seen <= RECORDS, "records seen twice: " + seen);
            }
            Map<TopicPartition, OffsetAndMetadata> offsets =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            for (TopicPartition tp : tps) {
                OffsetAndMetadata o = offsets.get(tp);
                committed.put(tp.partition(), o == null ? -1 : o.offset());
            }
        }
        System.out.printf("ConsumerAutoCommitIT enable.auto.commit=%s: committed offsets %s%n", autoCommit, committed);
        assertEquals(RECORDS, seen, "every record");
        Map<Integer, Long> all = new TreeMap<>();
        for (int i = 0; i < PARTITIONS; i++) {
            all.put(i, (long) (RECORDS / PARTITIONS));
        }
        if (autoCommit.equals("false")) {
            // Nothing asked to commit, and no epoch drained (the protocol's own commits, C7): nothing committed.
            Map<Integer, Long> none = new TreeMap<>();
            for (int i = 0; i < PARTITIONS; i++) {
                none.put(i, -1L);
            }
            assertEquals(none, committed, "offsets committed with enable.auto.commit=false");
        } else {
            assertEquals(all, committed, "every processed record committed by the periodic commit");
        }
    }
}
