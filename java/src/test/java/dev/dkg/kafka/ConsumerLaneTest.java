package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The fast path ({@link ConsumerCore#lane}, {@link ConsumerCore#admits}, {@link ConsumerCore#take} and its batch form
 * {@link ConsumerCore#took}) against the core alone: two cores fed the same random inputs (records with and without keys and epochs, seeks, batches processed
 * whole or up to an offset, epoch switches moving and splitting keys, leases, markers, other members' progress,
 * commits, time, partitions revoked and taken again), one taking every record its lane admits, the other giving every
 * record to {@link ConsumerCore#onRecord}. After every step both must agree on everything the protocol puts out: what
 * is delivered (and its split label), held and released, every partition's commit snapshot (offset and metadata:
 * commit safety, C7), positions, progress due and the settled epoch. The Rust simulation does the same for its lanes
 * ({@code crates/dkg-protocol/src/consumer/core.rs}); the conformance traces are too short to reach the lanes often.
 */
class ConsumerLaneTest {
    private static final int P = ConsumerCoreTest.P;
    private static final String[] KEYS = {"hot", "k1", "k2", "k3", "warm", ""};

    @Test
    void theFastPathDecidesAndChangesWhatTheCoreWould() {
        long takes = 0;
        long records = 0;
        for (long seed = 1; seed <= 150; seed++) {
            long[] n = run(seed, 400);
            takes += n[0];
            records += n[1];
        }
        // The comparison means something only if the lanes were taken often, and not always (about 15% of the records
        // are: switches come every 30 steps or so here, and held records close a partition's lane until released).
        assertTrue(takes > records / 10 && takes < records / 2, "lane takes " + takes + " of " + records + " records");
    }

    /** One random run; returns {lane takes, records}. */
    private static long[] run(long seed, int steps) {
        Random rnd = new Random(seed);
        ConsumerCore<Long> fast = ConsumerCoreTest.member(0, 1, 2);
        ConsumerCore<Long> ref = ConsumerCoreTest.member(0, 1, 2);
        long[] next = new long[P];
        CoreTypes.Snapshot[] finals = new CoreTypes.Snapshot[P];
        long epoch = 1;
        long now = 0;
        long nowMs = 1;
        long takes = 0;
        long records = 0;
        for (int step = 0; step < steps; step++) {
            String where = "seed " + seed + " step " + step;
            int op = rnd.nextInt(100);
            if (op < 55) {
                if (rnd.nextBoolean()) {
                    // What the decorator does before it fetches: the batch is processed, progress due committed,
                    // released records handed out.
                    fast.processed();
                    ref.processed();
                    assertEquals(commitDue(ref, now), commitDue(fast, now), where + ": progress committed first");
                    assertEquals(ConsumerCoreTest.readyAll(ref), ConsumerCoreTest.readyAll(fast), where + ": released first");
                }
                int p = rnd.nextInt(P);
                long o;
                if (rnd.nextInt(20) == 0 && next[p] > 0) {
                    o = rnd.nextInt((int) next[p]); // fetched again after a seek
                } else {
                    o = next[p];
                    next[p] += 1 + (rnd.nextInt(8) == 0 ? rnd.nextInt(3) : 0); // gaps: compaction, transactions
                }
                String key = rnd.nextInt(10) == 0 ? null : KEYS[rnd.nextInt(KEYS.length)];
                byte[] k = key == null ? null : ConsumerCoreTest.b(key);
                long e = rnd.nextInt(3) == 0 ? EpochHeader.NONE : Math.max(0, epoch - rnd.nextInt(3) + (rnd.nextInt(10) == 0 ? 1 : 0));
                records++;
                int labelF;
                CoreTypes.Outcome outF;
                OwnedPartition<Long> lane = fast.lane(p);
                if (lane != null && fast.admits(lane, o, e)) {
                    labelF = fast.splitLabel(p, k, e);
                    if (rnd.nextBoolean()) {
                        fast.take(lane, o, k != null);
                    } else {
                        // The decorator's batch form.
                        lane.laneReserve(1)[lane.laneCount] = o;
                        fast.took(lane, 1, o + 1, k != null);
                    }
                    outF = CoreTypes.Outcome.DELIVER;
                    takes++;
                } else {
                    labelF = fast.labelRecord(p, o, k, e);
                    outF = fast.onRecord(p, o, k, e, o, now);
                }
                int labelR = ref.labelRecord(p, o, k, e);
                CoreTypes.Outcome outR = ref.onRecord(p, o, k, e, o, now);
                assertEquals(outR, outF, where + ": outcome of " + p + "@" + o + " key " + key + " epoch " + e);
                assertEquals(labelR, labelF, where + ": label");
            } else if (op < 65) {
                fast.processed();
                ref.processed();
            } else if (op < 70) {
                int p = rnd.nextInt(P);
                long below = rnd.nextInt((int) next[p] + 2);
                fast.processedBelow(p, below);
                ref.processedBelow(p, below);
            } else if (op < 75) {
                List<Long> a = ConsumerCoreTest.readyAll(fast);
                List<Long> b = ConsumerCoreTest.readyAll(ref);
                assertEquals(b, a, where + ": released");
            } else if (op < 76 || (op < 78 && rnd.nextInt(4) == 0)) {
                epoch++;
                int hotOn = rnd.nextInt(P);
                Assignment a = rnd.nextInt(3) == 0
                        ? ConsumerCoreTest.placed(epoch, "hot", new int[] {hotOn}, "warm", new int[] {1, 2})
                        : rnd.nextBoolean() ? ConsumerCoreTest.placed(epoch, "hot", new int[] {hotOn}, "k1",
                                new int[] {rnd.nextInt(P)})
                                : ConsumerCoreTest.assignment(epoch, hotOn);
                fast.onAssignment(a, now);
                ref.onAssignment(a, now);
            } else if (op < 83) {
                // The producer's marker of the newest epoch, ending a little ahead of (or behind) the positions.
                long[] ends = new long[P];
                for (int p = 0; p < P; p++) {
                    ends[p] = Math.max(0, next[p] + rnd.nextInt(4) - 2);
                }
                HandoffRecords.Marker m = ConsumerCoreTest.marker(epoch, ends);
                fast.onMarker(m, now);
                ref.onMarker(m, now);
            } else if (op < 86) {
                HandoffRecords.Lease l = ConsumerCoreTest.lease(Math.max(0, epoch - 1 - rnd.nextInt(2)));
                fast.onLease(l, now);
                ref.onLease(l, now);
            } else if (op < 89) {
                // The member that owns partition 3 announces what it drained.
                HandoffRecords.Progress pr = ConsumerCoreTest.progress(3, Math.max(0, epoch - rnd.nextInt(4) / 3));
                fast.onProgress(pr, now);
                ref.onProgress(pr, now);
            } else if (op < 94) {
                List<String> a = commitDue(fast, now);
                List<String> b = commitDue(ref, now);
                assertEquals(b.toString(), a.toString(), where + ": progress committed");
            } else if (op < 97) {
                now += rnd.nextInt(2) * ConsumerCoreTest.SEC;
                nowMs += rnd.nextInt(3_000);
                fast.tick(now, nowMs);
                ref.tick(now, nowMs);
                assertEquals(ref.flow(now), fast.flow(now), where + ": flow");
            } else {
                // Given up with its final commit, taken again from it (the previous owner's skip rules, C11, C12),
                // and fetched again from there.
                int p = rnd.nextInt(3);
                if (fast.owns(p)) {
                    CoreTypes.Snapshot last = ref.snapshot(p);
                    finals[p] = last == null || last.metadata == null ? null : last;
                    fast.revoke(p, now);
                    ref.revoke(p, now);
                } else {
                    CoreTypes.Snapshot last = finals[p];
                    CommitMeta meta = null;
                    if (last != null) {
                        try {
                            meta = CommitMeta.parse(last.metadata);
                        } catch (StrictJson.Malformed ex) {
                            throw new AssertionError(ex);
                        }
                        next[p] = last.offset;
                    }
                    Long committed = last == null ? null : last.offset;
                    fast.assign(p, committed, meta, now);
                    ref.assign(p, committed, meta, now);
                }
            }
            same(where, fast, ref);
        }
        return new long[] {takes, records};
    }

    /** What {@link ConsumerDriver#commitProgress} does with the core, the commit succeeding. */
    private static List<String> commitDue(ConsumerCore<Long> c, long now) {
        List<String> out = new ArrayList<>();
        for (int p : c.progressDue()) {
            out.add(c.takeDrainedEpochs(p).size() + " epochs drained");
            CoreTypes.Snapshot s = c.snapshot(p);
            if (s == null) {
                out.add(String.valueOf(c.markDurable(p, now)));
            } else if (s.metadata != null) {
                out.add(s.toString());
                c.committed(p, s.drained, now);
                out.add(c.progressRecord(s).toString());
            }
        }
        return out;
    }

    private static void same(String where, ConsumerCore<Long> fast, ConsumerCore<Long> ref) {
        assertEquals(ref.heldCounts(), fast.heldCounts(), where + ": held");
        assertEquals(ref.heldTotal(), fast.heldTotal(), where + ": held in all");
        assertEquals(ref.positions(), fast.positions(), where + ": lowest unprocessed");
        assertEquals(ref.settled(), fast.settled(), where + ": settled");
        assertEquals(ref.progressDue(), fast.progressDue(), where + ": progress due");
        assertEquals(ref.hasInApp(), fast.hasInApp(), where + ": application records");
        assertEquals(ref.hasReady(), fast.hasReady(), where + ": released waiting");
        List<String> a = new ArrayList<>();
        List<String> b = new ArrayList<>();
        for (int p = 0; p < P; p++) {
            a.add(String.valueOf(fast.snapshot(p)));
            OwnedPartition<Long> part = fast.owned(p);
            // The reused snapshot (ConsumerCore.snapshot) is the one computed afresh.
            assertEquals(part == null ? null : String.valueOf(fast.snapshotFresh(p, part)),
                    part == null ? null : String.valueOf(fast.snapshot(p)), where + ": snapshot reused");
            b.add(String.valueOf(ref.snapshot(p)));
            assertEquals(ref.fetchPosition(p), fast.fetchPosition(p), where + ": fetch position of " + p);
        }
        assertEquals(b, a, where + ": commit snapshots");
    }
}
