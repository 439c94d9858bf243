package dev.dkg.kafka;

import dev.dkg.kafka.bench.PartitionBench;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.utils.Utils;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The parts of {@code PartitionBench.dkgPartitioner} one at a time, on the same keys: Kafka's murmur2, DKG's
 * seeded murmur2, the hash plus the bucket (fastmod), the whole {@code Assignment} lookup and the router's route
 * (lookup plus route counter), the cached partition count and the route counter alone. In this package to reach
 * the package-private lookup. Run with {@code -p keyLength=6} (or 16, 36) like {@code PartitionBench}.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(1)
public class LookupPartsBench {
    @Param({"6"})
    public int keyLength;

    private PartitionBench.Fixture f;
    private int seed;

    @Setup
    public void setup() throws AssignmentException {
        f = PartitionBench.Fixture.make(keyLength);
        seed = f.assignment.bucketSeed();
    }

    @Benchmark
    @OperationsPerInvocation(PartitionBench.BATCH)
    public int kafkaMurmur2() {
        int acc = 0;
        for (byte[] k : f.stream) {
            acc += Utils.murmur2(k);
        }
        return acc;
    }

    @Benchmark
    @OperationsPerInvocation(PartitionBench.BATCH)
    public int seededMurmur2() {
        int acc = 0;
        for (byte[] k : f.stream) {
            acc += Murmur2.hash(k, seed);
        }
        return acc;
    }

    @Benchmark
    @OperationsPerInvocation(PartitionBench.BATCH)
    public int bucket() {
        int acc = 0;
        for (byte[] k : f.stream) {
            acc += f.assignment.bucket(k);
        }
        return acc;
    }

    @Benchmark
    @OperationsPerInvocation(PartitionBench.BATCH)
    public int lookup() {
        int acc = 0;
        for (byte[] k : f.stream) {
            acc += f.assignment.lookup(k);
        }
        return acc;
    }

    @Benchmark
    @OperationsPerInvocation(PartitionBench.BATCH)
    public int route() {
        int acc = 0;
        DkgRouter.TopicState s = f.router.state(PartitionBench.TOPIC);
        for (byte[] k : f.stream) {
            acc += s.route(k, PartitionBench.PARTITIONS);
        }
        return acc;
    }

    @Benchmark
    @OperationsPerInvocation(PartitionBench.BATCH)
    public int partitionCount() {
        int acc = 0;
        DkgRouter.TopicState s = f.router.state(PartitionBench.TOPIC);
        for (byte[] k : f.stream) {
            acc += s.partitionCount(f.cluster) + k.length;
        }
        return acc;
    }

    @Benchmark
    @OperationsPerInvocation(PartitionBench.BATCH)
    public int counterOnly() {
        int acc = 0;
        DkgRouter.TopicState s = f.router.state(PartitionBench.TOPIC);
        for (byte[] k : f.stream) {
            s.records.add(k[0] & 1);
            acc += k.length;
        }
        return acc;
    }
}
