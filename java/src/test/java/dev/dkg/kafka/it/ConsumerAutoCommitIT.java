package dev.dkg.kafka.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dkg.kafka.DkgConfig;
import dev.dkg.kafka.DkgKafkaConsumer;
import dev.dkg.kafka.DkgKafkaProducer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.Test;
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

    /**
     * The periodic commit never covers a record the application has not been handed: a moved key's records on its
     * new partition are held while its old partition is paused, then released by a poll after the old partition's
     * records were handed out. After every poll, with a commit due at each (interval 0), the group's committed offset
     * of each partition lies at or below the lowest offset that poll returned of it (those are unprocessed).
     */
    @Test
    void thePeriodicCommitNeverCoversRecordsThePollReleasesToTheApplication() throws Exception {
        String topic = Broker.newTopic("auto-commit-held", 2);
        String control = Broker.createControlTopic("auto-commit-held");
        String handoff = Broker.createControlTopic("auto-commit-held-handoff");
        String group = Broker.uniqueTopic("g-auto-commit-held");
        byte[] hot = "hot".getBytes(StandardCharsets.UTF_8);
        int perEpoch = 100;
        TopicPartition oldHome = new TopicPartition(topic, 0);
        TopicPartition newHome = new TopicPartition(topic, 1);
        try (KafkaProducer<byte[], byte[]> publisher = Broker.publisher();
                DkgKafkaProducer<byte[], byte[]> p = Broker.orderingProducer(
                        Broker.orderingProducerConfig(control, handoff, topic))) {
            // The group has drained epoch 1 and not 2: the producer stamps the moved key's records of epoch 2
            // until the group settles it (a producer that sees no group stops stamping at once).
            Broker.announceProgress(publisher, handoff, group, topic, 2, 1);
            for (int epoch = 1; epoch <= 2; epoch++) {
                // Epoch 1: the key on partition 0; epoch 2 moves it to 1 (and its records there are stamped).
                Broker.publish(publisher, control, new Doc(topic, 2, epoch, new int[] {0, 1},
                        List.of(new Doc.Heavy(hot, epoch - 1))));
                Plugin.awaitEpoch(p, topic, epoch, Duration.ofSeconds(15));
                for (int i = 0; i < perEpoch; i++) {
                    Broker.ack(p.send(new ProducerRecord<>(topic, hot, ("e" + epoch + ":" + i).getBytes())), "send");
                }
            }
        }
        Map<String, Object> c = new HashMap<>();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, Broker.bootstrap());
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, 0);
        c.put(DkgConfig.CONTROL_TOPIC_CONFIG, control);
        c.put(DkgConfig.HANDOFF_TOPIC_CONFIG, handoff);
        try (DkgKafkaConsumer<byte[], byte[]> consumer = new DkgKafkaConsumer<>(c, new ByteArrayDeserializer(),
                new ByteArrayDeserializer())) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    // The old home lags: nothing of it is fetched until the test resumes it.
                    if (partitions.contains(oldHome)) {
                        consumer.pause(List.of(oldHome));
                    }
                }

                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}
            });
            Broker.waitUntil("the new home's records held", Duration.ofSeconds(30), () -> {
                assertEquals(0, consumer.poll(Duration.ofMillis(100)).count(), "records before the old home's");
                return consumer.heldRecords() == perEpoch;
            });
            consumer.resume(List.of(oldHome));
            int[] seen = new int[2];
            int releasedPolls = 0;
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (seen[0] + seen[1] < 2 * perEpoch) {
                assertTrue(System.nanoTime() < deadline, "records seen by partition: " + seen[0] + ", " + seen[1]);
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(100));
                Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(Set.of(oldHome, newHome));
                for (TopicPartition tp : batch.partitions()) {
                    List<ConsumerRecord<byte[], byte[]>> recs = batch.records(tp);
                    long lowest = recs.stream().mapToLong(ConsumerRecord::offset).min().getAsLong();
                    OffsetAndMetadata o = committed.get(tp);
                    assertTrue(o == null || o.offset() <= lowest, tp + ": committed " + o + " while the poll handed"
                            + " out offsets from " + lowest);
                    seen[tp.partition()] += recs.size();
                    if (tp.equals(newHome)) {
                        releasedPolls++;
                    }
                }
            }
            assertEquals(perEpoch, seen[0], "the old home's records");
            assertEquals(perEpoch, seen[1], "the new home's records, released");
            assertTrue(releasedPolls > 0, "polls that handed out released records");
        }
    }
}
