package dev.dkg.kafka;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.LongFunction;
import java.util.function.Predicate;

/**
 * {@code passed[P][y]} bookkeeping for one owned partition P (the Rust {@code consumer::progress}): which producers'
 * markers the member has passed, what the partition has therefore drained, and the commit metadata that carries
 * both across a change of owner. Pure. Rules (spec 9.3): C4 (reached), C5 (passed, also partially), C6 (drained),
 * C11 and C12 (skip rules after a change of owner). {@code minEpochBelow(o)} is the lowest epoch of an unprocessed
 * record below {@code o} (null: none).
 */
final class PartitionProgress {
    /** Markers kept per producer while the position has not reached them (a later one covers earlier ones). */
    static final int MAX_AWAITING_PER_PRODUCER = 4;

    /** A marker end reached (or awaited), not passed yet. */
    private static final class Pending {
        final String producer;
        final long epoch;
        final long offset;

        Pending(String producer, long epoch, long offset) {
            this.producer = producer;
            this.epoch = epoch;
            this.offset = offset;
        }
    }

    private final TreeMap<String, CommitMeta.PassedAt> passed;
    private List<Pending> pending = new ArrayList<>();
    /** Markers whose end the position has not reached yet ({@code offset} = the end). */
    private List<Pending> awaiting = new ArrayList<>();
    /** The committed offset at assignment (every record below it was processed), or null. */
    private final Long committed;
    /** From the previous owner's metadata: records below {@code offset} with an epoch below {@code epoch} were processed. */
    private final List<CommitMeta.PassedAt> skip;
    /** From the previous owner's metadata: below {@link #windowEnd}, only the offsets in {@link #windowLeft} were unprocessed. */
    private Long windowEnd;
    private TreeSet<Long> windowLeft;
    /** The first offset fetched since the assignment, or null. */
    private Long start;
    /** Changes whenever {@link #passed} does (the cache of {@link #meta} is keyed on it). */
    private long passedVersion;
    /**
     * {@link #meta} of the common commit (nothing unprocessed, nothing fetched past the offset), which a consumer
     * committing after every poll asks for again and again while nothing changes: for {@link #metaDrained},
     * {@link #passedVersion} = {@link #metaVersion} and {@link #metaMaxBytes}; null if none.
     */
    private String metaCached;
    private long metaDrained;
    private long metaVersion;
    private int metaMaxBytes;
    /** {@link #passedEpochs} as of {@link #epochsVersion}, or null. */
    private TreeMap<String, Long> epochsCached;
    private long epochsVersion;

    /** The state of a newly assigned partition, from its committed offset (or null) and metadata (or null). */
    PartitionProgress(CommitMeta meta, Long committed) {
        this.passed = meta == null ? new TreeMap<>() : new TreeMap<>(meta.passed);
        this.skip = new ArrayList<>(passed.values());
        // Descending by offset: skip() stops at the first rule whose offset is not above the record's.
        this.skip.sort(Comparator.comparingLong((CommitMeta.PassedAt p) -> p.offset).reversed());
        this.committed = committed;
        if (meta != null && committed != null && meta.next != CommitMeta.NO_NEXT && meta.next > committed) {
            windowEnd = meta.next;
            windowLeft = new TreeSet<>();
            for (long d : meta.unprocessed) {
                windowLeft.add(committed + d);
            }
        }
    }

    /** Changes whenever the passed map does. */
    long passedVersion() {
        return passedVersion;
    }

    /** {@code passed[producer]} (0 = none). */
    long passed(String producer) {
        CommitMeta.PassedAt p = passed.get(producer);
        return p == null ? 0 : p.epoch;
    }

    /** Every producer's passed epoch (one map per change of {@link #passed}, shared: read it, do not change it). */
    TreeMap<String, Long> passedEpochs() {
        if (epochsCached != null && epochsVersion == passedVersion) {
            return epochsCached;
        }
        TreeMap<String, Long> out = new TreeMap<>();
        for (Map.Entry<String, CommitMeta.PassedAt> e : passed.entrySet()) {
            out.put(e.getKey(), e.getValue().epoch);
        }
        epochsCached = out;
        epochsVersion = passedVersion;
        return out;
    }

    boolean hasPending() {
        return !pending.isEmpty();
    }

    /** Whether a skip rule from the previous owner's commit still applies to records ahead. */
    boolean hasSkipRules() {
        return !skip.isEmpty() || windowEnd != null;
    }

    /**
     * Whether a re-delivered record was processed by a previous owner (C11 window, else C12). {@code epoch} is its
     * {@code dkg-epoch} (-1: unstamped; never skipped by the marker rule).
     */
    boolean skip(long offset, long epoch) {
        if (windowEnd != null) {
            return offset < windowEnd && !windowLeft.contains(offset);
        }
        if (epoch < 0) {
            return false;
        }
        for (CommitMeta.PassedAt s : skip) {
            if (offset >= s.offset) {
                break;
            }
            if (epoch < s.epoch) {
                return true;
            }
        }
        return false;
    }

    /** The inherited window's end (null: none, or fetching passed it). */
    Long inheritedWindowEnd() {
        return windowEnd;
    }

    /** The offsets the inherited window left unprocessed (empty without a window). */
    TreeSet<Long> inheritedWindowLeft() {
        return windowLeft == null ? new TreeSet<>() : windowLeft;
    }

    /** Drops the skip rules once fetching is past them. */
    void forgetSkipsBelow(long nextOffset) {
        if (!skip.isEmpty() && skip.get(0).offset <= nextOffset) {
            skip.removeIf(s -> s.offset <= nextOffset);
        }
        if (windowEnd != null && windowEnd <= nextOffset) {
            windowEnd = null;
            windowLeft = null;
        }
    }

    private boolean raise(String producer, CommitMeta.PassedAt at) {
        CommitMeta.PassedAt p = passed.get(producer);
        if (p != null && p.epoch >= at.epoch) {
            return false;
        }
        passed.put(producer, at);
        passedVersion++;
        return true;
    }

    /** The position reached {@code offset}, the end of {@code producer}'s marker of {@code epoch} (C4). */
    boolean endReached(String producer, long epoch, long offset, LongFunction<Long> minEpochBelow) {
        if (passed(producer) >= epoch) {
            return false;
        }
        boolean[] r = pass(producer, epoch, offset, minEpochBelow.apply(offset));
        if (!r[1]) {
            pending.add(new Pending(producer, epoch, offset));
        }
        return r[0];
    }

    /**
     * Passes {@code producer}'s marker of {@code epoch} ending at {@code offset} as far as {@code low} (the lowest epoch
     * of an unprocessed record below it) allows (C5: a marker of E is also one of every lower epoch). Returns
     * {passed changed, marker fully passed}.
     */
    private boolean[] pass(String producer, long epoch, long offset, Long low) {
        if (low != null && low < epoch) {
            boolean partial = low > passed(producer) && raise(producer, new CommitMeta.PassedAt(low, offset));
            return new boolean[] {partial, false};
        }
        return new boolean[] {raise(producer, new CommitMeta.PassedAt(epoch, offset)), true};
    }

    /** Whether a marker ending at {@code end} is reached at {@code position} (null: nothing fetched); the committed offset counts. */
    private boolean reached(long end, Long position) {
        Long at = position;
        if (committed != null && (at == null || committed > at)) {
            at = committed;
        }
        return end <= 0 || (at != null && end <= at);
    }

    /** A marker of {@code producer} for {@code epoch} ending at {@code end} here, with the partition's position. */
    boolean onMarker(String producer, long epoch, long end, Long position, LongFunction<Long> minEpochBelow) {
        if (passed(producer) >= epoch) {
            return false;
        }
        if (reached(end, position)) {
            return endReached(producer, epoch, end, minEpochBelow);
        }
        int mine = 0;
        long oldest = Long.MAX_VALUE;
        for (Pending a : awaiting) {
            if (a.producer.equals(producer) && a.epoch >= epoch) {
                return false;
            }
        }
        awaiting.add(new Pending(producer, epoch, end));
        for (Pending a : awaiting) {
            if (a.producer.equals(producer)) {
                mine++;
                oldest = Math.min(oldest, a.epoch);
            }
        }
        if (mine > MAX_AWAITING_PER_PRODUCER) {
            long drop = oldest;
            awaiting.removeIf(a -> a.producer.equals(producer) && a.epoch == drop);
        }
        return false;
    }

    /** Whether some marker waits for the position. */
    boolean hasAwaiting() {
        return !awaiting.isEmpty();
    }

    /** Markers whose end the position has reached are passed as far as they can be. */
    boolean arrived(Long position, LongFunction<Long> minEpochBelow) {
        if (awaiting.isEmpty()) {
            return false;
        }
        List<Pending> due = new ArrayList<>();
        List<Pending> rest = new ArrayList<>();
        for (Pending a : awaiting) {
            (reached(a.offset, position) ? due : rest).add(a);
        }
        awaiting = rest;
        boolean changed = false;
        for (Pending a : due) {
            changed |= endReached(a.producer, a.epoch, a.offset, minEpochBelow);
        }
        return changed;
    }

    /** Forgets awaited markers of producers {@code keep} rejects (no lease live or closed). */
    void retainAwaiting(Predicate<String> keep) {
        awaiting.removeIf(a -> !keep.test(a.producer));
    }

    /** Re-checks reached, not yet passed markers after records were processed. */
    boolean recheck(LongFunction<Long> minEpochBelow) {
        if (pending.isEmpty()) {
            return false;
        }
        boolean changed = false;
        List<Pending> old = pending;
        pending = new ArrayList<>();
        for (Pending p : old) {
            boolean[] r = pass(p.producer, p.epoch, p.offset, minEpochBelow.apply(p.offset));
            changed |= r[0];
            if (!r[1] && passed(p.producer) < p.epoch) {
                pending.add(p);
            }
        }
        return changed;
    }

    /** The first offset fetched since the assignment, or null. */
    Long start() {
        return start;
    }

    /** Records the first fetched offset (once). */
    void setStart(long offset) {
        if (start == null) {
            start = offset;
        }
    }

    /** The highest epoch this partition has drained (C6) given the topic's leases, capped at {@code maxEpoch}. */
    long drained(Collection<HandoffRecords.Lease> leases, long nowMs, long maxEpoch) {
        long drained = maxEpoch;
        for (HandoffRecords.Lease lease : leases) {
            if (!lease.isAwaitable(nowMs)) {
                continue;
            }
            // Covered up to p; epoch p + 1 is awaited unless the producer closed before it.
            long p = Math.max(lease.firstEpoch, passed(lease.producer));
            if (lease.closedAtEpoch == HandoffRecords.NOT_CLOSED || p < lease.closedAtEpoch) {
                drained = Math.min(drained, p);
            }
        }
        return drained;
    }

    /**
     * The commit metadata for a commit at {@code offset} with fetch position {@code next} and the {@code unprocessed}
     * offsets (ascending, in {@code [offset, next)}), within {@code maxBytes}: if needed the unprocessed list goes
     * first, then entries of producers no longer awaited. Null (with {@code size[0]} set) if it still does not fit.
     * {@code leftOut[0]} is set to whether the metadata returned leaves out a skip window ({@code next > offset}:
     * {@code n} and {@code u} dropped because they did not fit; a next owner re-processes what was processed above
     * {@code offset}).
     */
    String meta(long drained, long offset, long next, List<Long> unprocessed, Collection<HandoffRecords.Lease> leases,
            long nowMs, int maxBytes, int[] size, boolean[] leftOut) {
        leftOut[0] = false;
        boolean plain = unprocessed.isEmpty() && next <= offset;
        if (plain && metaCached != null && metaDrained == drained && metaVersion == passedVersion
                && metaMaxBytes == maxBytes) {
            return metaCached;
        }
        List<Long> deltas = new ArrayList<>(unprocessed.size());
        for (long o : unprocessed) {
            deltas.add(o - offset);
        }
        CommitMeta m = new CommitMeta(CommitMeta.VERSION, drained, passed, next > offset ? next : CommitMeta.NO_NEXT,
                deltas);
        String encoded = m.encode();
        if (encoded.length() <= maxBytes) {
            if (plain) {
                // Only the full form is cached: what fits of it depends on nothing but drained and passed.
                metaCached = encoded;
                metaDrained = drained;
                metaVersion = passedVersion;
                metaMaxBytes = maxBytes;
            }
            return encoded;
        }
        m = new CommitMeta(CommitMeta.VERSION, drained, passed, CommitMeta.NO_NEXT, List.of());
        encoded = m.encode();
        boolean window = next > offset;
        if (encoded.length() <= maxBytes) {
            leftOut[0] = window;
            return encoded;
        }
        TreeMap<String, CommitMeta.PassedAt> live = new TreeMap<>();
        for (Map.Entry<String, CommitMeta.PassedAt> e : passed.entrySet()) {
            for (HandoffRecords.Lease l : leases) {
                if (l.producer.equals(e.getKey()) && l.isAwaitable(nowMs)) {
                    live.put(e.getKey(), e.getValue());
                    break;
                }
            }
        }
        encoded = new CommitMeta(CommitMeta.VERSION, drained, live, CommitMeta.NO_NEXT, List.of()).encode();
        if (encoded.length() <= maxBytes) {
            leftOut[0] = window;
            return encoded;
        }
        size[0] = encoded.length();
        return null;
    }
}
