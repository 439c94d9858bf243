package dev.dkg.kafka;

/**
 * A record handed to the application and not processed yet. The Rust core has one (its application takes one
 * record at a time); here a poll hands out a batch, processed together when the application polls again,
 * commits or closes, or up to an offset when it commits offsets of its own ({@link ConsumerCore#processedBelow}).
 */
final class AppRecord {
    final int partition;
    final long offset;
    final boolean fromHold;

    AppRecord(int partition, long offset, boolean fromHold) {
        this.partition = partition;
        this.offset = offset;
        this.fromHold = fromHold;
    }
}
