package dev.dkg.kafka;

import dev.dkg.kafka.CoreTypes.Anomalies;
import dev.dkg.kafka.CoreTypes.Config;
import dev.dkg.kafka.CoreTypes.Drained;
import dev.dkg.kafka.CoreTypes.Outcome;
import dev.dkg.kafka.CoreTypes.Snapshot;
import dev.dkg.kafka.CoreTypes.SplitChange;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The DKG consumer's protocol state machine (spec 9.3, rules C1-C19), without Kafka: a port of the Rust
 * {@code dkg_kafka_protocol::consumer::core}. Records in, decisions out (deliver now, hold, skip), plus the progress to
 * commit and announce, the partitions to pause and resume, and the records released from hold. One instance per
 * topic and group member; not thread-safe (the decorator calls it from the consumer's thread). Times enter as
 * arguments: {@code now} is a monotonic reading in nanoseconds, {@code nowMs} the wall clock (lease expiry).
 *
 * <p>Where each rule lives: C2 {@link #onLease}; C3 {@link #onMarker}; C4, C5, C6 {@link PartitionProgress};
 * C7 {@link #snapshot}, {@link #committed}; C8-C10 {@link #onRecord} with {@link HoldBuffer} and
 * {@link EpochHistory}; C11, C12 {@link PartitionProgress#skip}; C13 {@link #flow}; C14-C18 {@link SplitView} and
 * {@link #onRecord}; C19 {@link Config#unknownEpochWaitNanos}. C1 (a record's epoch) is read by the caller
 * ({@code dkg-epoch}, its last well-formed value). The Rust core's fast path is ported without its atomics (a
 * {@code KafkaConsumer} is single-threaded): {@link #lane}, {@link #admits} and {@link #take} hand out a quiet
 * partition's records with what {@link #onRecord} would decide and change for them, and no object per record.
 *
 * @param <M> a record as the caller keeps it while held
 */
final class ConsumerCore<M> {
    /** No offset yet (a partition's fetch position before its first record). */
    static final long NONE = Long.MIN_VALUE;

    private final String topic;
    private final String group;
    private int partitions;
    private final Config cfg;
    private final EpochHistory history;
    private final TreeMap<String, HandoffRecords.Lease> leases = new TreeMap<>();
    /** The latest marker of each producer (applied again to partitions assigned later, and on a lease re-read). */
    private final TreeMap<String, HandoffRecords.Marker> markers = new TreeMap<>();
    /** Drained of partitions owned by other members, as they announced it. */
    private final Map<Integer, Long> remote = new HashMap<>();
    private final TreeMap<Integer, OwnedPartition<M>> parts = new TreeMap<>();
    /** Minimum drained over all partitions: records of epochs up to it are never held. */
    private long settled;
    private final ArrayDeque<ReleasedRecord<M>> ready = new ArrayDeque<>();
    private final List<AppRecord> inApp = new ArrayList<>();
    /** Owned partitions with records of the fast path in the application ({@link OwnedPartition#laneCount} > 0). */
    private final List<OwnedPartition<M>> inLane = new ArrayList<>();
    /** Scratch of {@link #processed}: the partitions whose application records were processed. */
    private final List<OwnedPartition<M>> touched = new ArrayList<>();
    private final List<Long> holdTimes = new ArrayList<>();
    private final List<int[]> stalled = new ArrayList<>();
    private long nowMs;
    private SplitView splitView = SplitView.EMPTY;
    private long splitSeen;
    private final List<SplitChange> splitChanges = new ArrayList<>();
    private Anomalies anomalies = new Anomalies();

    ConsumerCore(String topic, String group, int partitions, Config cfg) {
        this.topic = topic;
        this.group = group;
        this.partitions = partitions;
        this.cfg = cfg;
        this.history = new EpochHistory(partitions, cfg.history);
    }

    String topic() {
        return topic;
    }

    int partitions() {
        return partitions;
    }

    Config config() {
        return cfg;
    }

    /** The topic's partition count changed. */
    void setPartitions(int partitions, long now) {
        if (partitions != this.partitions && partitions > 0) {
            this.partitions = partitions;
            history.setPartitions(partitions);
            splitViewChanged();
            refresh(now);
        }
    }

    List<Integer> owned() {
        return new ArrayList<>(parts.keySet());
    }

    boolean owns(int partition) {
        return parts.containsKey(partition);
    }

    long settled() {
        return settled;
    }

    long maxEpoch() {
        return history.maxEpoch();
    }

    /** The newest assignment known, or null. */
    Assignment latest() {
        return history.get(history.maxEpoch());
    }

    Collection<HandoffRecords.Lease> leases() {
        return Collections.unmodifiableCollection(leases.values());
    }

    long historyGcFloor() {
        return history.collectableBelow();
    }

    /** Records held per owned partition. */
    Map<Integer, Integer> heldCounts() {
        Map<Integer, Integer> out = new TreeMap<>();
        for (Map.Entry<Integer, OwnedPartition<M>> e : parts.entrySet()) {
            out.put(e.getKey(), e.getValue().hold.held());
        }
        return out;
    }

    /** The highest fetched offset + 1 of an owned partition (-1: nothing fetched, or not owned). */
    long fetchPosition(int partition) {
        OwnedPartition<M> part = parts.get(partition);
        return part == null || part.position == NONE ? -1 : part.position;
    }

    /** Lowest unprocessed offset per owned partition (null before the first record). */
    Map<Integer, Long> positions() {
        Map<Integer, Long> out = new TreeMap<>();
        for (int p : parts.keySet()) {
            out.put(p, lowestUnprocessed(p));
        }
        return out;
    }

    /** Partitions (with their held count) that {@link #flow} resumed past the hold limit since the last call. */
    List<int[]> takeStalled() {
        List<int[]> out = new ArrayList<>(stalled);
        stalled.clear();
        return out;
    }

    /** What was counted since the last call. */
    Anomalies takeAnomalies() {
        Anomalies out = anomalies;
        anomalies = new Anomalies();
        return out;
    }

    /** Hold times (nanoseconds) of records released since the last call. */
    List<Long> takeHoldTimes() {
        List<Long> out = new ArrayList<>(holdTimes);
        holdTimes.clear();
        return out;
    }

    /** Drained as this member sees it: its committed value for owned partitions, the announcement for others. */
    private long drainedOf(int partition) {
        OwnedPartition<M> p = parts.get(partition);
        if (p != null) {
            return p.durable;
        }
        Long r = remote.get(partition);
        return r == null ? 0 : r;
    }

    /** The lowest offset of the application's records of {@code partition}, or null. */
    private Long inAppOn(int partition) {
        Long low = null;
        OwnedPartition<M> part = parts.get(partition);
        if (part != null && part.laneCount > 0) {
            low = part.lane[0];
        }
        for (AppRecord a : inApp) {
            if (a.partition == partition && (low == null || a.offset < low)) {
                low = a.offset;
            }
        }
        return low;
    }

    private long computeSettled() {
        long min = Long.MAX_VALUE;
        for (int p = 0; p < partitions; p++) {
            min = Math.min(min, drainedOf(p));
        }
        return partitions == 0 ? 0 : min;
    }

    /** Where {@code part}'s markers stand: every offset below it fetched and processed or tracked (C4). */
    private static Long markerPosition(OwnedPartition<?> part, Long inApp, Long fetching) {
        Long position = fetching != null ? fetching : part.position();
        if (position != null && inApp != null) {
            return Math.min(position, inApp);
        }
        return position;
    }

    private static void applyMarker(OwnedPartition<?> part, int partition, HandoffRecords.Marker marker, Long inApp) {
        if (partition >= marker.length()) {
            return;
        }
        Long position = markerPosition(part, inApp, null);
        HoldBuffer<?> hold = part.hold;
        part.progress.onMarker(marker.producer, marker.epoch, marker.end(partition), position, hold::minEpochBelow);
    }

    private long drainedNow(OwnedPartition<M> part) {
        return part.progress.drained(leases.values(), nowMs, history.maxEpoch());
    }

    // ------------------------------------------------------------------------------------------------ ownership

    /** A partition was assigned, with its committed offset (or null) and metadata (or null). */
    void assign(int partition, Long committed, CommitMeta meta, long now) {
        PartitionProgress progress = new PartitionProgress(meta, committed);
        OwnedPartition<M> part = new OwnedPartition<>(partition, progress);
        long drained = progress.drained(leases.values(), nowMs, history.maxEpoch());
        part.drained = drained;
        // The passed map is durable (committed) and the rest is the lease view: no processing is claimed.
        part.durable = drained;
        part.high = Math.max(meta == null ? 0 : meta.drained, drained);
        part.hooked = drained;
        part.quietSince = now;
        parts.put(partition, part);
        for (HandoffRecords.Marker m : markers.values()) {
            applyMarker(part, partition, m, null);
        }
        remote.remove(partition);
        refresh(now);
    }

    /** A partition was revoked (after its final commit, if any): its held and released records are dropped. */
    void revoke(int partition, long now) {
        OwnedPartition<M> part = parts.remove(partition);
        if (part != null) {
            remote.put(partition, part.durable);
            inLane.remove(part);
        }
        ready.removeIf(r -> r.partition == partition);
        inApp.removeIf(a -> a.partition == partition);
        refresh(now);
    }

    // ------------------------------------------------------------------------------------------------ records

    /** The records the application holds are processed (it polled again, committed or closed). */
    void processed() {
        if (inApp.isEmpty() && inLane.isEmpty()) {
            return;
        }
        for (AppRecord app : inApp) {
            touch(app);
        }
        inApp.clear();
        for (OwnedPartition<M> part : inLane) {
            part.laneCount = 0;
            touch(part);
        }
        inLane.clear();
        afterProcessed();
    }

    /**
     * The application's records of {@code partition} below {@code offset} are processed (it committed that offset
     * itself: what it committed it has processed).
     */
    void processedBelow(int partition, long offset) {
        for (java.util.Iterator<AppRecord> it = inApp.iterator(); it.hasNext();) {
            AppRecord app = it.next();
            if (app.partition == partition && app.offset < offset) {
                it.remove();
                touch(app);
            }
        }
        OwnedPartition<M> part = parts.get(partition);
        if (part != null && part.laneProcessedBelow(offset)) {
            touch(part);
            if (part.laneCount == 0) {
                inLane.remove(part);
            }
        }
        afterProcessed();
    }

    /** Whether the application holds records not processed yet. */
    boolean hasInApp() {
        return !inApp.isEmpty() || !inLane.isEmpty();
    }

    private void touch(AppRecord app) {
        OwnedPartition<M> part = parts.get(app.partition);
        if (part == null) {
            return;
        }
        touch(part);
        if (app.fromHold) {
            part.hold.processed(app.offset);
            part.touchedHold = true;
        }
    }

    private void touch(OwnedPartition<M> part) {
        if (!part.touched) {
            part.touched = true;
            touched.add(part);
        }
    }

    /** What processing the {@link #touched} partitions' records changes: markers pass (C4, C5). */
    private void afterProcessed() {
        if (touched.isEmpty()) {
            return;
        }
        if (touched.size() > 1) {
            touched.sort((a, b) -> Integer.compare(a.partition, b.partition));
        }
        for (OwnedPartition<M> part : touched) {
            boolean fromHold = part.touchedHold;
            part.touched = false;
            part.touchedHold = false;
            if (fromHold && part.progress.hasPending() && part.progress.recheck(part.hold::minEpochBelow)) {
                part.drained = drainedNow(part);
            }
            if (part.progress.hasAwaiting()) {
                // The application's records were what kept the position below a marker's end.
                Long position = markerPosition(part, inAppOn(part.partition), null);
                if (part.progress.arrived(position, part.hold::minEpochBelow)) {
                    part.drained = drainedNow(part);
                }
            }
        }
        touched.clear();
    }

    // ------------------------------------------------------------------------------------------------ fast path

    /** {@code partition}'s state, or null if not owned (for tests). */
    OwnedPartition<M> owned(int partition) {
        return parts.get(partition);
    }

    /**
     * The fast path (the Rust core's lanes, {@code lane.rs}): {@code partition}'s state if a data record of it would
     * be delivered at once by {@link #onRecord} and change nothing but the partition's position and the application's
     * records (it is owned, fetching started, no skip rule of a previous owner is left, none of its records is held,
     * no marker waits for its position, no released record waits anywhere, no split key in transition on it), else
     * null. Such a partition's records go through {@link #admits} and {@link #take} instead, while nothing else is
     * called on the core: a record that is not admitted goes to {@link #onRecord}, and so do the rest of its batch.
     */
    OwnedPartition<M> lane(int partition) {
        if (!ready.isEmpty()) {
            return null;
        }
        OwnedPartition<M> part = parts.get(partition);
        if (part == null || part.hold.held() != 0 || part.progress.start() == null || part.progress.hasSkipRules()
                || part.progress.hasAwaiting()
                || (!splitView.isEmpty() && splitView.inTransition(partition, part.drained, settled))) {
            return null;
        }
        return part;
    }

    /**
     * Whether {@link #onRecord} would deliver a record at {@code offset} with {@code epoch} of {@code lane}'s
     * partition at once: unstamped, or of an epoch the group settled (C8, C9, C10: nothing of its key is held), and
     * not fetched again after a seek (below the position: the core tracks it).
     */
    boolean admits(OwnedPartition<M> lane, long offset, long epoch) {
        return (epoch < 0 || epoch <= settled) && (lane.position == NONE || offset >= lane.position);
    }

    /**
     * A record {@link #admits} let through goes to the application: what {@link #onRecord}'s delivery changes, and
     * nothing else ({@code keyed}: it has a key, even an empty one).
     */
    void take(OwnedPartition<M> lane, long offset, boolean keyed) {
        lane.position = offset + 1;
        if (keyed) {
            lane.high = Math.max(lane.high, lane.drained);
        }
        if (lane.laneCount == 0) {
            inLane.add(lane);
        }
        lane.laneAdd(offset);
    }

    /**
     * {@link #take} for {@code n} records at once, whose offsets the caller wrote to {@code lane.lane} after its
     * {@code laneCount} (ascending, each admitted in turn): {@code position} is the last one's + 1, {@code keyed} whether
     * any had a key.
     */
    void took(OwnedPartition<M> lane, int n, long position, boolean keyed) {
        if (n == 0) {
            return;
        }
        lane.position = position;
        if (keyed) {
            lane.high = Math.max(lane.high, lane.drained);
        }
        if (lane.laneCount == 0) {
            inLane.add(lane);
        }
        lane.laneCount += n;
    }

    /** Whether some epoch kept splits a key (records need their labels, C18). */
    boolean hasSplits() {
        return !splitView.isEmpty();
    }

    /** Records held now, over every owned partition. */
    int heldTotal() {
        int n = 0;
        for (OwnedPartition<M> p : parts.values()) {
            n += p.hold.held();
        }
        return n;
    }

    /** Bookkeeping for any record fetched from {@code partition}; null if it is not owned. */
    private OwnedPartition<M> fetched(int partition, long offset) {
        OwnedPartition<M> part = parts.get(partition);
        if (part == null) {
            return null;
        }
        if (part.progress.hasAwaiting()) {
            // Everything below this record was fetched (the record itself is not tracked yet). The application's
            // records are looked up only here: a scan of them per fetched record made a poll quadratic in its batch.
            Long position = markerPosition(part, inAppOn(partition), offset);
            if (part.progress.arrived(position, part.hold::minEpochBelow)) {
                part.drained = drainedNow(part);
            }
        }
        if (part.position == NONE || offset + 1 > part.position) {
            part.position = offset + 1;
        }
        part.progress.setStart(offset);
        part.progress.forgetSkipsBelow(offset);
        return part;
    }

    /**
     * Test hook for one partition of a marker: {@code offset} on {@code partition} is fetched (an entry the
     * application never sees, as a transaction marker) and {@code producer}'s marker of {@code epoch} ends right
     * after it, reached now.
     */
    void endReached(int partition, long offset, String producer, long epoch) {
        OwnedPartition<M> part = fetched(partition, offset);
        if (part == null) {
            return;
        }
        part.progress.endReached(producer, epoch, offset + 1, part.hold::minEpochBelow);
        part.drained = drainedNow(part);
    }

    /**
     * Decides about one data record taken from Kafka. {@code key} null: keyless; {@code epoch} -1: unstamped (its
     * last well-formed {@code dkg-epoch}, C1). {@code now} is the monotonic time in nanoseconds.
     */
    Outcome onRecord(int partition, long offset, byte[] key, long epoch, M msg, long now) {
        long known = history.maxEpoch();
        OwnedPartition<M> part = fetched(partition, offset);
        if (part == null) {
            return Outcome.UNOWNED;
        }
        if (part.progress.skip(offset, epoch)) {
            return Outcome.SKIPPED;
        }
        if (key == null) {
            return deliver(partition, offset, 0, msg);
        }
        RecordKey k = new RecordKey(key);
        // Held records of an epoch never learnt (C19) are left out: they would lift this one above the markers it
        // must block.
        long[] held = part.hold.keyEpochs(k, known);
        long drained = part.drained;
        part.high = Math.max(part.high, drained);
        long floor = Math.min(part.high, known);
        long[] heldToFloor = epoch < 0 ? part.hold.keyEpochs(k, floor) : null;
        // A split record carries no epoch: the newest epoch it can be of that splits its key here (C14).
        long split = -1;
        if (epoch < 0 && !splitView.isEmpty()) {
            long[] s = splitView.splitEpoch(k, partition, drained);
            if (s != null) {
                split = s[0];
            }
        }
        long recEpoch;
        long waitEpoch;
        if (epoch >= 0) {
            recEpoch = epoch;
            waitEpoch = epoch;
        } else if (split < 0) {
            if (heldToFloor == null) {
                // C10: unstamped and whole, nothing of its key held up to H(q).
                return deliver(partition, offset, 0, msg);
            }
            // C10: queued behind its key's held records up to H(q), counted as a record of H(q).
            recEpoch = floor;
            waitEpoch = -1;
        } else {
            // C15: split in epoch e; if it may as well be of the epoch before, which placed its key here too, it
            // counts as one of that epoch.
            long e = split;
            boolean older = e > drained && history.placeHolds(k, drained, partition);
            long own = older ? drained : e;
            recEpoch = held == null ? own : Math.max(held[1], own);
            waitEpoch = e;
        }
        // C9: earlier held records of the key with an epoch at most this one may be its producer's.
        boolean queued = held != null && held[0] <= recEpoch;
        if (!queued && recEpoch <= settled) {
            return deliver(partition, offset, recEpoch, msg);
        }
        HoldBuffer.Wait wait = waitEpoch >= 0 ? waitFor(k, waitEpoch, partition) : HoldBuffer.Wait.NOTHING;
        long target = waitEpoch >= 0 ? waitEpoch : recEpoch;
        if (!queued && canGo(wait, target)) {
            return deliver(partition, offset, recEpoch, msg);
        }
        part = parts.get(partition);
        if (part == null) {
            return Outcome.UNOWNED;
        }
        if (part.hold.held() == 0) {
            part.quietSince = now;
        }
        part.hold.hold(k, new HoldBuffer.Held<>(offset, recEpoch, wait, target, now, msg));
        return Outcome.HELD;
    }

    /**
     * Hands a record that may go to the application, unless released records of its partition still wait in the
     * ready queue: then it queues behind them (a key's released records must not be overtaken by its next one).
     */
    private Outcome deliver(int partition, long offset, long epoch, M msg) {
        if (!ready.isEmpty()) {
            for (ReleasedRecord<M> r : ready) {
                if (r.partition == partition) {
                    OwnedPartition<M> part = parts.get(partition);
                    if (part != null) {
                        part.hold.queued(offset, epoch);
                        ready.addLast(new ReleasedRecord<>(partition, offset, msg));
                        return Outcome.HELD;
                    }
                    break;
                }
            }
        }
        inApp.add(new AppRecord(partition, offset, false));
        return Outcome.DELIVER;
    }

    /**
     * Which partitions must have drained {@code epoch} before a record of {@code key} with that epoch on
     * {@code partition} may be processed (C8, C16): the key's homes in the epochs not settled everywhere. A record
     * of a key split in {@code epoch} waits only for its whole homes (C15, C17).
     */
    private HoldBuffer.Wait waitFor(RecordKey key, long epoch, int partition) {
        List<Integer> homes = history.splitParts(key, epoch) != null
                ? history.wholeHomes(key, settled, epoch)
                : history.homes(key, settled, epoch);
        if (homes == null) {
            return HoldBuffer.Wait.allBut(partition);
        }
        int[] others = homes.stream().filter(p -> p != partition).mapToInt(Integer::intValue).toArray();
        return others.length == 0 ? HoldBuffer.Wait.NOTHING : HoldBuffer.Wait.partitions(others);
    }

    private boolean canGo(HoldBuffer.Wait wait, long epoch) {
        if (wait.isNothing()) {
            return true;
        }
        if (wait.partitions != null) {
            for (int p : wait.partitions) {
                if (drainedOf(p) < epoch) {
                    return false;
                }
            }
            return true;
        }
        for (int p = 0; p < partitions; p++) {
            if (p != wait.allBut && drainedOf(p) < epoch) {
                return false;
            }
        }
        return true;
    }

    /** Whether a released record waits for the application. */
    boolean hasReady() {
        return !ready.isEmpty();
    }

    /** The next released record, in release order (it becomes the application's record), or null. */
    M nextReady() {
        ReleasedRecord<M> r = ready.pollFirst();
        if (r == null) {
            return null;
        }
        inApp.add(new AppRecord(r.partition, r.offset, true));
        return r.msg;
    }

    /** Releases every held record whose wait is over. */
    private void release(long now) {
        boolean any = false;
        for (OwnedPartition<M> p : parts.values()) {
            if (p.hold.held() > 0) {
                any = true;
                break;
            }
        }
        if (!any) {
            return;
        }
        long[] drained = new long[partitions];
        for (int p = 0; p < partitions; p++) {
            drained[p] = drainedOf(p);
        }
        long maxEpoch = history.maxEpoch();
        for (Map.Entry<Integer, OwnedPartition<M>> e : parts.entrySet()) {
            int partition = e.getKey();
            OwnedPartition<M> part = e.getValue();
            if (part.hold.held() == 0) {
                continue;
            }
            int n = part.hold.release(now, h -> {
                if (drainedEnough(h, drained)) {
                    return true;
                }
                // No partition drains past the newest known epoch: a record waiting for a higher one waits until
                // that epoch is learnt, or the bound runs out (C19).
                if (h.target > maxEpoch && now - h.since >= cfg.unknownEpochWaitNanos) {
                    anomalies.unknownEpochRecords++;
                    return true;
                }
                return false;
            }, r -> {
                holdTimes.add(r.heldForNanos);
                ready.addLast(new ReleasedRecord<>(partition, r.offset, r.msg));
            });
            if (n > 0) {
                part.quietSince = now;
            }
        }
    }

    private static boolean drainedEnough(HoldBuffer.Held<?> h, long[] drained) {
        HoldBuffer.Wait w = h.wait;
        if (w.isNothing()) {
            return true;
        }
        if (w.partitions != null) {
            for (int p : w.partitions) {
                if (p >= drained.length || drained[p] < h.target) {
                    return false;
                }
            }
            return true;
        }
        for (int p = 0; p < drained.length; p++) {
            if (p != w.allBut && drained[p] < h.target) {
                return false;
            }
        }
        return true;
    }

    // ------------------------------------------------------------------------------------------------ knowledge

    /** Recomputes drained values, the settled epoch and releases after any change of knowledge. */
    private void refresh(long now) {
        for (Map.Entry<Integer, OwnedPartition<M>> e : parts.entrySet()) {
            int partition = e.getKey();
            OwnedPartition<M> part = e.getValue();
            if (part.progress.hasAwaiting()) {
                part.progress.retainAwaiting(y -> {
                    HandoffRecords.Lease l = leases.get(y);
                    return l != null && l.isAwaitable(nowMs);
                });
                Long position = markerPosition(part, inAppOn(partition), null);
                part.progress.arrived(position, part.hold::minEpochBelow);
            }
            part.drained = drainedNow(part);
        }
        settled = computeSettled();
        release(now);
    }

    /** A lease was written (or re-read), read at the core's wall clock (C2: the {@code max_lease} clamp). */
    void onLease(HandoffRecords.Lease lease, long now) {
        if (!lease.topic.equals(topic)) {
            return;
        }
        long latest = nowMs + cfg.maxLeaseMs < nowMs ? Long.MAX_VALUE : nowMs + cfg.maxLeaseMs;
        if (Long.compareUnsigned(lease.expiresAtMs, latest) > 0) {
            lease = lease.withExpiry(latest);
            anomalies.clampedLeases++;
        }
        HandoffRecords.Marker marker = markers.get(lease.producer);
        if (marker != null) {
            for (Map.Entry<Integer, OwnedPartition<M>> e : parts.entrySet()) {
                applyMarker(e.getValue(), e.getKey(), marker, inAppOn(e.getKey()));
            }
        }
        leases.put(lease.producer, lease);
        refresh(now);
    }

    /** A producer's marker (C3; reached and passed per owned partition by C4 and C5). */
    void onMarker(HandoffRecords.Marker marker, long now) {
        if (!marker.topic.equals(topic)) {
            return;
        }
        if (marker.length() != partitions) {
            onMarkerRejected(HandoffRecords.MarkerReject.PARTITION_COUNT);
            return;
        }
        HandoffRecords.Marker known = markers.get(marker.producer);
        if (known != null && known.epoch >= marker.epoch) {
            return; // read again, or older than one already known
        }
        for (Map.Entry<Integer, OwnedPartition<M>> e : parts.entrySet()) {
            applyMarker(e.getValue(), e.getKey(), marker, inAppOn(e.getKey()));
        }
        markers.put(marker.producer, marker);
        refresh(now);
    }

    /** A marker record of this topic did not decode (or named another partition count): counted. */
    void onMarkerRejected(HandoffRecords.MarkerReject reason) {
        anomalies.rejectedMarkers[reason.ordinal()]++;
    }

    /** A lease was tombstoned: forgotten with its producer's marker (C2). */
    void onLeaseRemoved(String producer, long now) {
        markers.remove(producer);
        if (leases.remove(producer) != null) {
            refresh(now);
        }
    }

    /** An epoch's assignment (control topic or history record). */
    void onAssignment(Assignment a, long now) {
        if (!a.topic().equals(topic)) {
            return;
        }
        if (history.insert(a)) {
            splitViewChanged();
            splitTransitions();
            refresh(now);
        }
    }

    private void splitViewChanged() {
        if (splitView.isEmpty() && !history.hasSplits()) {
            return;
        }
        splitView = SplitView.of(history);
    }

    /** Keys whose split changed in epochs newer than the newest already reported, each against the epoch before. */
    private void splitTransitions() {
        long max = history.maxEpoch();
        if (max <= splitSeen) {
            return;
        }
        long from = splitSeen;
        splitSeen = max;
        splitChanges.addAll(history.splitChanges(from, max));
    }

    /** Keys that became split (or split differently) or whole again since the last call, in epoch order (C18). */
    List<SplitChange> takeSplitChanges() {
        List<SplitChange> out = new ArrayList<>(splitChanges);
        splitChanges.clear();
        return out;
    }

    /**
     * The label of a record about to go to {@link #onRecord}: over how many partitions its key is split in its
     * epoch, 0 if whole (C18). Does {@code onRecord}'s first bookkeeping first, so that both see the same state.
     */
    int labelRecord(int partition, long offset, byte[] key, long epoch) {
        if (splitView.isEmpty() || fetched(partition, offset) == null) {
            return 0;
        }
        return splitLabel(partition, key, epoch);
    }

    /** Over how many partitions {@code key} is split in the epoch of its record on {@code partition}, 0 if whole. */
    int splitLabel(int partition, byte[] key, long epoch) {
        if (splitView.isEmpty() || key == null) {
            return 0;
        }
        OwnedPartition<M> part = parts.get(partition);
        return part == null ? 0 : splitView.label(new RecordKey(key), partition, part.drained, epoch);
    }

    /** Another member's progress announcement (own partitions and other groups are ignored). */
    void onProgress(HandoffRecords.Progress p, long now) {
        if (!p.topic.equals(topic) || !p.group.equals(group) || parts.containsKey(p.partition)) {
            return;
        }
        // Replace, do not max: a group whose offsets were reset announces lower values.
        remote.put(p.partition, p.drained);
        settled = computeSettled();
        release(now);
    }

    /** Time passes: leases expire. */
    void tick(long now, long nowMs) {
        this.nowMs = nowMs;
        refresh(now);
    }

    /** The wall clock the core last read (milliseconds). */
    long nowMs() {
        return nowMs;
    }

    /** Sets the wall clock used for lease expiry without re-evaluating. */
    void setNowMs(long nowMs) {
        this.nowMs = nowMs;
    }

    // ------------------------------------------------------------------------------------------------ commits

    private Long lowestUnprocessed(int partition) {
        OwnedPartition<M> part = parts.get(partition);
        if (part == null || part.position == NONE) {
            return null;
        }
        long low = part.position;
        Long h = part.hold.lowestUnprocessed();
        if (h != null) {
            low = Math.min(low, h);
        }
        Long app = inAppOn(partition);
        if (app != null) {
            low = Math.min(low, app);
        }
        return low;
    }

    /**
     * What to commit for {@code partition} now (C7): null before its first record. A snapshot with null metadata
     * (and {@code drained} = the size) when the metadata does not fit: then nothing may be committed. A snapshot whose
     * metadata leaves out its skip window says so ({@code windowLeftOut}) and is counted in
     * {@link Anomalies#windowsLeftOut} once when it is built (a reused snapshot has no window: it counts nothing).
     */
    Snapshot snapshot(int partition) {
        OwnedPartition<M> part = parts.get(partition);
        if (part == null) {
            return null;
        }
        // The common case of a consumer committing after every poll: everything fetched is processed, nothing of a
        // previous owner's window is left. The snapshot is then a function of the position, drained and the passed
        // map (PartitionProgress.meta caches that form too): the last one is reused while they stay.
        boolean plain = part.position != NONE && part.laneCount == 0 && part.hold.lowestUnprocessed() == null
                && part.progress.inheritedWindowEnd() == null && !hasInAppOn(partition);
        if (plain && part.snap != null && part.snapPosition == part.position && part.snap.drained == part.drained
                && part.snapPassed == part.progress.passedVersion()) {
            return part.snap;
        }
        Snapshot s = snapshotFresh(partition, part);
        if (plain && s != null && s.metadata != null) {
            part.snap = s;
            part.snapPosition = part.position;
            part.snapPassed = part.progress.passedVersion();
        }
        return s;
    }

    private boolean hasInAppOn(int partition) {
        for (AppRecord a : inApp) {
            if (a.partition == partition) {
                return true;
            }
        }
        return false;
    }

    /** {@link #snapshot} computed afresh (package-private for the tests that check the reuse). */
    Snapshot snapshotFresh(int partition, OwnedPartition<M> part) {
        Long offset = lowestUnprocessed(partition);
        if (offset == null) {
            return null;
        }
        long next = part.position;
        List<Long> unprocessed = part.hold.unprocessedOffsets();
        for (AppRecord a : inApp) {
            if (a.partition == partition) {
                int i = Collections.binarySearch(unprocessed, a.offset);
                if (i < 0) {
                    unprocessed.add(-i - 1, a.offset);
                }
            }
        }
        for (int j = 0; j < part.laneCount; j++) {
            long o = part.lane[j];
            int i = Collections.binarySearch(unprocessed, o);
            if (i < 0) {
                unprocessed.add(-i - 1, o);
            }
        }
        // Not fetched past the previous owner's window yet: what it left unprocessed there still is.
        Long end = part.progress.inheritedWindowEnd();
        if (end != null && end > next) {
            unprocessed.addAll(part.progress.inheritedWindowLeft().subSet(next, true, end, false));
            next = end;
        }
        int[] size = new int[1];
        boolean[] leftOut = new boolean[1];
        String meta = part.progress.meta(part.drained, offset, next, unprocessed, leases.values(), nowMs,
                cfg.maxMetadataBytes, size, leftOut);
        if (meta == null) {
            return new Snapshot(partition, offset, null, size[0], part.progress.passedEpochs());
        }
        if (leftOut[0]) {
            // Counted per snapshot built: a reused snapshot (see snapshot()) never has a window to leave out.
            anomalies.windowsLeftOut++;
            return new Snapshot(partition, offset, meta, part.drained, part.progress.passedEpochs(),
                    unprocessed.size());
        }
        return new Snapshot(partition, offset, meta, part.drained, part.progress.passedEpochs());
    }

    /** Partitions whose drained value changed since their last progress commit. */
    List<Integer> progressDue() {
        List<Integer> out = new ArrayList<>();
        for (Map.Entry<Integer, OwnedPartition<M>> e : parts.entrySet()) {
            if (e.getValue().drained != e.getValue().durable) {
                out.add(e.getKey());
            }
        }
        return out;
    }

    /** Whether some partition's drained value changed since its last progress commit. */
    boolean hasProgressDue() {
        for (OwnedPartition<M> p : parts.values()) {
            if (p.drained != p.durable) {
                return true;
            }
        }
        return false;
    }

    /**
     * A partition with nothing fetched whose drained value changed (through leases only): as durable as the
     * committed state it started from. Returns the progress to announce, or null.
     */
    HandoffRecords.Progress markDurable(int partition, long now) {
        OwnedPartition<M> part = parts.get(partition);
        if (part == null) {
            return null;
        }
        committed(partition, part.drained, now);
        return initialProgress(partition);
    }

    /** The progress of an owned partition as committed (announced on assignment), or null. */
    HandoffRecords.Progress initialProgress(int partition) {
        OwnedPartition<M> part = parts.get(partition);
        if (part == null) {
            return null;
        }
        return new HandoffRecords.Progress(group, topic, partition, part.durable, part.progress.passedEpochs(), -1,
                nowMs);
    }

    /** The epochs {@code partition} drained since the hooks last ran for it (oldest first), marking them hooked. */
    List<Drained> takeDrainedEpochs(int partition) {
        OwnedPartition<M> part = parts.get(partition);
        List<Drained> out = new ArrayList<>();
        if (part == null || part.drained <= part.hooked) {
            return out;
        }
        long from = Math.max(part.hooked, Math.max(history.minEpoch() - 1, 0));
        long to = part.drained;
        part.hooked = to;
        for (long e = from + 1; e <= to; e++) {
            Assignment next = history.get(e);
            if (next != null) {
                out.add(new Drained(partition, history.before(e), next));
            }
        }
        return out;
    }

    /** A progress commit of {@code partition} succeeded: its drained value is durable (C7). */
    void committed(int partition, long drained, long now) {
        OwnedPartition<M> part = parts.get(partition);
        if (part == null) {
            return;
        }
        part.durable = drained;
        part.high = Math.max(part.high, drained);
        if (part.hooked < drained) {
            part.hooked = drained;
        }
        settled = computeSettled();
        release(now);
    }

    /** The progress to announce for {@code s}. */
    HandoffRecords.Progress progressRecord(Snapshot s) {
        return new HandoffRecords.Progress(group, topic, s.partition, s.drained, s.passed, s.offset, nowMs);
    }

    // ------------------------------------------------------------------------------------------------ flow control

    /** Partitions to pause (hold buffer over the limit) and to resume (halved, or stalled): {pause, resume} (C13). */
    List<List<Integer>> flow(long now) {
        List<Integer> pause = new ArrayList<>();
        List<Integer> resume = new ArrayList<>();
        int max = cfg.maxHeld;
        for (Map.Entry<Integer, OwnedPartition<M>> e : parts.entrySet()) {
            int p = e.getKey();
            OwnedPartition<M> part = e.getValue();
            int held = part.hold.held();
            if (part.paused) {
                if (held <= max / 2) {
                    part.paused = false;
                    resume.add(p);
                } else if (now - part.quietSince >= cfg.stallTimeoutNanos) {
                    stalled.add(new int[] {p, held});
                    part.paused = false;
                    part.overflow = true;
                    resume.add(p);
                }
            } else if (held > max && !part.overflow) {
                part.paused = true;
                part.quietSince = now;
                pause.add(p);
            } else if (part.overflow && held <= max / 2) {
                part.overflow = false;
            }
        }
        return List.of(pause, resume);
    }

    /** Partitions currently paused by flow control. */
    List<Integer> paused() {
        List<Integer> out = new ArrayList<>();
        for (Map.Entry<Integer, OwnedPartition<M>> e : parts.entrySet()) {
            if (e.getValue().paused) {
                out.add(e.getKey());
            }
        }
        return out;
    }
}
