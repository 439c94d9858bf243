package dev.dkg.kafka;

import java.util.Collections;
import java.util.List;

/** An epoch drained on one partition of this member ({@link DkgConsumerListener#onEpoch}). */
public final class EpochChange {
    private final String topic;
    private final Assignment prev;
    private final Assignment next;
    private final int partition;
    private final List<Integer> owned;
    private final int partitions;

    EpochChange(String topic, Assignment prev, Assignment next, int partition, List<Integer> owned, int partitions) {
        this.topic = topic;
        this.prev = prev;
        this.next = next;
        this.partition = partition;
        this.owned = Collections.unmodifiableList(owned);
        this.partitions = partitions;
    }

    /** The data topic. */
    public String topic() {
        return topic;
    }

    /** The assignment before (null: Kafka's default placement, or unknown). */
    public Assignment prev() {
        return prev;
    }

    /** The assignment now drained. */
    public Assignment next() {
        return next;
    }

    /** The epoch now drained. */
    public long epoch() {
        return next.epoch();
    }

    /** The partition that drained it. */
    public int partition() {
        return partition;
    }

    /** The partitions of the topic this member owns (ascending). */
    public List<Integer> owned() {
        return owned;
    }

    private int place(Assignment a, byte[] key) {
        if (a != null && a.partitions() == partitions) {
            int[] parts = a.splitPartsOf(key);
            // A split key's first part: its lookup would take the next partition of its spread.
            return parts != null ? parts[0] : a.partitionFor(key);
        }
        return Murmur2.kafkaPartition(key, partitions);
    }

    /** The key's partitions before the change if it was split then, else null. */
    public int[] splitBefore(byte[] key) {
        return prev != null && prev.partitions() == partitions ? prev.splitPartsOf(key) : null;
    }

    /** The key's partitions after the change if it is split now, else null. */
    public int[] splitAfter(byte[] key) {
        return next.partitions() == partitions ? next.splitPartsOf(key) : null;
    }

    /** The key's partition before the change (a split key's first part). */
    public int partitionBefore(byte[] key) {
        return place(prev, key);
    }

    /** The key's partition after the change (a split key's first part). */
    public int partitionAfter(byte[] key) {
        return place(next, key);
    }

    /** The key changed partition. */
    public boolean moved(byte[] key) {
        return partitionBefore(key) != partitionAfter(key);
    }

    /** The key lived on {@link #partition()} and now lives on a partition this member does not own. */
    public boolean movedOut(byte[] key) {
        return partitionBefore(key) == partition && !owned.contains(partitionAfter(key));
    }

    /** The key lived on a partition of another member and now lives on one of this member's. */
    public boolean movedIn(byte[] key) {
        return !owned.contains(partitionBefore(key)) && owned.contains(partitionAfter(key));
    }

    @Override
    public String toString() {
        return "EpochChange[" + topic + "-" + partition + ", " + (prev == null ? "none" : prev.epoch()) + " -> "
                + next.epoch() + "]";
    }
}
