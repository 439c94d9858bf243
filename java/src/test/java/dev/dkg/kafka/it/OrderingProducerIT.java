package dev.dkg.kafka.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dkg.kafka.Assignment;
import dev.dkg.kafka.DkgConfig;
import dev.dkg.kafka.DkgKafkaProducer;
import dev.dkg.kafka.DkgMetrics;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.utils.AppInfoParser;
import org.junit.jupiter.api.Test;

/**
 * {@link DkgKafkaProducer} on the broker, by itself (its life under {@code DkgConsumer} groups, beside Rust
 * producers, is {@code partitioner/tests/consumer_java_producer.rs}), with one consumer group's progress written to
 * the handoff topic by the test: the lease of a declared topic at the epoch in effect; every record stamped in the
 * start-up window until the group announces it drained epoch 1; then no stamp; after a switch exactly the keys it
 * moved stamped until the group drained it (closed as settled), and, for a switch the group does not drain, until
 * the bound (timed out: a second producer with a short bound shows it, then sends unstamped); each switch announced by its history record, and the last marker's ends one past the last
 * offset of the older epochs' records in each partition; the lease marked closed at the last marker's epoch by
 * {@code close()}.
 */
class OrderingProducerIT {
    private static final int PARTITIONS = 6;
    /**
     * The main producer's stamp-window bound: far beyond every step below, so only the group's progress closes its
     * windows (no step races the bound, however slow the machine).
     */
    private static final long WINDOW_MS = 120_000;
    /** A second producer's bound, for the window that closes at the bound (timed out). */
    private static final long SHORT_WINDOW_MS = 2_000;

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

    /** Publishes {@code doc} and waits until the producer routes by it. */
    private static void adopt(KafkaProducer<byte[], byte[]> publisher, String control,
            DkgKafkaProducer<byte[], byte[]> p, Doc doc) {
        Broker.publish(publisher, control, doc);
        Broker.waitUntil("epoch " + doc.epoch() + " adopted", Duration.ofSeconds(15),
                () -> p.router().assignment(doc.topic()).epoch() == doc.epoch());
    }

    /**
     * kafka-clients 3.x's {@code Producer.sendOffsetsToTransaction(Map, String)} (removed in 4.0) links and reaches the
     * inner client, which refuses it as a 3.x {@code KafkaProducer} without a transactional.id does. On a 3.x client
     * it is called through that client's {@code Producer} interface, as a 3.x caller's code does.
     */
    @SuppressWarnings("deprecation")
    private static void legacyOffsetsGoToTheInnerClient(DkgKafkaProducer<byte[], byte[]> p) {
        Method viaInterface = null;
        try {
            viaInterface = Producer.class.getMethod("sendOffsetsToTransaction", Map.class, String.class);
        } catch (NoSuchMethodException e) {
            assertTrue(Plugin.hasMonitorable() || !AppInfoParser.getVersion().startsWith("3."),
                    "a 3.x Producer has the method");
        }
        Method call = viaInterface;
        // Not empty: some 3.x clients return early on no offsets, before they check for transactions.
        Map<TopicPartition, OffsetAndMetadata> offsets = Map.of(new TopicPartition("legacy", 0),
                new OffsetAndMetadata(0));
        Throwable thrown = assertThrows(Throwable.class, () -> {
            if (call != null) {
                try {
                    call.invoke(p, offsets, "legacy-group");
                } catch (InvocationTargetException e) {
                    throw e.getCause();
                }
            } else {
                p.sendOffsetsToTransaction(offsets, "legacy-group");
            }
        });
        // 4.x: "Cannot use transactional methods without ... transactional.id ..."; 3.0: "Transactional method
        // invoked on a non-transactional producer."
        assertTrue(thrown instanceof IllegalStateException
                && thrown.getMessage().toLowerCase(java.util.Locale.ROOT).contains("transactional"),
                "the inner client's refusal: " + thrown);
    }

    @Test
    void stampsMovedKeysUntilTheGroupSettlesAnnouncesTheSwitchWithAMarkerAndClosesItsLease() {
        String topic = Broker.newTopic("ordering", PARTITIONS);
        String control = Broker.createControlTopic("ordering");
        String handoff = Broker.createControlTopic("ordering-handoff");
        List<Doc> docs = List.of(Doc.shuffled(topic, PARTITIONS, 1, 64, 11, List.of()),
                Doc.shuffled(topic, PARTITIONS, 2, 64, 12, List.of()),
                Doc.shuffled(topic, PARTITIONS, 3, 64, 13, List.of()));
        try (KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            Broker.publish(publisher, control, docs.get(0));
            Broker.announceProgress(publisher, handoff, "app", topic, PARTITIONS, 0);
            Map<String, Object> config = Broker.orderingProducerConfig(control, handoff, topic);
            config.put(DkgConfig.STAMP_WINDOW_MS_CONFIG, Long.toString(WINDOW_MS));
            String id;
            List<RecordMetadata> older = new ArrayList<>();
            try (DkgKafkaProducer<byte[], byte[]> p = Broker.orderingProducer(config)) {
                id = p.producerId();
                assertEquals(1, p.router().assignment(topic).epoch(), "epoch 1 read at construction");
                // Start-up window: its predecessor is not known, every placed record is stamped until the group
                // (followed: it announced drained 0) settles epoch 1.
                older.addAll(sendAll(p, topic, "open"));
                Broker.announceProgress(publisher, handoff, "app", topic, PARTITIONS, 1);
                Broker.waitUntil("the start-up window to close as settled", Duration.ofSeconds(15),
                        () -> p.stampWindowsSettled() >= 1);
                older.addAll(sendAll(p, topic, "closed"));
                // Epoch 2: the keys it moved are stamped until the group drained it.
                adopt(publisher, control, p, docs.get(1));
                older.addAll(sendAll(p, topic, "switched"));
                Broker.waitUntil("the marker of epoch 2", Duration.ofSeconds(15), () -> p.markersWritten() >= 1);
                Broker.announceProgress(publisher, handoff, "app", topic, PARTITIONS, 2);
                Broker.waitUntil("the window of epoch 2 to close as settled", Duration.ofSeconds(15),
                        () -> p.stampWindowsSettled() >= 2);
                older.addAll(sendAll(p, topic, "settled"));
                // Epoch 3 with a group that does not drain it: the moved keys stay stamped while the window is
                // open; a producer with a short bound closes its window at the bound, and then stamps nothing.
                Map<String, Object> shortConfig = new HashMap<>(config);
                shortConfig.put(DkgConfig.STAMP_WINDOW_MS_CONFIG, Long.toString(SHORT_WINDOW_MS));
                try (DkgKafkaProducer<byte[], byte[]> q = Broker.orderingProducer(shortConfig)) {
                    // Its start-up window (epoch 2, which the group drained) closes as settled first.
                    Broker.waitUntil("the short-bound producer's start-up window to close", Duration.ofSeconds(60),
                            () -> q.stampWindowsSettled() >= 1);
                    adopt(publisher, control, p, docs.get(2));
                    Broker.waitUntil("epoch 3 adopted by the short-bound producer", Duration.ofSeconds(60),
                            () -> q.router().assignment(topic).epoch() == 3);
                    sendAll(p, topic, "stuck");
                    Broker.waitUntil("the short-bound window of epoch 3 to time out", Duration.ofSeconds(60),
                            () -> q.stampWindowsTimedOut() >= 1);
                    sendAll(q, topic, "late");
                    assertEquals(1, q.stampWindowsTimedOut());
                }
                assertEquals(0, p.stampWindowsTimedOut(), "the long bound did not run out");
                assertEquals(2, p.stampWindowsSettled());
                assertEquals(2, p.markersWritten(), "the markers of epochs 2 and 3");
                // The same counts in the producer's metrics (JMX, group plugins), with the router's.
                assertEquals(2.0, Broker.metric(p.metrics(), DkgMetrics.MARKERS_WRITTEN_TOTAL, "topic", topic));
                assertEquals(2.0, Broker.metric(p.metrics(), DkgMetrics.STAMP_WINDOWS_CLOSED_TOTAL, "topic", topic,
                        "reason", "settled"));
                assertEquals(0.0, Broker.metric(p.metrics(), DkgMetrics.PARTITION_COUNT_CHANGES_TOTAL, "topic", topic));
                assertEquals(3.0, Broker.metric(p.metrics(), DkgMetrics.EPOCH, "topic", topic));
                assertEquals(300.0, Broker.metric(p.metrics(), DkgMetrics.RECORDS_TOTAL, "topic", topic, "route",
                        "assigned"), "every record placed by an assignment");
                assertEquals(300.0, Broker.metric(p.metrics(), "record-send-total", "topic", topic),
                        "the inner client's own metrics, beside them");
                legacyOffsetsGoToTheInnerClient(p);
            }

            // The data topic: every record stamped in the start-up window, the moved keys in epoch 2's and 3's.
            Map<String, Map<String, String>> headers = new LinkedHashMap<>();
            Broker.consumeAll(topic, 360, Duration.ofSeconds(30), r -> {
                Map<String, String> h = new HashMap<>();
                for (Header x : r.headers()) {
                    h.put(x.key(), utf8(x.value()));
                }
                headers.put(utf8(r.value()), h);
            });
            assertEquals(360, headers.size());
            Map<String, Integer> stampedPerPhase = new HashMap<>();
            for (Map.Entry<String, Map<String, String>> e : headers.entrySet()) {
                String value = e.getKey();
                String phase = value.substring(0, value.indexOf('-'));
                byte[] key = ("key-" + value.substring(value.indexOf('-') + 1)).getBytes(StandardCharsets.UTF_8);
                int epoch = switch (phase) {
                    case "open", "closed" -> 1;
                    case "switched", "settled" -> 2;
                    default -> 3;
                };
                boolean moved = epoch > 1
                        && docs.get(epoch - 2).expectedPartition(key) != docs.get(epoch - 1).expectedPartition(key);
                boolean stamped = phase.equals("open") || moved && (phase.equals("switched") || phase.equals("stuck"));
                assertEquals(stamped ? Map.of(DkgKafkaProducer.EPOCH_HEADER, Integer.toString(epoch),
                        DkgKafkaProducer.PRODUCER_HEADER, id) : Map.of(), e.getValue(),
                        value + (moved ? " (its key moved by epoch " + epoch + ")" : ""));
                if (stamped) {
                    stampedPerPhase.merge(phase, 1, Integer::sum);
                }
            }
            assertEquals(60, stampedPerPhase.get("open"));
            for (String phase : List.of("switched", "stuck")) {
                int n = stampedPerPhase.getOrDefault(phase, 0);
                assertTrue(n > 10 && n < 60, phase + ": " + n + " of 60 keys moved");
            }

            // The handoff topic: the lease (first epoch 1, closed at 2), the history of epoch 2, the marker.
            Map<String, String> latest = new HashMap<>();
            Broker.consumeAll(handoff, 3, Duration.ofSeconds(30), r -> latest.put(utf8(r.key()), utf8(r.value())));
            String lease = latest.get("lease2/" + topic + "/" + id);
            assertNotNull(lease, "lease2 record: " + latest.keySet());
            assertTrue(lease.contains("\"first_epoch\":1,") && lease.contains("\"closed_at_epoch\":3,")
                    && lease.endsWith("\"mode\":\"marker\"}"), lease);
            assertNull(latest.get("lease/" + topic + "/" + id), "no lease under any other key");
            for (int e = 2; e <= 3; e++) {
                String history = latest.get("assignment/" + topic + "/" + e);
                assertNotNull(history, "history of epoch " + e + ": " + latest.keySet());
                assertEquals(e, Assignment.fromJson(history.getBytes(StandardCharsets.UTF_8)).epoch());
            }
            String marker = latest.get("marker/" + topic + "/" + id);
            assertNotNull(marker, "marker: " + latest.keySet());
            assertTrue(marker.startsWith("{\"producer\":\"" + id + "\",\"topic\":\"" + topic + "\",\"epoch\":3,"),
                    marker);
            long[] ends = Arrays.stream(marker.substring(marker.indexOf('[') + 1, marker.indexOf(']')).split(","))
                    .mapToLong(Long::parseLong).toArray();
            long[] want = new long[PARTITIONS];
            for (RecordMetadata m : older) {
                want[m.partition()] = Math.max(want[m.partition()], m.offset() + 1);
            }
            assertArrayEquals(want, ends, "one past the last record of epochs 1 and 2 in each partition");
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }
}
