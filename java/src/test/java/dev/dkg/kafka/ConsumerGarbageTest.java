package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.api.Test;

/**
 * Handoff garbage collection by the Java consumer ({@link ConsumerDriver#garbage}; spec 9.1, "Lease garbage
 * collection"): the rule of the Rust core's {@code Core::collectable_leases} and the Rust driver's history floor.
 */
class ConsumerGarbageTest {
    private static final String TOPIC = "orders";
    private static final String P = "0123456789abcdef0123456789abcdef";
    private static final long T0 = 1_800_000_000_000L;
    /** Epochs of history every member keeps (small here, 32 by default). */
    private static final int KEEP = 4;

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

    /** A member of a 3-partition topic at wall time {@code T0} owning {@code owned}. */
    private static ConsumerDriver<Object> member(int... owned) {
        CoreTypes.Config cfg = new CoreTypes.Config(10_000, 5_000_000_000L, 4096, KEEP, 10_000_000_000L,
                Long.MAX_VALUE / 2);
        ConsumerDriver<Object> d = new ConsumerDriver<>(TOPIC, "g", 3, cfg, new NoSink(), 0, T0);
        List<ConsumerDriver.Assigned> parts = new ArrayList<>();
        for (int p : owned) {
            parts.add(new ConsumerDriver.Assigned(p, null, null));
        }
        d.assign(parts, 0, T0);
        return d;
    }

    private static List<String> strings(List<byte[]> keys) {
        return keys.stream().map(k -> new String(k, StandardCharsets.UTF_8)).toList();
    }

    static Stream<Arguments> leases() {
        long minute = 60_000;
        return Stream.of(
                // name, lease_ms, expires_at_ms, closed_at_epoch (-1: live), now_ms, collected
                Arguments.of("unexpired", 3_000, T0 + 3_000, -1, T0, false),
                Arguments.of("expired, within the 60 s floor of the grace", 3_000, T0 - 1_000, -1,
                        T0 - 1_000 + minute, false),
                Arguments.of("expired, past the 60 s floor", 3_000, T0 - 1_000, -1, T0 - 1_000 + minute + 1, true),
                Arguments.of("a 30 s lease: the grace is 3 x 30 s", 30_000, T0, -1, T0 + 90_000, false),
                Arguments.of("a 30 s lease, past 3 x 30 s", 30_000, T0, -1, T0 + 90_001, true),
                Arguments.of("a lease_ms of 2^63 (unsigned): the grace saturates", Long.MIN_VALUE, T0, -1,
                        T0 + 10 * minute, false),
                Arguments.of("closed at an epoch the group has not settled", 3_000, T0, 5, T0 + 10 * minute, false),
                Arguments.of("closed at an epoch the group settled (0)", 3_000, T0, 0, T0 + 10 * minute, true));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("leases")
    void leaseIsCollectedWithItsMarkerOnlyLongAfterItExpired(String name, long leaseMs, long expiresAtMs,
            long closedAtEpoch, long nowMs, boolean collected) {
        ConsumerDriver<Object> d = member(0, 1, 2);
        d.handoff(Handoff.leaseKey(TOPIC, P), Handoff.lease(P, TOPIC, 1, leaseMs, expiresAtMs, closedAtEpoch), 0);
        d.handoff(Handoff.markerKey(TOPIC, P), Handoff.marker(P, TOPIC, 2, new long[] {0, 0, 0}), 0);
        List<String> want = collected ? List.of("marker/" + TOPIC + "/" + P, "lease2/" + TOPIC + "/" + P) : List.of();
        assertEquals(want, strings(d.garbage(nowMs)));
    }

    @Test
    void onlyTheMemberOwningPartitionZeroCollects() {
        for (int[] owned : new int[][] {{1, 2}, {0}}) {
            ConsumerDriver<Object> d = member(owned);
            d.handoff(Handoff.leaseKey(TOPIC, P), Handoff.lease(P, TOPIC, 1, 3_000, T0 - 1_000_000, -1), 0);
            assertEquals(owned[0] == 0 ? 2 : 0, d.garbage(T0).size(), "owning " + owned.length + " partitions");
        }
    }

    @Test
    void historyBelowWhatEveryMemberKeepsIsCollectedOnceTombstoned() {
        ConsumerDriver<Object> d = member(0);
        for (long e = 1; e <= KEEP + 3; e++) {
            byte[] doc = Docs.base().topic(TOPIC).partitions(3).epoch(e).bytes();
            d.handoff(Handoff.historyKey(TOPIC, e), doc, 0);
        }
        // Epochs 1..7 known, the newest 4 kept: 1, 2 and 3 go.
        List<String> want = List.of("assignment/" + TOPIC + "/1", "assignment/" + TOPIC + "/2",
                "assignment/" + TOPIC + "/3");
        assertEquals(want, strings(d.garbage(T0)));
        // A tombstone read back (ours, or another member's) leaves nothing more to collect of that epoch.
        d.handoff(Handoff.historyKey(TOPIC, 1), null, 0);
        assertEquals(want.subList(1, 3), strings(d.garbage(T0)));
    }
}
