package dev.dkg.kafka.bench;

import dev.dkg.kafka.AssignmentException;
import dev.dkg.kafka.DkgPartitioner;
import java.util.function.LongUnaryOperator;
import org.apache.kafka.common.Cluster;

/**
 * The measured loop of {@link ClientVersionsBench}, loaded once per kafka-clients version (each in its own class
 * loader, with its own copy of the plug-in's classes): {@code applyAsLong(n)} places {@code n} times the
 * {@link PartitionBench} stream of keys through {@code DkgPartitioner.partition()} (the same call as
 * {@code PartitionBench.dkgPartitioner}) and returns a checksum of the partitions.
 */
public final class ClientVersionLoop implements LongUnaryOperator {
    private final byte[][] stream;
    private final DkgPartitioner partitioner;
    private final Cluster cluster;

    /** The PartitionBench fixture for keys of {@code keyLength} bytes. */
    public ClientVersionLoop(int keyLength) throws AssignmentException {
        PartitionBench.Fixture f = PartitionBench.Fixture.make(keyLength);
        this.stream = f.stream;
        this.cluster = f.cluster;
        this.partitioner = new DkgPartitioner(f.router, 16384);
    }

    @Override
    public long applyAsLong(long batches) {
        long acc = 0;
        for (long b = 0; b < batches; b++) {
            for (byte[] k : stream) {
                acc += partitioner.partition(PartitionBench.TOPIC, null, k, null, null, cluster);
            }
        }
        return acc;
    }
}
