package dev.dkg.kafka.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.junit.jupiter.api.Test;

/**
 * The Rust sidecar learns a topic that only Java producers write, and the skew falls (the Java side of
 * {@code sampler/tests/sampler_publishes_balanced_assignment.rs}): a Zipf(1.0) stream over 10^4 keys through the
 * plug-in into 12 partitions is hash-placed at first (imbalance far above the key-grouping bound); {@code dkg-sampler
 * run} then reads it, publishes an assignment, the plug-in adopts it, and the same stream produced again is close
 * to balanced. Imbalance = max/mean - 1 of the per-partition record counts (end offsets) of each phase.
 *
 * <p>The sampler binary is {@code target/debug/dkg-sampler} of the repository ({@code scripts/test} builds it), or
 * {@code DKG_SAMPLER_BIN}; the test fails when it is missing.
 */
class SamplerLearnsJavaTopicIT {
    private static final int PARTITIONS = 12;
    private static final int KEYS = 10_000;
    private static final int PHASE_RECORDS = 200_000;

    /** The sampler binary; fails the test with what to do when it is not there. */
    private static Path samplerBinary() {
        String env = System.getenv("DKG_SAMPLER_BIN");
        Path bin;
        if (env != null && !env.isBlank()) {
            bin = Paths.get(env);
        } else {
            // Maven runs the tests in java/ (basedir); the binary is built in the workspace root's target/.
            Path basedir = Paths.get(System.getProperty("basedir", System.getProperty("user.dir")));
            bin = basedir.toAbsolutePath().getParent().resolve("target/debug/dkg-sampler");
        }
        if (!Files.isExecutable(bin)) {
            fail("the sampler binary " + bin + " is missing: build it with `cargo build -p dkg-sampler` (scripts/test "
                    + "does) or point DKG_SAMPLER_BIN at one");
        }
        return bin;
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    /** Produces {@code n} Zipf-keyed records through {@code producer} and returns when all are acknowledged. */
    private static void produce(KafkaProducer<byte[], byte[]> producer, String topic, Zipf zipf, int n) {
        byte[] value = new byte[100];
        for (int i = 0; i < n; i++) {
            producer.send(new ProducerRecord<>(topic, zipf.keyOf(zipf.nextRank()), value));
        }
        producer.flush();
    }

    @Test
    void samplerBalancesATopicWrittenByJavaProducers() throws Exception {
        Path bin = samplerBinary();
        String topic = Broker.newTopic("sampler", PARTITIONS);
        String control = Broker.createControlTopic("sampler");
        Zipf zipf = new Zipf(KEYS, 1.0, 3);
        // The key-grouping bound: the hottest key alone on a partition (about 10% of the stream vs a mean of 8.3%).
        double bound = Math.max(0, zipf.share(1) * PARTITIONS - 1);

        Properties config = Broker.dkgProducerConfig(control);
        config.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        Process sampler = null;
        File log = File.createTempFile("dkg-sampler-" + topic, ".log");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config)) {
            // Phase 1: no assignment yet, Kafka's hashing.
            long[] start = Broker.endOffsets(topic);
            produce(producer, topic, zipf, PHASE_RECORDS);
            long[] hashed = Broker.endOffsets(topic);
            double hashImbalance = Broker.imbalance(start, hashed);
            assertTrue(Plugin.records(Plugin.metrics(producer), topic, "fallback") >= PHASE_RECORDS,
                    "phase 1 was hash-placed");

            // The sampler learns phase 1 from the beginning of the topic and publishes. It catches up on a backlog
            // partition by partition, so a decision at its first interval could miss the hot key's partition: it
            // decides only once its window holds 98% of phase 1 (barely decayed).
            String metricsAddr = "127.0.0.1:" + freePort();
            sampler = new ProcessBuilder(bin.toString(), "run", "--bootstrap-servers", Broker.bootstrap(), "--topic",
                    topic, "--control-topic", control, "--sketches-topic", Broker.uniqueTopic("sampler-sketches"),
                    "--interval-secs", "2", "--metrics-addr", metricsAddr, "--auto-offset-reset", "earliest",
                    "--min-samples", Integer.toString(PHASE_RECORDS * 49 / 50), "--decay", "0.999")
                    .redirectErrorStream(true).redirectOutput(log).start();
            Process running = sampler;
            Broker.waitUntil("the plug-in to adopt the sampler's first assignment", Duration.ofSeconds(90), () -> {
                if (!running.isAlive()) {
                    fail("dkg-sampler exited with " + running.exitValue() + ":\n" + readLog(log));
                }
                return Plugin.epoch(producer, topic) >= 1;
            });
            long epoch = Plugin.epoch(producer, topic);
            String view = samplerView(metricsAddr);
            // Phase 2 measures that one assignment: no later epoch may switch placement in the middle of it.
            stopSampler(sampler);

            // Phase 2: the same stream, now placed by the assignment.
            produce(producer, topic, zipf, PHASE_RECORDS);
            double dkgImbalance = Broker.imbalance(hashed, Broker.endOffsets(topic));
            assertEquals(epoch, Plugin.epoch(producer, topic), "phase 2 ran under one epoch");
            String summary = String.format("hash phase %.3f, DKG phase (epoch %d) %.3f, key-grouping bound %.3f; "
                    + "the sampler's view: %s", hashImbalance, epoch, dkgImbalance, bound, view);
            System.out.println("sampler learns a Java-written topic: " + summary);
            assertTrue(hashImbalance > 0.8, "hash placement should be far off balance: " + summary);
            assertTrue(dkgImbalance < 0.3, "DKG placement should be near the bound: " + summary + "\n" + readLog(log));
            assertTrue(dkgImbalance < hashImbalance / 3, summary);
        } finally {
            if (sampler != null) {
                stopSampler(sampler);
            }
        }
        Files.deleteIfExists(log.toPath());
    }

    /** SIGTERM, then SIGKILL if it has not exited within 10 s. */
    private static void stopSampler(Process sampler) throws InterruptedException {
        sampler.destroy();
        if (!sampler.waitFor(10, TimeUnit.SECONDS)) {
            sampler.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
    }

    /** The sampler's own imbalance and epoch metrics (from its /metrics), for the test's messages. */
    private static String samplerView(String addr) {
        try {
            HttpResponse<String> r = HttpClient.newHttpClient().send(
                    HttpRequest.newBuilder(URI.create("http://" + addr + "/metrics")).timeout(Duration.ofSeconds(5))
                            .build(), HttpResponse.BodyHandlers.ofString());
            return r.body().lines().filter(l -> l.startsWith("dkg_sampler_epoch") || l.startsWith("dkg_sampler_")
                    && l.contains("imbalance_ratio") || l.startsWith("dkg_sampler_key_grouping_bound_ratio"))
                    .collect(Collectors.joining("; "));
        } catch (IOException e) {
            return "(no /metrics: " + e + ")";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "(interrupted)";
        }
    }

    private static String readLog(File log) {
        try {
            return Files.readString(log.toPath());
        } catch (IOException e) {
            return "(cannot read " + log + ": " + e + ")";
        }
    }
}
