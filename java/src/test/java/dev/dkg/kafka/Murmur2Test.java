package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.util.SplittableRandom;
import org.apache.kafka.common.utils.Utils;
import org.junit.jupiter.api.Test;

class Murmur2Test {
    /** Random keys of every length 0..64: our murmur2 equals Kafka's own, and so does the keyed placement. */
    @Test
    void equalsKafkasMurmur2AndDefaultPlacement() {
        SplittableRandom random = new SplittableRandom(7);
        for (int len = 0; len <= 64; len++) {
            for (int i = 0; i < 50; i++) {
                byte[] key = new byte[len];
                random.nextBytes(key);
                assertEquals(Utils.murmur2(key), Murmur2.hash(key), "length " + len);
                for (int n : new int[] {1, 3, 7, 100, 1000}) {
                    assertEquals(Clusters.kafkaPartition(key, n), Murmur2.kafkaPartition(key, n));
                }
            }
        }
    }

    @Test
    void seedMattersAndToPositiveClearsOnlyTheSignBit() {
        byte[] key = "kafka".getBytes(java.nio.charset.StandardCharsets.UTF_8);
        assertEquals(Murmur2.hash(key), Murmur2.hash(key, Murmur2.KAFKA_SEED));
        assertNotEquals(Murmur2.hash(key), Murmur2.hash(key, 0x2545f491));
        assertEquals(0, Murmur2.toPositive(Integer.MIN_VALUE));
        assertEquals(Integer.MAX_VALUE, Murmur2.toPositive(-1));
        assertEquals(0x12345678, Murmur2.toPositive(0x12345678));
        assertEquals(0, Murmur2.kafkaPartition(key, 0));
    }
}
