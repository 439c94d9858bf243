package dev.dkg.kafka.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.dkg.kafka.DkgPartitioner;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.BitSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.utils.Exit;
import org.apache.kafka.connect.cli.ConnectStandalone;
import org.apache.kafka.connect.runtime.Connect;
import org.apache.kafka.connect.runtime.Herder;
import org.apache.kafka.connect.runtime.rest.entities.ConnectorInfo;
import org.apache.kafka.connect.runtime.standalone.StandaloneHerder;
import org.apache.kafka.connect.storage.StringConverter;
import org.apache.kafka.connect.util.FutureCallback;
import org.junit.jupiter.api.Test;

/**
 * Kafka Connect: a standalone worker in this JVM (Kafka's own {@link ConnectStandalone#startConnect}) runs
 * {@link SkewedSourceConnector} with {@code producer.override.partitioner.class=dev.dkg.kafka.DkgPartitioner}
 * (allowed by {@code connector.client.config.override.policy=All}); every record the worker's producer writes
 * lands where the published assignment names.
 */
class ConnectSourceIT {
    private static final int PARTITIONS = 6;
    private static final int RECORDS = 20_000;
    private static final int KEYS = 1_000;

    @Test
    void connectSourceRecordsFollowTheAssignment() throws Exception {
        String topic = Broker.newTopic("connect", PARTITIONS);
        String control = Broker.createControlTopic("connect");
        List<Doc.Heavy> heavy = List.of(new Doc.Heavy(Zipf.key(1), 0), new Doc.Heavy(Zipf.key(2), 1));
        Doc doc = Doc.shuffled(topic, PARTITIONS, 1, 64, 21, heavy);
        try (KafkaProducer<byte[], byte[]> publisher = Broker.publisher()) {
            Broker.publish(publisher, control, doc);
        }

        Path dir = Files.createTempDirectory("dkg-it-connect");
        Map<String, String> worker = new HashMap<>();
        worker.put("bootstrap.servers", Broker.bootstrap());
        worker.put("key.converter", StringConverter.class.getName());
        worker.put("value.converter", StringConverter.class.getName());
        worker.put("offset.storage.file.filename", dir.resolve("offsets").toString());
        worker.put("offset.flush.interval.ms", "1000");
        worker.put("listeners", "http://127.0.0.1:0");
        worker.put("connector.client.config.override.policy", "All");
        // The test connector is on the classpath without a ServiceLoader manifest: find it by scanning, no warning.
        worker.put("plugin.discovery", "only_scan");
        Map<String, String> connector = new HashMap<>();
        connector.put("name", "skewed-" + System.nanoTime());
        connector.put("connector.class", SkewedSourceConnector.class.getName());
        connector.put("tasks.max", "1");
        connector.put(SkewedSourceConnector.TOPIC, topic);
        connector.put(SkewedSourceConnector.RECORDS, Integer.toString(RECORDS));
        connector.put(SkewedSourceConnector.KEYS, Integer.toString(KEYS));
        connector.put("producer.override.partitioner.class", DkgPartitioner.class.getName());
        connector.put("producer.override.dkg.control.topic", control);

        // A failing start calls Exit.exit: make that a test failure instead of ending the JVM.
        Exit.setExitProcedure((code, message) -> {
            throw new AssertionError("Connect asked to exit with " + code + ": " + message);
        });
        Connect<StandaloneHerder> connect = new ConnectStandalone().startConnect(worker);
        try {
            FutureCallback<Herder.Created<ConnectorInfo>> created = new FutureCallback<>();
            connect.herder().putConnectorConfig(connector.get("name"), connector, false, created);
            assertTrue(created.get(60, TimeUnit.SECONDS).created(), "connector created");

            BitSet seen = new BitSet(RECORDS);
            Doc.Placement placement = doc.placement();
            Map<String, Integer> byKey = new HashMap<>();
            Broker.consumeAll(topic, RECORDS, Duration.ofSeconds(90), r -> {
                seen.set(Integer.parseInt(new String(r.value(), StandardCharsets.UTF_8)));
                placement.accept(r);
                byKey.merge(new String(r.key(), StandardCharsets.UTF_8), 1, Integer::sum);
            });
            assertEquals(RECORDS, seen.cardinality(), "every emitted record arrived");
            placement.assertPlaced();
            // The stream is skewed and the heavy keys were placed by the document's heavy list.
            assertTrue(byKey.get(new String(Zipf.key(1), StandardCharsets.UTF_8)) > RECORDS / 20, "rank 1 is hot");
            assertEquals(0, doc.expectedPartition(Zipf.key(1)));
        } finally {
            connect.stop();
            Exit.resetExitProcedure();
        }
    }
}
