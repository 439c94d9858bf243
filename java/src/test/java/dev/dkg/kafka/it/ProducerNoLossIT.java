package dev.dkg.kafka.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;

/**
 * No loss, no duplicates, exact placement (the Java side of {@code partitioner/tests/producer_no_loss.rs}):
 * 10^6 Zipf-keyed records through an idempotent {@code acks=all} producer with the plug-in, half under epoch 1,
 * then (flush, publish epoch 2, wait for it) half under epoch 2. Read back, every record is there exactly once,
 * with its key, on the partition its phase's assignment names.
 */
class ProducerNoLossIT {
    private static final int RECORDS = 1_000_000;
    private static final int PARTITIONS = 8;
    private static final int KEYS = 10_000;

    /** Epoch {@code e}: the three hottest keys pinned, a freshly shuffled table. */
    private static Doc epochDoc(String topic, long epoch) {
        List<Doc.Heavy> heavy = new ArrayList<>();
        for (int rank = 1; rank <= 3; rank++) {
            heavy.add(new Doc.Heavy(Zipf.key(rank), (int) ((rank + epoch * 3) % PARTITIONS)));
        }
        return Doc.shuffled(topic, PARTITIONS, epoch, 64, 100 + epoch, heavy);
    }

    /** Where {@code doc} puts each rank's key (index = rank), checked against the plug-in's own lookup. */
    private static int[] placement(Doc doc) {
        int[] out = new int[KEYS + 1];
        for (int rank = 1; rank <= KEYS; rank++) {
            out[rank] = doc.expectedPartition(Zipf.key(rank));
            assertEquals(out[rank], Plugin.lookup(doc, Zipf.key(rank)), "rank " + rank);
        }
        return out;
    }

    @Test
    void noLossNoDuplicatesExactPlacementAcrossAnEpochSwitch() {
        String topic = Broker.newTopic("noloss", PARTITIONS);
        String control = Broker.createControlTopic("noloss");
        Doc first = epochDoc(topic, 1);
        Doc second = epochDoc(topic, 2);
        int[][] expected = {placement(first), placement(second)};

        Properties config = Broker.dkgProducerConfig(control);
        config.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        config.put(ProducerConfig.ACKS_CONFIG, "all");
        config.put(ProducerConfig.BATCH_SIZE_CONFIG, Integer.toString(64 * 1024));
        Zipf zipf = new Zipf(KEYS, 1.1, 7);
        AtomicReference<Exception> failure = new AtomicReference<>();
        AtomicLong acked = new AtomicLong();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config);
                KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            Broker.publish(publisher, control, first);
            Plugin.awaitEpoch(producer, topic, 1, Duration.ofSeconds(15));
            for (int seq = 0; seq < RECORDS; seq++) {
                if (seq == RECORDS / 2) {
                    // The switch: everything sent so far is acknowledged under epoch 1 before epoch 2 is published.
                    producer.flush();
                    Broker.publish(publisher, control, second);
                    Plugin.awaitEpoch(producer, topic, 2, Duration.ofSeconds(15));
                }
                int rank = zipf.nextRank();
                byte[] value = ByteBuffer.allocate(12).putInt(seq).putInt(rank).putInt(seq < RECORDS / 2 ? 1 : 2)
                        .array();
                producer.send(new ProducerRecord<>(topic, zipf.keyOf(rank), value), (md, e) -> {
                    if (e != null) {
                        failure.compareAndSet(null, e);
                    } else {
                        acked.incrementAndGet();
                    }
                });
            }
            producer.flush();
        }
        assertNull(failure.get(), () -> "a send failed: " + failure.get());
        assertEquals(RECORDS, acked.get(), "acknowledged sends");

        BitSet seen = new BitSet(RECORDS);
        long[] duplicates = {0};
        List<String> misplaced = new ArrayList<>();
        long[] perPartition = new long[PARTITIONS];
        long read = Broker.consumeAll(topic, RECORDS, Duration.ofSeconds(120), r -> {
            ByteBuffer v = ByteBuffer.wrap(r.value());
            int seq = v.getInt();
            int rank = v.getInt();
            int epoch = v.getInt();
            if (seen.get(seq)) {
                duplicates[0]++;
            }
            seen.set(seq);
            perPartition[r.partition()]++;
            assertArrayEquals(Zipf.key(rank), r.key(), "key of record " + seq);
            if (expected[epoch - 1][rank] != r.partition() && misplaced.size() < 20) {
                misplaced.add("record " + seq + " (rank " + rank + ", epoch " + epoch + ") on " + r.partition()
                        + ", expected " + expected[epoch - 1][rank]);
            }
        });
        assertEquals(0, duplicates[0], "duplicates");
        assertEquals(RECORDS, seen.cardinality(), "distinct records read");
        assertEquals(RECORDS, read, "records read");
        assertTrue(misplaced.isEmpty(), "misplaced: " + misplaced);
        // Every partition got records (the assignments use all of them).
        for (int p = 0; p < PARTITIONS; p++) {
            assertTrue(perPartition[p] > 0, "partition " + p + " is empty");
        }
    }
}
