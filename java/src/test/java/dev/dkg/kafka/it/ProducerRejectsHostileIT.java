package dev.dkg.kafka.it;

import static org.apache.kafka.common.utils.Utils.utf8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dkg.kafka.Assignment;
import dev.dkg.kafka.DkgMetrics;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.junit.jupiter.api.Test;

/**
 * Hostile control-topic records (garbage, a document for another topic under this topic's key, a stale epoch, a
 * conflicting one, version 3, an out-of-range partition, a key that is no topic name, an oversize value) are all
 * rejected and counted by reason in the producer's metrics while it keeps producing, and the last good assignment
 * stays in force (the Java side of {@code partitioner/tests/producer_rejects_hostile_assignments.rs}).
 */
class ProducerRejectsHostileIT {
    private static final int PARTITIONS = 4;

    private record Hostile(byte[] key, byte[] value, String reason) {}

    @Test
    void rejectsHostileDocumentsAndKeepsTheLastGoodOne() throws Exception {
        String topic = Broker.newTopic("hostile", PARTITIONS);
        String otherTopic = Broker.uniqueTopic("hostile-other");
        String control = Broker.createControlTopic("hostile");
        byte[] hot = utf8("hot");
        // The last good assignment: the hot key on 1, every other key on 3, epoch 5.
        Doc good = Doc.constant(topic, PARTITIONS, 5, 3, List.of(new Doc.Heavy(hot, 1)));
        String goodJson = good.json();
        String version3 = goodJson.replace("\"version\":1", "\"version\":3");
        assertNotEquals(goodJson, version3);
        String outOfRange = goodJson.replace("\"table\":[3,", "\"table\":[17,");
        assertNotEquals(goodJson, outOfRange);
        byte[] key = utf8(topic);
        byte[] oversize = new byte[Assignment.MAX_ASSIGNMENT_BYTES + 1];
        Arrays.fill(oversize, (byte) ' ');
        List<Hostile> hostile = List.of(
                new Hostile(key, utf8("{\"format\":\"dkg.assignment\","), "malformed_json"),
                new Hostile(key, new byte[] {(byte) 0xff, (byte) 0xfe, 'x'}, "malformed_json"),
                new Hostile(key, utf8(version3), "unsupported_version"),
                new Hostile(key, utf8(outOfRange), "out_of_range"),
                new Hostile(key, good.withEpoch(4).bytes(), "stale_epoch"),
                new Hostile(key, Doc.constant(topic, PARTITIONS, 5, 0, List.of()).bytes(), "epoch_conflict"),
                new Hostile(key, good.withTopic(otherTopic).withEpoch(9).bytes(), "topic_mismatch"),
                new Hostile(new byte[] {(byte) 0xff, (byte) 0xfe}, good.withEpoch(6).bytes(), "bad_key"),
                new Hostile(key, oversize, "oversize"));
        Map<String, Long> wanted = new LinkedHashMap<>();
        for (Hostile h : hostile) {
            wanted.merge(h.reason(), 1L, Long::sum);
        }

        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(Broker.dkgProducerConfig(control));
                KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            Broker.publish(publisher, control, good);
            Plugin.awaitEpoch(producer, topic, 5, Duration.ofSeconds(15));

            // Produce all along while the hostile records arrive.
            AtomicBoolean stop = new AtomicBoolean();
            CompletableFuture<List<Integer>> sending = CompletableFuture.supplyAsync(() -> {
                List<Future<RecordMetadata>> acks = new ArrayList<>();
                for (int i = 0; !stop.get() || i < 100; i++) {
                    acks.add(producer.send(new ProducerRecord<>(topic, utf8("k" + (i % 50)), utf8("v" + i))));
                    if (i % 20 == 0) {
                        sleep(2);
                    }
                }
                List<Integer> partitions = new ArrayList<>();
                for (Future<RecordMetadata> ack : acks) {
                    partitions.add(get(ack).partition());
                }
                return partitions;
            });
            for (Hostile h : hostile) {
                Broker.publishRaw(publisher, control, h.key(), h.value());
            }
            Broker.waitUntil("every hostile record to be rejected", Duration.ofSeconds(20),
                    () -> wanted.entrySet().stream()
                            .allMatch(e -> Plugin.rejected(Plugin.metrics(producer), e.getKey()) >= e.getValue()));
            stop.set(true);
            List<Integer> during = sending.get(60, TimeUnit.SECONDS);
            assertTrue(during.stream().allMatch(p -> p == 3), "records sent meanwhile follow epoch 5: " + during);

            for (Map.Entry<String, Long> e : wanted.entrySet()) {
                assertEquals(e.getValue(), Plugin.rejected(Plugin.metrics(producer), e.getKey()), e.getKey());
            }
            assertEquals(0, Plugin.rejected(Plugin.metrics(producer), "invalid"));
            // By topic (issue 31): the record's topic for this producer's, "(other)" for a key naming none.
            assertEquals(1, Plugin.rejected(Plugin.metrics(producer), DkgMetrics.OTHER_TOPIC, "bad_key"));
            assertEquals(0, Plugin.rejected(Plugin.metrics(producer), topic, "bad_key"));
            assertEquals(wanted.get("oversize"), Plugin.rejected(Plugin.metrics(producer), topic, "oversize"));
            // The last good assignment is still in force, and no other topic was hijacked.
            assertEquals(5, Plugin.epoch(producer, topic));
            assertEquals(0, Plugin.epoch(producer, otherTopic));
            assertEquals(1, get(producer.send(new ProducerRecord<>(topic, hot, utf8("hot")))).partition());
            assertEquals(3, get(producer.send(new ProducerRecord<>(topic, utf8("cold"), utf8("cold")))).partition());

            // The reader is alive: a valid newer epoch is still adopted.
            Broker.publish(publisher, control, Doc.constant(topic, PARTITIONS, 6, 2, List.of()));
            Plugin.awaitEpoch(producer, topic, 6, Duration.ofSeconds(15));
            assertEquals(2, get(producer.send(new ProducerRecord<>(topic, hot, utf8("hot6")))).partition());
        }

        // A producer started now reads the same history to the same result, rejecting the same records.
        try (KafkaProducer<byte[], byte[]> late = new KafkaProducer<>(Broker.dkgProducerConfig(control))) {
            assertEquals(2, get(late.send(new ProducerRecord<>(topic, hot, utf8("late")))).partition());
            assertEquals(6, Plugin.epoch(late, topic));
            assertEquals(0, Plugin.epoch(late, otherTopic));
            for (Map.Entry<String, Long> e : wanted.entrySet()) {
                assertEquals(e.getValue(), Plugin.rejected(Plugin.metrics(late), e.getKey()), "late producer: " + e.getKey());
            }
        }
    }

    private static RecordMetadata get(Future<RecordMetadata> ack) {
        return Broker.ack(ack, "a record of the data topic");
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }
}
