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
    /**
     * The application's records handed out by the fast path ({@link ConsumerCore#lane}), not processed yet: their
     * offsets, ascending, in {@code lane[0..laneCount)}. They count exactly as the core's own application records
     * (what {@code AppRecord}s of this partition not from hold would say), without an object per record.
     */
    long[] lane = new long[64];
    int laneCount;
    /** Scratch of {@code ConsumerCore.processed}: some application record of this partition was processed. */
    boolean touched;
    /** Scratch of {@code ConsumerCore.processed}: one of them came from the hold buffer. */
    boolean touchedHold;
    final int partition;
    /**
     * {@code ConsumerCore.snapshot}'s last result when nothing was unprocessed (null: none), with the position and
     * {@code PartitionProgress.passedVersion} it was taken at ({@code drained} is in it).
     */
    CoreTypes.Snapshot snap;
    long snapPosition;
    long snapPassed;

    OwnedPartition(int partition, PartitionProgress progress) {
        this.partition = partition;
        this.progress = progress;
    }

    /** Appends a fast-path record's offset (above every offset there: the caller checked it is past the position). */
    void laneAdd(long offset) {
        if (laneCount == lane.length) {
            lane = java.util.Arrays.copyOf(lane, lane.length * 2);
        }
        lane[laneCount++] = offset;
    }

    /** Room for {@code n} more fast-path offsets after {@code lane[laneCount - 1]}: the array to write them to. */
    long[] laneReserve(int n) {
        if (laneCount + n > lane.length) {
            lane = java.util.Arrays.copyOf(lane, Math.max(lane.length * 2, laneCount + n));
        }
        return lane;
    }

    /** Drops the fast-path records below {@code offset} (processed); returns whether there were any. */
    boolean laneProcessedBelow(long offset) {
        int n = 0;
        while (n < laneCount && lane[n] < offset) {
            n++;
        }
        if (n == 0) {
            return false;
        }
        System.arraycopy(lane, n, lane, 0, laneCount - n);
        laneCount -= n;
        return true;
    }

    Long position() {
        return position == ConsumerCore.NONE ? null : position;
    }
}
