package dev.dkg.kafka.streams;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import dev.dkg.kafka.Assignment;
import dev.dkg.kafka.DkgRouter;
import dev.dkg.kafka.Murmur2;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.Set;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

class DkgStreamPartitionerTest {
    private static final String DOC = "{\"format\":\"dkg.assignment\",\"version\":1,\"topic\":\"orders\",\"partitions\":3,"
            + "\"epoch\":7,\"bucket_hash\":{\"function\":\"murmur2\",\"seed\":625341585},\"buckets\":4,"
            + "\"table\":[0,1,2,0],\"heavy\":[{\"key_b64\":\"aG90\",\"partition\":1,\"weight\":1200}],"
            + "\"params\":{\"theta\":0.01,\"epsilon\":0.005,\"mu\":4.0,\"window_records\":100000},"
            + "\"created_at_ms\":1700000000000,\"predicted_load\":[0.34,0.33,0.33]}";

    @Test
    void placesSerializedKeysLikeTheProducerAndLeavesKeylessToIt() throws Exception {
        DkgRouter router = DkgRouter.detached("_dkg.assignments");
        router.apply("orders".getBytes(StandardCharsets.UTF_8), DOC.getBytes(StandardCharsets.UTF_8));
        Assignment a = Assignment.fromJson(DOC.getBytes(StandardCharsets.UTF_8));
        try (DkgStreamPartitioner<String, String> p = new DkgStreamPartitioner<>(router, new StringSerializer())) {
            assertEquals(Optional.of(Set.of(1)), p.partitions("orders", "hot", "v", 3));
            for (int i = 0; i < 500; i++) {
                String key = "user-" + i;
                int want = a.partitionFor(key.getBytes(StandardCharsets.UTF_8));
                assertEquals(Optional.of(Set.of(want)), p.partitions("orders", key, null, 3));
                // Another partition count: Kafka's default placement.
                int fallback = Murmur2.kafkaPartition(key.getBytes(StandardCharsets.UTF_8), 5);
                assertEquals(Optional.of(Set.of(fallback)), p.partitions("orders", key, null, 5));
            }
            assertEquals(Optional.empty(), p.partitions("orders", null, "v", 3));
            // Answers are cached: the same object each time.
            assertSame(p.partitions("orders", "hot", null, 3), p.partitions("orders", "hot", null, 3));
            assertSame(router, p.router());
        }
    }

    @Test
    void serializerFailuresAndNullBytesLeaveTheRecordToStreams() {
        DkgRouter router = DkgRouter.detached("_dkg.assignments");
        Serializer<String> failing = (topic, data) -> {
            throw new IllegalStateException("boom");
        };
        Serializer<String> nulls = (topic, data) -> null;
        try (DkgStreamPartitioner<String, String> p = new DkgStreamPartitioner<>(router, failing);
                DkgStreamPartitioner<String, String> q = new DkgStreamPartitioner<>(router, nulls)) {
            assertEquals(Optional.empty(), p.partitions("orders", "k", null, 3));
            assertEquals(Optional.empty(), q.partitions("orders", "k", null, 3));
        }
    }
}
