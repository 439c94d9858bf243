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
        if (length >= 4 && length < 8) {
            // One word and a tail: straight-line (C2's pre/main/post loop for a single trip cost about 2.5 ns).
            return hash4To7(seed, length, (int) INT_LE.get(data, 0), (int) INT_LE.get(data, length - 4));
        }
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
        return finish(h);
    }

    /**
     * {@link #hash(byte[], int)} of a key of {@code length} 4 to 7 bytes from its first 4 bytes {@code first} and
     * its last 4 {@code last} (little-endian; they overlap unless the length is 8): the word, then the tail
     * (bytes 4 to {@code length - 1}, the top bytes of {@code last}) XORed in at once, which is what the byte-wise
     * fallthrough adds up to. {@code Assignment}'s lookup passes the words it also compares with.
     */
    static int hash4To7(int seed, int length, int first, int last) {
        int k = first * M;
        k ^= k >>> R;
        k *= M;
        int h = ((seed ^ length) * M) ^ k;
        // The tail as a long shift: for length 4 it is 32 bits, which an int shift would not clear.
        h ^= (int) ((last & 0xffff_ffffL) >>> ((8 - length) << 3));
        if ((length & 3) != 0) {
            h *= M;
        }
        return finish(h);
    }

    private static int finish(int h) {
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
