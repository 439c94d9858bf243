package dev.dkg.kafka;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.LongAdder;

/**
 * One topic's record counters by {@link Route} ({@code dkg-producer-records-total}), counted without an atomic
 * read-modify-write per record: an uncontended {@link LongAdder} increment is a locked compare-and-swap, a full
 * fence that stalls the pipeline of every {@code partition()} call and cost about as much as the whole lookup.
 *
 * <p>Each thread counts in a cell of its own, found from its thread id (a home slot, then a few neighbours), with
 * plain single-writer increments (opaque accesses: atomic, never torn or cached in a register, no fence). A read
 * sums the cells. Exact: a cell has exactly one writer (thread ids are unique among live threads; a cell left by a
 * thread that ended keeps its counts and, should the id be reused, gets one writer again), so no increment is ever
 * lost. Staleness: a read may miss the increments of the last few nanoseconds still in another core's store
 * buffer, nothing more. Threads that find no free cell near their home slot (more than {@value #CELLS} threads
 * ever counted for this topic, or clustered ids) count in a shared {@link LongAdder}, still exact.
 */
final class RouteCounters {
    /** Cells per topic (a power of two). */
    private static final int CELLS = 64;
    /** Slots a thread tries, from its home slot, before it counts in the shared adders. */
    private static final int PROBES = 8;
    /** Longs before and after a cell's counts: two threads' counts never share a cache line. */
    private static final int PAD = 8;
    private static final int ROUTES = Route.values().length;
    private static final VarHandle COUNT = MethodHandles.arrayElementVarHandle(long[].class);
    private static final VarHandle CELL = MethodHandles.arrayElementVarHandle(long[][].class);
    /** Index of a cell's owner (a thread id); its counts are at {@code PAD + route}. */
    private static final int OWNER = 0;

    /**
     * The cells, each a {@code long[]} holding its owner's thread id and that thread's counts (one array: one load
     * fewer on the hot path than an object holding an array). Written only by compare-and-set ({@link #CELL}).
     */
    private final long[][] cells = new long[CELLS][];
    private final LongAdder[] shared = new LongAdder[ROUTES];

    RouteCounters() {
        for (int i = 0; i < ROUTES; i++) {
            shared[i] = new LongAdder();
        }
    }

    /** Counts one record of route {@code route} (a {@link Route} ordinal). */
    void add(int route) {
        long tid = Thread.currentThread().getId();
        // A plain read: a thread always sees the cell it published itself, owner included; another thread's cell
        // may show up without its owner yet (0, no thread's id), which only sends this thread to the slow path.
        long[] c = cells[(int) tid & (CELLS - 1)];
        if (c != null && c[OWNER] == tid) {
            increment(c, route);
        } else {
            addSlow(tid, route);
        }
    }

    private void addSlow(long tid, int route) {
        int home = (int) tid & (CELLS - 1);
        for (int i = 0; i < PROBES; i++) {
            int slot = (home + i) & (CELLS - 1);
            long[] c = (long[]) CELL.getVolatile(cells, slot);
            if (c == null) {
                long[] mine = new long[PAD + ROUTES + PAD];
                mine[OWNER] = tid;
                if (CELL.compareAndSet(cells, slot, (long[]) null, mine)) {
                    increment(mine, route);
                    return;
                }
                c = (long[]) CELL.getVolatile(cells, slot);
            }
            if (c[OWNER] == tid) {
                increment(c, route);
                return;
            }
        }
        shared[route].increment();
    }

    private static void increment(long[] cell, int route) {
        int i = PAD + route;
        COUNT.setOpaque(cell, i, (long) COUNT.getOpaque(cell, i) + 1);
    }

    /** Records counted for {@code route} so far (see the class comment for how current this is). */
    long sum(Route route) {
        int r = route.ordinal();
        long total = shared[r].sum();
        for (int slot = 0; slot < CELLS; slot++) {
            long[] c = (long[]) CELL.getVolatile(cells, slot);
            if (c != null) {
                total += (long) COUNT.getOpaque(c, PAD + r);
            }
        }
        return total;
    }
}
