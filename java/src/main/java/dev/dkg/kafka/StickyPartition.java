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
 * records stay on one partition for about one batch, then the next partition is chosen at random among the
 * available ones (those with a leader), or among all if none is available.
 *
 * <p>Once {@code partitioner.class} is set, the producer leaves keyless records to the plug-in (a custom
 * partitioner must return a partition; {@code onNewBatch} no longer exists in Kafka 4), so the plug-in does this
 * itself. The built-in switches only once the partition's batch is full ({@code RecordAccumulator} passes
 * {@code enableSwitch = allBatchesFull}); a partitioner cannot see the batches, so a run here ends when the next
 * record would no longer fit in one batch by the record sizes of the v2 format ({@link #recordBytes}: what
 * {@code DefaultRecord.sizeInBytes} counts, with 2-byte deltas and no headers) and the batch header
 * ({@link #BATCH_OVERHEAD}). Switching after {@code batch.size} bytes instead spilled the last records of every
 * run into a second, nearly empty batch (BENCHMARKS.md: 9.5 KB batches against the client's 16.3 KB).
 * Differences that remain: headers are not visible to a partitioner (records with headers make a run overflow
 * its batch), compression is not accounted for (compressed batches hold more records than a run), and
 * partitions are chosen uniformly, not by broker queue lengths ({@code partitioner.adaptive.partitioning.enable}
 * has no effect).
 */
final class StickyPartition {
    /** The v2 record batch header ({@code DefaultRecordBatch.RECORD_BATCH_OVERHEAD}). */
    static final int BATCH_OVERHEAD = 61;

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

    /**
     * The size of a keyless v2 record with a value of {@code valueLength} bytes (-1 for none) and no headers:
     * length varint, attributes, timestamp and offset deltas (2 bytes each: up to 8 s and 8191 records into a
     * batch), key length -1, value length and value, header count 0.
     */
    static int recordBytes(int valueLength) {
        int body = 1 + 2 + 2 + 1 + varintBytes(valueLength) + Math.max(0, valueLength) + 1;
        return varintBytes(body) + body;
    }

    /** Bytes of a zig-zag varint (Kafka's {@code ByteUtils.sizeOfVarint}). */
    private static int varintBytes(int value) {
        int v = (value << 1) ^ (value >> 31);
        return (38 - Integer.numberOfLeadingZeros(v | 1)) / 7;
    }

    /** The partition for a keyless record of {@code recordBytes} bytes; {@code numPartitions > 0}. */
    int next(Cluster cluster, int numPartitions, int recordBytes, int batchSize) {
        long capacity = Math.max(1, batchSize - BATCH_OVERHEAD);
        while (true) {
            Current cur = current.get();
            if (cur == null || cur.partition >= numPartitions) {
                current.compareAndSet(cur, new Current(choose(cluster, numPartitions)));
                continue;
            }
            long after = cur.bytes.addAndGet(recordBytes);
            // A record larger than a batch goes alone (the producer makes it a batch of its own).
            if (after <= capacity || after == recordBytes) {
                if (after >= capacity) {
                    // The batch is full: the next record starts a new sticky run.
                    current.compareAndSet(cur, new Current(choose(cluster, numPartitions)));
                }
                return cur.partition;
            }
            // It would not fit in what is left of the batch: it starts the next run (a CAS lost to another
            // thread means that thread already started it).
            current.compareAndSet(cur, new Current(choose(cluster, numPartitions)));
        }
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
