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
 * byte what the Rust encoder writes, {@code dkg_protocol::handoff}, so that both decode alike), and the epoch
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
            ConfigException e = assertThrows(ConfigException.class, () -> DkgKafkaProducer.validate(settings),
                    c.toString());
            assertTrue(e.getMessage().contains(c.key()), e.getMessage());
        }
        for (Case c : List.of(new Case("acks", "all"), new Case("acks", "-1"), new Case("enable.idempotence", "true"),
                new Case("interceptor.classes", ""), new Case("interceptor.classes", List.of()))) {
            Map<String, Object> settings = new HashMap<>(Map.of("bootstrap.servers", "b:1"));
            settings.put(c.key(), c.value());
            DkgKafkaProducer.validate(settings);
        }
    }

    @Test
    void handoffRecordsAreWhatTheRustEncoderWrites() {
        assertEquals("lease2/orders/" + ID, utf8(Handoff.leaseKey("orders", ID)));
        assertEquals("marker/orders/" + ID, utf8(Handoff.markerKey("orders", ID)));
        assertEquals("assignment/orders/18446744073709551615", utf8(Handoff.historyKey("orders", -1L)));
        // serde's order of the Rust Lease: producer, topic, first_epoch, lease_ms, expires_at_ms, barrier (absent in
        // marker mode), closed_at_epoch (absent while live), mode (absent for barrier mode).
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
}
