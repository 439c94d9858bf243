package dev.dkg.kafka.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.utils.Utils;
import org.junit.jupiter.api.Test;

/**
 * Format version 2 over a broker ({@code docs/spec.md} section 11): the control topic starts with its
 * {@code @generation} record, then a version 2 document (compact table, one split key, one whole heavy key). A
 * producer with the plug-in sends the split key's records, in send order, exactly by the smooth weighted round
 * robin schedule of its weights (so exactly in their proportions), every other key where the document says; a
 * retraction document then returns every key to Kafka's placement and keeps its epoch as the floor (a lower epoch
 * is rejected as stale); a document of another generation makes the follower re-read the control topic and is then
 * rejected ({@code generation_mismatch}). Read back, each record is where its acknowledgement said.
 */
class ProducerSplitsHeavyKeyIT {
    private static final int PARTITIONS = 6;
    private static final Duration ADOPTION = Duration.ofSeconds(15);
    private static final String GENERATION = "5e1f0c2a9b8d7e6f5a4b3c2d1e0f9a8b";

    /**
     * The spec's placement rule, written out per record: each part's credit grows by its weight, the most credited
     * part (the first on ties) takes the record and pays the weights' sum.
     */
    private static int[] expectedPartitions(int[] partitions, int[] weights, int records) {
        long[] credit = new long[weights.length];
        long sum = 0;
        for (int w : weights) {
            sum += w;
        }
        int[] out = new int[records];
        for (int n = 0; n < records; n++) {
            int best = -1;
            for (int i = 0; i < weights.length; i++) {
                credit[i] += weights[i];
                best = best < 0 || credit[i] > credit[best] ? i : best;
            }
            credit[best] -= sum;
            out[n] = partitions[best];
        }
        return out;
    }

    @Test
    void splitKeyFollowsItsScheduleRetractionKeepsTheFloorAndGenerationsReread() {
        String topic = Broker.newTopic("split", PARTITIONS);
        String control = Broker.createControlTopic("split");
        byte[] hot = Utils.utf8("hot");
        byte[] pinned = Utils.utf8("pinned");
        int[] parts = {5, 1, 2};
        int[] weights = {3, 2, 1};
        Doc doc = Doc.shuffled(topic, PARTITIONS, 4, 16, 21,
                List.of(new Doc.Heavy(pinned, (Broker.kafkaPartition(pinned, PARTITIONS) + 1) % PARTITIONS)));
        String v2 = doc.jsonV2(List.of(new Doc.Split(hot, parts, weights)), GENERATION);
        List<byte[]> keys = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            keys.add(Utils.utf8("key-" + i));
        }
        keys.add(pinned);
        int hotRecords = 600;
        int[] want = expectedPartitions(parts, weights, hotRecords);
        Map<String, Integer> acked = new HashMap<>();
        try (KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            Broker.publishRaw(publisher, control, Utils.utf8("@generation"), Utils.utf8(
                    "{\"format\":\"dkg.assignment\",\"version\":2,\"kind\":\"generation\",\"generation\":\""
                            + GENERATION + "\"}"));
            Broker.publishRaw(publisher, control, Utils.utf8(topic), Utils.utf8(v2));
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(Broker.dkgProducerConfig(control))) {
                Plugin.awaitEpoch(producer, topic, 4, ADOPTION);
                // Sent without waiting (the partitioner runs in send(), in send order), acknowledged afterwards.
                Map<String, Future<RecordMetadata>> sends = new LinkedHashMap<>();
                Map<String, Integer> otherWant = new HashMap<>();
                int pinnedSent = 0;
                for (int n = 0; n < hotRecords; n++) {
                    sends.put("hot-" + n, producer.send(new ProducerRecord<>(topic, hot, Utils.utf8("hot-" + n))));
                    if (n % 3 == 0) {
                        // Other keys between the split key's records do not move its schedule.
                        byte[] key = keys.get(keys.size() - 1 - n / 3 % keys.size());
                        pinnedSent += key == pinned ? 1 : 0;
                        String other = "other-" + n;
                        sends.put(other, producer.send(new ProducerRecord<>(topic, key, Utils.utf8(other))));
                        otherWant.put(other, doc.expectedPartition(key));
                    }
                }
                int[] got = new int[hotRecords];
                for (Map.Entry<String, Future<RecordMetadata>> e : sends.entrySet()) {
                    int p = Broker.ack(e.getValue(), e.getKey()).partition();
                    acked.put(e.getKey(), p);
                    if (e.getKey().startsWith("hot-")) {
                        got[Integer.parseInt(e.getKey().substring(4))] = p;
                    } else {
                        assertEquals(otherWant.get(e.getKey()), p, e.getKey());
                    }
                }
                assertArrayEquals(want, got, "the split key's records follow its schedule");
                assertEquals(hotRecords, Plugin.records(Plugin.metrics(producer), topic, "split"));
                assertEquals(1, pinnedSent);
                assertEquals(otherWant.size(), Plugin.records(Plugin.metrics(producer), topic, "assigned"));

                // A retraction document: Kafka's placement for every key; its epoch stays the floor.
                String retraction = "{\"format\":\"dkg.assignment\",\"version\":2,\"kind\":\"retraction\",\"topic\":\""
                        + topic + "\",\"epoch\":9,\"generation\":\"" + GENERATION + "\",\"created_at_ms\":"
                        + System.currentTimeMillis() + "}";
                Broker.publishRaw(publisher, control, Utils.utf8(topic), Utils.utf8(retraction));
                Plugin.awaitEpoch(producer, topic, 0, ADOPTION);
                Broker.publishRaw(publisher, control, Utils.utf8(topic), Utils.utf8(v2.replace("\"epoch\":4,",
                        "\"epoch\":8,")));
                Broker.waitUntil("the stale document rejected", ADOPTION,
                        () -> Plugin.rejected(Plugin.metrics(producer), "stale_epoch") == 1);
                for (int n = 0; n < 12; n++) {
                    String value = "after-" + n;
                    int p = Broker.ack(producer.send(new ProducerRecord<>(topic, hot, Utils.utf8(value))), value)
                            .partition();
                    assertEquals(Broker.kafkaPartition(hot, PARTITIONS), p, value);
                    acked.put(value, p);
                }
                assertEquals(0, Plugin.epoch(producer, topic));

                // A document of another control topic generation: the follower drops its state and re-reads the
                // control topic from the beginning (so the stale document is rejected a second time); meeting
                // the foreign document again, it rejects it.
                Broker.publishRaw(publisher, control, Utils.utf8(topic), Utils.utf8(v2.replace("\"epoch\":4,",
                        "\"epoch\":10,").replace(GENERATION, "0".repeat(32))));
                Broker.waitUntil("the foreign generation rejected after a re-read", ADOPTION,
                        () -> Plugin.rejected(Plugin.metrics(producer), "generation_mismatch") == 1);
                assertEquals(2, Plugin.rejected(Plugin.metrics(producer), "stale_epoch"), "the log was read again");
                assertEquals(0, Plugin.epoch(producer, topic), "the retraction is in force again");
            }
        }
        long[] perPart = new long[PARTITIONS];
        Map<String, Integer> seen = new HashMap<>();
        long read = Broker.consumeAll(topic, acked.size(), Duration.ofSeconds(60), r -> {
            String value = new String(r.value(), StandardCharsets.UTF_8);
            assertNull(seen.put(value, r.partition()), value + " read twice");
            if (value.startsWith("hot-")) {
                perPart[r.partition()]++;
            }
        });
        assertEquals(acked.size(), read);
        assertEquals(acked, seen);
        // 600 records over weights 3:2:1 on partitions 5, 1, 2.
        assertArrayEquals(new long[] {0, 200, 100, 0, 0, 300}, perPart);
    }
}
