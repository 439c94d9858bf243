package dev.dkg.kafka;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The reader of a {@link DkgKafkaProducer}'s handoff topic (its thread {@code dkg-handoff-reader}): it follows the
 * consumer groups' {@code progress/} records (spec 9.2.2) into the producer's {@link StampWindows}, which they close.
 */
final class HandoffProgressReader implements Runnable {
    /** The producer's logger: its log lines keep the category they always had. */
    private static final Logger LOG = LoggerFactory.getLogger(DkgKafkaProducer.class);

    private final String producerId;
    private final String handoffTopic;
    private final Map<String, Object> config;
    private final StampWindows windows;
    private final long ioTimeoutMs;
    private final BooleanSupplier stopping;
    /** The consumer while it runs (woken up by {@link #wakeup}: an interrupt would abort its close). */
    private volatile KafkaConsumer<byte[], byte[]> consumer;
    /** The handoff topic was read to its end once (no window closes before: a partial view of the groups). */
    private volatile boolean caughtUp;

    HandoffProgressReader(String producerId, String handoffTopic, Map<String, Object> config, StampWindows windows,
            long ioTimeoutMs, BooleanSupplier stopping) {
        this.producerId = producerId;
        this.handoffTopic = handoffTopic;
        this.config = config;
        this.windows = windows;
        this.ioTimeoutMs = ioTimeoutMs;
        this.stopping = stopping;
    }

    /** Whether the handoff topic was read to its end once since the last (re)start. */
    boolean caughtUp() {
        return caughtUp;
    }

    /** Wakes the consumer up, if it runs, so that the reader returns (the producer's close). */
    void wakeup() {
        KafkaConsumer<byte[], byte[]> c = consumer;
        if (c != null) {
            c.wakeup();
        }
    }

    /**
     * Reads the handoff topic from its beginning and follows it: the groups' {@code progress/} records, which close
     * stamp windows. On failure the windows stay open (moved keys stay stamped: the safe side) and it starts over.
     */
    @Override
    public void run() {
        TopicPartition tp = new TopicPartition(handoffTopic, 0);
        while (!stopping.getAsBoolean()) {
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(config, new ByteArrayDeserializer(),
                    new ByteArrayDeserializer())) {
                consumer = c;
                if (stopping.getAsBoolean()) {
                    return;
                }
                // From the beginning again (a restart after a failure): windows wait for the whole read again.
                caughtUp = false;
                windows.clearProgress();
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                long end = c.endOffsets(List.of(tp), Duration.ofMillis(ioTimeoutMs)).get(tp);
                while (!stopping.getAsBoolean()) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                        onRecord(r.key(), r.value());
                    }
                    if (!caughtUp && c.position(tp) >= end) {
                        caughtUp = true;
                    }
                }
            } catch (InterruptException | WakeupException e) {
                return;
            } catch (RuntimeException e) {
                LOG.warn("DKG: ordering producer {}: reading handoff topic {} failed: {} (retrying)", producerId,
                        handoffTopic, e.toString());
                DkgKafkaProducer.sleep(1000);
            }
        }
    }

    /** One handoff record: progress is kept (key parsed from the right: a group may contain '/'), the rest skipped. */
    void onRecord(byte[] rawKey, byte[] value) {
        if (rawKey == null) {
            return;
        }
        String key = new String(rawKey, StandardCharsets.UTF_8);
        if (!key.startsWith("progress/")) {
            return;
        }
        int last = key.lastIndexOf('/');
        int before = key.lastIndexOf('/', last - 1);
        if (before < "progress/".length()) {
            return;
        }
        String group = key.substring("progress/".length(), before);
        String topic = key.substring(before + 1, last);
        String digits = key.substring(last + 1);
        int partition;
        try {
            partition = Integer.parseInt(digits);
        } catch (NumberFormatException e) {
            return;
        }
        if (group.isEmpty() || topic.isEmpty() || partition < 0 || !digits.chars().allMatch(Character::isDigit)) {
            return;
        }
        if (value == null) {
            windows.onRemoved(group, topic, partition);
            return;
        }
        try {
            StrictJson.Progress p = StrictJson.readProgress(value);
            if (p.group.equals(group) && p.topic.equals(topic) && p.partition == partition) {
                windows.onProgress(group, topic, partition, p.drained);
            }
        } catch (StrictJson.Malformed e) {
            LOG.debug("DKG: skipped a malformed handoff record {}: {}", key, e.getMessage());
        }
    }
}
