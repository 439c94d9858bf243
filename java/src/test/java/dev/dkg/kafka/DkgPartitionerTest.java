package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.metrics.Sensor;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;

class DkgPartitionerTest {
    private static final String TOPIC = "orders";

    private static byte[] key(int i) {
        return ("key-" + i).getBytes(StandardCharsets.UTF_8);
    }

    /** A table sending every bucket to partition {@code p}, plus heavy key "hot" on partition 0. */
    private static Docs allTo(int partitions, int p, long epoch) {
        int[] table = new int[16];
        java.util.Arrays.fill(table, p);
        return Docs.base().topic(TOPIC).partitions(partitions).epoch(epoch).table(table).heavy("hot", 0);
    }

    /**
     * kafka-clients 3.x calls onNewBatch when a record needs a new batch and then partition() again for that record:
     * the repeat gets the first answer and is not counted again (a split key's schedule does not skip a part); a
     * different record after onNewBatch (one with an explicit partition
     * needed the batch) is placed and counted as usual.
     */
    private static boolean hasOnNewBatch() {
        try {
            org.apache.kafka.clients.producer.Partitioner.class.getMethod("onNewBatch", String.class,
                    Cluster.class, int.class);
            return true;
        } catch (NoSuchMethodException e) {
            return false;
        }
    }

    @Test
    void theRepeatCallOfA3xClientAfterOnNewBatchIsAnsweredOnceAndCountedOnce() {
        DkgRouter router = DkgRouter.detached("_dkg.assignments");
        router.apply(Docs.utf8(TOPIC), Docs.base().split("warm", new int[] {2, 0}, new int[] {1, 1}).bytes());
        DkgPartitioner p = new DkgPartitioner(router, 16384);
        Cluster cluster = Clusters.of(TOPIC, 3);
        byte[] value = new byte[10];
        byte[] first = Docs.utf8("warm");
        // The split key alternates 2, 0, 2, 0, ... over its records.
        assertEquals(2, p.partition(TOPIC, null, first, null, value, cluster));
        p.onNewBatch(TOPIC, cluster, 2);
        // On 4.x no client calls onNewBatch and the partitioner does not look for repeats: a second call is a record.
        boolean threeX = hasOnNewBatch();
        assertEquals(threeX ? 2 : 0, p.partition(TOPIC, null, first, null, value, cluster), "the repeat");
        assertEquals(threeX ? 0 : 2, p.partition(TOPIC, null, Docs.utf8("warm"), null, value, cluster),
                "the schedule went on");
        assertEquals(threeX ? 2 : 3, router.records(TOPIC, Route.SPLIT));
        // onNewBatch for a record the partitioner did not place (explicit partition): the next record is new.
        p.onNewBatch(TOPIC, cluster, 1);
        assertEquals(threeX ? 2 : 0, p.partition(TOPIC, null, Docs.utf8("warm"), null, value, cluster));
        assertEquals(threeX ? 3 : 4, router.records(TOPIC, Route.SPLIT));
        // Keyless records too: the repeat is not counted twice.
        byte[] keyless = new byte[100];
        int k = p.partition(TOPIC, null, null, null, keyless, cluster);
        p.onNewBatch(TOPIC, cluster, k);
        assertEquals(k, p.partition(TOPIC, null, null, null, keyless, cluster));
        assertEquals(threeX ? 1 : 2, router.records(TOPIC, Route.KEYLESS));
    }

    @Test
    void withoutAssignmentKeysGoWhereKafkasDefaultPartitionerPutsThem() {
        DkgRouter router = DkgRouter.detached("_dkg.assignments");
        DkgPartitioner partitioner = new DkgPartitioner(router, 16384);
        Cluster cluster = Clusters.of(TOPIC, 7);
        for (int i = 0; i < 1000; i++) {
            byte[] k = key(i);
            assertEquals(Clusters.kafkaPartition(k, 7), partitioner.partition(TOPIC, null, k, null, null, cluster));
        }
        assertEquals(1000, router.records(TOPIC, Route.FALLBACK));
        assertEquals(0, router.records(TOPIC, Route.ASSIGNED));
    }

    @Test
    void anAssignmentRoutesOnlyWhileItsPartitionCountMatchesTheClusters() {
        // DEBUG: heavy and bucket records counted apart.
        DkgRouter router = DkgRouter.detached("_dkg.assignments", Sensor.RecordingLevel.DEBUG);
        DkgPartitioner partitioner = new DkgPartitioner(router, 16384);
        Assignment a = allTo(4, 3, 1).build();
        assertEquals(ControlUpdate.Outcome.ACCEPTED, router.apply(Docs.utf8(TOPIC), allTo(4, 3, 1).bytes()).outcome());
        Cluster four = Clusters.of(TOPIC, 4);
        for (int i = 0; i < 200; i++) {
            int p = partitioner.partition(TOPIC, null, key(i), null, null, four);
            assertEquals(a.partitionFor(key(i)), p);
            assertEquals(3, p);
        }
        assertEquals(0, partitioner.partition(TOPIC, null, Docs.utf8("hot"), null, null, four));
        assertEquals(200, router.records(TOPIC, Route.BUCKET));
        assertEquals(1, router.records(TOPIC, Route.HEAVY));
        // The topic grew to 6 partitions: the 4-partition assignment no longer applies.
        Cluster six = Clusters.of(TOPIC, 6);
        Set<Integer> seen = new HashSet<>();
        for (int i = 0; i < 200; i++) {
            int p = partitioner.partition(TOPIC, null, key(i), null, null, six);
            assertEquals(Clusters.kafkaPartition(key(i), 6), p);
            seen.add(p);
        }
        assertTrue(seen.size() > 1);
        assertEquals(200, router.records(TOPIC, Route.FALLBACK));
        // A tombstone returns to the default placement; other topics were never affected.
        router.apply(Docs.utf8(TOPIC), null);
        assertEquals(Clusters.kafkaPartition(key(1), 4),
                partitioner.partition(TOPIC, null, key(1), null, null, four));
        assertEquals(Clusters.kafkaPartition(key(1), 4),
                partitioner.partition("other", null, key(1), null, null, Clusters.of("other", 4)));
    }

    @Test
    void rejectedDocumentsKeepTheLastGoodAssignmentAndAreCounted() {
        DkgRouter router = DkgRouter.detached("_dkg.assignments");
        DkgPartitioner partitioner = new DkgPartitioner(router, 16384);
        router.apply(Docs.utf8(TOPIC), allTo(4, 2, 5).bytes());
        router.apply(Docs.utf8(TOPIC), Docs.utf8("{broken"));
        router.apply(Docs.utf8(TOPIC), allTo(4, 1, 4).bytes());
        assertEquals(1, router.rejected(RejectReason.MALFORMED_JSON));
        assertEquals(1, router.rejected(RejectReason.STALE_EPOCH));
        assertEquals(2, partitioner.partition(TOPIC, null, key(9), null, null, Clusters.of(TOPIC, 4)));
    }

    @Test
    void neverThrowsAndAlwaysReturnsAnExistingPartition() {
        DkgRouter router = DkgRouter.detached("_dkg.assignments");
        router.apply(Docs.utf8(TOPIC), allTo(4, 3, 1).bytes());
        DkgPartitioner partitioner = new DkgPartitioner(router, 100);
        Cluster cluster = Clusters.of(TOPIC, 4);
        // Empty key: keyed (Kafka hashes empty keys too), routed by the assignment.
        assertEquals(3, partitioner.partition(TOPIC, null, new byte[0], null, null, cluster));
        // Null key and null value: keyless.
        int p = partitioner.partition(TOPIC, null, null, null, null, cluster);
        assertTrue(p >= 0 && p < 4);
        // An unknown topic, or a Cluster with no partitions at all: 0 (KafkaProducer never asks before the
        // topic's metadata has partitions; there is no right answer, and 0 is what a 1-partition topic gets).
        assertEquals(0, partitioner.partition("unknown", null, key(1), null, null, cluster));
        assertEquals(0, partitioner.partition("unknown", null, null, null, null, cluster));
        assertEquals(0, partitioner.partition(TOPIC, null, key(1), null, null, Cluster.empty()));
        assertEquals(0, partitioner.partition(TOPIC, null, null, null, Docs.utf8("v"), Cluster.empty()));
        // A null Cluster is a bug in the caller; still an answer, counted as an error.
        assertEquals(0, partitioner.partition(TOPIC, null, key(1), null, null, null));
        assertEquals(1, router.errors());
        // A partitioner never configured (no router): still an answer.
        assertEquals(Clusters.kafkaPartition(key(1), 4),
                new DkgPartitioner().partition(TOPIC, null, key(1), null, null, cluster));
    }

    @Test
    void keylessRecordsStickUntilBatchSizeBytesThenMoveOnAtRandom() {
        DkgRouter router = DkgRouter.detached("_dkg.assignments");
        // A 90-byte value makes a 101-byte v2 record: a body of 99 (attributes 1, deltas 2 + 2, key length 1, value
        // length 2 (zig-zag 180), the value, header count 1) and its length (2, zig-zag 198). Ten of them fill a
        // batch of 10 * 101 + 61 bytes (the batch header); an eleventh would not fit.
        byte[] value = new byte[90];
        assertEquals(101, StickyPartition.recordBytes(value.length));
        assertEquals(9, StickyPartition.recordBytes(-1));
        DkgPartitioner partitioner = new DkgPartitioner(router, 10 * 101 + StickyPartition.BATCH_OVERHEAD + 100);
        Cluster cluster = Clusters.of(TOPIC, 4);
        int runs = 400;
        int[] perPartition = new int[4];
        int changes = 0;
        int previous = -1;
        for (int run = 0; run < runs; run++) {
            int first = partitioner.partition(TOPIC, null, null, null, value, cluster);
            for (int i = 1; i < 10; i++) {
                assertEquals(first, partitioner.partition(TOPIC, null, null, null, value, cluster), "run " + run);
            }
            perPartition[first]++;
            changes += first != previous ? 1 : 0;
            previous = first;
        }
        for (int p = 0; p < 4; p++) {
            // Uniform choice: 100 runs expected per partition; 50 is more than 7 standard deviations away.
            assertTrue(perPartition[p] > 50, "partition " + p + " got " + perPartition[p] + " runs");
        }
        // Random choice may repeat a partition (1 in 4): about 300 of 400 runs start on a new one.
        assertTrue(changes > 200, "changes " + changes);
        assertEquals(runs * 10L, router.records(TOPIC, Route.KEYLESS));
    }

    @Test
    void keylessRecordsGoOnlyToPartitionsWithALeaderWhileThereAreAny() {
        DkgPartitioner partitioner = new DkgPartitioner(DkgRouter.detached("_dkg.assignments"), 1);
        Cluster someDown = Clusters.of(TOPIC, 5, 1, 3);
        Set<Integer> seen = new HashSet<>();
        for (int i = 0; i < 500; i++) {
            seen.add(partitioner.partition(TOPIC, null, null, null, new byte[10], someDown));
        }
        assertEquals(Set.of(0, 2, 4), seen);
        Cluster allDown = Clusters.of(TOPIC, 3, 0, 1, 2);
        seen.clear();
        for (int i = 0; i < 500; i++) {
            seen.add(partitioner.partition(TOPIC, null, null, null, new byte[10], allDown));
        }
        assertEquals(Set.of(0, 1, 2), seen);
    }

    @Test
    void keylessStickyPartitionIsReplacedWhenTheTopicShrinks() {
        DkgPartitioner partitioner = new DkgPartitioner(DkgRouter.detached("_dkg.assignments"), 1 << 30);
        Cluster big = Clusters.of(TOPIC, 50);
        int p = partitioner.partition(TOPIC, null, null, null, null, big);
        while (p == 0) {
            // Start from a partition above 0 (a fresh partitioner per try: the first choice is random).
            partitioner = new DkgPartitioner(DkgRouter.detached("_dkg.assignments"), 1 << 30);
            p = partitioner.partition(TOPIC, null, null, null, null, big);
        }
        assertEquals(p, partitioner.partition(TOPIC, null, null, null, null, big));
        assertEquals(0, partitioner.partition(TOPIC, null, null, null, null, Clusters.of(TOPIC, 1)));
    }

    /**
     * Lookups racing with assignment swaps (and tombstones): every answer is one of the answers of the documents
     * in play (or the default placement), never anything else, and nothing throws.
     */
    @Test
    void concurrentSwapsAlwaysGiveOneOfTheAssignmentsAnswers() throws Exception {
        DkgRouter router = DkgRouter.detached("_dkg.assignments");
        DkgPartitioner partitioner = new DkgPartitioner(router, 16384);
        int n = 8;
        Cluster cluster = Clusters.of(TOPIC, n);
        int[] tableA = new int[64];
        int[] tableB = new int[64];
        for (int i = 0; i < 64; i++) {
            tableA[i] = i % n;
            tableB[i] = (i * 5 + 3) % n;
        }
        Assignment a = Docs.base().topic(TOPIC).partitions(n).table(tableA).heavy(key(1), 7).build();
        Assignment b = Docs.base().topic(TOPIC).partitions(n).table(tableB).heavy(key(2), 6).build();
        int keys = 512;
        List<Set<Integer>> allowed = new ArrayList<>();
        for (int i = 0; i < keys; i++) {
            allowed.add(new HashSet<>(List.of(a.partitionFor(key(i)), b.partitionFor(key(i)),
                    Clusters.kafkaPartition(key(i), n))));
        }
        AtomicBoolean stop = new AtomicBoolean();
        ConcurrentLinkedQueue<String> wrong = new ConcurrentLinkedQueue<>();
        CountDownLatch started = new CountDownLatch(3);
        List<Thread> threads = new ArrayList<>();
        long[] lookups = new long[3];
        for (int t = 0; t < 3; t++) {
            int id = t;
            threads.add(new Thread(() -> {
                started.countDown();
                long done = 0;
                do { // at least one pass, however late this thread is scheduled
                    for (int i = 0; i < keys; i++) {
                        int p = partitioner.partition(TOPIC, null, key(i), null, null, cluster);
                        if (!allowed.get(i).contains(p)) {
                            wrong.add("key " + i + " -> " + p);
                        }
                        done++;
                    }
                } while (!stop.get());
                lookups[id] = done;
            }));
        }
        threads.forEach(Thread::start);
        started.await();
        int swaps = 0;
        for (long epoch = 1; epoch <= 3000; epoch++) {
            Docs d = Docs.base().topic(TOPIC).partitions(n).epoch(epoch).table(epoch % 2 == 0 ? tableA : tableB)
                    .heavy(epoch % 2 == 0 ? key(1) : key(2), epoch % 2 == 0 ? 7 : 6);
            ControlUpdate u = router.apply(Docs.utf8(TOPIC), d.bytes());
            assertEquals(ControlUpdate.Outcome.ACCEPTED, u.outcome());
            swaps++;
            if (epoch % 100 == 0) {
                router.apply(Docs.utf8(TOPIC), null);
            }
        }
        stop.set(true);
        for (Thread t : threads) {
            t.join();
        }
        assertTrue(wrong.isEmpty(), () -> wrong.size() + " wrong answers, e.g. " + wrong.peek());
        assertEquals(3000, swaps);
        long total = lookups[0] + lookups[1] + lookups[2];
        assertTrue(total > 0);
        assertEquals(total, router.records(TOPIC, Route.ASSIGNED) + router.records(TOPIC, Route.FALLBACK));
        assertEquals(0, router.errors());
    }

    /** Through a real producer API (MockProducer calls the partitioner as KafkaProducer does). */
    @Test
    void mockProducerPlacesRecordsThroughThePartitioner() throws Exception {
        DkgRouter router = DkgRouter.detached("_dkg.assignments");
        router.apply(Docs.utf8(TOPIC), allTo(4, 2, 1).bytes());
        Cluster cluster = Clusters.of(TOPIC, 4);
        try (MockProducer<byte[], byte[]> producer = new MockProducer<>(cluster, true,
                new DkgPartitioner(router, 16384), new ByteArraySerializer(), new ByteArraySerializer())) {
            RecordMetadata light = producer.send(new ProducerRecord<>(TOPIC, key(5), Docs.utf8("v"))).get();
            RecordMetadata hot = producer.send(new ProducerRecord<>(TOPIC, Docs.utf8("hot"), Docs.utf8("v"))).get();
            RecordMetadata keyless = producer.send(new ProducerRecord<>(TOPIC, null, Docs.utf8("v"))).get();
            assertEquals(2, light.partition());
            assertEquals(0, hot.partition());
            assertTrue(keyless.partition() >= 0 && keyless.partition() < 4);
            assertNotEquals(-1, keyless.partition());
        }
    }
}
