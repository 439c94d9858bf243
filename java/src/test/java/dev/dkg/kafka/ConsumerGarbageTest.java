package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Handoff garbage collection by the Java consumer ({@link ConsumerDriver#garbage}; spec 9.1, "Lease garbage
 * collection"): the shared cases of {@code spec/garbage/cases.json}, which the Rust and Python tests read too.
 */
class ConsumerGarbageTest {
    private static final String TOPIC = "orders";
    private static final String P = "0123456789abcdef0123456789abcdef";
    private static final long T0 = 1_800_000_000_000L;

    /** Every effect ignored: garbage collection has none (its keys are returned). */
    private static final class NoSink implements ConsumerDriver.Sink {
        @Override
        public void commitSync(List<ConsumerDriver.Commit> commits) {}

        @Override
        public void announce(HandoffRecords.Progress progress) {}

        @Override
        public void assigned(List<Integer> partitions) {}

        @Override
        public void revoked(List<Integer> partitions) {}

        @Override
        public void epoch(CoreTypes.Drained drained, List<Integer> owned, int partitions) {}

        @Override
        public void split(CoreTypes.SplitChange change) {}

        @Override
        public void pause(int partition) {}

        @Override
        public void resume(int partition) {}
    }

    /**
     * A member of the 2-partition topic {@code orders} whose lease clamp is {@code maxLeaseMs} and wall clock
     * {@code nowMs}, keeping {@code keep} epochs, owning {@code owned}.
     */
    private static ConsumerDriver<Object> member(long maxLeaseMs, long nowMs, int keep, int... owned) {
        CoreTypes.Config cfg = new CoreTypes.Config(10_000, 5_000_000_000L, 4096, keep, 10_000_000_000L, maxLeaseMs);
        ConsumerDriver<Object> d = new ConsumerDriver<>(TOPIC, "g", 2, cfg, new NoSink(), 0, nowMs);
        List<ConsumerDriver.Assigned> parts = new ArrayList<>();
        for (int p : owned) {
            parts.add(new ConsumerDriver.Assigned(p, null, null));
        }
        d.assign(parts, 0, nowMs);
        return d;
    }

    private static List<String> strings(List<byte[]> keys) {
        return keys.stream().map(k -> new String(k, StandardCharsets.UTF_8)).toList();
    }

    /** The shared cases, {@code spec/garbage/cases.json} (beside the traces the pom points {@code dkg.traces} at). */
    static JsonNode cases() throws IOException {
        String traces = System.getProperty("dkg.traces");
        assertNotNull(traces, "system property dkg.traces is not set (the pom sets it to ../spec/traces)");
        Path file = Path.of(traces).getParent().resolve("garbage").resolve("cases.json");
        return new ObjectMapper().readTree(Files.readString(file));
    }

    static Stream<Arguments> leases() throws IOException {
        JsonNode all = cases();
        List<Arguments> out = new ArrayList<>();
        for (JsonNode c : all.get("lease_cases")) {
            out.add(Arguments.of(c.get("name").asText(), c));
        }
        assertTrue(out.size() >= 8, "the shared cases are all there");
        return out.stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("leases")
    void leaseIsCollectedWithItsMarkerOnlyLongAfterItExpired(String name, JsonNode c) throws IOException {
        JsonNode all = cases();
        String topic = all.get("topic").asText();
        String producer = all.get("producer").asText();
        ConsumerDriver<Object> d = member(all.get("max_lease_ms").asLong(), all.get("read_at_ms").asLong(), 32, 0);
        // The lease as it is on the handoff topic, through the decoder every reader uses.
        ObjectNode lease = ((ObjectNode) c.get("lease")).deepCopy();
        lease.put("producer", producer).put("topic", topic).put("first_epoch", 1);
        d.handoff(Handoff.leaseKey(topic, producer), lease.toString().getBytes(StandardCharsets.UTF_8), 0);
        d.handoff(Handoff.markerKey(topic, producer), Handoff.marker(producer, topic, 2, new long[] {0, 0}), 0);
        List<String> want = c.get("collected").asBoolean()
                ? List.of("marker/" + topic + "/" + producer, "lease2/" + topic + "/" + producer) : List.of();
        assertEquals(want, strings(d.garbage(c.get("now_ms").asLong())));
    }

    @Test
    void historyBelowWhatEveryMemberKeepsIsCollected() throws IOException {
        JsonNode all = cases();
        String topic = all.get("topic").asText();
        int n = 0;
        for (JsonNode c : all.get("history_cases")) {
            ConsumerDriver<Object> d = member(all.get("max_lease_ms").asLong(), all.get("read_at_ms").asLong(),
                    c.get("keep").asInt(), 0);
            for (JsonNode e : c.get("epochs")) {
                byte[] doc = Docs.base().topic(topic).partitions(2).table(0, 1).epoch(e.asLong()).bytes();
                d.handoff(Handoff.historyKey(topic, e.asLong()), doc, 0);
            }
            for (JsonNode e : c.get("tombstoned")) {
                d.handoff(Handoff.historyKey(topic, e.asLong()), null, 0);
            }
            List<String> want = new ArrayList<>();
            for (JsonNode e : c.get("collected")) {
                want.add("assignment/" + topic + "/" + e.asLong());
            }
            assertEquals(want, strings(d.garbage(all.get("read_at_ms").asLong())), c.get("name").asText());
            n++;
        }
        assertTrue(n >= 4, "the shared cases are all there");
    }

    @Test
    void onlyTheMemberOwningPartitionZeroCollects() {
        for (int[] owned : new int[][] {{1}, {0}}) {
            ConsumerDriver<Object> d = member(Long.MAX_VALUE / 2, T0, 32, owned);
            d.handoff(Handoff.leaseKey(TOPIC, P), Handoff.lease(P, TOPIC, 1, 3_000, T0 - 1_000_000, -1), 0);
            assertEquals(owned[0] == 0 ? 2 : 0, d.garbage(T0).size(), "owning partition " + owned[0]);
        }
    }
}
