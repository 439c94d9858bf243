package dev.dkg.kafka;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * When an ordering producer's stamp windows close (docs/spec.md 9.2.2), the Java counterpart of the Rust
 * {@code dkg_kafka_protocol::window} ({@code GroupProgress} and {@code StampWindows}): what the consumer groups announced
 * on the handoff topic ({@code progress/<group>/<topic>/<partition>}: the epoch each partition drained), and the
 * rule. Pure (the caller passes its monotonic clock); thread-safe (the handoff reader feeds it, the ordering thread
 * asks it).
 *
 * <p>Windows close in epoch order, only once this producer announced the epoch (its marker of it or later is
 * written), and then when every followed group has settled the epoch (the lowest drained value over the topic's
 * partitions, a partition without progress counting as 0), or once open for the bound. A group is followed for the
 * window of {@code E} when its best settled value (per partition the highest drained it ever announced, the lowest
 * over the partitions it announced) is at least the window's predecessor epoch: a group left behind before the
 * previous switch (stopped, its progress still in the compacted topic) is not waited for.
 */
final class StampWindows {
    /** Why windows closed. */
    enum Reason {
        SETTLED("settled"),
        TIMED_OUT("timed_out");

        final String label;

        Reason(String label) {
            this.label = label;
        }
    }

    /** Windows up to {@code upto} may close, the newest of them for {@code reason}. */
    static final class Closing extends Value {
        final long upto;
        final Reason reason;

        Closing(long upto, Reason reason) {
            this.upto = upto;
            this.reason = reason;
        }

        @Override
        Object[] components() {
            return new Object[] {upto, reason};
        }
    }

    /** A group's settled epochs over a topic's partitions: now, and the best it ever reached. */
    static final class Settled {
        final long now;
        final long best;

        Settled(long now, long best) {
            this.now = now;
            this.best = best;
        }
    }

    private final long maxOpenNanos;
    /** topic -> group -> partition -> {drained now, highest drained announced}. */
    private final Map<String, Map<String, TreeMap<Integer, long[]>>> progress = new HashMap<>();
    /** topic -> epoch -> when its window was first seen open. */
    private final Map<String, Map<Long, Long>> opened = new HashMap<>();

    StampWindows(long maxOpenNanos) {
        this.maxOpenNanos = maxOpenNanos;
    }

    /** A progress record was read (a later record of the same key replaces an earlier one). */
    synchronized void onProgress(String group, String topic, int partition, long drained) {
        long[] v = progress.computeIfAbsent(topic, t -> new HashMap<>()).computeIfAbsent(group, g -> new TreeMap<>())
                .computeIfAbsent(partition, p -> new long[] {drained, drained});
        v[0] = drained;
        v[1] = Math.max(v[1], drained);
    }

    /** A progress key was removed (a tombstone). */
    synchronized void onRemoved(String group, String topic, int partition) {
        Map<String, TreeMap<Integer, long[]>> groups = progress.get(topic);
        if (groups != null && groups.containsKey(group)) {
            TreeMap<Integer, long[]> parts = groups.get(group);
            parts.remove(partition);
            if (parts.isEmpty()) {
                groups.remove(group);
            }
        }
    }

    /** Per group of {@code topic}, what it settled over {@code partitions} partitions. */
    synchronized List<Settled> settled(String topic, int partitions) {
        List<Settled> out = new ArrayList<>();
        Map<String, TreeMap<Integer, long[]>> groups = progress.getOrDefault(topic, Map.of());
        for (TreeMap<Integer, long[]> parts : groups.values()) {
            long now = Long.MAX_VALUE;
            for (int p = 0; p < partitions; p++) {
                long[] v = parts.get(p);
                now = Math.min(now, v == null ? 0 : v[0]);
            }
            // Over the partitions it announced: one not announced yet (just added) does not make a group that kept up
            // look left behind.
            long best = Long.MAX_VALUE;
            for (long[] v : parts.headMap(partitions).values()) {
                best = Math.min(best, v[1]);
            }
            out.add(new Settled(partitions == 0 ? 0 : now, best == Long.MAX_VALUE ? 0 : best));
        }
        return out;
    }

    /**
     * The highest epoch of {@code topic} whose window (and every older one) may close now, and why the newest of
     * them closes; null if none. {@code open}: the topic's open windows, oldest first; {@code announced}: the
     * highest epoch this producer announced. The caller {@link #forget}s the windows it then closes.
     */
    synchronized Closing due(String topic, List<Transition.OpenWindow> open, long announced, int partitions,
            long nowNanos) {
        Map<Long, Long> since = opened.computeIfAbsent(topic, t -> new HashMap<>());
        // Windows gone without closing here (a retraction, a reset) are forgotten: a reused epoch starts its own clock.
        since.keySet().removeIf(e -> open.stream().noneMatch(w -> w.epoch == e));
        for (Transition.OpenWindow w : open) {
            since.putIfAbsent(w.epoch, nowNanos);
        }
        List<Settled> groups = settled(topic, partitions);
        Closing closing = null;
        for (Transition.OpenWindow w : open) {
            if (Long.compareUnsigned(announced, w.epoch) < 0) {
                break;
            }
            boolean settled = groups.stream().allMatch(g -> Long.compareUnsigned(g.best, w.prev) < 0
                    || Long.compareUnsigned(g.now, w.epoch) >= 0);
            Reason reason;
            if (settled) {
                reason = Reason.SETTLED;
            } else if (nowNanos - since.get(w.epoch) >= maxOpenNanos) {
                reason = Reason.TIMED_OUT;
            } else {
                break;
            }
            closing = new Closing(w.epoch, reason);
        }
        return closing;
    }

    /** Windows of {@code topic} up to {@code epoch} are closed: forget when they opened. */
    synchronized void forget(String topic, long epoch) {
        Map<Long, Long> since = opened.get(topic);
        if (since != null) {
            since.keySet().removeIf(e -> Long.compareUnsigned(e, epoch) <= 0);
        }
    }

    /** Forget every group's progress (the handoff topic is read again from its beginning). */
    synchronized void clearProgress() {
        progress.clear();
    }
}
