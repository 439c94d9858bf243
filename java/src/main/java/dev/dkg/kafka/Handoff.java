package dev.dkg.kafka;

import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeTopicsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * The records an ordering producer writes to the handoff topic (docs/spec.md 9.1), as the Rust
 * {@code dkg_kafka_protocol::handoff} encodes them: keys {@code lease2/<topic>/<producer>}, {@code marker/<topic>/<producer>}
 * and {@code assignment/<topic>/<epoch>}; values compact JSON with the members in the Rust encoder's order. Also
 * the topic itself: one partition, compacted, created when missing, checked otherwise.
 */
final class Handoff {
    /** Room for the largest assignment document (history records), as the Rust control and handoff topics. */
    static final int MAX_MESSAGE_BYTES = Assignment.MAX_ASSIGNMENT_BYTES + 1024 * 1024;
    private static final char[] HEX = "0123456789abcdef".toCharArray();
    private static final SecureRandom RANDOM = new SecureRandom();

    private Handoff() {}

    /** A new producer id: 32 lowercase hex digits (128 random bits), the spec's {@code <producer>}. */
    static String newProducerId() {
        byte[] b = new byte[16];
        RANDOM.nextBytes(b);
        char[] out = new char[32];
        for (int i = 0; i < 16; i++) {
            out[2 * i] = HEX[(b[i] >> 4) & 0xf];
            out[2 * i + 1] = HEX[b[i] & 0xf];
        }
        return new String(out);
    }

    static byte[] leaseKey(String topic, String producer) {
        return utf8("lease2/" + topic + "/" + producer);
    }

    static byte[] markerKey(String topic, String producer) {
        return utf8("marker/" + topic + "/" + producer);
    }

    static byte[] historyKey(String topic, long epoch) {
        return utf8("assignment/" + topic + "/" + Long.toUnsignedString(epoch));
    }

    /**
     * A lease: {@code closedAtEpoch} < 0 leaves {@code closed_at_epoch} out (a live lease). Epochs and
     * times are unsigned 64-bit, as in the spec.
     */
    static byte[] lease(String producer, String topic, long firstEpoch, long leaseMs, long expiresAtMs,
            long closedAtEpoch) {
        StringBuilder b = new StringBuilder(160);
        b.append("{\"producer\":");
        string(b, producer);
        b.append(",\"topic\":");
        string(b, topic);
        b.append(",\"first_epoch\":").append(Long.toUnsignedString(firstEpoch));
        b.append(",\"lease_ms\":").append(Long.toUnsignedString(leaseMs));
        b.append(",\"expires_at_ms\":").append(Long.toUnsignedString(expiresAtMs));
        if (closedAtEpoch >= 0) {
            b.append(",\"closed_at_epoch\":").append(Long.toUnsignedString(closedAtEpoch));
        }
        b.append(",\"mode\":\"marker\"}");
        return utf8(b.toString());
    }

    /** A marker: every record {@code producer} routed under an epoch below {@code epoch} to p lies below ends[p]. */
    static byte[] marker(String producer, String topic, long epoch, long[] ends) {
        StringBuilder b = new StringBuilder(64 + ends.length * 8);
        b.append("{\"producer\":");
        string(b, producer);
        b.append(",\"topic\":");
        string(b, topic);
        b.append(",\"epoch\":").append(Long.toUnsignedString(epoch));
        b.append(",\"ends\":[");
        for (int i = 0; i < ends.length; i++) {
            if (i > 0) {
                b.append(',');
            }
            b.append(ends[i]);
        }
        b.append("]}");
        return utf8(b.toString());
    }

    /** A JSON string (topic names and ids are plain ASCII; the escapes are for anything else). */
    private static void string(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        b.append('"');
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /**
     * Creates the handoff topic (1 partition, compacted, room for the largest document) if it does not exist, else
     * checks that it has exactly 1 partition and is compacted, as the Rust {@code ensure_handoff_topic}.
     *
     * @throws KafkaException naming the topic and what is wrong, or the admin call that failed
     */
    static void ensureTopic(Admin admin, String name, long timeoutMs) {
        try {
            try {
                NewTopic t = new NewTopic(name, Optional.of(1), Optional.empty()).configs(Map.of(
                        "cleanup.policy", "compact", "max.message.bytes", Integer.toString(MAX_MESSAGE_BYTES)));
                admin.createTopics(List.of(t)).all().get(timeoutMs, TimeUnit.MILLISECONDS);
                return;
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) {
                    throw e;
                }
            }
            TopicDescription d = describe(admin, name, timeoutMs);
            if (d.partitions().size() != 1) {
                throw new KafkaException("DKG: handoff topic " + name + " has " + d.partitions().size()
                        + " partitions; the ordering protocol needs exactly 1");
            }
            ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, name);
            Config c = admin.describeConfigs(List.of(r)).all().get(timeoutMs, TimeUnit.MILLISECONDS).get(r);
            ConfigEntry policy = c == null ? null : c.get("cleanup.policy");
            if (policy == null || !List.of(policy.value().split(",")).contains("compact")) {
                throw new KafkaException("DKG: handoff topic " + name + " is not compacted (cleanup.policy="
                        + (policy == null ? "<none>" : policy.value()) + ")");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new KafkaException("DKG: interrupted while checking handoff topic " + name, e);
        } catch (ExecutionException | TimeoutException e) {
            Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
            throw new KafkaException("DKG: could not create or check handoff topic " + name + ": " + cause, cause);
        }
    }

    /**
     * {@code allTopicNames()} (kafka-clients 3.1+), else {@code all()} (3.0; removed in 4.0): no one method of
     * {@code DescribeTopicsResult} exists on every supported client, so the one there is is found by name.
     */
    @SuppressWarnings("unchecked")
    static KafkaFuture<Map<String, TopicDescription>> byName(DescribeTopicsResult r) {
        for (String method : new String[] {"allTopicNames", "all"}) {
            try {
                return (KafkaFuture<Map<String, TopicDescription>>) DescribeTopicsResult.class.getMethod(method)
                        .invoke(r);
            } catch (NoSuchMethodException e) {
                // The other one.
            } catch (IllegalAccessException e) {
                throw new KafkaException(e);
            } catch (InvocationTargetException e) {
                Throwable cause = e.getCause();
                throw cause instanceof RuntimeException ? (RuntimeException) cause : new KafkaException(cause);
            }
        }
        throw new KafkaException("DescribeTopicsResult has neither allTopicNames() nor all()");
    }

    /** A topic's description, asked again for a while: a topic created a moment ago may not be known yet. */
    private static TopicDescription describe(Admin admin, String name, long timeoutMs)
            throws InterruptedException, ExecutionException, TimeoutException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (true) {
            try {
                Collection<TopicDescription> all = byName(admin.describeTopics(List.of(name)))
                        .get(timeoutMs, TimeUnit.MILLISECONDS).values();
                return all.iterator().next();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof UnknownTopicOrPartitionException) || System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(100);
            }
        }
    }
}
