package dev.dkg.kafka.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.regex.Pattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.junit.jupiter.api.Test;

/**
 * The golden lookup vectors ({@code spec/vectors/lookup.json}, computed by the Rust implementation) through the
 * broker: every case's document is published for a topic of its own (its {@code topic} field renamed) with the
 * case's partition count, a producer with the plug-in starts (reading them all at startup), and every vector key
 * sent lands on the vector's partition, with the plug-in counting the vector's routes (heavy, bucket, fallback for
 * the partition-count cases). Reads the vectors from the {@code dkg.vectors} system property (set by the pom) and
 * fails if they are missing.
 */
class ProducerFollowsVectorsIT {
    private static final Pattern TOPIC_FIELD = Pattern.compile("\"topic\"\\s*:\\s*\"[^\"]*\"");

    private record Case(String name, String topic, int partitions, List<byte[]> keys, List<Integer> expected,
            Map<String, Long> routes) {}

    private static JsonNode lookupVectors() throws IOException {
        String dir = System.getProperty("dkg.vectors");
        assertTrue(dir != null && !dir.isBlank(), "the dkg.vectors system property is not set (the pom sets it)");
        Path file = Paths.get(dir, "lookup.json");
        assertTrue(Files.isRegularFile(file), "the golden vectors " + file + " are missing");
        return new ObjectMapper().readTree(file.toFile());
    }

    @Test
    void everyGoldenLookupVectorLandsOnItsPartition() throws IOException {
        JsonNode vectors = lookupVectors();
        String control = Broker.createControlTopic("vectors");
        List<Case> cases = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            for (JsonNode c : vectors.get("cases")) {
                String name = c.get("name").asText();
                String topic = Broker.uniqueTopic("vectors-" + name.replace('_', '-'));
                int partitions = c.get("topic_partitions").asInt();
                String original = c.get("document_json").asText();
                assertEquals(1, TOPIC_FIELD.matcher(original).results().count(), name + ": one topic field");
                String doc = TOPIC_FIELD.matcher(original).replaceFirst("\"topic\":\"" + topic + "\"");
                Broker.createTopic(topic, partitions);
                Broker.publishRaw(publisher, control, topic.getBytes(StandardCharsets.UTF_8),
                        doc.getBytes(StandardCharsets.UTF_8));
                List<byte[]> keys = new ArrayList<>();
                List<Integer> expected = new ArrayList<>();
                Map<String, Long> routes = new HashMap<>();
                for (JsonNode k : c.get("keys")) {
                    keys.add(Base64.getDecoder().decode(k.get("key_b64").asText()));
                    expected.add(k.get("partition").asInt());
                    routes.merge(k.get("route").asText(), 1L, Long::sum);
                }
                cases.add(new Case(name, topic, partitions, keys, expected, routes));
            }
        }
        assertTrue(cases.size() >= 10, "only " + cases.size() + " lookup cases");

        // Started after the publications: the plug-in reads them all before its first record.
        Properties config = Broker.dkgProducerConfig(control);
        // The client's own DEBUG level: the plug-in then counts heavy and bucket records apart.
        config.put("metrics.recording.level", "DEBUG");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config)) {
            for (Case c : cases) {
                List<Future<RecordMetadata>> acks = new ArrayList<>();
                for (byte[] key : c.keys()) {
                    acks.add(producer.send(new ProducerRecord<>(c.topic(), key, key)));
                }
                for (int i = 0; i < acks.size(); i++) {
                    int got = Broker.ack(acks.get(i), c.name() + " key " + i).partition();
                    assertEquals(c.expected().get(i), got, c.name() + ": key #" + i + " ("
                            + Base64.getEncoder().encodeToString(c.keys().get(i)) + ")");
                }
                for (String route : List.of("heavy", "bucket", "fallback")) {
                    assertEquals(c.routes().getOrDefault(route, 0L),
                            Plugin.records(Plugin.metrics(producer), c.topic(), route), c.name() + ": route " + route);
                }
            }
        }
    }
}
