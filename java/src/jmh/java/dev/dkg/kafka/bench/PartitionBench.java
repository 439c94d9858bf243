package dev.dkg.kafka.bench;

import dev.dkg.kafka.Assignment;
import dev.dkg.kafka.AssignmentException;
import dev.dkg.kafka.DkgPartitioner;
import dev.dkg.kafka.DkgRouter;
import dev.dkg.kafka.it.Doc;
import dev.dkg.kafka.it.Zipf;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.metrics.Sensor;
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
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Cost of one keyed placement: the plug-in ({@code DkgPartitioner.partition()}, the {@code DkgRouter} under it and
 * the bare {@code Assignment} lookup) against the client's own keyed placement of the same keys
 * ({@code BuiltInPartitioner.partitionForKey} and the spelled-out {@code toPositive(murmur2(k)) % n}). The
 * realistic case of BENCHMARKS.md "Lookup speed": 12 partitions, 64 * 12 buckets, 50 heavy keys (the Zipf head),
 * a Zipf(1.0) stream over 10^4 keys; key lengths 6, 16 and 36 bytes. Target: {@code dkgPartitioner} at most 1.5x
 * {@code builtInWithCluster} (the producer's own keyed path, partition count lookup included). Each invocation
 * places {@value #BATCH} keys; scores are per key.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class PartitionBench {
    public static final int BATCH = 4096;
    public static final int PARTITIONS = 12;
    public static final String TOPIC = "bench";

    @Param({"6", "16", "36"})
    public int keyLength;

    /**
     * The router's metrics recording level: {@code INFO} (the default: heavy and bucket records counted together)
     * or {@code DEBUG} (counted apart, {@code -p metricsLevel=DEBUG}).
     */
    @Param({"INFO"})
    public String metricsLevel;

    private byte[][] stream;
    private Assignment assignment;
    private DkgRouter router;
    private DkgPartitioner partitioner;
    private Cluster cluster;

    /** The bench's keys, assignment, router and cluster (shared with {@code dev.dkg.kafka.LookupPartsBench}). */
    public static final class Fixture {
        public final byte[][] stream;
        public final Assignment assignment;
        public final DkgRouter router;
        public final Cluster cluster;

        private Fixture(byte[][] stream, Assignment assignment, DkgRouter router, Cluster cluster) {
            this.stream = stream;
            this.assignment = assignment;
            this.router = router;
            this.cluster = cluster;
        }

        /** Keys of {@code keyLength} bytes, the router at the default recording level. */
        public static Fixture make(int keyLength) throws AssignmentException {
            return make(keyLength, Sensor.RecordingLevel.INFO);
        }

        /** Keys of {@code keyLength} bytes, the router at recording level {@code level}. */
        public static Fixture make(int keyLength, Sensor.RecordingLevel level) throws AssignmentException {
            Zipf zipf = new Zipf(10_000, 1.0, 42);
            List<Doc.Heavy> heavy = new ArrayList<>();
            for (int rank = 1; rank <= 50; rank++) {
                heavy.add(new Doc.Heavy(key(rank, keyLength), rank % PARTITIONS));
            }
            Doc doc = Doc.shuffled(TOPIC, PARTITIONS, 1, 64, 1, heavy);
            Assignment assignment = Assignment.fromJson(doc.bytes());
            // A router fed directly (no broker), shared with a partitioner the way a Streams app shares one.
            DkgRouter router = DkgRouter.detached("bench-control", level);
            router.apply(TOPIC.getBytes(StandardCharsets.UTF_8), doc.bytes());
            if (router.assignment(TOPIC) == null) {
                throw new IllegalStateException("the bench assignment was not adopted");
            }
            List<PartitionInfo> infos = new ArrayList<>();
            Node node = new Node(0, "localhost", 9092);
            for (int p = 0; p < PARTITIONS; p++) {
                infos.add(new PartitionInfo(TOPIC, p, node, new Node[] {node}, new Node[] {node}));
            }
            Cluster cluster = new Cluster("bench", List.of(node), infos, Set.of(), Set.of());
            byte[][] stream = new byte[BATCH][];
            for (int i = 0; i < BATCH; i++) {
                stream[i] = key(zipf.nextRank(), keyLength);
            }
            return new Fixture(stream, assignment, router, cluster);
        }
    }

    @Setup
    public void setup() throws AssignmentException {
        Fixture f = Fixture.make(keyLength, Sensor.RecordingLevel.forName(metricsLevel));
        stream = f.stream;
        assignment = f.assignment;
        router = f.router;
        cluster = f.cluster;
        partitioner = new DkgPartitioner(router, 16384);
    }

    @TearDown
    public void tearDown() {
        partitioner.close();
        router.close();
    }

    /** The key of {@code rank}, exactly {@code length} bytes: the rank's digits left-padded with {@code k0..}. */
    static byte[] key(int rank, int length) {
        byte[] out = new byte[length];
        Arrays.fill(out, (byte) '0');
        out[0] = 'k';
        byte[] digits = Integer.toString(rank).getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(digits, 0, out, length - digits.length, digits.length);
        return out;
    }

    /** {@code DkgPartitioner.partition()} as the producer calls it (partition count from the Cluster). */
    @Benchmark
    @OperationsPerInvocation(BATCH)
    public int dkgPartitioner() {
        int acc = 0;
        for (byte[] k : stream) {
            acc += partitioner.partition(TOPIC, k, k, null, null, cluster);
        }
        return acc;
    }

    /** The router under it: topic state, partition-count check, lookup, route counter. */
    @Benchmark
    @OperationsPerInvocation(BATCH)
    public int dkgRouter() {
        int acc = 0;
        for (byte[] k : stream) {
            acc += router.partition(TOPIC, k, PARTITIONS);
        }
        return acc;
    }

    /** The bare lookup of {@code Assignment}. */
    @Benchmark
    @OperationsPerInvocation(BATCH)
    public int assignmentLookup() {
        int acc = 0;
        for (byte[] k : stream) {
            acc += assignment.partitionFor(k);
        }
        return acc;
    }

    /**
     * What {@code KafkaProducer} does for a keyed record without a {@code partitioner.class}: the partition count
     * from the Cluster, then {@code BuiltInPartitioner.partitionForKey}. The baseline for {@link #dkgPartitioner}.
     */
    @Benchmark
    @OperationsPerInvocation(BATCH)
    public int builtInWithCluster() {
        int acc = 0;
        for (byte[] k : stream) {
            acc += BuiltInPartitioner.partitionForKey(k, cluster.partitionsForTopic(TOPIC).size());
        }
        return acc;
    }

    @Benchmark
    @OperationsPerInvocation(BATCH)
    public int builtInPartitionForKey() {
        int acc = 0;
        for (byte[] k : stream) {
            acc += BuiltInPartitioner.partitionForKey(k, PARTITIONS);
        }
        return acc;
    }

    @Benchmark
    @OperationsPerInvocation(BATCH)
    public int murmur2Modulo() {
        int acc = 0;
        for (byte[] k : stream) {
            acc += Utils.toPositive(Utils.murmur2(k)) % PARTITIONS;
        }
        return acc;
    }

}
