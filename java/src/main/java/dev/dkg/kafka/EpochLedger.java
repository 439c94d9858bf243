package dev.dkg.kafka;

import java.util.Arrays;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.LongAdder;

/**
 * The delivery accounting of the records one ordering producer routed to one topic under one epoch: how many are
 * still without an outcome, and per partition 1 + the largest acknowledged offset (docs/spec.md 9.2; the Java
 * counterpart of the Rust {@code dkg_kafka_protocol::marker::EpochLedger}). Shared by the sending threads and the client's
 * I/O thread, which runs the delivery callbacks: atomics, no lock on the hot path.
 *
 * <p>Order of a record's calls: {@link #sent} before the record is handed to the client (so the count is in before
 * any outcome can be), then exactly one of {@link #withdrawn} (the client threw: never appended), {@link #acked} or
 * {@link #unknown} (a delivery error: the record may be in the log at an offset nobody reports). A {@link #snapshot}
 * taken when {@link #outstanding()} is 0 has seen every outcome's effect on the ends.
 */
final class EpochLedger {
    private final long epoch;
    /**
     * Records counted, and outcomes counted: two adders, so that the sending threads and the client's I/O thread
     * never write the same cache line (one shared counter cost a cache miss per record on each side).
     */
    private final LongAdder sent = new LongAdder();
    private final LongAdder done = new LongAdder();
    /** Per partition, 1 + the largest acknowledged offset (0: none), for the partitions the topic had at creation. */
    private final AtomicLongArray ends;
    /** The same for partitions added to the topic later (rare; a map, so that nothing is ever copied under writers). */
    private final ConcurrentHashMap<Integer, AtomicLong> added = new ConcurrentHashMap<>();
    /** Partitions with a delivery error: their end comes from the broker (the high watermark) before a marker. */
    private final Set<Integer> unknown = ConcurrentHashMap.newKeySet();

    EpochLedger(long epoch, int partitions) {
        this.epoch = epoch;
        this.ends = new AtomicLongArray(Math.max(1, partitions));
    }

    long epoch() {
        return epoch;
    }

    /** A record routed under this epoch is about to be handed to the client. */
    void sent() {
        sent.increment();
    }

    /** The client refused the record (it threw before appending it): it will never be in the log. */
    void withdrawn() {
        done.increment();
    }

    /** The record was acknowledged at {@code offset} of {@code partition}. */
    void acked(int partition, long offset) {
        long end = offset + 1;
        if (partition < ends.length()) {
            ends.accumulateAndGet(partition, end, Math::max);
        } else {
            added.computeIfAbsent(partition, p -> new AtomicLong()).accumulateAndGet(end, Math::max);
        }
        done.increment();
    }

    /** The record's delivery failed: it may or may not be in {@code partition} (negative: the partition is unknown). */
    void unknown(int partition) {
        unknown.add(partition);
        done.increment();
    }

    /**
     * Records handed to the client with no outcome yet; 0 means every record counted before the call has its outcome.
     * Outcomes are read first, then records: both only grow and an outcome follows its count, so equal sums mean that
     * at the end of the first read every record counted so far had its outcome (sums taken while others add are not
     * exact at any one instant; read in this order they err only towards "outstanding").
     */
    long outstanding() {
        long outcomes = done.sum();
        return sent.sum() - outcomes;
    }

    /** Partitions with a delivery error (-1 or below: one whose partition was not known: every partition). */
    Set<Integer> unknownPartitions() {
        return Set.copyOf(unknown);
    }

    /** The acknowledged ends, at least {@code partitions} long. */
    long[] snapshot(int partitions) {
        int length = Math.max(partitions, ends.length());
        for (int p : added.keySet()) {
            length = Math.max(length, p + 1);
        }
        long[] out = new long[length];
        for (int i = 0; i < ends.length(); i++) {
            out[i] = ends.get(i);
        }
        added.forEach((p, end) -> out[p] = Math.max(out[p], end.get()));
        return out;
    }

    @Override
    public String toString() {
        return "EpochLedger{epoch=" + Long.toUnsignedString(epoch) + ", outstanding=" + outstanding() + ", ends="
                + Arrays.toString(snapshot(0)) + ", unknown=" + unknown + "}";
    }
}
