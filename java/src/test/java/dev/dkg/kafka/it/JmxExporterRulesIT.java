package dev.dkg.kafka.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dkg.kafka.DkgConfig;
import dev.dkg.kafka.DkgKafkaConsumer;
import dev.dkg.kafka.DkgKafkaProducer;
import io.prometheus.jmx.JmxCollector;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;

/**
 * The shipped jmx_exporter config ({@code deploy/jmx-exporter/dkg-producer.yml}) applied by the exporter's own
 * collector ({@code io.prometheus.jmx:collector}, what {@code jmx_prometheus_javaagent} runs) to the MBeans that a
 * live {@code KafkaProducer} with {@code DkgPartitioner} and a live {@code DkgKafkaProducer} register: every
 * attribute of every DKG MBean becomes exactly one {@code dkg_producer_*} series, named as the Rust and Python
 * producers name theirs, labelled with the bean's tags, with the value the client's own metric has.
 */
class JmxExporterRulesIT {
    private static final int PARTITIONS = 4;
    /** The Rust producer's names (partitioner/src/kafka/metrics.rs) and the Java-only ones of DkgMetrics. */
    private static final Set<String> NAMES = Set.of("dkg_producer_records_total", "dkg_producer_epoch",
            "dkg_producer_assignment_in_effect", "dkg_producer_assignment_age_seconds",
            "dkg_producer_assignments_rejected_total", "dkg_producer_stamp_windows_closed_total",
            "dkg_producer_partition_count_changes_total",
            // Java only: no Rust counterpart (README "Metrics").
            "dkg_producer_partitioner_errors_total", "dkg_producer_markers_written_total");
    private static final Pattern SAMPLE = Pattern.compile("^([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{(.*)})? (\\S+)$");
    private static final Pattern LABEL = Pattern.compile("([a-zA-Z_][a-zA-Z0-9_]*)=\"((?:[^\"\\\\]|\\\\.)*)\"");

    /** One exposed sample: name, labels, value. */
    private record Sample(String name, Map<String, String> labels, double value) {}

    private static Path config() {
        // dkg.vectors is <repo>/spec/vectors (set by the pom for every test).
        Path vectors = Path.of(System.getProperty("dkg.vectors", "../spec/vectors")).toAbsolutePath().normalize();
        return vectors.getParent().getParent().resolve("deploy/jmx-exporter/dkg-producer.yml");
    }

    /** What the agent would serve on /metrics: the collector's snapshots in the Prometheus text format. */
    private static List<Sample> scrape() throws Exception {
        // As the agent does: the collector registered in a registry, which the HTTP server scrapes.
        PrometheusRegistry registry = new PrometheusRegistry();
        new JmxCollector(new File(config().toString())).register(registry);
        MetricSnapshots snapshots = registry.scrape();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrometheusTextFormatWriter.create().write(out, snapshots);
        return out.toString(StandardCharsets.UTF_8).lines().filter(l -> !l.startsWith("#") && !l.isBlank())
                .map(l -> {
                    Matcher m = SAMPLE.matcher(l);
                    assertTrue(m.matches(), () -> "unparsable exposition line: " + l);
                    Map<String, String> labels = new TreeMap<>();
                    if (m.group(3) != null) {
                        Matcher lm = LABEL.matcher(m.group(3));
                        while (lm.find()) {
                            labels.put(lm.group(1), lm.group(2));
                        }
                    }
                    return new Sample(m.group(1), labels, Double.parseDouble(m.group(4)));
                }).toList();
    }

    private static List<Sample> series(List<Sample> all, String clientId) {
        return all.stream().filter(s -> clientId.equals(s.labels().get("client_id"))).toList();
    }

    private static double value(List<Sample> samples, String name, Map<String, String> labels) {
        List<Sample> found = samples.stream()
                .filter(s -> s.name().equals(name) && s.labels().entrySet().containsAll(labels.entrySet())).toList();
        assertEquals(1, found.size(), () -> name + labels + ": " + found + " among " + samples);
        return found.get(0).value();
    }

    /** Every attribute of every DKG MBean of {@code clientId}: each must become one series. */
    private static int attributes(String clientId) throws Exception {
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        int n = 0;
        for (ObjectName name : server.queryNames(new ObjectName("kafka.producer:type=plugins,*"), null)) {
            if (!clientId.equals(name.getKeyProperty("client-id"))) {
                continue;
            }
            for (MBeanAttributeInfo a : server.getMBeanInfo(name).getAttributes()) {
                assertTrue(a.getName().startsWith("dkg-producer-"), () -> name + " " + a.getName());
                n++;
            }
        }
        return n;
    }

    /** The exported series of one producer: names from NAMES, every attribute mapped, one language's labels. */
    private static List<Sample> checkedSeries(String clientId) throws Exception {
        List<Sample> mine = series(scrape(), clientId);
        Set<String> names = new TreeSet<>();
        for (Sample s : mine) {
            assertTrue(NAMES.contains(s.name()), () -> "unexpected series " + s);
            names.add(s.name());
            Set<String> keys = new TreeSet<>(s.labels().keySet());
            keys.remove("client_id");
            assertTrue(Set.of("topic", "route", "reason").containsAll(keys), () -> "labels of " + s);
        }
        assertEquals(attributes(clientId), mine.size(), () -> "MBean attributes vs series: " + mine);
        return mine;
    }

    @Test
    void partitionerMetricsBecomeTheRustProducersSeries() throws Exception {
        String topic = Broker.newTopic("jmx", PARTITIONS);
        String control = Broker.createControlTopic("jmx");
        String clientId = "jmx-it-" + topic;
        Properties config = Broker.dkgProducerConfig(control);
        config.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        byte[] hot = "hot".getBytes(StandardCharsets.UTF_8);
        Doc doc = Doc.shuffled(topic, PARTITIONS, 1, 16, 5, List.of(new Doc.Heavy(hot, 2)));
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config);
                KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            Broker.ack(producer.send(new ProducerRecord<>(topic, hot, new byte[1])), "before");
            Broker.publish(publisher, control, doc);
            Plugin.awaitEpoch(producer, topic, 1, Duration.ofSeconds(15));
            for (int i = 0; i < 10; i++) {
                Broker.ack(producer.send(new ProducerRecord<>(topic, ("k" + i).getBytes(StandardCharsets.UTF_8),
                        new byte[1])), "after-" + i);
            }
            Broker.ack(producer.send(new ProducerRecord<>(topic, null, new byte[1])), "keyless");
            Broker.publishRaw(publisher, control, topic.getBytes(StandardCharsets.UTF_8),
                    "{not json".getBytes(StandardCharsets.UTF_8));
            Broker.waitUntil("the malformed document to be rejected", Duration.ofSeconds(15),
                    () -> Plugin.rejected(Plugin.metrics(producer), "malformed_json") == 1);

            List<Sample> mine = checkedSeries(clientId);
            Map<String, String> t = Map.of("topic", topic);
            assertEquals(1, value(mine, "dkg_producer_records_total", Map.of("topic", topic, "route", "fallback")));
            assertEquals(10, value(mine, "dkg_producer_records_total", Map.of("topic", topic, "route", "assigned")));
            assertEquals(1, value(mine, "dkg_producer_records_total", Map.of("topic", topic, "route", "keyless")));
            assertEquals(1, value(mine, "dkg_producer_epoch", t));
            assertEquals(1, value(mine, "dkg_producer_assignment_in_effect", t));
            double age = value(mine, "dkg_producer_assignment_age_seconds", t);
            assertTrue(age >= 0 && age < 600, () -> "age " + age);
            assertEquals(1, value(mine, "dkg_producer_assignments_rejected_total",
                    Map.of("topic", topic, "reason", "malformed_json")));
            assertEquals(0, value(mine, "dkg_producer_assignments_rejected_total",
                    Map.of("topic", "(other)", "reason", "malformed_json")));
            assertEquals(0, value(mine, "dkg_producer_assignments_rejected_total",
                    Map.of("topic", topic, "reason", "stale_epoch")));
            assertEquals(20, mine.stream().filter(s -> s.name().equals("dkg_producer_assignments_rejected_total"))
                    .count(), "one series per reject reason for the topic and for (other)");
            assertEquals(0, value(mine, "dkg_producer_partitioner_errors_total", Map.of()));
        }
    }

    @Test
    void orderingProducerMetricsBecomeTheRustProducersSeries() throws Exception {
        String topic = Broker.newTopic("jmx-ordering", PARTITIONS);
        String control = Broker.createControlTopic("jmx-ordering");
        String handoff = Broker.createControlTopic("jmx-ordering-handoff");
        String clientId = "jmx-it-" + topic;
        try (KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            Broker.publish(publisher, control, Doc.shuffled(topic, PARTITIONS, 1, 16, 7, List.of()));
            Broker.announceProgress(publisher, handoff, "app", topic, PARTITIONS, 0);
            Map<String, Object> config = Broker.orderingProducerConfig(control, handoff, topic);
            config.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
            try (DkgKafkaProducer<byte[], byte[]> p = Broker.orderingProducer(config)) {
                for (int i = 0; i < 5; i++) {
                    Broker.ack(p.send(new ProducerRecord<>(topic, ("k" + i).getBytes(StandardCharsets.UTF_8),
                            new byte[1])), "ordered-" + i);
                }
                List<Sample> mine = checkedSeries(clientId);
                Map<String, String> t = Map.of("topic", topic);
                assertEquals(5, value(mine, "dkg_producer_records_total", Map.of("topic", topic, "route", "assigned")));
                assertEquals(1, value(mine, "dkg_producer_epoch", t));
                assertEquals(0, value(mine, "dkg_producer_partition_count_changes_total", t));
                assertEquals(p.markersWritten(), value(mine, "dkg_producer_markers_written_total", t));
                for (String reason : List.of("settled", "timed_out")) {
                    value(mine, "dkg_producer_stamp_windows_closed_total", Map.of("topic", topic, "reason", reason));
                }
            }
        }
    }

    /**
     * The Rust consumer's names (partitioner/src/kafka/consumer/metrics.rs); its histogram as three series, the
     * buckets named without {@code _bucket} (the exporter's client strips it from a series that is no histogram;
     * {@code histogram_quantile} reads them by {@code le} alike).
     */
    private static final Set<String> CONSUMER_NAMES = Set.of("dkg_consumer_records_total",
            "dkg_consumer_member_records_total", "dkg_consumer_lag_records", "dkg_consumer_held_records",
            "dkg_consumer_hold_seconds", "dkg_consumer_hold_seconds_sum", "dkg_consumer_hold_seconds_count",
            "dkg_consumer_split_records_total", "dkg_consumer_untrusted_records_total",
            "dkg_consumer_clamped_leases_total", "dkg_consumer_commit_windows_left_out_total",
            "dkg_consumer_markers_rejected_total");

    @Test
    void orderingConsumerMetricsBecomeTheRustConsumersSeries() throws Exception {
        String topic = Broker.newTopic("jmx-consumer", PARTITIONS);
        String control = Broker.createControlTopic("jmx-consumer");
        String handoff = Broker.createControlTopic("jmx-consumer-handoff");
        String clientId = "jmx-it-" + topic;
        try (KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            Broker.publish(publisher, control, Doc.shuffled(topic, PARTITIONS, 1, 16, 9, List.of()));
            try (KafkaProducer<byte[], byte[]> plain = new KafkaProducer<>(Broker.plainProducerConfig())) {
                for (int i = 0; i < 8; i++) {
                    Broker.ack(plain.send(new ProducerRecord<>(topic, i % PARTITIONS, ("k" + i).getBytes(
                            StandardCharsets.UTF_8), new byte[1])), "record-" + i);
                }
            }
            Map<String, Object> config = new java.util.HashMap<>();
            config.put("bootstrap.servers", Broker.bootstrap());
            config.put("group.id", "jmx-" + topic);
            config.put("client.id", clientId);
            config.put("auto.offset.reset", "earliest");
            config.put(DkgConfig.CONTROL_TOPIC_CONFIG, control);
            config.put(DkgConfig.HANDOFF_TOPIC_CONFIG, handoff);
            try (DkgKafkaConsumer<byte[], byte[]> c = new DkgKafkaConsumer<>(config,
                    new org.apache.kafka.common.serialization.ByteArrayDeserializer(),
                    new org.apache.kafka.common.serialization.ByteArrayDeserializer())) {
                c.subscribe(List.of(topic));
                int[] seen = {0};
                Broker.waitUntil("8 records through the consumer", Duration.ofSeconds(30), () -> {
                    seen[0] += c.poll(Duration.ofMillis(200)).count();
                    return seen[0] >= 8;
                });
                // Housekeeping (gauges) runs within the next polls.
                for (int i = 0; i < 3; i++) {
                    c.poll(Duration.ofMillis(150));
                }
                List<Sample> mine = series(scrape(), clientId);
                Set<String> names = new TreeSet<>();
                for (Sample x : mine) {
                    assertTrue(CONSUMER_NAMES.contains(x.name()), () -> "unexpected series " + x);
                    names.add(x.name());
                }
                assertEquals(CONSUMER_NAMES, names, "every consumer series exported");
                MBeanServer server = ManagementFactory.getPlatformMBeanServer();
                int attributes = 0;
                for (ObjectName name : server.queryNames(new ObjectName("kafka.consumer:type=plugins,*"), null)) {
                    if (clientId.equals(name.getKeyProperty("client-id"))) {
                        attributes += server.getMBeanInfo(name).getAttributes().length;
                    }
                }
                int mapped = mine.size();
                assertEquals(attributes, mapped, () -> "MBean attributes vs series: " + mine);
                assertEquals(8, value(mine, "dkg_consumer_member_records_total", Map.of("topic", topic)));
                double perPartition = 0;
                for (int p = 0; p < PARTITIONS; p++) {
                    perPartition += value(mine, "dkg_consumer_records_total", Map.of("topic", topic, "partition",
                            Integer.toString(p)));
                    assertEquals(0, value(mine, "dkg_consumer_held_records", Map.of("topic", topic, "partition",
                            Integer.toString(p))));
                }
                assertEquals(8, perPartition);
                assertEquals(0, value(mine, "dkg_consumer_markers_rejected_total", Map.of("topic", topic, "reason",
                        "partition_count")));
                assertEquals(0, value(mine, "dkg_consumer_hold_seconds_count", Map.of("topic", topic)));
            }
        }
    }
}
