package dev.dkg.kafka;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * Kafka's murmur2 (bit-exact with {@code org.apache.kafka.common.utils.Utils.murmur2}, which the default
 * partitioner uses as {@code toPositive(murmur2(key)) % numPartitions}) and the seeded variant DKG uses as its
 * bucket hash. Austin Appleby's MurmurHash2, 32-bit, little-endian word reads, Kafka's length mixing and tail
 * handling. Reference: {@code partitioner/src/hash.rs} (the Rust implementation this must equal).
 *
 * <p>Words are read with one little-endian 4-byte load ({@link MethodHandles#byteArrayViewVarHandle}, which the JIT
 * compiles to a plain unaligned load) instead of Kafka's four byte loads and shifts: the same value, fewer
 * instructions on the hot path.
 */
public final class Murmur2 {
    /** Seed of Kafka's murmur2. */
    public static final int KAFKA_SEED = 0x9747b28c;

    private static final int M = 0x5bd1e995;
    private static final int R = 24;
    private static final VarHandle INT_LE = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);

    private Murmur2() {}

    /** Kafka's murmur2 of {@code data}. */
    public static int hash(byte[] data) {
        return hash(data, KAFKA_SEED);
    }

    /** MurmurHash2 of {@code data} with an explicit seed (Kafka's length mixing and tail handling). */
    public static int hash(byte[] data, int seed) {
        final int length = data.length;
        int h = seed ^ length;
        final int tail = length & ~3;
        for (int o = 0; o < tail; o += 4) {
            int k = (int) INT_LE.get(data, o);
            k *= M;
            k ^= k >>> R;
            k *= M;
            h *= M;
            h ^= k;
        }
        // The C/Java switch with fallthrough: bytes 2, 1, 0 of the tail, then one multiply.
        final int rest = length & 3;
        if (rest == 3) {
            h ^= (data[tail + 2] & 0xff) << 16;
        }
        if (rest >= 2) {
            h ^= (data[tail + 1] & 0xff) << 8;
        }
        if (rest >= 1) {
            h ^= data[tail] & 0xff;
            h *= M;
        }
        h ^= h >>> 13;
        h *= M;
        h ^= h >>> 15;
        return h;
    }

    /** Kafka's {@code Utils.toPositive}: clears the sign bit (not {@code abs}, which breaks on MIN_VALUE). */
    public static int toPositive(int h) {
        return h & 0x7fffffff;
    }

    /**
     * Kafka's default keyed placement, {@code toPositive(murmur2(key)) % partitions}; 0 when {@code partitions
     * <= 0} (there is no valid answer; callers must not produce to such a topic).
     */
    public static int kafkaPartition(byte[] key, int partitions) {
        if (partitions <= 0) {
            return 0;
        }
        return toPositive(hash(key)) % partitions;
    }
}
