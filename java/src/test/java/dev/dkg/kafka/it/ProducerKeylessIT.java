package dev.dkg.kafka.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;

/**
 * Keyless records through the plug-in on the broker: an assignment does not touch them (it places keys), they are
 * spread sticky, batch by batch, over every partition, as the client's built-in placement would, and counted on
 * the {@code keyless} route.
 */
class ProducerKeylessIT {
    private static final int PARTITIONS = 12;
    private static final int RECORDS = 120_000;

    @Test
    void keylessRecordsAreSpreadInBatchesOverEveryPartition() {
        String topic = Broker.newTopic("keyless", PARTITIONS);
        String control = Broker.createControlTopic("keyless");
        Properties config = Broker.dkgProducerConfig(control);
        config.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        byte[] value = new byte[100];
        double perRequest;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config);
                KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            // Every key on partition 0: keyless records must not follow it.
            Broker.publish(publisher, control, Doc.constant(topic, PARTITIONS, 1, 0, List.of()));
            Plugin.awaitEpoch(producer, topic, 1, Duration.ofSeconds(15));
            for (int i = 0; i < RECORDS; i++) {
                producer.send(new ProducerRecord<>(topic, null, value));
            }
            producer.flush();
            assertEquals(RECORDS, Plugin.records(Plugin.metrics(producer), topic, "keyless"));
            perRequest = Broker.metric(producer.metrics(), "records-per-request-avg");
        }
        long[] end = Broker.endOffsets(topic);
        assertEquals(RECORDS, Arrays.stream(end).sum());
        assertTrue(Arrays.stream(end).allMatch(n -> n > 0), "every partition used: " + Arrays.toString(end));
        // About 16 KiB per sticky stretch: ~150 records, ~800 stretches at random over 12 partitions (about 0.25).
        double imbalance = Broker.imbalance(new long[PARTITIONS], end);
        System.out.printf("keyless through the plug-in: imbalance %.3f, records per request %.1f, per partition %s%n",
                imbalance, perRequest, Arrays.toString(end));
        assertTrue(imbalance < 0.6, "keyless spread " + imbalance + ": " + Arrays.toString(end));
        // Sticky, not record by record: requests carry many records.
        assertTrue(perRequest > 20, "records per request " + perRequest);
    }
}
