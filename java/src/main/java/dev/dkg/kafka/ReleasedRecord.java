package dev.dkg.kafka;

/**
 * A record released from hold (or queued behind such records), waiting for the application.
 *
 * @param <M> a record as the caller keeps it while held
 */
final class ReleasedRecord<M> {
    final int partition;
    final long offset;
    final M msg;

    ReleasedRecord(int partition, long offset, M msg) {
        this.partition = partition;
        this.offset = offset;
        this.msg = msg;
    }
}
