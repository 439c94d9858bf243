package dev.dkg.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.Test;

/**
 * The pure parts of the Java ordering producer: the settings it refuses, the handoff records it writes (byte for
 * byte what the Rust encoder writes, {@code dkg_kafka_protocol::handoff}, so that both decode alike), and the epoch
 * ledger its markers are made from. The broker side is {@code partitioner/tests/consumer_java_producer.rs} (Java and
 * Rust producers under {@code DkgConsumer}) and {@code it/OrderingProducerIT}.
 */
class DkgKafkaProducerTest {
    private static final String ID = "0123456789abcdef0123456789abcdef";

    private static String utf8(byte[] b) {
        return new String(b, StandardCharsets.UTF_8);
    }

    @Test
    void settingsThatWouldBreakTheGuaranteeAreRefusedNamingTheKey() {
        record Case(String key, Object value) {}
        List<Case> refused = List.of(new Case("acks", "1"), new Case("acks", "0"), new Case("acks", 1),
                new Case("enable.idempotence", "false"), new Case("enable.idempotence", false),
                new Case("transactional.id", "tx"), new Case("partitioner.class", DkgPartitioner.class.getName()),
                new Case("interceptor.classes", "com.example.Audit"));
        for (Case c : refused) {
            Map<String, Object> settings = new HashMap<>(Map.of("bootstrap.servers", "b:1"));
            settings.put(c.key(), c.value());
            ConfigException e = assertThrows(ConfigException.class, () -> ProducerSettings.validate(settings),
                    c.toString());
            assertTrue(e.getMessage().contains(c.key()), e.getMessage());
        }
        for (Case c : List.of(new Case("acks", "all"), new Case("acks", "-1"), new Case("enable.idempotence", "true"),
                new Case("interceptor.classes", ""), new Case("interceptor.classes", List.of()))) {
            Map<String, Object> settings = new HashMap<>(Map.of("bootstrap.servers", "b:1"));
            settings.put(c.key(), c.value());
            ProducerSettings.validate(settings);
        }
    }

    @Test
    void handoffRecordsAreWhatTheRustEncoderWrites() {
        assertEquals("lease2/orders/" + ID, utf8(Handoff.leaseKey("orders", ID)));
        assertEquals("marker/orders/" + ID, utf8(Handoff.markerKey("orders", ID)));
        assertEquals("assignment/orders/18446744073709551615", utf8(Handoff.historyKey("orders", -1L)));
        // The Rust Lease's order: producer, topic, first_epoch, lease_ms, expires_at_ms, closed_at_epoch (absent
        // while live), then the fixed mode member.
        assertEquals("{\"producer\":\"" + ID + "\",\"topic\":\"orders\",\"first_epoch\":3,\"lease_ms\":30000,"
                        + "\"expires_at_ms\":1796000000000,\"mode\":\"marker\"}",
                utf8(Handoff.lease(ID, "orders", 3, 30_000, 1_796_000_000_000L, -1)));
        assertEquals("{\"producer\":\"" + ID + "\",\"topic\":\"orders\",\"first_epoch\":0,\"lease_ms\":3000,"
                        + "\"expires_at_ms\":5,\"closed_at_epoch\":7,\"mode\":\"marker\"}",
                utf8(Handoff.lease(ID, "orders", 0, 3_000, 5, 7)));
        assertEquals("{\"producer\":\"" + ID + "\",\"topic\":\"orders\",\"epoch\":7,\"ends\":[0,12,5]}",
                utf8(Handoff.marker(ID, "orders", 7, new long[] {0, 12, 5})));
        assertEquals("{\"producer\":\"" + ID + "\",\"topic\":\"a\\\"b\",\"epoch\":1,\"ends\":[]}",
                utf8(Handoff.marker(ID, "a\"b", 1, new long[0])));
    }

    @Test
    void producerIdsAre32LowercaseHexDigitsAndDistinct() {
        Set<String> seen = new java.util.HashSet<>();
        for (int i = 0; i < 1000; i++) {
            String id = Handoff.newProducerId();
            assertTrue(id.matches("[0-9a-f]{32}"), id);
            assertTrue(seen.add(id), "repeated " + id);
        }
    }

    @Test
    void ledgerEndsAreOnePastTheLargestAcknowledgedOffsetPerPartition() {
        EpochLedger l = new EpochLedger(4, 3);
        for (int i = 0; i < 6; i++) {
            l.sent();
        }
        assertEquals(6, l.outstanding());
        l.acked(0, 10);
        l.acked(0, 7);
        l.acked(2, 0);
        l.withdrawn();
        l.unknown(1);
        assertEquals(1, l.outstanding());
        // A partition added to the topic after the ledger was made.
        l.acked(5, 41);
        assertEquals(0, l.outstanding());
        assertArrayEquals(new long[] {11, 0, 1, 0, 0, 42}, l.snapshot(3));
        assertArrayEquals(new long[] {11, 0, 1, 0, 0, 42, 0}, l.snapshot(7));
        assertEquals(Set.of(1), l.unknownPartitions());
    }

    @Test
    void ledgerCountsEveryOutcomeOfConcurrentSendersExactly() throws InterruptedException {
        EpochLedger l = new EpochLedger(1, 4);
        int threads = 8;
        int perThread = 20_000;
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> all = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int id = t;
            Thread th = new Thread(() -> {
                try {
                    start.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                for (int i = 0; i < perThread; i++) {
                    l.sent();
                    // Partitions 0-3 at creation, 4-5 added later: both paths race.
                    l.acked((id + i) % 6, (long) i * threads + id);
                }
            });
            th.start();
            all.add(th);
        }
        start.countDown();
        for (Thread th : all) {
            th.join();
        }
        assertEquals(0, l.outstanding());
        long[] ends = l.snapshot(6);
        long max = (long) (perThread - 1) * threads + (threads - 1) + 1;
        long top = 0;
        for (long e : ends) {
            top = Math.max(top, e);
            assertTrue(e > 0, "every partition acknowledged: " + java.util.Arrays.toString(ends));
        }
        assertEquals(max, top);
    }

    private static final long S = 1_000_000_000L;

    private static List<Transition.OpenWindow> windows(long... epochPrev) {
        List<Transition.OpenWindow> out = new ArrayList<>();
        for (int i = 0; i < epochPrev.length; i += 2) {
            out.add(new Transition.OpenWindow(epochPrev[i], epochPrev[i + 1]));
        }
        return out;
    }

    @Test
    void windowsCloseInOrderOnceAnnouncedWhenFollowedGroupsSettleOrAtTheBound() {
        StampWindows w = new StampWindows(60 * S);
        // No group at all: closes as settled once announced, not before.
        assertEquals(null, w.due("t", windows(3, 2), 2, 4, 0));
        assertEquals(new StampWindows.Closing(3, StampWindows.Reason.SETTLED), w.due("t", windows(3, 2), 3, 4, 0));
        // A group that kept up (best >= prev) is waited for; one left behind long ago is not.
        for (int p = 0; p < 4; p++) {
            w.onProgress("live", "t", p, 3);
            w.onProgress("gone", "t", p, 1);
        }
        assertEquals(null, w.due("t", windows(4, 3, 5, 4), 5, 4, S), "live has not drained 4");
        w.onProgress("live", "t", 0, 4);
        assertEquals(null, w.due("t", windows(4, 3, 5, 4), 5, 4, S), "one partition drained 4, three not");
        for (int p = 1; p < 4; p++) {
            w.onProgress("live", "t", p, 5);
        }
        w.onProgress("live", "t", 0, 5);
        assertEquals(new StampWindows.Closing(5, StampWindows.Reason.SETTLED), w.due("t", windows(4, 3, 5, 4), 5, 4,
                2 * S), "both, in order; 'gone' (best 1 < prev 3) not followed");
        // Announced only up to 4: 5 stays open even though settled.
        w.onProgress("live", "t", 0, 6);
        assertEquals(new StampWindows.Closing(4, StampWindows.Reason.SETTLED), w.due("t", windows(4, 3, 6, 5), 4, 4,
                3 * S));
        // A group that regressed (offsets reset) stays followed and keeps the window open to its bound.
        for (int p = 0; p < 4; p++) {
            w.onProgress("live", "t", p, 0);
        }
        assertEquals(null, w.due("t", windows(6, 5), 6, 4, 10 * S), "best 5 >= prev 5: followed, now 0");
        assertEquals(new StampWindows.Closing(6, StampWindows.Reason.TIMED_OUT),
                w.due("t", windows(6, 5), 6, 4, 70 * S));
        assertEquals(new StampWindows.Closing(7, StampWindows.Reason.SETTLED), w.due("t", windows(7, 6), 7, 4,
                70 * S), "best 5 < prev 6: left behind, not followed");
        // A partition without progress counts as 0 (5 partitions now: the fifth has none).
        w.onProgress("x", "u", 0, 9);
        assertEquals(null, w.due("u", windows(9, 8), 9, 2, 0));
        w.onRemoved("x", "u", 0);
        assertEquals(new StampWindows.Closing(9, StampWindows.Reason.SETTLED), w.due("u", windows(9, 8), 9, 2, 0),
                "a removed group is not waited for");
    }

    @Test
    void transitionsStampTheKeysAnOpenWindowsPlacementPutElsewhere() throws Exception {
        Assignment a1 = Assignment.fromJson(Docs.base().topic("t").partitions(3).epoch(1).table(0, 1, 2, 0).json()
                .getBytes(StandardCharsets.UTF_8));
        Assignment a2 = Assignment.fromJson(Docs.base().topic("t").partitions(3).epoch(2).table(1, 1, 2, 0).json()
                .getBytes(StandardCharsets.UTF_8));
        Transition start = Transition.tracked(1, Transition.Before.UNKNOWN, null);
        byte[] key = "k".getBytes(StandardCharsets.UTF_8);
        assertTrue(start.moved(1, key, a1.partitionFor(key), 3), "start-up: every key");
        Transition closed = start.closedUpTo(1);
        assertTrue(closed.open.isEmpty());
        assertEquals(false, closed.moved(1, key, a1.partitionFor(key), 3), "closed: no key");
        Transition t2 = Transition.tracked(2, Transition.Before.of(a1), closed);
        int moved = 0;
        for (int i = 0; i < 200; i++) {
            byte[] k = ("key-" + i).getBytes(StandardCharsets.UTF_8);
            boolean m = a1.partitionFor(k) != a2.partitionFor(k);
            assertEquals(m, t2.moved(2, k, a2.partitionFor(k), 3), "key-" + i);
            assertTrue(t2.moved(3, k, a2.partitionFor(k), 3), "another epoch's record: moved");
            moved += m ? 1 : 0;
        }
        assertTrue(moved > 0 && moved < 200, moved + " moved");
        // Epoch 2's window still open when 4 comes (3 skipped): every key, and both windows open.
        Transition t4 = Transition.tracked(4, Transition.Before.of(a2), t2);
        assertEquals(List.of(new Transition.OpenWindow(2, 1), new Transition.OpenWindow(4, 2)), t4.open);
        assertTrue(t4.moved(4, key, 0, 3) && t4.moved(4, key, 1, 3) && t4.moved(4, key, 2, 3));
        // After a retraction (Kafka's placement before epoch 5 > 1): every key.
        Transition t5 = Transition.tracked(5, Transition.Before.HASH, null);
        assertTrue(t5.moved(5, key, Murmur2.kafkaPartition(key, 3), 3));
        // Epoch 1 after Kafka's placement: the keys Kafka put elsewhere only.
        Transition first = Transition.tracked(1, Transition.Before.HASH, null);
        assertEquals(false, first.moved(1, key, Murmur2.kafkaPartition(key, 3), 3));
        assertTrue(first.moved(1, key, (Murmur2.kafkaPartition(key, 3) + 1) % 3, 3));
    }

    @Test
    void handoffProgressRecordsAreReadByKeyAndValueAndEverythingElseSkipped() throws Exception {
        StrictJson.Progress p = StrictJson.readProgress(("{\"group\":\"g/1\",\"topic\":\"t\",\"partition\":3,"
                + "\"drained\":7,\"passed\":{\"a\":1},\"committed_offset\":9,\"updated_at_ms\":1,\"new\":[1]}")
                .getBytes(StandardCharsets.UTF_8));
        assertEquals(new StrictJson.Progress("g/1", "t", 3, 7), p);
        for (String bad : List.of("{}", "[]", "{\"group\":\"g\",\"topic\":\"t\",\"partition\":-1,\"drained\":1}",
                "{\"group\":\"g\",\"topic\":\"t\",\"partition\":1,\"drained\":1.5}",
                "{\"group\":\"g\",\"group\":\"h\",\"topic\":\"t\",\"partition\":1,\"drained\":1}",
                "{\"group\":\"g\",\"topic\":\"t\",\"partition\":1,\"drained\":1} x")) {
            assertThrows(StrictJson.Malformed.class, () -> StrictJson.readProgress(bad.getBytes(StandardCharsets.UTF_8)),
                    bad);
        }
    }

    @Test
    void aRouterServesOneOrderingProducerAndGivesEarlierAdoptionsTheStartUpWindow() throws Exception {
        DkgRouter router = DkgRouter.detached("c");
        router.apply("t".getBytes(StandardCharsets.UTF_8), Docs.base().topic("t").partitions(3).epoch(1)
                .table(0, 1, 2, 0).json().getBytes(StandardCharsets.UTF_8));
        assertEquals(null, router.transition("t"), "no windows before tracking");
        assertTrue(router.trackWindows());
        Transition start = router.transition("t");
        assertEquals(List.of(new Transition.OpenWindow(1, 0)), start.open);
        assertTrue(start.moved(1, "k".getBytes(StandardCharsets.UTF_8), 0, 3), "start-up: every key");
        assertEquals(false, router.trackWindows(), "a second ordering producer is refused");
        router.apply("t".getBytes(StandardCharsets.UTF_8), Docs.base().topic("t").partitions(3).epoch(2)
                .table(1, 1, 2, 0).json().getBytes(StandardCharsets.UTF_8));
        Transition next = router.transition("t");
        assertEquals(2, next.toEpoch);
        assertEquals(List.of(new Transition.OpenWindow(1, 0), new Transition.OpenWindow(2, 1)), next.open,
                "the start-up window is still open: carried over");
        assertEquals(false, router.closeWindows("t", start, 1), "a transition replaced meanwhile is not closed");
        assertTrue(router.closeWindows("t", next, 2));
        assertTrue(router.transition("t").open.isEmpty());
        router.close();
    }
}
