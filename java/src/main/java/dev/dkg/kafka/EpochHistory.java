package dev.dkg.kafka;

import dev.dkg.kafka.CoreTypes.SplitChange;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.TreeMap;

/**
 * Where a key lived in recent epochs (the Rust {@code consumer::history}): the assignments of the last epochs (from
 * the control topic and the handoff topic's {@code assignment/<topic>/<epoch>} records), plus epoch 0 = Kafka's
 * default placement. A split heavy key (spec 4.6) lives on all of its parts at once. Pure.
 */
final class EpochHistory {
    /** The Rust default number of epochs kept. */
    static final int DEFAULT_KEEP = 32;

    private int partitions;
    private final TreeMap<Long, Assignment> epochs = new TreeMap<>();
    /** The split keys (key -> its parts' partitions, document order) of the epochs that have any. */
    private final TreeMap<Long, Map<RecordKey, int[]>> splits = new TreeMap<>();
    private final int keep;

    EpochHistory(int partitions, int keep) {
        this.partitions = partitions;
        this.keep = Math.max(keep, 2);
    }

    /** The split keys of {@code a} (empty for most assignments). */
    static Map<RecordKey, int[]> splitKeys(Assignment a) {
        Map<RecordKey, int[]> out = new HashMap<>();
        for (int i = 0; i < a.heavyCount(); i++) {
            if (a.isSplit(i)) {
                out.put(new RecordKey(a.heavyKey(i)), a.splitPartitions(i));
            }
        }
        return out;
    }

    /**
     * The topic's partition count (homes under assignments for another count are Kafka's default placement:
     * producers fall back to it).
     */
    void setPartitions(int partitions) {
        this.partitions = partitions;
    }

    /** Adds an epoch's assignment; false if it was known (or is epoch 0). Keeps the newest {@code keep} epochs. */
    boolean insert(Assignment a) {
        long epoch = a.epoch();
        if (epoch == 0 || epochs.containsKey(epoch)) {
            return false;
        }
        Map<RecordKey, int[]> s = splitKeys(a);
        if (!s.isEmpty()) {
            splits.put(epoch, s);
        }
        epochs.put(epoch, a);
        while (epochs.size() > keep) {
            long old = epochs.pollFirstEntry().getKey();
            splits.remove(old);
        }
        return true;
    }

    boolean hasSplits() {
        return !splits.isEmpty();
    }

    /** The split keys of every epoch kept that has any. */
    NavigableMap<Long, Map<RecordKey, int[]>> splits() {
        return Collections.unmodifiableNavigableMap(splits);
    }

    /**
     * The parts of {@code key} if it is split under {@code epoch} (only when the assignment is for the topic's
     * partition count: otherwise producers place by Kafka's hash), else null. Not a copy: do not change it.
     */
    int[] splitParts(RecordKey key, long epoch) {
        if (splits.isEmpty()) {
            return null;
        }
        Map<RecordKey, int[]> s = splits.get(epoch);
        int[] parts = s == null ? null : s.get(key);
        if (parts == null) {
            return null;
        }
        Assignment a = epochs.get(epoch);
        return a != null && a.partitions() == partitions ? parts : null;
    }

    /**
     * Where {@code key}'s records went under {@code epoch}: an array of one partition for a whole key, the parts
     * for a split key (then {@code split[0]} is true); null if the epoch is unknown.
     */
    int[] place(RecordKey key, long epoch, boolean[] split) {
        int[] parts = splitParts(key, epoch);
        if (parts != null) {
            if (split != null) {
                split[0] = true;
            }
            return parts;
        }
        if (split != null) {
            split[0] = false;
        }
        int home = home(key, epoch);
        return home < 0 ? null : new int[] {home};
    }

    /** Whether records of {@code key} under {@code epoch} can be on {@code partition} (false: unknown epoch). */
    boolean placeHolds(RecordKey key, long epoch, int partition) {
        int[] p = place(key, epoch, null);
        if (p == null) {
            return false;
        }
        for (int q : p) {
            if (q == partition) {
                return true;
            }
        }
        return false;
    }

    /** The newest epoch known (0 = none). */
    long maxEpoch() {
        return epochs.isEmpty() ? 0 : epochs.lastKey();
    }

    /** The oldest epoch kept (0 = none). */
    long minEpoch() {
        return epochs.isEmpty() ? 0 : epochs.firstKey();
    }

    Assignment get(long epoch) {
        return epochs.get(epoch);
    }

    /** The newest assignment of an epoch below {@code epoch}, or null. */
    Assignment before(long epoch) {
        Map.Entry<Long, Assignment> e = epochs.lowerEntry(epoch);
        return e == null ? null : e.getValue();
    }

    /** History records of epochs below this one may be garbage-collected (older than the newest {@code keep}). */
    long collectableBelow() {
        int skip = keep - 1;
        for (long e : epochs.descendingKeySet()) {
            if (skip-- == 0) {
                return e;
            }
        }
        return 0;
    }

    /**
     * Where {@code key} lived under {@code epoch} (-1 = unknown) if it was whole; for a split key its first part's
     * partition. Epoch 0 = Kafka's default placement.
     */
    int home(RecordKey key, long epoch) {
        int[] parts = splitParts(key, epoch);
        if (parts != null) {
            return parts.length == 0 ? -1 : parts[0];
        }
        byte[] k = key.bytes();
        if (epoch == 0) {
            return Murmur2.kafkaPartition(k, partitions);
        }
        Assignment a = epochs.get(epoch);
        if (a == null) {
            return -1;
        }
        // Not split here (checked above), so the lookup counts nothing.
        return a.partitions() == partitions ? a.partitionFor(k) : Murmur2.kafkaPartition(k, partitions);
    }

    /**
     * Homes of {@code key} under every epoch in {@code [from, to)}, every part of a split key included; null when
     * unknown (the range is longer than the history kept, or an epoch in it is missing: gaps never count as
     * "stayed").
     */
    List<Integer> homes(RecordKey key, long from, long to) {
        return homesWhere(key, from, to, true);
    }

    /** {@link #homes} without the epochs in which {@code key} was split: what a split record waits for. */
    List<Integer> wholeHomes(RecordKey key, long from, long to) {
        return homesWhere(key, from, to, false);
    }

    private List<Integer> homesWhere(RecordKey key, long from, long to, boolean withSplit) {
        List<Integer> out = new ArrayList<>(2);
        if (from >= to) {
            return out;
        }
        if (to - from > (long) keep + 1) {
            return null;
        }
        boolean[] split = new boolean[1];
        for (long epoch = from; epoch < to; epoch++) {
            int[] p = place(key, epoch, split);
            if (p == null) {
                return null;
            }
            if (split[0] && !withSplit) {
                continue;
            }
            for (int q : p) {
                if (!out.contains(q)) {
                    out.add(q);
                }
            }
        }
        return out;
    }

    /**
     * The keys whose split changed in each known epoch of {@code (from, to]}, each against the epoch before (C18): by
     * epoch, then key.
     */
    List<SplitChange> splitChanges(long from, long to) {
        List<SplitChange> out = new ArrayList<>();
        for (long e = from + 1; e <= to; e++) {
            if (get(e) == null) {
                continue;
            }
            Assignment prevA = before(e);
            long prev = prevA == null ? -1 : prevA.epoch();
            Map<RecordKey, int[]> nowSplit = splits().get(e);
            Map<RecordKey, int[]> prevSplit = prev < 0 ? null : splits().get(prev);
            List<SplitChange> changes = new ArrayList<>();
            if (nowSplit != null) {
                for (RecordKey key : nowSplit.keySet()) {
                    int[] p = splitParts(key, e);
                    int[] was = prev < 0 ? null : splitParts(key, prev);
                    if (p != null && p.length > 0 && (was == null || !java.util.Arrays.equals(was, p))) {
                        changes.add(new SplitChange(key, e, p.clone(), -1));
                    }
                }
            }
            if (prevSplit != null) {
                for (RecordKey key : prevSplit.keySet()) {
                    boolean wasSplit = splitParts(key, prev) != null;
                    if (wasSplit && splitParts(key, e) == null) {
                        changes.add(new SplitChange(key, e, new int[0], home(key, e)));
                    }
                }
            }
            changes.sort((a, b) -> a.key.compareTo(b.key));
            out.addAll(changes);
        }
        return out;
    }
}
