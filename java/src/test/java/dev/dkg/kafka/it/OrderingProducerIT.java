package dev.dkg.kafka.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dkg.kafka.Assignment;
import dev.dkg.kafka.DkgConfig;
import dev.dkg.kafka.DkgKafkaProducer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

/**
 * {@link DkgKafkaProducer} on the broker, by itself (its life under {@code DkgConsumer} groups, beside Rust
 * producers, is {@code partitioner/tests/consumer_java_producer.rs}): the lease of a declared topic at the epoch in
 * effect, stamps inside the stamp window and none after it, an epoch switch announced by the history record and a
 * marker whose ends are one past the last offset of the older epoch's records in each partition, stamps again after
 * the switch, and the lease marked closed at the last marker's epoch by {@code close()}.
 */
class OrderingProducerIT {
    private static final int PARTITIONS = 6;
    private static final long WINDOW_MS = 1_500;

    private static String utf8(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    /** Sends 60 keys with values {@code phase-i}; returns the acknowledgements. */
    private static List<RecordMetadata> sendAll(DkgKafkaProducer<byte[], byte[]> p, String topic, String phase) {
        List<RecordMetadata> out = new ArrayList<>();
        for (int i = 0; i < 60; i++) {
            byte[] key = ("key-" + i).getBytes(StandardCharsets.UTF_8);
            out.add(Broker.ack(p.send(new ProducerRecord<>(topic, key, (phase + "-" + i).getBytes(
                    StandardCharsets.UTF_8))), phase + "-" + i));
        }
        return out;
    }

    @Test
    void stampsInsideTheWindowAnnouncesTheSwitchWithAMarkerAndClosesItsLease() {
        String topic = Broker.uniqueTopic("ordering");
        Broker.createTopic(topic, PARTITIONS);
        String control = Broker.createControlTopic("ordering");
        String handoff = Broker.uniqueTopic("ordering-handoff");
        try (KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            Broker.publish(publisher, control, Doc.shuffled(topic, PARTITIONS, 1, 64, 11, List.of()));
            Map<String, Object> config = new HashMap<>();
            config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, Broker.bootstrap());
            config.put(DkgConfig.CONTROL_TOPIC_CONFIG, control);
            config.put(DkgConfig.HANDOFF_TOPIC_CONFIG, handoff);
            config.put(DkgConfig.TOPICS_CONFIG, topic);
            config.put(DkgConfig.STAMP_WINDOW_MS_CONFIG, Long.toString(WINDOW_MS));
            config.put(DkgConfig.STARTUP_TIMEOUT_MS_CONFIG, "10000");
            String id;
            List<RecordMetadata> older = new ArrayList<>();
            try (DkgKafkaProducer<byte[], byte[]> p = new DkgKafkaProducer<>(config, new ByteArraySerializer(),
                    new ByteArraySerializer())) {
                id = p.producerId();
                assertEquals(1, p.router().assignment(topic).epoch(), "epoch 1 read at construction");
                older.addAll(sendAll(p, topic, "open"));
                Broker.waitUntil("the stamp window of epoch 1 to close", Duration.ofSeconds(15),
                        () -> p.stampWindowsClosed() >= 1);
                older.addAll(sendAll(p, topic, "closed"));
                Broker.publish(publisher, control, Doc.shuffled(topic, PARTITIONS, 2, 64, 12, List.of()));
                Broker.waitUntil("epoch 2 adopted", Duration.ofSeconds(15),
                        () -> p.router().assignment(topic).epoch() == 2);
                sendAll(p, topic, "switched");
                Broker.waitUntil("the marker of epoch 2", Duration.ofSeconds(15), () -> p.markersWritten() >= 1);
            }

            // The data topic: stamps exactly inside the windows, the plug-in's placement, nothing else.
            Map<String, Map<String, String>> headers = new LinkedHashMap<>();
            Broker.consumeAll(topic, 180, Duration.ofSeconds(30), r -> {
                Map<String, String> h = new HashMap<>();
                for (Header x : r.headers()) {
                    h.put(x.key(), utf8(x.value()));
                }
                headers.put(utf8(r.value()), h);
            });
            assertEquals(180, headers.size());
            headers.forEach((value, h) -> {
                if (value.startsWith("closed-")) {
                    assertEquals(Map.of(), h, value + ": after the window, no header");
                } else {
                    String epoch = value.startsWith("open-") ? "1" : "2";
                    assertEquals(Map.of(DkgKafkaProducer.EPOCH_HEADER, epoch, DkgKafkaProducer.PRODUCER_HEADER, id),
                            h, value + ": inside a window, stamped");
                }
            });

            // The handoff topic: the lease (first epoch 1, closed at 2), the history of epoch 2, the marker.
            Map<String, String> latest = new HashMap<>();
            Broker.consumeAll(handoff, 3, Duration.ofSeconds(30), r -> latest.put(utf8(r.key()), utf8(r.value())));
            String lease = latest.get("lease2/" + topic + "/" + id);
            assertNotNull(lease, "lease2 record: " + latest.keySet());
            assertTrue(lease.contains("\"first_epoch\":1,") && lease.contains("\"closed_at_epoch\":2,")
                    && lease.endsWith("\"mode\":\"marker\"}"), lease);
            assertNull(latest.get("lease/" + topic + "/" + id), "no barrier-mode lease");
            String history = latest.get("assignment/" + topic + "/2");
            assertNotNull(history, "history of epoch 2: " + latest.keySet());
            assertEquals(2, Assignment.fromJson(history.getBytes(StandardCharsets.UTF_8)).epoch());
            String marker = latest.get("marker/" + topic + "/" + id);
            assertNotNull(marker, "marker: " + latest.keySet());
            assertTrue(marker.startsWith("{\"producer\":\"" + id + "\",\"topic\":\"" + topic + "\",\"epoch\":2,"),
                    marker);
            long[] ends = Arrays.stream(marker.substring(marker.indexOf('[') + 1, marker.indexOf(']')).split(","))
                    .mapToLong(Long::parseLong).toArray();
            long[] want = new long[PARTITIONS];
            for (RecordMetadata m : older) {
                want[m.partition()] = Math.max(want[m.partition()], m.offset() + 1);
            }
            assertArrayEquals(want, ends, "one past the last epoch-1 record of each partition");
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }
}
