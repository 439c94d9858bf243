package dev.dkg.kafka.streams;

import dev.dkg.kafka.DkgRouter;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.processor.StreamPartitioner;

/**
 * A Kafka Streams {@link StreamPartitioner} that places keyed records like the Rust {@code DkgProducer} and
 * {@link dev.dkg.kafka.DkgPartitioner}: the key is serialized with the given serializer and looked up in the
 * topic's DKG assignment ({@link DkgRouter#partition}), with the same fallback to Kafka's default placement.
 * Keyless records (and keys the serializer turns into null) are left to the producer ({@code Optional.empty()}).
 *
 * <p>Works with Kafka Streams 3.0 and newer: 3.0 to 3.3 call {@link #partition}, 3.4 and newer {@link #partitions}.
 *
 * <p>DKG placement is not co-partitioned with anything hash-placed: a join between a DKG-placed topic and
 * another topic needs a repartition or a GlobalKTable (see the README).
 *
 * @param <K> key type
 * @param <V> value type
 */
public final class DkgStreamPartitioner<K, V> implements StreamPartitioner<K, V>, AutoCloseable {
    private final DkgRouter router;
    private final boolean ownsRouter;
    private final Serializer<K> keySerializer;
    /** Cached singleton answers, so most calls allocate nothing. */
    private volatile Optional<Set<Integer>>[] answers = newAnswers(0);

    /** Routes with a router the caller owns (and closes), e.g. the same one a producer uses. */
    public DkgStreamPartitioner(DkgRouter router, Serializer<K> keySerializer) {
        this(router, false, keySerializer);
    }

    /** Starts its own router from a client configuration ({@link DkgRouter#start}); {@link #close()} stops it. */
    public DkgStreamPartitioner(Map<String, ?> configs, Serializer<K> keySerializer) {
        this(DkgRouter.start(configs), true, keySerializer);
    }

    private DkgStreamPartitioner(DkgRouter router, boolean owns, Serializer<K> keySerializer) {
        this.router = Objects.requireNonNull(router, "router");
        this.ownsRouter = owns;
        this.keySerializer = Objects.requireNonNull(keySerializer, "keySerializer");
    }

    @Override
    public Optional<Set<Integer>> partitions(String topic, K key, V value, int numPartitions) {
        int p = place(topic, key, numPartitions);
        return p < 0 ? Optional.empty() : answer(p);
    }

    /**
     * The single-partition method of Kafka Streams 3.0 to 3.3 ({@code StreamPartitioner.partitions} arrived in
     * 3.4, and 4.0 removed this one; so no {@code @Override}): what {@link #partitions} answers, as a partition, or
     * null (the producer places the record) where that is empty. Streams 3.4+ calls {@link #partitions} instead.
     */
    public Integer partition(String topic, K key, V value, int numPartitions) {
        int p = place(topic, key, numPartitions);
        return p < 0 ? null : p;
    }

    /** The key's partition, or -1 to leave the record to the producer. */
    private int place(String topic, K key, int numPartitions) {
        if (key == null) {
            return -1;
        }
        byte[] bytes;
        try {
            bytes = keySerializer.serialize(topic, key);
        } catch (RuntimeException e) {
            // Streams serializes the key again when sending and reports the failure through its own handler.
            return -1;
        }
        if (bytes == null) {
            return -1;
        }
        return router.partition(topic, bytes, numPartitions);
    }

    private Optional<Set<Integer>> answer(int p) {
        Optional<Set<Integer>>[] cache = answers;
        if (p < cache.length) {
            return cache[p];
        }
        Optional<Set<Integer>>[] grown = newAnswers(Math.max(p + 1, Math.min(cache.length * 2, 1 << 16)));
        answers = grown;
        return grown[p];
    }

    @SuppressWarnings("unchecked")
    private static Optional<Set<Integer>>[] newAnswers(int n) {
        Optional<Set<Integer>>[] a = (Optional<Set<Integer>>[]) new Optional<?>[n];
        for (int i = 0; i < n; i++) {
            a[i] = Optional.of(Set.of(i));
        }
        return a;
    }

    /** The router used. */
    public DkgRouter router() {
        return router;
    }

    /** Stops the router's follower if this partitioner started it. */
    @Override
    public void close() {
        if (ownsRouter) {
            router.close();
        }
    }
}
