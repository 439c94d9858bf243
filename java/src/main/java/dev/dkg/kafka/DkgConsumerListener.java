package dev.dkg.kafka;

import java.util.Collection;

/**
 * Callbacks of a {@link DkgKafkaConsumer}: the application's per-key state follows its keys across rebalances and
 * epoch switches (the Rust {@code ConsumerHooks}). All run on the thread that calls {@code poll} (or
 * {@code commitSync}, {@code close}), synchronously, between two batches: the state they touch is not used
 * concurrently by the application's own processing. Keep them short; the group's rebalance waits for the
 * revocation callback. Every method has an empty default. The {@link org.apache.kafka.clients.consumer.ConsumerRebalanceListener}
 * given to {@code subscribe} is still called as usual, right after the matching callback here.
 */
public interface DkgConsumerListener {
    /**
     * {@code partitions} of {@code topic} now belong to this member. Called after their committed progress was
     * loaded, before any of their records is handed out.
     *
     * @param topic the data topic
     * @param partitions the partitions, ascending
     */
    default void onPartitionsAssigned(String topic, Collection<Integer> partitions) {}

    /**
     * {@code partitions} of {@code topic} are taken from this member (rebalance or close). Called before the final
     * commit of their offsets: flush the state of their keys now. Not called when they are lost (the group gave them
     * away already) or the consumer is abandoned without close.
     *
     * @param topic the data topic
     * @param partitions the partitions, ascending
     */
    default void onPartitionsRevoked(String topic, Collection<Integer> partitions) {}

    /**
     * {@code change.partition()} has drained epoch {@code change.epoch()}: every record on it of an earlier epoch is
     * processed (for every producer awaited). Keys that left it at this epoch for a partition of another member
     * ({@link EpochChange#movedOut}) will be processed there next: flush and drop their state now. The other member
     * hands out their first new record only after this callback returned and the progress it enables is committed.
     * Keys that move in need no call: their first record is handed out only after their old owner ran this.
     *
     * @param change the epoch and partition
     */
    default void onEpoch(EpochChange change) {}

    /**
     * A key became split over several partitions ({@code change.parts()} non-empty), was split differently, or
     * became whole again (empty parts, {@code change.partition()} its partition), from epoch {@code change.epoch()}
     * on. Called once per key and transition, before any record labelled by that epoch is handed out. Across a split
     * key's parts order is not kept ({@link DkgKafkaConsumer#splitParts}): keep partial state per partition.
     *
     * @param change the key and its new placement
     */
    default void onSplitChange(SplitChange change) {}
}
