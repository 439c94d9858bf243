package dev.dkg.kafka;

import java.util.ArrayList;
import java.util.List;

/**
 * The epoch transitions of a topic whose stamp windows are open (docs/spec.md 9.2.2), the Java counterpart of the
 * Rust {@code Transition} ({@code partitioner/src/kafka/router/state.rs}); immutable. Made by {@link DkgRouter} at
 * each adoption (before the assignment is swapped in) for an ordering producer ({@link DkgKafkaProducer}), and used
 * by a send only when {@link #toEpoch} equals the epoch of the assignment it loaded, so a send racing an adoption
 * never pairs an assignment with the wrong predecessors (it counts the key as moved).
 *
 * <p>A record of the current epoch counts as moved when its key's home differs from its home under any placement in
 * {@link #befores}: the predecessor of every window that was open when the epoch was adopted, and its own. The set
 * is fixed for the epoch; only closing the current epoch's window empties it, so a producer stops stamping a key
 * only once the groups settled the epoch it last stamped it in (what the consumers' rule for unstamped records
 * relies on).
 */
final class Transition {
    /** Placements beyond this many per record collapse into one unknown placement (bounded cost per record). */
    static final int MAX_BEFORES = 8;
    /** Open windows kept at most. */
    static final int MAX_OPEN = 64;

    /** Where keys lived before an epoch: an assignment, Kafka's default placement, or not known. */
    static final class Before {
        static final Before HASH = new Before(null);
        static final Before UNKNOWN = new Before(null);
        final Assignment assignment;

        private Before(Assignment assignment) {
            this.assignment = assignment;
        }

        static Before of(Assignment a) {
            return new Before(a);
        }

        /** The epoch of this placement (0: Kafka's default placement, or not known). */
        long epoch() {
            return assignment == null ? 0 : assignment.epoch();
        }

        /** Whether {@code key}, now on {@code partition} of {@code count}, lived elsewhere under this placement. */
        boolean moved(byte[] key, int partition, int count) {
            if (this == UNKNOWN) {
                return true;
            }
            Assignment b = assignment;
            if (b == null || b.partitions() != count) {
                return Murmur2.kafkaPartition(key, count) != partition;
            }
            // A key split in the previous epoch had its records on several partitions: a whole record of it now
            // counts as moved (the consumer holds it until every old part has drained, spec 4.6). One lookup: p for
            // a bucket, -1 - p for a heavy key, SPLIT_BASE + s (decoded) for a split key.
            int r = b.lookup(key);
            int p = r ^ (r >> 31);
            return p >= Assignment.SPLIT_BASE || p != partition;
        }
    }

    /** An open window: the epoch adopted and the epoch of the placement before it (0: Kafka's, or not known). */
    static final class OpenWindow extends Value {
        final long epoch;
        final long prev;

        OpenWindow(long epoch, long prev) {
            this.epoch = epoch;
            this.prev = prev;
        }

        @Override
        Object[] components() {
            return new Object[] {epoch, prev};
        }
    }

    final long toEpoch;
    /** Empty once the current epoch's window closed (nothing counts as moved). */
    final Before[] befores;
    /** The open windows, oldest first. */
    final List<OpenWindow> open;

    private Transition(long toEpoch, Before[] befores, List<OpenWindow> open) {
        this.toEpoch = toEpoch;
        this.befores = befores;
        this.open = List.copyOf(open);
    }

    /**
     * The transition to {@code toEpoch} from {@code before}, with the windows of {@code prev} that are still open
     * carried over with their placements. An epoch that does not follow its predecessor directly (this producer
     * never adopted the ones between), or that follows Kafka's placement after epoch 1 (a retraction), adds an
     * unknown placement: every key counts as moved until the window closes.
     */
    static Transition tracked(long toEpoch, Before before, Transition prev) {
        boolean skipped = before == Before.HASH ? toEpoch > 1
                : before != Before.UNKNOWN && Long.compareUnsigned(toEpoch, before.epoch() + 1) > 0;
        List<Before> befores = new ArrayList<>();
        List<OpenWindow> open = new ArrayList<>();
        if (prev != null && !prev.open.isEmpty()) {
            befores.addAll(List.of(prev.befores));
            open.addAll(prev.open);
        }
        befores.add(before);
        if (skipped) {
            befores.add(Before.UNKNOWN);
        }
        open.add(new OpenWindow(toEpoch, before.epoch()));
        if (befores.size() > MAX_BEFORES || befores.contains(Before.UNKNOWN)) {
            befores = List.of(Before.UNKNOWN);
        }
        if (open.size() > MAX_OPEN) {
            // Windows that cannot close (a topic without lease) stay bounded: the oldest go, and every key is then
            // stamped (closing the newest needs every followed group to have settled it, which covers the older).
            open = new ArrayList<>(open.subList(open.size() - MAX_OPEN, open.size()));
            befores = List.of(Before.UNKNOWN);
        }
        return new Transition(toEpoch, befores.toArray(new Before[0]), open);
    }

    /** Whether {@code key}, placed on {@code partition} of {@code count} by the assignment of {@code epoch}, moved. */
    boolean moved(long epoch, byte[] key, int partition, int count) {
        if (epoch != toEpoch) {
            return true;
        }
        for (Before b : befores) {
            if (b.moved(key, partition, count)) {
                return true;
            }
        }
        return false;
    }

    /** This transition with the windows of epochs up to {@code upto} closed. */
    Transition closedUpTo(long upto) {
        List<OpenWindow> still = new ArrayList<>();
        for (OpenWindow w : open) {
            if (Long.compareUnsigned(w.epoch, upto) > 0) {
                still.add(w);
            }
        }
        Before[] b = Long.compareUnsigned(upto, toEpoch) >= 0 ? new Before[0] : befores;
        return new Transition(toEpoch, b, still);
    }

    @Override
    public String toString() {
        return "Transition{to=" + Long.toUnsignedString(toEpoch) + ", befores=" + befores.length + ", open=" + open
                + "}";
    }
}
