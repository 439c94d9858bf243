package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The consumer state machine (spec 9.3), ported with the Rust core's unit tests
 * ({@code crates/dkg-protocol/src/consumer/core.rs}): two members through epoch switches, one test per rule or group
 * of rules, named after it.
 */
class ConsumerCoreTest {
    static final int P = 4;
    static final String Y = "a".repeat(32);
    static final long SEC = 1_000_000_000L;

    static CoreTypes.Config cfg() {
        return new CoreTypes.Config(4, 5 * SEC, 4096, 8, 3 * SEC, 60_000);
    }

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** Every bucket on partition 0; {@code hot} on {@code hotOn}. */
    static Assignment assignment(long epoch, int hotOn) {
        return Docs.base().topic("t").partitions(P).epoch(epoch).table(0, 0, 0, 0).heavy("hot", hotOn).build();
    }

    /** Keys whole on their one partition, or split (weights 1) over several; every bucket on partition 0. */
    static Assignment placed(long epoch, Object... keysAndPlaces) {
        Docs d = Docs.base().topic("t").partitions(P).epoch(epoch).table(0);
        for (int i = 0; i < keysAndPlaces.length; i += 2) {
            String key = (String) keysAndPlaces[i];
            int[] place = (int[]) keysAndPlaces[i + 1];
            if (place.length == 1) {
                d.heavy(key, place[0]);
            } else {
                int[] w = new int[place.length];
                java.util.Arrays.fill(w, 1);
                d.split(key, place, w);
            }
        }
        return d.build();
    }

    static HandoffRecords.Lease lease(long first) {
        return new HandoffRecords.Lease(Y, "t", first, 10_000, 10_000, HandoffRecords.NOT_CLOSED);
    }

    static HandoffRecords.Marker marker(long epoch, long... ends) {
        return new HandoffRecords.Marker(Y, "t", epoch, ends);
    }

    static HandoffRecords.Progress progress(int partition, long drained) {
        return new HandoffRecords.Progress("g", "t", partition, drained, Map.of(), 0, 0);
    }

    static CoreTypes.Outcome on(ConsumerCore<Long> c, int p, long o, String key, long epoch, long now) {
        return c.onRecord(p, o, key == null ? null : b(key), epoch, o, now);
    }

    /** The test producer's marker of {@code epoch} ends right after {@code offset} on {@code partition}. */
    static void end(ConsumerCore<Long> c, int partition, long offset, long epoch) {
        c.processed();
        c.endReached(partition, offset, Y, epoch);
    }

    /** A member owning {@code parts}, knowing epoch 1 (hot on 1) and one live producer from epoch 0. */
    static ConsumerCore<Long> member(int... parts) {
        return memberWith(cfg(), parts);
    }

    static ConsumerCore<Long> memberWith(CoreTypes.Config cfg, int... parts) {
        ConsumerCore<Long> c = new ConsumerCore<>("t", "g", P, cfg);
        c.tick(0, 1);
        c.onAssignment(assignment(1, 1), 0);
        c.onLease(lease(0), 0);
        for (int p : parts) {
            c.assign(p, null, null, 0);
        }
        return c;
    }

    static Long deliver(ConsumerCore<Long> c, int p, long o, String key, long epoch) {
        c.processed();
        return on(c, p, o, key, epoch, 0) == CoreTypes.Outcome.DELIVER ? o : null;
    }

    static List<HandoffRecords.Progress> commitDue(ConsumerCore<Long> c) {
        List<HandoffRecords.Progress> out = new ArrayList<>();
        for (int p : c.progressDue()) {
            CoreTypes.Snapshot s = c.snapshot(p);
            c.committed(p, s.drained, 0);
            out.add(c.progressRecord(s));
        }
        return out;
    }

    static void announce(ConsumerCore<Long> to, List<HandoffRecords.Progress> progress) {
        for (HandoffRecords.Progress p : progress) {
            to.onProgress(p, 0);
        }
    }

    static List<Long> readyAll(ConsumerCore<Long> c) {
        List<Long> out = new ArrayList<>();
        for (Long m = c.nextReady(); m != null; m = c.nextReady()) {
            out.add(m);
        }
        return out;
    }

    static long drained(ConsumerCore<Long> c, int partition) {
        CoreTypes.Snapshot s = c.snapshot(partition);
        return s == null ? -1 : s.drained;
    }

    @Test
    void c8_c9_c10_aMovedKeyWaitsForItsOldPartitionToDrainAcrossMembers() {
        // Member A owns partition 1 (hot's home at epoch 1), member B owns 2 (hot's home at 2).
        ConsumerCore<Long> a = member(0, 1);
        ConsumerCore<Long> bb = member(2, 3);
        end(a, 0, 0, 1);
        end(a, 1, 0, 1);
        end(bb, 2, 0, 1);
        end(bb, 3, 0, 1);
        List<HandoffRecords.Progress> pa = commitDue(a);
        List<HandoffRecords.Progress> pb = commitDue(bb);
        announce(a, pb);
        announce(bb, pa);
        assertEquals(1, a.settled());
        assertEquals(1, bb.settled());

        assertEquals(1L, deliver(a, 1, 1, "hot", 1));
        a.onAssignment(assignment(2, 2), 0);
        bb.onAssignment(assignment(2, 2), 0);
        // B sees hot's epoch-2 record before A drained partition 1: held (C8).
        bb.processed();
        assertEquals(CoreTypes.Outcome.HELD, on(bb, 2, 1, "hot", 2, 0));
        // C10: an unstamped hot record while partition 2 has drained only 1: the held epoch-2 record is another
        // producer's, it does not wait.
        bb.processed();
        assertEquals(CoreTypes.Outcome.DELIVER, on(bb, 2, 2, "hot", EpochHeader.NONE, 0));
        // A key whose epoch-1 home is partition 0 waits for partition 0.
        assertNull(deliver(bb, 2, 3, "cold", 2));
        // Partition 2 drains 2; now an unstamped hot record may be the held one's producer's: it queues (C10).
        end(bb, 2, 4, 2);
        assertEquals(2, drained(bb, 2));
        bb.processed();
        assertEquals(CoreTypes.Outcome.HELD, on(bb, 2, 5, "hot", EpochHeader.NONE, 0));
        assertEquals(3, bb.heldCounts().get(2));

        assertEquals(2L, deliver(a, 1, 2, "hot", 1));
        end(a, 1, 3, 2);
        end(a, 0, 5, 2);
        pa = commitDue(a);
        assertEquals(2, pa.size());
        assertTrue(pa.stream().allMatch(p -> p.drained == 2));
        announce(bb, pa);
        // Hot's records on 2 are released in order (C9); cold (waiting for 0) too.
        List<Long> released = readyAll(bb);
        assertTrue(released.indexOf(1L) < released.indexOf(5L), "per-key FIFO: " + released);
        released.sort(null);
        assertEquals(List.of(1L, 3L, 5L), released);
        assertEquals(3, bb.takeHoldTimes().size());
        assertTrue(a.takeDrainedEpochs(1).isEmpty(), "committed() already marks hooked");
    }

    @Test
    void c5_heldRecordsBelowAMarkerEndBlockItOnlyForLaterEpochs() {
        ConsumerCore<Long> c = member(2);
        c.onAssignment(assignment(2, 2), 0);
        c.processed();
        assertEquals(CoreTypes.Outcome.HELD, on(c, 2, 10, "hot", 2, 0));
        end(c, 2, 11, 2);
        assertEquals(List.of(2), c.progressDue());
        CoreTypes.Snapshot s = c.snapshot(2);
        assertEquals(10, s.offset, "the held record keeps the commit below it");
        assertEquals(2, s.drained);
        c.onAssignment(assignment(3, 2), 0);
        end(c, 2, 12, 3);
        assertEquals(2, drained(c, 2));
        announce(c, List.of(progress(0, 2), progress(1, 2), progress(3, 2)));
        assertEquals(10L, c.nextReady());
        c.processed();
        assertEquals(3, drained(c, 2));
        assertEquals(13, c.snapshot(2).offset);
    }

    @Test
    void c11_c12_restartSkipsWhatThePreviousOwnerProcessedBelowItsMarkers() throws Exception {
        java.util.function.Function<int[], ConsumerCore<Long>> setup = parts -> {
            ConsumerCore<Long> m = member(parts);
            m.onAssignment(assignment(2, 2), 0);
            m.onAssignment(assignment(3, 1), 0);
            announce(m, List.of(progress(0, 3), progress(2, 2), progress(3, 3)));
            return m;
        };
        ConsumerCore<Long> a = setup.apply(new int[] {1});
        a.processed();
        assertEquals(CoreTypes.Outcome.HELD, on(a, 1, 5, "hot", 3, 0));
        assertNotNull(deliver(a, 1, 6, "x", 2));
        end(a, 1, 7, 3);
        CoreTypes.Snapshot s = a.snapshot(1);
        assertEquals(5, s.offset);
        assertEquals(3, s.drained);
        // A crashes; B takes partition 1 from the committed offset and metadata.
        CommitMeta meta = CommitMeta.parse(s.metadata);
        ConsumerCore<Long> bb = setup.apply(new int[0]);
        bb.assign(1, s.offset, meta, 0);
        assertNull(bb.snapshot(1));
        assertEquals(CoreTypes.Outcome.HELD, on(bb, 1, 5, "hot", 3, 0));
        bb.processed();
        assertEquals(CoreTypes.Outcome.SKIPPED, on(bb, 1, 6, "x", 2, 0), "processed by A");
        end(bb, 1, 7, 3);
        assertEquals(3, drained(bb, 1));
        announce(bb, List.of(progress(2, 3)));
        assertEquals(5L, bb.nextReady());
    }

    @Test
    void c11_theWindowSkipsEverythingTheCrashedOwnerProcessed() throws Exception {
        // A processed 10 and 12 but still held 11 when it committed: the next owner skips 10 and 12 only.
        ConsumerCore<Long> a = member(1);
        a.onAssignment(assignment(2, 2), 0);
        assertEquals(10L, deliver(a, 1, 10, "x", EpochHeader.NONE));
        a.processed();
        // Stamped 2 while nothing is settled: waits for the key's homes of epochs 0 and 1.
        assertEquals(CoreTypes.Outcome.HELD, on(a, 1, 11, "hot", 2, 0));
        assertEquals(12L, deliver(a, 1, 12, "y", EpochHeader.NONE));
        a.processed();
        CoreTypes.Snapshot s = a.snapshot(1);
        assertEquals(11, s.offset);
        CommitMeta meta = CommitMeta.parse(s.metadata);
        assertEquals(13, meta.next);
        assertEquals(List.of(0L), meta.unprocessed);
        ConsumerCore<Long> bb = member(1);
        bb.onAssignment(assignment(2, 2), 0);
        bb.assign(1, s.offset, meta, 0);
        assertEquals(CoreTypes.Outcome.HELD, on(bb, 1, 11, "hot", 2, 0));
        bb.processed();
        assertEquals(CoreTypes.Outcome.SKIPPED, on(bb, 1, 12, "y", EpochHeader.NONE, 0));
        assertEquals(13L, deliver(bb, 1, 13, "y", EpochHeader.NONE));
    }

    @Test
    void c19_aRecordOfAnUnknownEpochWaitsABoundedTime() {
        ConsumerCore<Long> c = member(2);
        announce(c, List.of(progress(0, 1), progress(1, 1), progress(3, 1)));
        c.processed();
        assertEquals(CoreTypes.Outcome.HELD, on(c, 2, 10, "hot", 99, 0));
        // The key's unstamped records do not queue behind it; other keys pass.
        assertEquals(11L, deliver(c, 2, 11, "hot", EpochHeader.NONE));
        assertEquals(12L, deliver(c, 2, 12, "cold", 1));
        c.processed();
        c.tick(2 * SEC, 2);
        assertNull(c.nextReady(), "still within the bound");
        assertEquals(0, c.takeAnomalies().unknownEpochRecords);
        c.tick(3 * SEC, 3);
        assertEquals(10L, c.nextReady());
        c.processed();
        assertEquals(1, c.takeAnomalies().unknownEpochRecords);
        assertEquals(13, c.snapshot(2).offset);

        // An epoch learnt within the bound follows the normal rules.
        c.processed();
        assertEquals(CoreTypes.Outcome.HELD, on(c, 2, 13, "hot", 5, 3 * SEC));
        c.onAssignment(assignment(5, 2), 4 * SEC);
        c.tick(10 * SEC, 10);
        assertNull(c.nextReady(), "known now: waits for partition 1");
        assertEquals(0, c.takeAnomalies().unknownEpochRecords);
        announce(c, List.of(progress(0, 5), progress(1, 5), progress(3, 5)));
        assertEquals(13L, c.nextReady());
    }

    /** Partition 2 holds {@code hot} at 10-12 (epoch 2 waits for partition 1): the commit at 10 has a window. */
    static ConsumerCore<Long> holdingThree(int maxMetadataBytes) {
        ConsumerCore<Long> c = memberWith(new CoreTypes.Config(4, 5 * SEC, maxMetadataBytes, 8, 3 * SEC, 60_000), 2);
        c.onAssignment(assignment(2, 2), 0);
        for (long o = 10; o < 13; o++) {
            assertEquals(CoreTypes.Outcome.HELD, on(c, 2, o, "hot", 2, 0));
        }
        c.takeAnomalies();
        return c;
    }

    @Test
    void c7_aSnapshotThatLeavesOutItsWindowIsCounted() {
        ConsumerCore<Long> fits = holdingThree(4096);
        CoreTypes.Snapshot s = fits.snapshot(2);
        assertTrue(s.metadata.contains("\"n\":13,\"u\":[0,1,2]"), s.metadata);
        assertEquals(10, s.offset);
        assertEquals(CoreTypes.NO_WINDOW_LEFT_OUT, s.windowLeftOut);
        assertEquals(0, fits.takeAnomalies().windowsLeftOut, "it fits");

        ConsumerCore<Long> over = holdingThree(s.metadata.length() - 1);
        for (int i = 0; i < 2; i++) {
            CoreTypes.Snapshot t = over.snapshot(2);
            assertFalse(t.metadata.contains("\"n\""), t.metadata);
            assertEquals(10, t.offset);
            assertEquals(3, t.windowLeftOut);
        }
        assertEquals(2, over.takeAnomalies().windowsLeftOut, "once per snapshot built");
        // Everything processed: no window, nothing left out (and the reused snapshot counts nothing either).
        announce(over, List.of(progress(1, 2)));
        for (long o = 10; o < 13; o++) {
            assertEquals(o, over.nextReady());
            over.processed();
        }
        for (int i = 0; i < 2; i++) {
            CoreTypes.Snapshot t = over.snapshot(2);
            assertEquals(13, t.offset);
            assertEquals(CoreTypes.NO_WINDOW_LEFT_OUT, t.windowLeftOut);
        }
        assertEquals(0, over.takeAnomalies().windowsLeftOut);
    }

    @Test
    void c2_aLeaseCountsAsExpiredMaxLeaseAfterItWasRead() {
        ConsumerCore<Long> c = member(0);
        assertEquals(0, c.takeAnomalies().clampedLeases);
        c.onAssignment(assignment(2, 2), 0);
        HandoffRecords.Lease skewed = lease(0).withExpiry(-1L); // u64::MAX
        c.onLease(skewed, 0);
        assertEquals(1, c.takeAnomalies().clampedLeases);
        end(c, 0, 0, 1);
        c.tick(0, 60_000);
        assertEquals(1, drained(c, 0), "read at 1: live");
        c.onLease(skewed, 0);
        c.tick(0, 119_999);
        assertEquals(1, drained(c, 0), "renewal re-arms it");
        c.tick(0, 120_000);
        assertEquals(2, drained(c, 0), "max_lease after the last read: not awaited");
        assertEquals(1, c.takeAnomalies().clampedLeases);
    }

    @Test
    void c3_c4_c5_aMarkerPassesOnceThePositionReachesItAndItsRecordsAreProcessed() {
        ConsumerCore<Long> c = member(0, 3);
        c.onAssignment(assignment(2, 2), 0);
        HandoffRecords.Lease l = lease(0);
        c.onLease(l, 0);
        assertEquals(0L, deliver(c, 0, 0, "k", 1));
        c.onMarker(marker(2, 3, 0, 0, 5), 0);
        assertEquals(0, drained(c, 0), "offsets 1 and 2 not fetched yet");
        assertEquals(1L, deliver(c, 0, 1, "k", 1));
        assertEquals(2L, deliver(c, 0, 2, "k", 1));
        // Offset 2 was fetched but the application still has it: not passed.
        c.tick(0, 1);
        assertEquals(0, drained(c, 0));
        c.processed();
        assertEquals(2, drained(c, 0));
        assertNull(c.snapshot(3), "partition 3 fetched nothing");
        c.onMarker(marker(2, 3, 0, 0, 5), 0); // read again: nothing changes
        String meta = c.snapshot(0).metadata;
        assertTrue(meta.contains("\"" + Y + "\":[2,3]"), meta);

        // A partition assigned with a committed offset at or above the end passes at once (C4).
        ConsumerCore<Long> d = member(3);
        d.onAssignment(assignment(2, 2), 0);
        d.onLease(l, 0);
        d.onMarker(marker(2, 3, 0, 0, 5), 0);
        d.revoke(3, 0);
        d.assign(3, 5L, null, 0);
        assertEquals(List.of(3), d.progressDue());

        // C3: a marker for another partition count is rejected and counted.
        d.onMarker(marker(3, 1, 1), 0);
        CoreTypes.Anomalies an = d.takeAnomalies();
        assertEquals(1, an.rejectedMarkers[HandoffRecords.MarkerReject.PARTITION_COUNT.ordinal()]);
        d.onMarkerRejected(HandoffRecords.MarkerReject.INVALID);
        assertEquals(1, d.takeAnomalies().rejectedMarkers[HandoffRecords.MarkerReject.INVALID.ordinal()]);
    }

    @Test
    void c3_anOlderMarkerAfterANewerOneIsIgnored() {
        ConsumerCore<Long> c = member(0);
        c.onAssignment(assignment(2, 2), 0);
        c.onAssignment(assignment(3, 2), 0);
        assertEquals(0L, deliver(c, 0, 0, "k", 1));
        c.processed();
        c.onMarker(marker(3, 1, 0, 0, 0), 0);
        assertEquals(3, drained(c, 0));
        c.onMarker(marker(2, 9, 9, 9, 9), 0);
        assertEquals(3, drained(c, 0));
    }

    @Test
    void c6_expiredAndLateProducers() {
        ConsumerCore<Long> c = member(0);
        c.onAssignment(assignment(2, 2), 0);
        assertNull(c.snapshot(0), "nothing fetched yet");
        end(c, 0, 0, 1);
        assertEquals(1, drained(c, 0));
        c.tick(0, 10_000);
        assertEquals(2, drained(c, 0), "expired: not awaited");
        c.onAssignment(assignment(3, 2), 0);
        c.onLease(lease(0).withExpiry(20_000), 0);
        assertEquals(1, drained(c, 0), "renewed: awaited again");
        c.onMarker(marker(3, 1, 0, 0, 0), 0);
        assertEquals(3, drained(c, 0));
    }

    @Test
    void c6_aClosedProducerIsNotAwaitedAfterItsLastEpoch() {
        ConsumerCore<Long> c = member(0);
        c.onAssignment(assignment(2, 2), 0);
        end(c, 0, 0, 1);
        assertEquals(1, drained(c, 0));
        c.onLease(new HandoffRecords.Lease(Y, "t", 0, 10_000, 10_000, 1), 0);
        assertEquals(2, drained(c, 0), "closed at 1 after passing 1");
        c.onLeaseRemoved(Y, 0);
        assertEquals(2, drained(c, 0));
    }

    @Test
    void c7_theSnapshotCarriesPositionUnprocessedAndTheApplicationsRecord() throws Exception {
        ConsumerCore<Long> c = member(0);
        assertEquals(0L, deliver(c, 0, 0, "k", EpochHeader.NONE));
        CoreTypes.Snapshot s = c.snapshot(0);
        assertEquals(0, s.offset, "the application's record is not processed yet");
        c.processed();
        s = c.snapshot(0);
        assertEquals(1, s.offset);
        CommitMeta m = CommitMeta.parse(s.metadata);
        assertEquals(CommitMeta.NO_NEXT, m.next);
        assertEquals(s.metadata, m.encode(), "round trip");
        HandoffRecords.Progress p = c.progressRecord(s);
        assertEquals(1, p.committedOffset);
        assertEquals("g", p.group);
        // Drained epochs for the hook: once each, before the commit.
        end(c, 0, 1, 1);
        assertEquals(1, c.takeDrainedEpochs(0).size());
        assertTrue(c.takeDrainedEpochs(0).isEmpty());
    }

    @Test
    void c13_flowControlPausesAndResumes() {
        ConsumerCore<Long> c = member(2);
        c.onAssignment(assignment(2, 2), 0);
        for (long o = 0; o < 6; o++) {
            c.processed();
            on(c, 2, o, "hot", 2, 0);
        }
        List<List<Integer>> f = c.flow(0);
        assertEquals(List.of(2), f.get(0));
        assertEquals(List.of(), f.get(1));
        assertEquals(List.of(2), c.paused());
        f = c.flow(6 * SEC);
        assertEquals(List.of(), f.get(0));
        assertEquals(List.of(2), f.get(1), "stalled: resumed past the limit");
        assertEquals(1, c.takeStalled().size());
        assertTrue(c.flow(7 * SEC).get(0).isEmpty(), "not re-paused until halved");
    }

    @Test
    void c18_splitTransitionsAreReportedOncePerKeyAndEpoch() {
        ConsumerCore<Long> c = new ConsumerCore<>("t", "g", P, cfg());
        c.onAssignment(placed(2, "hot", new int[] {1, 2}, "cold", new int[] {0}), 0);
        c.onAssignment(placed(1, "hot", new int[] {0}, "cold", new int[] {0}), 0);
        c.onAssignment(placed(3, "hot", new int[] {2, 3}, "cold", new int[] {0}), 0);
        c.onAssignment(placed(3, "hot", new int[] {2, 3}, "cold", new int[] {0}), 0);
        c.onAssignment(placed(4, "hot", new int[] {3}, "cold", new int[] {0}), 0);
        c.onAssignment(placed(5, "hot", new int[] {3}, "cold", new int[] {0}), 0);
        List<CoreTypes.SplitChange> got = c.takeSplitChanges();
        assertEquals(3, got.size(), got.toString());
        for (CoreTypes.SplitChange ch : got) {
            assertArrayEquals(b("hot"), ch.key.bytes());
        }
        assertEquals(2, got.get(0).epoch);
        assertArrayEquals(new int[] {1, 2}, got.get(0).parts);
        assertEquals(3, got.get(1).epoch);
        assertArrayEquals(new int[] {2, 3}, got.get(1).parts);
        assertEquals(4, got.get(2).epoch);
        assertArrayEquals(new int[0], got.get(2).parts);
        assertEquals(3, got.get(2).partition);
        assertTrue(c.takeSplitChanges().isEmpty());
        c.assign(3, null, null, 0);
        assertEquals(2, c.splitLabel(3, b("hot"), 3));
        assertEquals(0, c.splitLabel(3, b("hot"), 4));
        assertEquals(0, c.splitLabel(3, b("cold"), EpochHeader.NONE));
        assertEquals(0, c.splitLabel(0, b("hot"), 3), "not owned");
    }

    /** Partition 0..3 all drained {@code e} by announcement except the owned ones. */
    static void others(ConsumerCore<Long> c, long e, int... owned) {
        for (int p = 0; p < P; p++) {
            final int q = p;
            if (java.util.Arrays.stream(owned).noneMatch(o -> o == q)) {
                c.onProgress(progress(p, e), 0);
            }
        }
    }

    @Test
    void c14_c15_c17_wholeToSplitWaitsForTheWholeHomeThenNothingWaits() {
        // Epoch 1: hot whole on 0. Epoch 2: hot split over 1 and 2. A member owning 1 has drained 1: an unstamped
        // hot record there is of epoch 1 or 2, split in 2 with a part on 1 (C14): it waits for partition 0 (hot's
        // whole home in epoch 1) to drain 2 (C15).
        ConsumerCore<Long> c = new ConsumerCore<>("t", "g", P, cfg());
        c.tick(0, 1);
        c.onAssignment(placed(1, "hot", new int[] {0}), 0);
        c.onAssignment(placed(2, "hot", new int[] {1, 2}), 0);
        c.onLease(lease(0), 0);
        c.assign(1, null, null, 0);
        end(c, 1, 0, 1);
        commitDue(c);
        others(c, 1, 1);
        assertEquals(1, c.settled());
        assertEquals(2, c.splitLabel(1, b("hot"), EpochHeader.NONE));
        c.processed();
        assertEquals(CoreTypes.Outcome.HELD, on(c, 1, 1, "hot", EpochHeader.NONE, 0));
        // Partition 2 (the other part) draining 2 does not release it: only whole homes count.
        c.onProgress(progress(2, 2), 0);
        assertNull(c.nextReady());
        c.onProgress(progress(0, 2), 0);
        assertEquals(1L, c.nextReady());
        c.processed();
        // C17: once the split epoch is settled, split records go at once.
        end(c, 1, 2, 2);
        commitDue(c);
        c.onProgress(progress(3, 2), 0);
        assertEquals(2, c.settled());
        assertEquals(3L, deliver(c, 1, 3, "hot", EpochHeader.NONE));
    }

    @Test
    void c16_splitToWholeWaitsForEveryPart() {
        // Epoch 1: hot split over 1 and 2; epoch 2: hot whole on 3. A stamped epoch-2 record on 3 waits for both
        // parts.
        ConsumerCore<Long> c = new ConsumerCore<>("t", "g", P, cfg());
        c.tick(0, 1);
        c.onAssignment(placed(1, "hot", new int[] {1, 2}), 0);
        c.onAssignment(placed(2, "hot", new int[] {3}), 0);
        c.onLease(lease(0), 0);
        c.assign(3, null, null, 0);
        end(c, 3, 0, 2);
        commitDue(c);
        others(c, 1, 3);
        c.processed();
        assertEquals(CoreTypes.Outcome.HELD, on(c, 3, 1, "hot", 2, 0));
        c.onProgress(progress(1, 2), 0);
        assertNull(c.nextReady(), "part 2 not drained");
        c.onProgress(progress(2, 2), 0);
        assertEquals(1L, c.nextReady());
    }

    @Test
    void c18_anUnplacedUnstampedRecordIsDeliveredAndLabelledWhole() {
        ConsumerCore<Long> c = new ConsumerCore<>("t", "g", P, cfg());
        c.onAssignment(placed(1, "hot", new int[] {1, 2}), 0);
        c.assign(0, null, null, 0);
        assertEquals(0, c.labelRecord(0, 0, b("hot"), EpochHeader.NONE));
        assertEquals(CoreTypes.Outcome.DELIVER, on(c, 0, 0, "hot", EpochHeader.NONE, 0));
    }

    @Test
    void c10_keylessRecordsAreDeliveredAtOnceAndUnownedAreDropped() {
        ConsumerCore<Long> c = member(2);
        c.onAssignment(assignment(2, 2), 0);
        c.processed();
        assertEquals(CoreTypes.Outcome.HELD, on(c, 2, 0, "hot", 2, 0));
        c.processed();
        assertEquals(CoreTypes.Outcome.DELIVER, on(c, 2, 1, null, 2, 0));
        assertEquals(CoreTypes.Outcome.UNOWNED, on(c, 1, 0, "hot", 2, 0));
        // Revoked: the held record is dropped, the next owner reads it.
        c.revoke(2, 0);
        assertNull(c.nextReady());
        assertTrue(c.owned().isEmpty());
    }

    @Test
    void c9_aReleasedRecordsPartitionQueuesLaterRecordsBehindIt() {
        ConsumerCore<Long> c = member(2);
        c.onAssignment(assignment(2, 2), 0);
        c.processed();
        assertEquals(CoreTypes.Outcome.HELD, on(c, 2, 0, "hot", 2, 0));
        others(c, 2, 2);
        assertTrue(c.hasReady());
        // Not taken yet: a record of the same partition queues behind it.
        assertEquals(CoreTypes.Outcome.HELD, on(c, 2, 1, "hot", EpochHeader.NONE, 0));
        assertEquals(List.of(0L, 1L), readyAll(c));
    }

    @Test
    void c1_theLastWellFormedEpochHeaderCounts() {
        long e = EpochHeader.NONE;
        e = EpochHeader.fold(e, "dkg-epoch", b("7"));
        e = EpochHeader.fold(e, "dkg-epoch", b("x"));
        e = EpochHeader.fold(e, "dkg-producer", b("9"));
        assertEquals(7, e);
        e = EpochHeader.fold(e, "dkg-epoch", b("12"));
        assertEquals(12, e);
        assertEquals(EpochHeader.NONE, EpochHeader.parse(b("+1")));
        assertEquals(EpochHeader.NONE, EpochHeader.parse(b("")));
        assertEquals(EpochHeader.NONE, EpochHeader.parse(b("18446744073709551616")));
        assertEquals(Long.MAX_VALUE, EpochHeader.parse(b("18446744073709551615")));
        assertEquals(EpochHeader.NONE, EpochHeader.parse(null));
    }

    @Test
    void c4_c5_aBatchIsProcessedTogetherOrBelowACommittedOffset() {
        // A poll hands out several records at once: all stay unprocessed (the commit below them, markers ending
        // above them not reached) until the next poll, or, for a commit of the application's own, up to its offset.
        ConsumerCore<Long> c = member(0);
        c.onAssignment(assignment(2, 2), 0);
        c.processed();
        for (long o = 0; o < 3; o++) {
            assertEquals(CoreTypes.Outcome.DELIVER, on(c, 0, o, "k", 1, 0));
        }
        assertEquals(0, c.snapshot(0).offset, "nothing of the batch is processed yet");
        c.onMarker(marker(2, 2, 0, 0, 0), 0);
        assertEquals(0, drained(c, 0), "the marker's end lies above unprocessed records");
        c.processedBelow(0, 1);
        assertEquals(1, c.snapshot(0).offset);
        assertEquals(0, drained(c, 0), "offset 1 is still the application's");
        c.processedBelow(0, 2);
        assertEquals(2, c.snapshot(0).offset);
        assertEquals(2, drained(c, 0), "offsets 0 and 1 processed: the marker ending at 2 passes");
        assertTrue(c.hasInApp());
        c.processed();
        assertEquals(3, c.snapshot(0).offset);
        assertTrue(!c.hasInApp());
    }
}
