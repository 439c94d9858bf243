package dev.dkg.kafka;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the consumer glue does around the state machine ({@link ConsumerCore}), without Kafka: the Rust
 * {@code partitioner/src/kafka/consumer/} ({@code driver.rs}, {@code commits.rs}, {@code context.rs}'s rebalance
 * handling, {@code followers.rs}'s {@code apply}). Commits, announcements, hooks and flow control go to a
 * {@link Sink}; {@link DkgKafkaConsumer} implements it over a {@code KafkaConsumer}, the conformance trace replay
 * over the trace. One instance per topic and member; not thread-safe (the consumer's thread drives it).
 *
 * <p>The application takes records in batches here (a {@code poll}), not one at a time as from the Rust
 * {@code recv}: the records of a batch are processed together when the application polls again, commits or closes
 * ({@link ConsumerCore#processed}). {@link #prelude} with {@code oneAtATime} runs the Rust glue's loop exactly, each
 * released record processed before the next is handed out (what the traces pin).
 *
 * @param <M> a record as the caller keeps it
 */
final class ConsumerDriver<M> {
    private static final Logger LOG = LoggerFactory.getLogger(ConsumerDriver.class);
    /** How often a partition may warn of commits that leave out their skip window. */
    static final long WINDOW_WARN_EVERY_NANOS = 60_000_000_000L;
    /** A lease is collected no sooner than this long after it expired, whatever its duration (spec 9.1). */
    static final long LEASE_GC_MIN_MS = 60_000;

    /** One partition's commit: offset and metadata. */
    static final class Commit extends Value {
        final int partition;
        final long offset;
        final String metadata;

        Commit(int partition, long offset, String metadata) {
            this.partition = partition;
            this.offset = offset;
            this.metadata = metadata;
        }

        @Override
        Object[] components() {
            return new Object[] {partition, offset, metadata};
        }
    }

    /** A partition taken with its committed offset (null: none) and metadata ("" or null: none). */
    static final class Assigned {
        final int partition;
        final Long offset;
        final String metadata;

        Assigned(int partition, Long offset, String metadata) {
            this.partition = partition;
            this.offset = offset;
            this.metadata = metadata;
        }
    }

    /** Where the driver's effects go, in the order it makes them. */
    interface Sink {
        /** One synchronous commit of these partitions (ascending); throws if it failed. */
        void commitSync(List<Commit> commits);

        /** A progress record for the handoff topic (C7: after the commit that makes it durable). */
        void announce(HandoffRecords.Progress progress);

        /** Partitions were assigned (after their committed progress was loaded). */
        void assigned(List<Integer> partitions);

        /** Partitions are revoked (before their final commit). */
        void revoked(List<Integer> partitions);

        /** A partition drained an epoch (C7: before the commit that makes it durable). */
        void epoch(CoreTypes.Drained drained, List<Integer> owned, int partitions);

        /** A key became split, split differently, or whole again (C18). */
        void split(CoreTypes.SplitChange change);

        /** Flow control (C13). */
        void pause(int partition);

        /** Flow control (C13). */
        void resume(int partition);
    }

    /** A record handed out, with its split label (0: whole). */
    static final class Labelled<M> {
        final M msg;
        final int split;

        Labelled(M msg, int split) {
            this.msg = msg;
            this.split = split;
        }
    }

    private final ConsumerCore<Labelled<M>> core;
    private final Sink sink;
    private final AssignmentBook book = new AssignmentBook();
    /** A progress commit failed: not retried before this monotonic time (nanoseconds), else {@link Long#MIN_VALUE}. */
    private long progressRetryAt = Long.MIN_VALUE;
    /** When (System.nanoTime) each partition last warned of a commit that left out its skip window. */
    private final Map<Integer, Long> windowWarnedAt = new TreeMap<>();
    /** Epochs of this topic's history records on the handoff topic ({@code assignment/<topic>/<E>}). */
    private final TreeSet<Long> historyKeys = new TreeSet<>(Long::compareUnsigned);

    ConsumerDriver(String topic, String group, int partitions, CoreTypes.Config cfg, Sink sink, long now,
            long nowMs) {
        this.core = new ConsumerCore<>(topic, group, partitions, cfg);
        this.sink = sink;
        core.tick(now, nowMs);
    }

    ConsumerCore<Labelled<M>> core() {
        return core;
    }

    String topic() {
        return core.topic();
    }

    // ------------------------------------------------------------------------------------------ the other topics

    /** A control-topic record (the decorator's own follower reads them; the trace replay passes them here). */
    void control(byte[] key, byte[] value, long now) {
        ControlUpdate u = book.apply(key, value);
        if (u.outcome() == ControlUpdate.Outcome.ACCEPTED && u.assignment() != null) {
            adopted(u.assignment(), now);
        } else {
            splitHooks();
        }
    }

    /** An assignment adopted from the control topic. */
    void adopted(Assignment a, long now) {
        if (a.topic().equals(core.topic())) {
            core.onAssignment(a, now);
        }
        splitHooks();
    }

    /** A handoff-topic record (spec 9.1): decoded, checked against its key, applied; anything else skipped. */
    void handoff(byte[] key, byte[] value, long now) {
        HandoffReader.Key k = HandoffReader.parseKey(key);
        if (k == null || !k.topic.equals(core.topic())) {
            return;
        }
        try {
            switch (k.kind) {
                case LEASE:
                    if (value == null) {
                        core.onLeaseRemoved(k.name, now);
                    } else {
                        core.onLease(HandoffReader.decodeLease(k, value), now);
                    }
                    break;
                case MARKER:
                    if (value != null) {
                        try {
                            core.onMarker(HandoffReader.decodeMarker(k.topic, k.name, value), now);
                        } catch (HandoffReader.Rejected e) {
                            LOG.warn("DKG: skipped a marker record of topic {} ({})", k.topic, e.reason.label);
                            core.onMarkerRejected(e.reason);
                        }
                    }
                    break;
                case ASSIGNMENT:
                    if (value == null) {
                        historyKeys.remove(k.number);
                    } else {
                        core.onAssignment(HandoffReader.decodeHistory(k, value), now);
                        historyKeys.add(k.number);
                    }
                    break;
                default:
                    if (value != null) {
                        core.onProgress(HandoffReader.decodeProgress(k, value), now);
                    }
                    break;
            }
        } catch (StrictJson.Malformed | AssignmentException e) {
            LOG.debug("DKG: skipped a handoff record: {}", e.getMessage());
        }
        splitHooks();
    }

    private void splitHooks() {
        for (CoreTypes.SplitChange c : core.takeSplitChanges()) {
            LOG.info("DKG: key {} of topic {} {} from epoch {}", c.key, core.topic(),
                    c.parts.length == 0 ? "whole again on " + c.partition : "split over " + java.util.Arrays.toString(c.parts),
                    c.epoch);
            sink.split(c);
        }
    }

    // ------------------------------------------------------------------------------------------ rebalances

    /** Partitions assigned: taken with their committed state, hooked, their progress as committed announced. */
    void assign(List<Assigned> parts, long now, long nowMs) {
        if (parts.isEmpty()) {
            return;
        }
        core.setNowMs(nowMs);
        List<Integer> ps = new ArrayList<>();
        for (Assigned a : parts) {
            CommitMeta meta = null;
            try {
                meta = CommitMeta.parse(a.metadata);
            } catch (StrictJson.Malformed e) {
                LOG.warn("DKG: ignoring commit metadata of {}-{} this build does not read: {}", core.topic(),
                        a.partition, e.getMessage());
            }
            if (a.partition >= core.partitions()) {
                core.setPartitions(a.partition + 1, now);
            }
            core.assign(a.partition, a.offset, meta, now);
            ps.add(a.partition);
        }
        LOG.info("DKG: partitions {} of {} assigned", ps, core.topic());
        sink.assigned(ps);
        for (int p : ps) {
            HandoffRecords.Progress r = core.initialProgress(p);
            if (r != null) {
                sink.announce(r);
            }
        }
    }

    /**
     * Partitions revoked: hooked, their final offsets committed and announced (unless {@code lost}: the group took
     * them already, so nothing is committed), then forgotten (their held records are dropped: the next owner reads
     * them). Returns the final commit's failure, or null.
     */
    RuntimeException revoke(List<Integer> partitions, boolean lost, long now) {
        if (partitions.isEmpty()) {
            return null;
        }
        sink.revoked(partitions);
        RuntimeException failed = null;
        if (!lost) {
            List<Commit> commit = new ArrayList<>();
            List<HandoffRecords.Progress> announce = new ArrayList<>();
            for (int p : partitions) {
                CoreTypes.Snapshot s = core.snapshot(p);
                if (s == null) {
                    continue;
                }
                if (s.metadata == null) {
                    LOG.error("DKG: commit metadata of {}-{} too large ({} bytes): final offset not committed",
                            core.topic(), p, s.drained);
                    continue;
                }
                warnWindowLeftOut(s);
                commit.add(new Commit(p, s.offset, s.metadata));
                announce.add(core.progressRecord(s));
            }
            if (!commit.isEmpty()) {
                try {
                    sink.commitSync(commit);
                    for (HandoffRecords.Progress r : announce) {
                        sink.announce(r);
                    }
                } catch (RuntimeException e) {
                    LOG.warn("DKG: final commit of revoked partitions {} of {} failed (their records since the last "
                            + "commit will be delivered again): {}", partitions, core.topic(), e.toString());
                    failed = e;
                }
            }
        }
        for (int p : partitions) {
            core.revoke(p, now);
        }
        LOG.info("DKG: partitions {} of {} revoked{}", partitions, core.topic(), lost ? " (lost)" : "");
        return failed;
    }

    // ------------------------------------------------------------------------------------------ records

    /**
     * What the glue does before it fetches: the application's records are processed, progress due is committed,
     * released records are handed out. {@code oneAtATime}: each released record is processed before the next one
     * is handed out (the Rust {@code recv} loop); else they all go out in this batch, processed at the next call.
     */
    List<Labelled<M>> prelude(long now, boolean oneAtATime) {
        List<Labelled<M>> out = new ArrayList<>();
        while (true) {
            core.processed();
            commitProgress(now);
            if (!oneAtATime) {
                for (Labelled<M> m = core.nextReady(); m != null; m = core.nextReady()) {
                    out.add(m);
                }
                return out;
            }
            Labelled<M> m = core.nextReady();
            if (m == null) {
                return out;
            }
            out.add(m);
        }
    }

    /** Released records waiting (handed out by {@link #drainReady}), for a batch that is being built. */
    List<Labelled<M>> drainReady() {
        List<Labelled<M>> out = new ArrayList<>();
        for (Labelled<M> m = core.nextReady(); m != null; m = core.nextReady()) {
            out.add(m);
        }
        return out;
    }

    /**
     * A fetched data record. {@code epoch}: its C1 epoch ({@link EpochHeader#NONE}: unstamped). Returns the record
     * with its label if it goes to the application now, else null ({@code outcome[0]} says why).
     */
    Labelled<M> record(int partition, long offset, byte[] key, long epoch, M msg, long now,
            CoreTypes.Outcome[] outcome) {
        // The fast path first, as the decorator takes it (so that the conformance traces replay through it too).
        OwnedPartition<Labelled<M>> lane = core.lane(partition);
        if (lane != null && core.admits(lane, offset, epoch)) {
            int split = core.splitLabel(partition, key, epoch);
            core.take(lane, offset, key != null);
            if (outcome != null) {
                outcome[0] = CoreTypes.Outcome.DELIVER;
            }
            return new Labelled<>(msg, split);
        }
        int split = core.labelRecord(partition, offset, key, epoch);
        Labelled<M> l = new Labelled<>(msg, split);
        CoreTypes.Outcome o = core.onRecord(partition, offset, key, epoch, l, now);
        if (outcome != null) {
            outcome[0] = o;
        }
        if (o == CoreTypes.Outcome.UNOWNED) {
            LOG.debug("DKG: record {}-{}@{} of a partition no longer owned: dropped (its next owner reads it)",
                    core.topic(), partition, offset);
        }
        return o == CoreTypes.Outcome.DELIVER ? l : null;
    }

    /**
     * Warns that the commit of {@code s} leaves out its skip window (C7: its metadata did not fit), at most once per
     * {@link #WINDOW_WARN_EVERY_NANOS} and partition. The core counts it
     * ({@code dkg-consumer-commit-windows-left-out-total}).
     */
    private void warnWindowLeftOut(CoreTypes.Snapshot s) {
        if (s.windowLeftOut == CoreTypes.NO_WINDOW_LEFT_OUT) {
            return;
        }
        long now = System.nanoTime();
        Long last = windowWarnedAt.get(s.partition);
        if (last != null && now - last < WINDOW_WARN_EVERY_NANOS) {
            return;
        }
        windowWarnedAt.put(s.partition, now);
        LOG.warn("DKG: the commit of {}-{} at offset {} leaves out its skip window ({} unprocessed offsets over the "
                + "{}-byte metadata limit): a next owner would re-process the records processed above {}; keep {} "
                + "below ~900", core.topic(), s.partition, s.offset, s.windowLeftOut, core.config().maxMetadataBytes,
                s.offset, DkgKafkaConsumer.MAX_HELD_RECORDS_CONFIG);
    }

    /** Commits the drained changes (C7): epoch hooks, one synchronous commit with metadata, then announcements. */
    void commitProgress(long now) {
        if (progressRetryAt != Long.MIN_VALUE && now - progressRetryAt < 0) {
            return;
        }
        for (int round = 0; round < 4 && core.hasProgressDue(); round++) {
            List<CoreTypes.Drained> drained = new ArrayList<>();
            List<CoreTypes.Snapshot> snapshots = new ArrayList<>();
            List<HandoffRecords.Progress> immediate = new ArrayList<>();
            for (int p : core.progressDue()) {
                drained.addAll(core.takeDrainedEpochs(p));
                CoreTypes.Snapshot s = core.snapshot(p);
                if (s == null) {
                    // Nothing fetched yet: the change comes from leases only and claims no processing.
                    HandoffRecords.Progress r = core.markDurable(p, now);
                    if (r != null) {
                        immediate.add(r);
                    }
                } else if (s.metadata == null) {
                    LOG.error("DKG: commit metadata of {}-{} over the limit ({} bytes): its progress cannot be "
                            + "committed (too many producers?); moved keys waiting for it stay held", core.topic(), p,
                            s.drained);
                    progressRetryAt = now + 5_000_000_000L;
                } else {
                    warnWindowLeftOut(s);
                    snapshots.add(s);
                }
            }
            for (HandoffRecords.Progress r : immediate) {
                sink.announce(r);
            }
            List<Integer> owned = core.owned();
            for (CoreTypes.Drained d : drained) {
                sink.epoch(d, owned, core.partitions());
            }
            if (snapshots.isEmpty()) {
                return;
            }
            List<Commit> commits = new ArrayList<>();
            for (CoreTypes.Snapshot s : snapshots) {
                commits.add(new Commit(s.partition, s.offset, s.metadata));
            }
            try {
                sink.commitSync(commits);
            } catch (RuntimeException e) {
                LOG.warn("DKG: progress commit of {} failed (retrying): {}", core.topic(), e.toString());
                progressRetryAt = now + 200_000_000L;
                return;
            }
            progressRetryAt = Long.MIN_VALUE;
            for (CoreTypes.Snapshot s : snapshots) {
                if (core.owns(s.partition)) {
                    core.committed(s.partition, s.drained, now);
                    sink.announce(core.progressRecord(s));
                }
            }
        }
    }

    /** What a commit of every owned partition with something fetched carries now (ascending). */
    List<Commit> commitAll() {
        List<Commit> out = new ArrayList<>();
        for (int p : core.owned()) {
            CoreTypes.Snapshot s = core.snapshot(p);
            if (s != null && s.metadata != null) {
                warnWindowLeftOut(s);
                out.add(new Commit(p, s.offset, s.metadata));
            }
        }
        return out;
    }

    /** The application's explicit commit: its records are processed, progress committed, then every offset. */
    void commit(long now) {
        core.processed();
        commitProgress(now);
        List<Commit> all = commitAll();
        if (!all.isEmpty()) {
            sink.commitSync(all);
        }
    }

    /**
     * Handoff garbage collection (spec 9.1, "Lease garbage collection"; the Rust driver's {@code collect_garbage}):
     * the keys to tombstone, for the member owning partition 0. A lease expired more than
     * {@code max(3 x lease_ms, 60 s)} ago, with its producer's marker, if it is not closed or the group settled its
     * closing epoch ({@code Core::collectable_leases}); history records below the epochs every member keeps.
     */
    List<byte[]> garbage(long nowMs) {
        List<byte[]> keys = new ArrayList<>();
        if (!core.owns(0)) {
            return keys;
        }
        long settled = core.settled();
        for (HandoffRecords.Lease l : core.leases()) {
            // Unsigned 64-bit, saturating, as the Rust rule: max(3 x lease_ms, 60 s) after the expiry.
            long grace = Long.compareUnsigned(l.leaseMs, Long.divideUnsigned(-1L, 3)) > 0 ? -1L : 3 * l.leaseMs;
            if (Long.compareUnsigned(grace, LEASE_GC_MIN_MS) < 0) {
                grace = LEASE_GC_MIN_MS;
            }
            long after = l.expiresAtMs + grace;
            if (Long.compareUnsigned(after, l.expiresAtMs) < 0) {
                after = -1; // saturated: the largest unsigned value
            }
            if (Long.compareUnsigned(nowMs, after) > 0 && (l.closedAtEpoch == HandoffRecords.NOT_CLOSED
                    || Long.compareUnsigned(l.closedAtEpoch, settled) <= 0)) {
                keys.add(Handoff.markerKey(core.topic(), l.producer));
                keys.add(Handoff.leaseKey(core.topic(), l.producer));
            }
        }
        for (long epoch : historyKeys.headSet(core.historyGcFloor())) {
            keys.add(Handoff.historyKey(core.topic(), epoch));
        }
        return keys;
    }

    /** Housekeeping: the wall clock is read, leases expire, releases and flow control (C2, C6, C13, C19). */
    void tick(long now, long nowMs) {
        core.tick(now, nowMs);
        flow(now);
    }

    /**
     * Flow control (C13): partitions over the hold limit paused, halved or stalled ones resumed. Cheap (a look at
     * each owned partition), so the glue runs it after every fetch, not only at housekeeping: a partition read
     * quickly (after a rebalance, from its lowest held offset) would otherwise overshoot the limit by what 100 ms of
     * fetching brings, and the commit metadata's unprocessed list with it.
     */
    void flow(long now) {
        List<List<Integer>> flow = core.flow(now);
        long stall = core.config().stallTimeoutNanos / 1_000_000;
        for (int[] s : core.takeStalled()) {
            LOG.warn("DKG: partition {}-{} paused with {} held records and nothing released for {} ms: resuming past "
                    + "the hold limit (marker ends may lie behind the pause)", core.topic(), s[0], s[1], stall);
        }
        for (int p : flow.get(0)) {
            sink.pause(p);
        }
        for (int p : flow.get(1)) {
            sink.resume(p);
        }
    }

    /** Records held per owned partition, only the non-zero ones. */
    Map<Integer, Integer> held() {
        Map<Integer, Integer> out = new TreeMap<>();
        for (Map.Entry<Integer, Integer> e : core.heldCounts().entrySet()) {
            if (e.getValue() > 0) {
                out.put(e.getKey(), e.getValue());
            }
        }
        return Collections.unmodifiableMap(out);
    }
}
