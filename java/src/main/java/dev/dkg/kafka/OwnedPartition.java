package dev.dkg.kafka;

/**
 * An owned partition's state in the consumer core: its hold buffer, progress, fetch position, drained values and
 * flow control.
 *
 * @param <M> a record as the caller keeps it while held
 */
final class OwnedPartition<M> {
    final HoldBuffer<M> hold = new HoldBuffer<>();
    final PartitionProgress progress;
    /** Highest fetched offset + 1, or {@link ConsumerCore#NONE} before the first record. */
    long position = ConsumerCore.NONE;
    /** Drained by the current state (not committed yet). */
    long drained;
    /** Drained as last committed: what release decisions use. */
    long durable;
    /** The highest drained value this partition has had (committed by a previous owner, or reached here). */
    long high;
    /** Hooks ran for epochs up to this one. */
    long hooked;
    boolean paused;
    /** Paused, or last released, at. */
    long quietSince;
    /** Resumed by the stall timeout: not paused again until the buffer halves. */
    boolean overflow;

    OwnedPartition(PartitionProgress progress) {
        this.progress = progress;
    }

    Long position() {
        return position == ConsumerCore.NONE ? null : position;
    }
}
