package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * The consumer state machine's parts, ported with the Rust unit tests of {@code consumer/hold.rs},
 * {@code progress.rs}, {@code history.rs}, {@code split.rs} and the handoff decoders of {@code handoff.rs}.
 */
class ConsumerPartsTest {
    static RecordKey k(String s) {
        return new RecordKey(s.getBytes(StandardCharsets.UTF_8));
    }

    static HoldBuffer.Held<String> held(long offset, long epoch, HoldBuffer.Wait wait) {
        return new HoldBuffer.Held<>(offset, epoch, wait, epoch, 0, "m");
    }

    @Test
    void holdALowerEpochBypassesHigherHeldEpochsOfItsKey() {
        HoldBuffer<String> b = new HoldBuffer<>();
        b.hold(k("k"), held(1, 4, HoldBuffer.Wait.allBut(0)));
        b.hold(k("k"), held(2, 2, HoldBuffer.Wait.NOTHING));
        b.hold(k("k"), held(3, 4, HoldBuffer.Wait.NOTHING));
        b.hold(k("k"), held(4, 3, HoldBuffer.Wait.NOTHING));
        List<Long> out = new ArrayList<>();
        b.release(0, h -> h.wait.isNothing(), r -> out.add(r.offset));
        assertEquals(List.of(2L, 4L), out, "3 waits behind 1 (same epoch), 2 and 4 bypass");
        out.clear();
        b.release(0, h -> true, r -> out.add(r.offset));
        assertEquals(List.of(1L, 3L), out);
    }

    @Test
    void holdFifoPerKeyAndUnprocessedTracking() {
        HoldBuffer<String> b = new HoldBuffer<>();
        b.hold(k("k"), held(10, 5, HoldBuffer.Wait.partitions(new int[] {1})));
        b.hold(k("k"), held(12, 5, HoldBuffer.Wait.NOTHING));
        b.hold(k("j"), held(11, 5, HoldBuffer.Wait.allBut(0)));
        assertEquals(3, b.held());
        assertEquals(2, b.heldKeys());
        assertArrayEquals(new long[] {5, 5}, b.keyEpochs(k("k"), Long.MAX_VALUE));
        assertNull(b.keyEpochs(k("x"), Long.MAX_VALUE));
        assertNull(b.keyEpochs(k("k"), 4), "epochs above the known ones do not count");
        assertEquals(10L, b.lowestUnprocessed());
        assertEquals(5L, b.minEpochBelow(12));
        assertNull(b.minEpochBelow(10));
        List<long[]> out = new ArrayList<>();
        assertEquals(0, b.release(5, h -> h.wait.isNothing(), r -> out.add(new long[] {r.offset, r.heldForNanos})));
        b.release(7, h -> h.wait.allBut < 0, r -> out.add(new long[] {r.offset, r.heldForNanos}));
        assertEquals(2, out.size());
        assertArrayEquals(new long[] {10, 7}, out.get(0));
        assertArrayEquals(new long[] {12, 7}, out.get(1));
        assertEquals(1, b.held());
        assertEquals(10L, b.lowestUnprocessed(), "released, not processed");
        b.processed(10);
        b.processed(12);
        assertEquals(11L, b.lowestUnprocessed());
        b.release(0, h -> true, r -> { });
        b.processed(11);
        assertTrue(b.isEmpty());
        assertEquals(0, b.held());
    }

    static final String A = "a".repeat(32);
    static final String B = "b".repeat(32);
    static final String C = "c".repeat(32);

    static HandoffRecords.Lease lease(String y, long first, long closed) {
        return new HandoffRecords.Lease(y, "t", first, 1000, 1000, closed);
    }

    @Test
    void progressAReachedMarkerPassesOnceNothingOlderBelowItIsUnprocessed() {
        PartitionProgress p = new PartitionProgress(null, null);
        java.util.function.LongFunction<Long> below = o -> o > 5 ? 2L : null;
        assertTrue(p.endReached(A, 3, 10, below));
        assertTrue(p.hasPending());
        assertTrue(p.endReached(B, 2, 8, below));
        assertEquals(2, p.passed(A));
        assertEquals(2, p.passed(B));
        assertFalse(p.recheck(below));
        PartitionProgress q = new PartitionProgress(null, null);
        assertFalse(q.endReached(A, 3, 10, o -> 0L));
        assertEquals(0, q.passed(A));
        assertTrue(p.recheck(o -> null));
        assertEquals(3, p.passed(A));
        assertFalse(p.hasPending());
        assertFalse(p.endReached(A, 3, 10, o -> null));
        assertFalse(p.endReached(A, 2, 12, o -> null));
        assertTrue(p.endReached(A, 4, 20, o -> 4L), "a held record of the marker's own epoch does not block it");
    }

    @Test
    void progressDrainedTable() {
        PartitionProgress p = new PartitionProgress(null, null);
        p.endReached(A, 5, 1, o -> null);
        p.endReached(B, 3, 2, o -> null);
        long n = HandoffRecords.NOT_CLOSED;
        Object[][] cases = {
            {List.of(), 6L},
            {List.of(lease(A, 0, n)), 5L},
            {List.of(lease(A, 0, n), lease(B, 0, n)), 3L},
            {List.of(lease(A, 0, n), lease(B, 4, n)), 4L},
            {List.of(lease(A, 0, n), lease(B, 0, 3)), 5L},
            {List.of(lease(C, 0, 4)), 0L},
            {List.of(lease(C, 6, n)), 6L},
        };
        for (Object[] c : cases) {
            @SuppressWarnings("unchecked")
            List<HandoffRecords.Lease> leases = (List<HandoffRecords.Lease>) c[0];
            assertEquals((long) c[1], p.drained(leases, 10, 6), leases.toString());
        }
        assertEquals(5, p.drained(List.of(lease(A, 0, n), lease(B, 0, n).withExpiry(5)), 10, 6));
        // Closed at 6 and expired, its marker of 6 not passed (passed 3): still awaited for 4..6.
        assertEquals(3, p.drained(List.of(lease(A, 0, n), lease(B, 0, 6).withExpiry(5)), 10, 6));
        // Closed at 3 and expired, passed 3: nothing more to wait for.
        assertEquals(5, p.drained(List.of(lease(A, 0, n), lease(B, 0, 3).withExpiry(5)), 10, 6));
    }

    @Test
    void leaseAwaitedTable() {
        long n = HandoffRecords.NOT_CLOSED;
        // {first_epoch, expires, closed, epoch asked, now, awaited}: the Rust table of handoff.rs.
        long[][] cases = {
            {2, 100, n, 3, 50, 1},
            {3, 100, n, 3, 50, 0},
            {2, 100, n, 3, 100, 0},
            {0, 100, 4, 4, 50, 1},
            {0, 100, 4, 5, 50, 0},
            {0, 100, 4, 4, 200, 1},
            {0, 100, 4, 5, 200, 0},
            {4, 100, 4, 4, 200, 0},
        };
        for (long[] c : cases) {
            HandoffRecords.Lease l = new HandoffRecords.Lease(A, "t", c[0], 1000, c[1], c[2]);
            assertEquals(c[5] == 1, l.awaitedFor(c[3], c[4]), java.util.Arrays.toString(c));
        }
    }

    @Test
    void progressMetadataRoundTripsAndDrivesTheSkipRule() throws Exception {
        PartitionProgress p = new PartitionProgress(null, null);
        p.endReached(A, 4, 100, o -> null);
        p.endReached(B, 3, 80, o -> null);
        List<HandoffRecords.Lease> leases = List.of(lease(A, 0, -1), lease(B, 0, -1));
        boolean[] leftOut = {true};
        String json = p.meta(3, 10, 10, List.of(), leases, 10, 4096, new int[1], leftOut);
        assertFalse(leftOut[0], "no window to leave out");
        CommitMeta meta = CommitMeta.parse(json);
        assertEquals(3, meta.drained);
        assertEquals(new CommitMeta.PassedAt(4, 100), meta.passed.get(A));
        assertEquals(CommitMeta.NO_NEXT, meta.next);
        assertTrue(meta.unprocessed.isEmpty());
        PartitionProgress next = new PartitionProgress(meta, 10L);
        assertEquals(3, next.passed(B));
        long[][] cases = {{50, 2, 1}, {50, 3, 1}, {50, 4, 0}, {90, 3, 1}, {90, 2, 1}, {99, 4, 0}, {100, 0, 0},
            {85, 3, 1}};
        for (long[] c : cases) {
            assertEquals(c[2] == 1, next.skip(c[0], c[1]), c[0] + " " + c[1]);
        }
        next.forgetSkipsBelow(90);
        assertTrue(next.skip(95, 3));
        assertFalse(next.skip(95, EpochHeader.NONE), "unstamped records are never skipped by the marker rule");
        next.forgetSkipsBelow(200);
        assertFalse(next.skip(95, 3));

        assertNull(CommitMeta.parse(""));
        assertThrows(StrictJson.Malformed.class, () -> CommitMeta.parse("{"));
        assertThrows(StrictJson.Malformed.class, () -> CommitMeta.parse("{\"v\":9,\"d\":0,\"p\":{}}"));
        int[] size = new int[1];
        assertNull(p.meta(3, 10, 10, List.of(), leases, 10, 20, size, leftOut));
        assertTrue(size[0] > 20);
        String small = p.meta(3, 10, 500, List.of(10L, 300L), List.of(lease(A, 0, -1)), 10, 70, size, leftOut);
        assertFalse(small.contains(B), small);
        assertFalse(small.contains("\"u\""), small);
        assertTrue(leftOut[0], "the window was left out");
        // Over the limit without any window (nothing fetched above the offset): nothing left out.
        String plain = p.meta(3, 10, 10, List.of(), List.of(lease(A, 0, -1)), 10, 70, size, leftOut);
        assertFalse(leftOut[0], plain);
    }

    @Test
    void progressProcessedWindowSkipsEverythingButTheUnprocessed() throws Exception {
        PartitionProgress p = new PartitionProgress(null, null);
        boolean[] leftOut = {true};
        String json = p.meta(0, 100, 110, List.of(100L, 104L, 107L), List.of(), 0, 4096, new int[1], leftOut);
        assertTrue(json.contains("\"u\":[0,4,7]"), json);
        assertFalse(leftOut[0], "the window fits");
        CommitMeta meta = CommitMeta.parse(json);
        PartitionProgress next = new PartitionProgress(meta, 100L);
        List<Long> skipped = new ArrayList<>();
        for (long o = 100; o < 112; o++) {
            if (next.skip(o, EpochHeader.NONE)) {
                skipped.add(o);
            }
        }
        assertEquals(List.of(101L, 102L, 103L, 105L, 106L, 108L, 109L), skipped);
        next.forgetSkipsBelow(110);
        assertFalse(next.skip(101, EpochHeader.NONE));
        assertFalse(new PartitionProgress(meta, null).skip(101, EpochHeader.NONE),
                "without the committed offset the window is not trusted");
    }

    @Test
    void progressAMarkerEndBelowThePositionOrTheCommittedOffsetIsReachedAtOnce() {
        PartitionProgress p = new PartitionProgress(null, null);
        p.setStart(50);
        p.setStart(10);
        assertEquals(50L, p.start());
        assertTrue(p.onMarker(A, 7, 40, 50L, o -> null));
        assertFalse(p.onMarker(B, 7, 60, 50L, o -> null));
        assertTrue(p.hasAwaiting());
        assertTrue(p.arrived(60L, o -> null));
        assertEquals(7, p.passed(A));
        assertEquals(7, p.passed(B));
        PartitionProgress q = new PartitionProgress(null, 60L);
        assertTrue(q.onMarker(A, 3, 60, null, o -> null));
        assertFalse(q.onMarker(B, 3, 61, null, o -> null));
    }

    static Assignment a(long epoch, int hotOn) {
        return Docs.base().topic("t").partitions(4).epoch(epoch).table(0, 1, 2, 3).heavy("hot", hotOn).build();
    }

    @Test
    void historyHomesOverRanges() {
        EpochHistory h = new EpochHistory(4, 3);
        assertTrue(h.insert(a(1, 0)));
        assertFalse(h.insert(a(1, 0)));
        h.insert(a(2, 3));
        h.insert(a(3, 3));
        assertEquals(3, h.maxEpoch());
        byte[] hot = "hot".getBytes(StandardCharsets.UTF_8);
        int dflt = Murmur2.kafkaPartition(hot, 4);
        assertEquals(dflt, h.home(k("hot"), 0));
        assertEquals(List.of(), h.homes(k("hot"), 3, 3));
        assertEquals(List.of(3), h.homes(k("hot"), 2, 3));
        assertEquals(List.of(0, 3), h.homes(k("hot"), 1, 3));
        assertEquals(List.of(0, 3), h.homes(k("hot"), 1, 4));
        assertNull(h.homes(k("hot"), 1, 5), "epoch 4 unknown");
        List<Integer> want = new ArrayList<>(List.of(dflt));
        if (dflt != 0) {
            want.add(0);
        }
        assertEquals(want, h.homes(k("hot"), 0, 2));
        h.insert(a(4, 1));
        assertEquals(2, h.minEpoch());
        assertNull(h.homes(k("hot"), 1, 3));
        assertEquals(3, h.before(4).epoch());
        assertEquals(2, h.collectableBelow());
        h.setPartitions(8);
        assertEquals(Murmur2.kafkaPartition(hot, 8), h.home(k("hot"), 4));
    }

    @Test
    void splitLabelsFollowTheEpochWindow() {
        EpochHistory h = new EpochHistory(4, 8);
        h.insert(ConsumerCoreTest.placed(1, "hot", new int[] {0}));
        h.insert(ConsumerCoreTest.placed(2, "hot", new int[] {1, 2}));
        h.insert(ConsumerCoreTest.placed(3, "hot", new int[] {1}));
        h.insert(ConsumerCoreTest.placed(4, "hot", new int[] {0, 3}));
        SplitView v = SplitView.of(h);
        assertFalse(v.isEmpty());
        long n = EpochHeader.NONE;
        long[][] cases = {{1, 1, n, 2}, {0, 1, n, 0}, {1, 2, n, 2}, {1, 3, n, 0}, {3, 3, n, 2}, {2, 4, n, 0},
            {0, 0, 3, 0}, {0, 0, 4, 2}, {0, 0, 9, 0}};
        for (long[] c : cases) {
            assertEquals(c[3], v.label(k("hot"), (int) c[0], c[1], c[2]), java.util.Arrays.toString(c));
            assertEquals(0, v.label(k("cold"), (int) c[0], c[1], c[2]));
        }
        assertArrayEquals(new long[] {2, 2}, v.splitEpoch(k("hot"), 1, 1));
        assertTrue(v.inTransition(1, 1, 1));
        assertFalse(v.inTransition(1, 1, 2));
        assertFalse(v.inTransition(0, 1, 1), "0 is no part of epoch 2");
        h.setPartitions(8);
        assertTrue(SplitView.of(h).isEmpty(), "an assignment for another partition count splits nothing");
    }

    static byte[] u(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void handoffKeysParseFromTheRight() {
        assertEquals(new HandoffReader.Key(HandoffReader.Key.Kind.LEASE, "t/x", A, -1),
                HandoffReader.parseKey(u("lease2/t/x/" + A)));
        assertEquals(new HandoffReader.Key(HandoffReader.Key.Kind.MARKER, "t", A, -1),
                HandoffReader.parseKey(u("marker/t/" + A)));
        assertEquals(new HandoffReader.Key(HandoffReader.Key.Kind.ASSIGNMENT, "t", null, 7),
                HandoffReader.parseKey(u("assignment/t/7")));
        assertEquals(new HandoffReader.Key(HandoffReader.Key.Kind.PROGRESS, "t", "g/h", 3),
                HandoffReader.parseKey(u("progress/g/h/t/3")));
        assertNull(HandoffReader.parseKey(u("lease/t/" + A)), "the design stage's keys are unknown");
        assertNull(HandoffReader.parseKey(u("marker/t/" + A.toUpperCase(java.util.Locale.ROOT))));
        assertNull(HandoffReader.parseKey(u("marker//" + A)));
        assertNull(HandoffReader.parseKey(u("progress/t/3")));
        assertNull(HandoffReader.parseKey(u("assignment/t/x")));
        assertNull(HandoffReader.parseKey(null));
    }

    @Test
    void handoffValuesDecodeAsTheRustDecoderDoes() throws Exception {
        HandoffRecords.Lease l = StrictJson.readLease(u("{\"producer\":\"" + A + "\",\"topic\":\"t\",\"first_epoch\":2,"
                + "\"lease_ms\":30000,\"expires_at_ms\":99,\"mode\":\"marker\",\"extra\":[1,{}]}"));
        assertEquals(new HandoffRecords.Lease(A, "t", 2, 30000, 99, HandoffRecords.NOT_CLOSED), l);
        // The producer's own encoder's bytes read back.
        byte[] enc = Handoff.lease(A, "t", 1, 30000, 5, 4);
        assertEquals(new HandoffRecords.Lease(A, "t", 1, 30000, 5, 4), StrictJson.readLease(enc));
        assertThrows(StrictJson.Malformed.class, () -> StrictJson.readLease(u("{\"producer\":\"" + A + "\"}")));

        byte[] m = Handoff.marker(A, "t", 3, new long[] {0, 5});
        assertEquals(new HandoffRecords.Marker(A, "t", 3, new long[] {0, 5}), HandoffReader.decodeMarker("t", A, m));
        Object[][] rejects = {
            {"{", HandoffRecords.MarkerReject.MALFORMED_JSON},
            {"{\"producer\":\"" + A + "\",\"topic\":\"t\",\"epoch\":-1,\"ends\":[1]}",
                HandoffRecords.MarkerReject.MALFORMED_JSON},
            {"{\"producer\":\"" + A + "\",\"topic\":\"t\",\"epoch\":1.5,\"ends\":[1]}",
                HandoffRecords.MarkerReject.MALFORMED_JSON},
            {"{\"producer\":\"" + A + "\",\"topic\":\"t\",\"epoch\":1,\"epoch\":2,\"ends\":[1]}",
                HandoffRecords.MarkerReject.MALFORMED_JSON},
            {"{\"producer\":\"" + A + "\",\"topic\":\"u\",\"epoch\":1,\"ends\":[1]}",
                HandoffRecords.MarkerReject.KEY_MISMATCH},
            {"{\"producer\":\"" + A + "\",\"topic\":\"t\",\"epoch\":0,\"ends\":[1]}", HandoffRecords.MarkerReject.INVALID},
            {"{\"producer\":\"" + A + "\",\"topic\":\"t\",\"epoch\":1,\"ends\":[]}", HandoffRecords.MarkerReject.INVALID},
            {"{\"producer\":\"" + A + "\",\"topic\":\"t\",\"epoch\":1,\"ends\":[-1]}",
                HandoffRecords.MarkerReject.INVALID},
        };
        for (Object[] r : rejects) {
            HandoffReader.Rejected e = assertThrows(HandoffReader.Rejected.class,
                    () -> HandoffReader.decodeMarker("t", A, u((String) r[0])));
            assertEquals(r[1], e.reason, (String) r[0]);
        }

        HandoffReader.Key pk = HandoffReader.parseKey(u("progress/g/t/1"));
        HandoffRecords.Progress p = HandoffReader.decodeProgress(pk, u("{\"group\":\"g\",\"topic\":\"t\",\"partition\":1,"
                + "\"drained\":4,\"passed\":{\"" + A + "\":4},\"committed_offset\":-1,\"updated_at_ms\":7}"));
        TreeMap<String, Long> passed = new TreeMap<>();
        passed.put(A, 4L);
        assertEquals(new HandoffRecords.Progress("g", "t", 1, 4, passed, -1, 7), p);
        assertThrows(StrictJson.Malformed.class, () -> HandoffReader.decodeProgress(pk, u("{\"group\":\"g\",\"topic\":"
                + "\"t\",\"partition\":2,\"drained\":4,\"committed_offset\":-1,\"updated_at_ms\":7}")));

        CommitMeta meta = CommitMeta.parse("{\"v\":1,\"d\":2,\"p\":{\"" + A + "\":[2,-3]},\"n\":null,\"x\":1}");
        assertEquals(new CommitMeta.PassedAt(2, -3), meta.passed.get(A));
        assertEquals(CommitMeta.NO_NEXT, meta.next);
        assertThrows(StrictJson.Malformed.class, () -> CommitMeta.parse("{\"v\":1,\"d\":2,\"p\":{\"" + A
                + "\":[2]}}"));
        assertThrows(StrictJson.Malformed.class, () -> CommitMeta.parse("{\"v\":1,\"d\":2,\"p\":{\"x\":[2,1]}}"));
    }
}
