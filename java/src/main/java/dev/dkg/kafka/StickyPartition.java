package dev.dkg.kafka;

import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.PartitionInfo;

/**
 * Sticky placement of keyless records for one topic, as Kafka's built-in partitioner does it
 * ({@code org.apache.kafka.clients.producer.internals.BuiltInPartitioner}, KIP-794) without its adaptive part:
 * records stay on one partition until about {@code batch.size} bytes went to it, then the next partition is chosen
 * at random among the available ones (those with a leader), or among all if none is available.
 *
 * <p>Once {@code partitioner.class} is set, the producer leaves keyless records to the plug-in (a custom
 * partitioner must return a partition; {@code onNewBatch} no longer exists in Kafka 4), so the plug-in does this
 * itself. Differences from the built-in: the bytes counted are an estimate (key and value plus
 * {@link #RECORD_OVERHEAD}; headers are not visible to a partitioner), and partitions are chosen uniformly, not
 * by broker queue lengths ({@code partitioner.adaptive.partitioning.enable} has no effect).
 */
final class StickyPartition {
    /** Approximate per-record framing of a v2 record (attributes, varint deltas and lengths). */
    static final int RECORD_OVERHEAD = 10;

    private static final class Current {
        final int partition;
        /** Bytes sent to it; a long so that no batch size can make it wrap. */
        final AtomicLong bytes = new AtomicLong();

        Current(int partition) {
            this.partition = partition;
        }
    }

    private final String topic;
    private final AtomicReference<Current> current = new AtomicReference<>();

    StickyPartition(String topic) {
        this.topic = topic;
    }

    /** The partition for a keyless record of {@code recordBytes} bytes; {@code numPartitions > 0}. */
    int next(Cluster cluster, int numPartitions, int recordBytes, int batchSize) {
        Current cur = current.get();
        while (cur == null || cur.partition >= numPartitions) {
            Current fresh = new Current(choose(cluster, numPartitions));
            if (current.compareAndSet(cur, fresh)) {
                cur = fresh;
            } else {
                cur = current.get();
            }
        }
        if (cur.bytes.addAndGet(recordBytes) >= batchSize) {
            // This record still goes to the current partition; the next one starts a new sticky run.
            current.compareAndSet(cur, new Current(choose(cluster, numPartitions)));
        }
        return cur.partition;
    }

    private int choose(Cluster cluster, int numPartitions) {
        int random = Murmur2.toPositive(ThreadLocalRandom.current().nextInt());
        List<PartitionInfo> available = cluster.availablePartitionsForTopic(topic);
        if (!available.isEmpty()) {
            int p = available.get(random % available.size()).partition();
            if (p >= 0 && p < numPartitions) {
                return p;
            }
        }
        return random % numPartitions;
    }
}
