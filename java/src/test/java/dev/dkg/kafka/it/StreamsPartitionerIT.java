package dev.dkg.kafka.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dkg.kafka.Route;
import dev.dkg.kafka.streams.DkgStreamPartitioner;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.junit.jupiter.api.Test;

/**
 * Kafka Streams: {@code builder.stream(in).to(out, Produced.with(...).withStreamPartitioner(new
 * DkgStreamPartitioner<>(...)))} run by {@code KafkaStreams} against the broker writes every record of {@code out}
 * to the partition the published assignment names (string keys, placed on their UTF-8 bytes).
 */
class StreamsPartitionerIT {
    private static final int IN_PARTITIONS = 3;
    private static final int OUT_PARTITIONS = 6;
    private static final int RECORDS = 5_000;

    @Test
    void streamsOutputFollowsTheAssignment() throws Exception {
        String in = Broker.newTopic("streams-in", IN_PARTITIONS);
        String out = Broker.newTopic("streams-out", OUT_PARTITIONS);
        String control = Broker.createControlTopic("streams");
        Doc doc = Doc.shuffled(out, OUT_PARTITIONS, 1, 64, 31, List.of(new Doc.Heavy(Zipf.key(1), 5)));
        try (KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            Broker.publish(publisher, control, doc);
        }
        // Input, keyed by strings, written without the plug-in.
        Zipf zipf = new Zipf(1_000, 1.1, 9);
        Properties plain = Broker.plainProducerConfig();
        plain.put("key.serializer", StringSerializer.class.getName());
        plain.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(plain)) {
            for (int i = 0; i < RECORDS; i++) {
                String key = new String(zipf.keyOf(zipf.nextRank()), StandardCharsets.UTF_8);
                producer.send(new ProducerRecord<>(in, key, Integer.toString(i)));
            }
            producer.flush();
        }

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, Broker.uniqueTopic("streams-app"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, Broker.bootstrap());
        props.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("dkg-it-streams").toString());
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        StreamsBuilder builder = new StreamsBuilder();
        DkgStreamPartitioner<String, String> partitioner = new DkgStreamPartitioner<>(
                Map.of("bootstrap.servers", Broker.bootstrap(), "dkg.control.topic", control,
                        "dkg.metrics.recording.level", "DEBUG"), new StringSerializer());
        builder.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
                .to(out, Produced.with(Serdes.String(), Serdes.String()).withStreamPartitioner(partitioner));

        Set<String> seen = new HashSet<>();
        Doc.Placement placement = doc.placement();
        try (KafkaStreams streams = new KafkaStreams(builder.build(), props)) {
            streams.start();
            Broker.consumeAll(out, RECORDS, Duration.ofSeconds(90), r -> {
                seen.add(new String(r.value(), StandardCharsets.UTF_8));
                placement.accept(r);
            });
            streams.close(Duration.ofSeconds(30));
        } finally {
            partitioner.close();
        }
        assertEquals(RECORDS, seen.size(), "every input record reached the output");
        assertEquals(1, partitioner.router().assignment(out).epoch(), "the assignment in force");
        assertTrue(partitioner.router().records(out, Route.HEAVY) > RECORDS / 20, "the hot key went the heavy route");
        assertTrue(partitioner.router().records(out, Route.BUCKET) > 0, "the other keys went by bucket");
        placement.assertPlaced();
    }
}
