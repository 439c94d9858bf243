package dev.dkg.kafka.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dkg.kafka.DkgMetrics;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;

/**
 * A {@code KafkaProducer} with {@code partitioner.class=dev.dkg.kafka.DkgPartitioner} follows the control topic
 * (the Java side of {@code partitioner/tests/producer_follows_control_topic.rs} and
 * {@code producer_partition_count_change.rs}): Kafka's placement before any assignment, the assignment's once
 * published (heavy keys and buckets), Kafka's again after a tombstone, and Kafka's over the new count when the
 * topic grows, until an assignment for that count arrives. Read back with a consumer, every record is where its
 * send was acknowledged and where the expectation (Kafka's {@code Utils.murmur2} and the table, and the plug-in's
 * own {@code Assignment}) says.
 */
class ProducerFollowsAssignmentIT {
    private static final int PARTITIONS = 6;
    private static final Duration ADOPTION = Duration.ofSeconds(15);

    /** Sends every key (value {@code phase-i}) and returns the acknowledged partitions. */
    private static List<Integer> sendAll(KafkaProducer<byte[], byte[]> producer, String topic, String phase,
            List<byte[]> keys) {
        List<Integer> out = new ArrayList<>();
        for (int i = 0; i < keys.size(); i++) {
            byte[] value = (phase + "-" + i).getBytes(StandardCharsets.UTF_8);
            out.add(Broker.ack(producer.send(new ProducerRecord<>(topic, keys.get(i), value)), phase + "-" + i)
                    .partition());
        }
        return out;
    }

    @Test
    void followsPublishedAssignmentFallsBackOnTombstoneAndOnGrowth() {
        String topic = Broker.newTopic("follows", PARTITIONS);
        String control = Broker.createControlTopic("follows");
        List<byte[]> keys = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
            keys.add(("key-" + i).getBytes(StandardCharsets.UTF_8));
        }
        byte[] hot = "hot-key".getBytes(StandardCharsets.UTF_8);
        keys.add(hot);
        // Pin the hot key away from where Kafka puts it, so following the document is visible.
        int hotPartition = (Broker.kafkaPartition(hot, PARTITIONS) + 1) % PARTITIONS;
        Doc doc = Doc.shuffled(topic, PARTITIONS, 1, 64, 11, List.of(new Doc.Heavy(hot, hotPartition)));

        Properties config = Broker.dkgProducerConfig(control);
        config.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, "500");
        // On 4.1+ this test runs the KIP-877 partitioner (metrics in the producer's own), the other ITs the
        // default one (its own registry, read from JMX): both paths on the pinned client, the default on 3.x.
        boolean kip877 = Plugin.hasMonitorable();
        if (kip877) {
            config.put(ProducerConfig.PARTITIONER_CLASS_CONFIG, "dev.dkg.kafka.kip877.DkgPartitioner");
        }
        Map<String, Integer> expected = new HashMap<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config);
                KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            // 1. No assignment: Kafka's placement.
            List<Integer> before = sendAll(producer, topic, "before", keys);
            for (int i = 0; i < keys.size(); i++) {
                assertEquals(Broker.kafkaPartition(keys.get(i), PARTITIONS), before.get(i), "before-" + i);
                expected.put("before-" + i, before.get(i));
            }
            assertEquals(0, Plugin.epoch(producer, topic), "no assignment yet");
            assertEquals(kip877, Broker.metric(producer.metrics(), DkgMetrics.EPOCH, "topic", topic) != null,
                    "the plug-in's metrics are in the producer's own metrics exactly with the KIP-877 partitioner");

            // 2. The assignment: heavy key pinned, every other key by its bucket.
            Broker.publish(publisher, control, doc);
            Plugin.awaitEpoch(producer, topic, 1, ADOPTION);
            List<Integer> during = sendAll(producer, topic, "during", keys);
            int differs = 0;
            for (int i = 0; i < keys.size(); i++) {
                byte[] key = keys.get(i);
                assertEquals(doc.expectedPartition(key), during.get(i), "during-" + i + " (Utils.murmur2 + table)");
                assertEquals(Plugin.lookup(doc, key), during.get(i), "during-" + i + " (the plug-in's Assignment)");
                differs += during.get(i).equals(before.get(i)) ? 0 : 1;
                expected.put("during-" + i, during.get(i));
            }
            assertEquals(hotPartition, during.get(keys.size() - 1), "the heavy key");
            assertEquals(keys.size(), Plugin.records(Plugin.metrics(producer), topic, "fallback"), "fallback before");
            // Recording level INFO (the client's default): heavy and bucket records count as one route.
            assertEquals(keys.size(), Plugin.records(Plugin.metrics(producer), topic, "assigned"), "assigned route");
            // A shuffled table moves about 5/6 of the keys; far fewer would mean the table was not used.
            assertTrue(differs > keys.size() / 2, differs + " of " + keys.size() + " keys moved");

            // 3. A tombstone: Kafka's placement again.
            Broker.retract(publisher, control, topic);
            Plugin.awaitEpoch(producer, topic, 0, ADOPTION);
            List<Integer> after = sendAll(producer, topic, "after", keys);
            assertEquals(before, after, "after the tombstone");
            for (int i = 0; i < keys.size(); i++) {
                expected.put("after-" + i, after.get(i));
            }

            // 4. An assignment, then the topic grows: the document for 6 partitions is no longer used.
            Broker.publish(publisher, control, doc.withEpoch(2));
            Plugin.awaitEpoch(producer, topic, 2, ADOPTION);
            int grown = 9;
            Broker.growTopic(topic, grown);
            Broker.waitUntil("the producer to see " + grown + " partitions", Duration.ofSeconds(20),
                    () -> producer.partitionsFor(topic).size() == grown);
            List<Integer> fallback = sendAll(producer, topic, "grown", keys);
            for (int i = 0; i < keys.size(); i++) {
                assertEquals(Broker.kafkaPartition(keys.get(i), grown), fallback.get(i), "grown-" + i);
                expected.put("grown-" + i, fallback.get(i));
            }
            assertTrue(fallback.stream().anyMatch(p -> p >= PARTITIONS), "the new partitions are used");

            // 5. An assignment for the new count takes over.
            Doc nine = Doc.shuffled(topic, grown, 3, 64, 12, List.of(new Doc.Heavy(hot, 8)));
            Broker.publish(publisher, control, nine);
            Plugin.awaitEpoch(producer, topic, 3, ADOPTION);
            List<Integer> matched = sendAll(producer, topic, "nine", keys);
            for (int i = 0; i < keys.size(); i++) {
                assertEquals(nine.expectedPartition(keys.get(i)), matched.get(i), "nine-" + i);
                expected.put("nine-" + i, matched.get(i));
            }
            assertEquals(8, matched.get(keys.size() - 1));
        }

        // The log holds what the acknowledgements said, each record once.
        Map<String, Integer> seen = new HashMap<>();
        long read = Broker.consumeAll(topic, expected.size(), Duration.ofSeconds(60), r -> {
            String value = new String(r.value(), StandardCharsets.UTF_8);
            assertNull(seen.put(value, r.partition()), value + " read twice");
        });
        assertEquals(expected.size(), read);
        assertEquals(expected, seen);
    }
}
