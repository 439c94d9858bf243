package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.common.Cluster;
import org.junit.jupiter.api.Test;

class RouteCountersTest {
    /**
     * More threads than cells (so some count in the shared adders), all at once: no increment is lost, and a reader
     * running alongside never sees a count go down or past the total.
     */
    @Test
    void countsAreExactAcrossManyThreads() throws Exception {
        RouteCounters counters = new RouteCounters();
        Route[] routes = Route.values();
        // A multiple of the route count, so that every route is counted by as many threads.
        int threads = 20 * routes.length;
        int perThread = 20_000;
        CountDownLatch go = new CountDownLatch(1);
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int route = t % routes.length;
            workers.add(new Thread(() -> {
                try {
                    go.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
                for (int i = 0; i < perThread; i++) {
                    counters.add(route);
                }
            }));
        }
        AtomicBoolean stop = new AtomicBoolean();
        ConcurrentLinkedQueue<String> wrong = new ConcurrentLinkedQueue<>();
        long max = (long) threads / routes.length * perThread;
        Thread reader = new Thread(() -> {
            long[] last = new long[routes.length];
            while (!stop.get()) {
                for (Route r : routes) {
                    long now = counters.sum(r);
                    if (now < last[r.ordinal()] || now > max) {
                        wrong.add(r + ": " + last[r.ordinal()] + " then " + now);
                    }
                    last[r.ordinal()] = now;
                }
            }
        });
        reader.start();
        workers.forEach(Thread::start);
        go.countDown();
        for (Thread w : workers) {
            w.join();
        }
        stop.set(true);
        reader.join();
        assertTrue(wrong.isEmpty(), () -> wrong.size() + " bad reads, e.g. " + wrong.peek());
        for (Route r : routes) {
            assertEquals(max, counters.sum(r), r.label());
        }
    }

    /**
     * Hundreds of topics through one partitioner, each topic name a fresh String every call (the direct-mapped
     * index compares by identity first, then by value): each topic's records land in its own counters, and an
     * assignment of one topic routes only that one.
     */
    @Test
    void manyTopicsKeepTheirOwnStateAndCounters() {
        DkgRouter router = DkgRouter.detached("_dkg.assignments");
        DkgPartitioner partitioner = new DkgPartitioner(router, 16384);
        int topics = 300;
        int[] table = new int[8];
        java.util.Arrays.fill(table, 2);
        router.apply(Docs.utf8("t7"), Docs.base().topic("t7").partitions(3).table(table).bytes());
        List<Cluster> clusters = new ArrayList<>();
        for (int t = 0; t < topics; t++) {
            clusters.add(Clusters.of("t" + t, 3));
        }
        for (int round = 0; round < 5; round++) {
            for (int t = 0; t < topics; t++) {
                String topic = "t" + t; // a new String every call
                for (int i = 0; i <= t % 4; i++) {
                    byte[] key = Docs.utf8("k" + i);
                    int p = partitioner.partition(topic, null, key, null, null, clusters.get(t));
                    assertEquals(t == 7 ? 2 : Murmur2.kafkaPartition(key, 3), p, topic);
                }
            }
        }
        for (int t = 0; t < topics; t++) {
            long want = 5L * (t % 4 + 1);
            assertEquals(t == 7 ? 0 : want, router.records("t" + t, Route.FALLBACK), "t" + t);
            assertEquals(t == 7 ? want : 0, router.records("t" + t, Route.ASSIGNED), "t" + t);
        }
        assertEquals(0, router.errors());
    }
}
