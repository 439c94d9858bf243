package dev.dkg.kafka;

import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The ordering state of one data topic in a {@link DkgKafkaProducer}. The ledgers and the send count are shared with
 * the send path; the rest belongs to the ordering thread (leases: under the producer's lease lock).
 */
final class TopicOrdering {
    final String topic;
    /** The ledger the current epoch's sends use (the fast track), and all of them by epoch. */
    volatile EpochLedger hot;
    final ConcurrentSkipListMap<Long, EpochLedger> ledgers = new ConcurrentSkipListMap<>();
    /**
     * The partition count sends route with (0: not known yet: the first send asks the client), refreshed by the
     * ordering thread every round: {@code partitionsFor} per record would take the client's metadata lock twice.
     */
    volatile int sendCount;
    /** Registered: a lease is in the log. */
    volatile boolean registered;
    long firstEpoch;
    /** The highest epoch announced: the first epoch, then the latest marker's. */
    long announced;
    /** The latest marker's ends (empty before any). */
    long[] base = new long[0];
    /** The epoch in effect the ordering thread last saw. */
    long current = -1;
    int partitions = -1;
    /** The protocol's counters for this topic (spec section 10 labels them by topic). */
    final AtomicLong markers = new AtomicLong();
    final AtomicLong windowsSettled = new AtomicLong();
    final AtomicLong windowsTimedOut = new AtomicLong();
    final AtomicLong countChanges = new AtomicLong();

    TopicOrdering(String topic) {
        this.topic = topic;
    }

    /** The count a first send read, unless the ordering thread has set one meanwhile. */
    synchronized void firstCount(int n) {
        if (sendCount <= 0) {
            sendCount = n;
        }
    }

    EpochLedger ledger(long epoch, int partitions) {
        EpochLedger h = hot;
        if (h != null && h.epoch() == epoch) {
            return h;
        }
        EpochLedger l = ledgers.computeIfAbsent(epoch, e -> new EpochLedger(e, partitions));
        hot = l;
        return l;
    }
}
