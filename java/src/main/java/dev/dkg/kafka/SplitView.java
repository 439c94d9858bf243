package dev.dkg.kafka;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Split heavy keys on the consumer side (spec 4.6; rules C14-C18 of 9.3; the Rust {@code consumer::split}): which
 * records of a key are split, over how many partitions, and which of them wait at a transition. Pure.
 *
 * <p>Split records carry no {@code dkg-epoch}, so their epoch is bounded instead: a record fetched from a partition
 * that has drained {@code D} has an epoch of at least {@code D} and (producers adopt an epoch only after the
 * previous switch drained) at most {@code D + 1}.
 */
final class SplitView {
    static final SplitView EMPTY = new SplitView(new HashMap<>());

    /** Key -> (epoch, parts) for every epoch kept in which the key is split, epochs ascending. */
    private final Map<RecordKey, List<Object[]>> keys;

    private SplitView(Map<RecordKey, List<Object[]>> keys) {
        this.keys = keys;
    }

    /** The view of {@code history}'s split keys. */
    static SplitView of(EpochHistory history) {
        Map<RecordKey, List<Object[]>> keys = new HashMap<>();
        for (Map.Entry<Long, Map<RecordKey, int[]>> e : history.splits().entrySet()) {
            for (RecordKey key : e.getValue().keySet()) {
                // Through splitParts: an assignment for another partition count splits nothing.
                int[] parts = history.splitParts(key, e.getKey());
                if (parts != null) {
                    keys.computeIfAbsent(key, k -> new ArrayList<>()).add(new Object[] {e.getKey(), parts});
                }
            }
        }
        return new SplitView(keys);
    }

    boolean isEmpty() {
        return keys.isEmpty();
    }

    private static boolean contains(int[] parts, int partition) {
        for (int p : parts) {
            if (p == partition) {
                return true;
            }
        }
        return false;
    }

    /**
     * The newest epoch in {@code [drained, drained + 1]} under which a record of {@code key} on {@code partition} can
     * be a split record, with its number of parts: {epoch, parts}, or null.
     */
    long[] splitEpoch(RecordKey key, int partition, long drained) {
        if (keys.isEmpty()) {
            return null;
        }
        List<Object[]> list = keys.get(key);
        if (list == null) {
            return null;
        }
        for (int i = list.size() - 1; i >= 0; i--) {
            long e = (Long) list.get(i)[0];
            int[] parts = (int[]) list.get(i)[1];
            if (e >= drained && e <= drained + 1 && contains(parts, partition)) {
                return new long[] {e, parts.length};
            }
        }
        return null;
    }

    /**
     * Over how many partitions {@code key} is split in the record's epoch, 0 if whole there: for a stamped record
     * ({@code epoch} >= 0) its split in that epoch; for an unstamped one ({@code epoch} < 0) on a partition that
     * drained {@code drained}, {@link #splitEpoch}'s (split wins when ambiguous: the safe mistake).
     */
    int label(RecordKey key, int partition, long drained, long epoch) {
        if (keys.isEmpty()) {
            return 0;
        }
        if (epoch >= 0) {
            List<Object[]> list = keys.get(key);
            if (list == null) {
                return 0;
            }
            for (Object[] x : list) {
                if ((Long) x[0] == epoch) {
                    return ((int[]) x[1]).length;
                }
            }
            return 0;
        }
        long[] s = splitEpoch(key, partition, drained);
        return s == null ? 0 : (int) s[1];
    }

    /**
     * Whether a split record on {@code partition} (drained {@code drained}) may have to wait: some key is split under
     * an epoch it can be of that the group has not settled yet.
     */
    boolean inTransition(int partition, long drained, long settled) {
        for (List<Object[]> list : keys.values()) {
            for (Object[] x : list) {
                long e = (Long) x[0];
                if (e > settled && e >= drained && e <= drained + 1 && contains((int[]) x[1], partition)) {
                    return true;
                }
            }
        }
        return false;
    }
}
