package dev.dkg.kafka;

/** A key became split, was split differently, or became whole again ({@link DkgConsumerListener#onSplitChange}). */
public final class SplitChange {
    private final String topic;
    private final byte[] key;
    private final long epoch;
    private final int[] parts;
    private final int partition;

    SplitChange(String topic, byte[] key, long epoch, int[] parts, int partition) {
        this.topic = topic;
        this.key = key.clone();
        this.epoch = epoch;
        this.parts = parts.clone();
        this.partition = partition;
    }

    /** The data topic. */
    public String topic() {
        return topic;
    }

    /** The key (a copy). */
    public byte[] key() {
        return key.clone();
    }

    /** The epoch from which the change holds. */
    public long epoch() {
        return epoch;
    }

    /** The parts' partitions from {@link #epoch()} on (a copy); empty: the key is whole again. */
    public int[] parts() {
        return parts.clone();
    }

    /** The whole key's partition from {@link #epoch()} on when whole again, else -1. */
    public int partition() {
        return partition;
    }

    @Override
    public String toString() {
        return "SplitChange[" + topic + ", epoch " + epoch + ", " + (parts.length == 0 ? "whole on " + partition
                : "split over " + java.util.Arrays.toString(parts)) + "]";
    }
}
