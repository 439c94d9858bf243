package dev.dkg.kafka;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.utils.Utils;

/** Test clusters: one node, topics with a given partition count; some partitions may lack a leader. */
final class Clusters {
    private Clusters() {}

    /**
     * Kafka's keyed placement, {@code toPositive(murmur2(key)) % n}, from the client's public {@code Utils}: what
     * the built-in partitioner does on every client version (its {@code BuiltInPartitioner} is internal and 3.3+).
     */
    static int kafkaPartition(byte[] key, int n) {
        return Utils.toPositive(Utils.murmur2(key)) % n;
    }

    static Cluster of(String topic, int partitions, int... leaderless) {
        Node node = new Node(0, "localhost", 9092);
        List<PartitionInfo> infos = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            boolean noLeader = false;
            for (int l : leaderless) {
                noLeader |= l == p;
            }
            infos.add(new PartitionInfo(topic, p, noLeader ? null : node, new Node[] {node}, new Node[] {node}));
        }
        return new Cluster("test", List.of(node), infos, Set.of(), Set.of());
    }
}
