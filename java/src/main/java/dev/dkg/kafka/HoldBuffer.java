package dev.dkg.kafka;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Consumer;
import java.util.function.Predicate;

/**
 * The hold buffer of one partition (the Rust {@code consumer::hold}): records of moved keys wait here, per key in
 * arrival (offset) order, until the partitions their key used to live on are drained. Pure: no Kafka, no clock.
 *
 * <p>Besides the held records the buffer tracks every record of the partition that was taken out of Kafka but is
 * not processed yet (held, or released and waiting for the application): offset -> epoch. That set answers the two
 * questions the protocol asks of a partition: the lowest unprocessed offset (the offset to commit: a held record
 * keeps the commit below it) and the lowest epoch below an offset (C5).
 *
 * @param <M> the held record
 */
final class HoldBuffer<M> {
    /** Which partitions must have drained (to the record's target epoch) before a held record may go. */
    static final class Wait extends Value {
        /** Nothing: the record waits only for earlier records of its key (FIFO). */
        static final Wait NOTHING = new Wait(null, -1);

        /** The key's earlier homes, the record's own partition excluded; null with {@link #allBut}. */
        final int[] partitions;
        /** Every partition but this one (an earlier epoch's assignment is unknown), or -1. */
        final int allBut;

        private Wait(int[] partitions, int allBut) {
            this.partitions = partitions;
            this.allBut = allBut;
        }

        static Wait partitions(int[] partitions) {
            return new Wait(partitions.clone(), -1);
        }

        static Wait allBut(int own) {
            return new Wait(null, own);
        }

        boolean isNothing() {
            return partitions == null && allBut < 0;
        }

        @Override
        Object[] components() {
            return new Object[] {partitions == null ? null : java.util.Arrays.toString(partitions), allBut};
        }
    }

    /** One held record. */
    static final class Held<M> {
        final long offset;
        /** The record's epoch, or the epoch it is counted as: what the markers and its key's FIFO go by. */
        final long epoch;
        final Wait wait;
        /** The epoch the partitions of {@code wait} must have drained. */
        final long target;
        /** Monotonic nanoseconds at which it was held. */
        final long since;
        final M msg;

        Held(long offset, long epoch, Wait wait, long target, long since, M msg) {
            this.offset = offset;
            this.epoch = epoch;
            this.wait = wait;
            this.target = target;
            this.since = since;
            this.msg = msg;
        }
    }

    /** A released record, with how long it was held. */
    static final class Released<M> {
        final long offset;
        final long heldForNanos;
        final M msg;

        Released(long offset, long heldForNanos, M msg) {
            this.offset = offset;
            this.heldForNanos = heldForNanos;
            this.msg = msg;
        }
    }

    // Insertion-ordered: a release pass visits keys in a fixed order (only the order within a key is a rule).
    private final Map<RecordKey, List<Held<M>>> byKey = new LinkedHashMap<>();
    /** Offset -> epoch of every record that is held or released-but-unprocessed. */
    private final TreeMap<Long, Long> unprocessed = new TreeMap<>();
    private int held;

    /** Records held now. */
    int held() {
        return held;
    }

    /** Keys with held records. */
    int heldKeys() {
        return byKey.size();
    }

    /**
     * The lowest and highest epoch at most {@code known} of {@code key}'s held records, or null if none. Held records
     * of epochs above {@code known} (never learnt: untrusted input) are left out, so that they cannot lift a later
     * record of the key above the markers it must block.
     */
    long[] keyEpochs(RecordKey key, long known) {
        if (byKey.isEmpty()) {
            return null;
        }
        List<Held<M>> queue = byKey.get(key);
        if (queue == null) {
            return null;
        }
        long min = Long.MAX_VALUE;
        long max = Long.MIN_VALUE;
        for (Held<M> h : queue) {
            if (h.epoch <= known) {
                min = Math.min(min, h.epoch);
                max = Math.max(max, h.epoch);
            }
        }
        return min == Long.MAX_VALUE ? null : new long[] {min, max};
    }

    /** Queue a record behind the key's earlier held records. */
    void hold(RecordKey key, Held<M> record) {
        unprocessed.put(record.offset, record.epoch);
        held++;
        byKey.computeIfAbsent(key, k -> new ArrayList<>(2)).add(record);
    }

    /**
     * Release every record whose {@code canGo} holds and that no earlier held record of its key with an epoch at
     * most its own still precedes (that one may be of the same producer; one with a higher epoch cannot be: a
     * producer's epochs never decrease). Within a key, released records come out in offset order. Released records
     * stay unprocessed until {@link #processed}. Returns how many were released.
     */
    int release(long now, Predicate<Held<M>> canGo, Consumer<Released<M>> out) {
        int released = 0;
        Iterator<List<Held<M>>> queues = byKey.values().iterator();
        while (queues.hasNext()) {
            List<Held<M>> queue = queues.next();
            long blocked = Long.MAX_VALUE;
            Iterator<Held<M>> it = queue.iterator();
            while (it.hasNext()) {
                Held<M> h = it.next();
                if (h.epoch < blocked && canGo.test(h)) {
                    it.remove();
                    released++;
                    out.accept(new Released<>(h.offset, Math.max(0, now - h.since), h.msg));
                } else {
                    blocked = Math.min(blocked, h.epoch);
                }
            }
            if (queue.isEmpty()) {
                queues.remove();
            }
        }
        held -= released;
        return released;
    }

    /** A record that goes straight to the ready queue (behind released ones): unprocessed until processed. */
    void queued(long offset, long epoch) {
        unprocessed.put(offset, epoch);
    }

    /** A released record was processed. */
    void processed(long offset) {
        unprocessed.remove(offset);
    }

    /** The lowest held or released-unprocessed offset, or null. */
    Long lowestUnprocessed() {
        return unprocessed.isEmpty() ? null : unprocessed.firstKey();
    }

    /** Every held or released-unprocessed offset, ascending. */
    List<Long> unprocessedOffsets() {
        return new ArrayList<>(unprocessed.keySet());
    }

    /** The lowest epoch among held or released-unprocessed records below {@code offset}, or null. */
    Long minEpochBelow(long offset) {
        Long min = null;
        for (long e : unprocessed.headMap(offset, false).values()) {
            if (min == null || e < min) {
                min = e;
            }
        }
        return min;
    }

    /** Whether nothing is held or released-unprocessed. */
    boolean isEmpty() {
        return unprocessed.isEmpty();
    }
}
