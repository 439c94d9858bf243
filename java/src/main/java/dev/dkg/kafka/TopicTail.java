package dev.dkg.kafka;

import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Follows partition 0 of a one-partition topic (the control or the handoff topic) from its beginning in a daemon
 * thread and queues its records, key and value, for the consumer's thread ({@link DkgKafkaConsumer} applies them
 * between polls). A consumer without a group, reading committed records only.
 */
final class TopicTail implements Runnable {
    private static final Logger LOG = LoggerFactory.getLogger(TopicTail.class);

    /** One record: key and value (null: a tombstone). */
    static final class Entry {
        final byte[] key;
        final byte[] value;

        Entry(byte[] key, byte[] value) {
            this.key = key;
            this.value = value;
        }
    }

    private final String topic;
    private final Map<String, Object> config;
    private final ConcurrentLinkedQueue<Entry> queue = new ConcurrentLinkedQueue<>();
    private final CountDownLatch caughtUp = new CountDownLatch(1);
    private volatile boolean running = true;
    private volatile KafkaConsumer<byte[], byte[]> consumer;
    private final Thread thread;

    TopicTail(String topic, Map<String, Object> config, String threadName) {
        this.topic = topic;
        this.config = config;
        this.thread = new Thread(this, threadName);
        thread.setDaemon(true);
        thread.start();
    }

    /** The records read since the last call, in order. */
    Entry poll() {
        return queue.poll();
    }

    /** Waits until the topic was read to its end (as of the first read) once; false on timeout. */
    boolean awaitCaughtUp(long timeoutMs) throws InterruptedException {
        return caughtUp.await(timeoutMs, TimeUnit.MILLISECONDS);
    }

    @Override
    public void run() {
        TopicPartition tp = new TopicPartition(topic, 0);
        while (running) {
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(config, new ByteArrayDeserializer(),
                    new ByteArrayDeserializer())) {
                consumer = c;
                List<PartitionInfo> parts = c.partitionsFor(topic, Duration.ofSeconds(10));
                if (parts == null || parts.isEmpty()) {
                    // Nothing to read yet (no producer created it): as read to its end.
                    caughtUp.countDown();
                    sleep(1000);
                    continue;
                }
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                long end = c.endOffsets(List.of(tp), Duration.ofSeconds(30)).get(tp);
                while (running) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                        queue.add(new Entry(r.key(), r.value()));
                    }
                    if (caughtUp.getCount() > 0 && c.position(tp) >= end) {
                        caughtUp.countDown();
                    }
                }
            } catch (WakeupException | InterruptException e) {
                return;
            } catch (RuntimeException e) {
                LOG.warn("DKG: reading topic {} failed: {} (retrying from its beginning)", topic, e.toString());
                sleep(1000);
            } finally {
                consumer = null;
            }
        }
    }

    private void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            running = false;
        }
    }

    /** Stops the thread and waits up to 10 s for it. */
    void close() {
        running = false;
        KafkaConsumer<byte[], byte[]> c = consumer;
        if (c != null) {
            c.wakeup();
        }
        try {
            thread.join(10_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * The tail consumer's configuration: {@code connection} (the application's settings), read from the start,
     * committed records only.
     */
    static Map<String, Object> config(Map<String, Object> connection, String clientId) {
        Map<String, Object> out = new HashMap<>(connection);
        out.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
        out.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        out.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        out.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        out.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, false);
        out.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 100);
        out.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, Handoff.MAX_MESSAGE_BYTES);
        return out;
    }

    /** Keeps the latest entry per key of {@code log} once it exceeds {@code max} (compacted topics: that is their state). */
    static void keepLatest(List<Entry> log, int max) {
        if (log.size() <= max) {
            return;
        }
        Map<String, Entry> latest = new LinkedHashMap<>();
        for (Entry e : log) {
            String k = e.key == null ? "" : new String(e.key, java.nio.charset.StandardCharsets.ISO_8859_1);
            latest.remove(k);
            latest.put(k, e);
        }
        log.clear();
        log.addAll(latest.values());
    }
}
