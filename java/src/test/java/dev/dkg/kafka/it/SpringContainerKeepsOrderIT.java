package dev.dkg.kafka.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dkg.kafka.DkgConfig;
import dev.dkg.kafka.DkgKafkaConsumer;
import dev.dkg.kafka.DkgKafkaProducer;
import dev.dkg.kafka.DkgMetrics;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.junit.jupiter.api.Test;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.listener.ConcurrentMessageListenerContainer;
import org.springframework.kafka.listener.ConsumerAwareMessageListener;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.KafkaMessageListenerContainer;

/**
 * A Spring Kafka listener container keeps per-key order across DKG epoch switches when its
 * {@link DefaultKafkaConsumerFactory} wraps every consumer it makes in a {@link DkgKafkaConsumer} (the one line of
 * the README: {@code factory.addPostProcessor(c -> DkgKafkaConsumer.wrap(c, factory.getConfigurationProperties()))}).
 * Plain JUnit, no Spring context: the factory, the container properties and a {@link ConcurrentMessageListenerContainer}
 * of {@value #CONCURRENCY} members are built by hand, as a {@code @KafkaListener}'s infrastructure would build them.
 *
 * <p>Two Java ordering producers ({@link DkgKafkaProducer}) number each key's records while the assignment switches
 * {@value #SWITCHES} times; the record listener logs (member thread, stream, sequence number) in processing order.
 * One member is slow, so a moved key's old partition lags behind its new one. With the post-processor: 0 per-key
 * order violations, 0 lost, 0 duplicated, moved keys' records were held at the switches, and every consumer the
 * container polled is a {@code DkgKafkaConsumer}. The same container without it (the control run) processes moved
 * keys out of order, so the test can fail.
 *
 * <p>Kafka-clients 4.x only (spring-kafka 4 needs it): not in the 3.x legs of {@code scripts/test}.
 */
class SpringContainerKeepsOrderIT {
    private static final int PARTITIONS = 6;
    private static final int KEYS = 48;
    private static final int SWITCHES = 3;
    private static final int CONCURRENCY = 3;
    private static final long SWITCH_EVERY_MS = 1500;

    /** One record as the listener processed it: which member thread, which (producer, key), its sequence number. */
    record Seen(String thread, String stream, long seq) {}

    /** The outcome of one run. */
    record Run(long sent, long processed, long violations, long lost, long duplicates, long held, int maxHeldSeen,
            int postProcessed, int consumersSeen, int nonDkgConsumersSeen, long slowMemberRecords, long millis,
            long assignedMillis, long drainMillis, Map<String, Set<String>> dkgClientIds) {}

    @Test
    void aSpringListenerContainerWithDkgConsumersKeepsPerKeyOrderAcrossSwitches() throws Exception {
        Run dkg = run("dkg", true);
        System.out.printf("SpringContainerKeepsOrderIT dkg: sent %d processed %d violations %d lost %d duplicates %d "
                + "held %d (most held at once by a member: %d) post-processed consumers %d, DkgKafkaConsumers seen "
                + "by the listener %d (records from other consumers: %d), slow member's records %d; %d ms (members assigned after %d ms, last record processed %d ms after the "
                + "producers stopped)%n", dkg.sent, dkg.processed, dkg.violations, dkg.lost, dkg.duplicates, dkg.held,
                dkg.maxHeldSeen, dkg.postProcessed, dkg.consumersSeen, dkg.nonDkgConsumersSeen,
                dkg.slowMemberRecords, dkg.millis, dkg.assignedMillis, dkg.drainMillis);
        // The container's consumers are the factory's, wrapped: one post-processor call per member, and the consumer
        // each record came with (ConsumerAwareMessageListener) was a DkgKafkaConsumer, one per member.
        assertEquals(CONCURRENCY, dkg.postProcessed, "consumers the factory's post-processor wrapped");
        assertEquals(CONCURRENCY, dkg.consumersSeen, "distinct DkgKafkaConsumers the listener was called with");
        assertEquals(0, dkg.nonDkgConsumersSeen, "records that came from a consumer that is no DkgKafkaConsumer");
        assertTrue(dkg.sent > 0 && dkg.slowMemberRecords > 0, "records sent, and the slow member processed some");
        assertEquals(0, dkg.violations, "per-key order violations");
        assertEquals(0, dkg.lost, "records lost");
        assertEquals(0, dkg.duplicates, "records processed twice (no member left the group)");
        assertTrue(dkg.held > 0, "moved keys were held at the switches (records released from hold)");
        // The factory's client.id is one for all members; Spring suffixes each consumer's. The dkg-consumer-* metrics
        // of each member carry its consumer's own id (as Spring's container.metrics() keys them), so the members'
        // metrics and JMX beans do not collide.
        assertEquals(CONCURRENCY, dkg.dkgClientIds.size(), "members with dkg-consumer-* metrics: " + dkg.dkgClientIds);
        dkg.dkgClientIds.forEach((consumerId, tagged) -> assertEquals(Set.of(consumerId), tagged,
                "client-id tags of the dkg-consumer-* metrics of " + consumerId));

        Run plain = run("plain", false);
        System.out.printf("SpringContainerKeepsOrderIT plain consumers (control): sent %d processed %d violations %d "
                + "lost %d; %d ms (members assigned after %d ms, last record processed %d ms after the producers stopped)%n",
                plain.sent, plain.processed, plain.violations, plain.lost, plain.millis, plain.assignedMillis,
                plain.drainMillis);
        assertEquals(0, plain.postProcessed, "the control run's consumers are not wrapped");
        assertTrue(plain.violations > 0, "the control run (the container's own KafkaConsumers) shows order violations");
    }

    private static Run run(String name, boolean dkg) throws Exception {
        long started = System.nanoTime();
        String topic = Broker.newTopic("spring-order-" + name, PARTITIONS);
        String control = Broker.createControlTopic("spring-order-" + name);
        String handoff = Broker.createControlTopic("spring-order-" + name + "-handoff");
        String group = Broker.uniqueTopic("g-spring-" + name);
        List<Doc> docs = new ArrayList<>();
        for (int e = 1; e <= SWITCHES + 1; e++) {
            docs.add(Doc.shuffled(topic, PARTITIONS, e, 8, 200 + e, List.of()));
        }

        // The factory's properties as an application has them: connection, deserialization and the dkg.* settings.
        // No group.id (the container gives it to each consumer, as a @KafkaListener's groupId does: wrap reads it
        // from the consumer) and no enable.auto.commit (the container sets it false on the consumers it creates).
        Map<String, Object> props = new HashMap<>();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, Broker.bootstrap());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 50);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "spring-order-" + name);
        props.put(DkgConfig.CONTROL_TOPIC_CONFIG, control);
        props.put(DkgConfig.HANDOFF_TOPIC_CONFIG, handoff);
        props.put(DkgConfig.STARTUP_TIMEOUT_MS_CONFIG, "20000");
        DefaultKafkaConsumerFactory<byte[], byte[]> factory = new DefaultKafkaConsumerFactory<>(props,
                new ByteArrayDeserializer(), new ByteArrayDeserializer());
        AtomicInteger postProcessed = new AtomicInteger();
        if (dkg) {
            // The README's line, counted: every consumer the containers get goes through it.
            factory.addPostProcessor(c -> {
                postProcessed.incrementAndGet();
                return DkgKafkaConsumer.wrap(c, factory.getConfigurationProperties());
            });
        }

        String bean = "spring-order-" + name;
        // The first member's thread ("<bean>-0-C-1": the child container's bean name, then Spring's "-C-n") is slow.
        String slowThread = bean + "-0-";
        List<Seen> log = new ArrayList<>();
        Map<Consumer<?, ?>, Boolean> consumers = new IdentityHashMap<>();
        AtomicLong nonDkg = new AtomicLong();
        AtomicInteger maxHeld = new AtomicInteger();
        ConsumerAwareMessageListener<byte[], byte[]> listener = (r, consumer) -> {
            String v = new String(r.value(), StandardCharsets.UTF_8);
            int at = v.lastIndexOf(':');
            String thread = Thread.currentThread().getName();
            synchronized (log) {
                log.add(new Seen(thread, v.substring(0, at), Long.parseLong(v.substring(at + 1))));
                consumers.put(consumer, Boolean.TRUE);
            }
            if (consumer instanceof DkgKafkaConsumer) {
                // On the consumer's own thread: the listener runs inside the container's poll loop.
                maxHeld.accumulateAndGet(((DkgKafkaConsumer<?, ?>) consumer).heldRecords(), Math::max);
            } else {
                nonDkg.incrementAndGet();
            }
            if (thread.startsWith(slowThread)) {
                try {
                    Thread.sleep(2);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        };
        ContainerProperties containerProps = new ContainerProperties(topic);
        containerProps.setGroupId(group);
        // BATCH: after the listener processed a poll's records, the container commits them through the consumer,
        // commitSync(offsets) with each partition's highest processed offset + 1 (RECORD would commit after each
        // record the same way). DkgKafkaConsumer takes those offsets as "processed below" and commits only what is
        // safe: each partition's lowest unprocessed offset (a held record, delivered later, is never skipped) with the
        // protocol's metadata, then announces the progress that releases the keys other members hold. Auto-commit
        // (enable.auto.commit=true) would commit past held records: wrap refuses it, the container sets it false.
        containerProps.setAckMode(ContainerProperties.AckMode.BATCH);
        containerProps.setPollTimeout(1000);
        containerProps.setShutdownTimeout(30_000);
        containerProps.setMessageListener(listener);
        ConcurrentMessageListenerContainer<byte[], byte[]> container = new ConcurrentMessageListenerContainer<>(
                factory, containerProps);
        container.setConcurrency(CONCURRENCY);
        container.setBeanName(bean);

        Set<String> acked = ConcurrentHashMap.newKeySet();
        AtomicBoolean producing = new AtomicBoolean(true);
        long held = 0;
        long assignedMillis;
        long drainMillis;
        Map<String, Set<String>> dkgClientIds = new TreeMap<>();
        try (KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            Broker.publish(publisher, control, docs.get(0));
            container.start();
            // Every member in the group, with partitions, before records flow.
            Broker.waitUntil(name + ": the container's " + CONCURRENCY + " members assigned", Duration.ofSeconds(30),
                    () -> {
                        int n = 0;
                        for (KafkaMessageListenerContainer<byte[], byte[]> c : container.getContainers()) {
                            Collection<TopicPartition> a = c.getAssignedPartitions();
                            if (a == null || a.isEmpty()) {
                                return false;
                            }
                            n += a.size();
                        }
                        return n == PARTITIONS;
                    });
            assignedMillis = (System.nanoTime() - started) / 1_000_000;
            List<DkgKafkaProducer<byte[], byte[]>> producers = new ArrayList<>();
            for (int y = 0; y < 2; y++) {
                producers.add(Broker.orderingProducer(Broker.orderingProducerConfig(control, handoff, topic)));
            }
            List<Thread> senders = new ArrayList<>();
            for (int y = 0; y < producers.size(); y++) {
                senders.add(Broker.numberedSender(producers.get(y), y, topic, KEYS, producing, acked,
                        "producer-" + name + "-" + y));
            }
            // The switches, paced (not a timing assertion): each moves about 5/6 of the keys.
            for (int e = 1; e <= SWITCHES; e++) {
                Thread.sleep(SWITCH_EVERY_MS);
                Broker.publish(publisher, control, docs.get(e));
            }
            Thread.sleep(SWITCH_EVERY_MS);
            producing.set(false);
            for (Thread t : senders) {
                t.join();
            }
            for (DkgKafkaProducer<byte[], byte[]> p : producers) {
                p.close();
            }
            long stopped = System.nanoTime();
            Broker.waitUntil(name + ": every acknowledged record processed", Duration.ofSeconds(60), () -> {
                Set<String> seen = new HashSet<>();
                synchronized (log) {
                    for (Seen s : log) {
                        seen.add(s.stream + ":" + s.seq);
                    }
                }
                return seen.containsAll(acked);
            });
            drainMillis = (System.nanoTime() - stopped) / 1_000_000;
            for (Map.Entry<String, ? extends Map<MetricName, ? extends Metric>> e : container.metrics().entrySet()) {
                for (MetricName n : e.getValue().keySet()) {
                    if (n.name().startsWith("dkg-consumer-")) {
                        dkgClientIds.computeIfAbsent(e.getKey(), k -> new TreeSet<>()).add(n.tags().get("client-id"));
                    }
                }
            }
            if (dkg) {
                // The hold-time histogram's count: records released from hold, counted by the consumers' housekeeping
                // on their next polls (every member keeps polling). Read through Spring's own view of its consumers'
                // metrics (container.metrics(): each consumer's metrics(), here the DkgKafkaConsumer's, which adds
                // its dkg-consumer-* to the inner client's).
                long deadline = System.nanoTime() + 5_000_000_000L;
                do {
                    held = 0;
                    for (Map<MetricName, ? extends Metric> m : container.metrics().values()) {
                        Double released = Broker.metric(m, DkgMetrics.CONSUMER_HOLD_SECONDS_COUNT, "topic", topic);
                        held += released == null ? 0 : released.longValue();
                    }
                    if (held > 0) {
                        break;
                    }
                    Thread.sleep(100);
                } while (System.nanoTime() < deadline);
            }
        } finally {
            producing.set(false);
            container.stop();
        }

        // Order: per stream, the sequence processed never goes back below what was already processed.
        Map<String, Long> highest = new HashMap<>();
        Set<String> seen = new HashSet<>();
        long violations = 0;
        long duplicates = 0;
        long slow = 0;
        int dkgConsumers;
        synchronized (log) {
            for (Seen s : log) {
                if (s.thread.startsWith(slowThread)) {
                    slow++;
                }
                String id = s.stream + ":" + s.seq;
                if (!seen.add(id)) {
                    duplicates++;
                    continue;
                }
                Long h = highest.get(s.stream);
                if (h != null && s.seq < h) {
                    violations++;
                }
                highest.merge(s.stream, s.seq, Math::max);
            }
            dkgConsumers = (int) consumers.keySet().stream().filter(c -> c instanceof DkgKafkaConsumer).count();
        }
        long lost = acked.stream().filter(a -> !seen.contains(a)).count();
        return new Run(acked.size(), log.size(), violations, lost, duplicates, held, maxHeld.get(),
                postProcessed.get(), dkgConsumers, (int) nonDkg.get(), slow,
                (System.nanoTime() - started) / 1_000_000, assignedMillis, drainMillis, dkgClientIds);
    }
}
