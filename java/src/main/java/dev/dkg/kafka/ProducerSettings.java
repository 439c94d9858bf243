package dev.dkg.kafka;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Serializer;

/**
 * The settings of a {@link DkgKafkaProducer}: what it refuses (see its class comment) and the configurations of its
 * inner data producer and its handoff producer, made from the user's.
 */
final class ProducerSettings {
    private ProducerSettings() {}

    /** Refuses what would break the guarantee (see {@link DkgKafkaProducer}'s class comment). */
    static void validate(Map<String, ?> settings) {
        Object acks = settings.get(ProducerConfig.ACKS_CONFIG);
        if (acks != null && !acks.toString().trim().equals("all") && !acks.toString().trim().equals("-1")) {
            throw new ConfigException(ProducerConfig.ACKS_CONFIG, acks,
                    "DkgKafkaProducer needs acks=all: a marker's offsets must be final");
        }
        Object idempotence = settings.get(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG);
        if (idempotence != null && !Boolean.parseBoolean(idempotence.toString().trim())) {
            throw new ConfigException(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, idempotence,
                    "DkgKafkaProducer needs an idempotent producer: retries could otherwise reorder records against "
                            + "a marker's offsets");
        }
        for (String refused : List.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, ProducerConfig.PARTITIONER_CLASS_CONFIG,
                ProducerConfig.INTERCEPTOR_CLASSES_CONFIG)) {
            Object v = settings.get(refused);
            if (v != null && !v.toString().isEmpty() && !(v instanceof List<?> && ((List<?>) v).isEmpty())) {
                throw new ConfigException(refused, v, "not supported by DkgKafkaProducer: "
                        + refusal(refused));
            }
        }
    }


    private static String refusal(String key) {
        switch (key) {
            case ProducerConfig.TRANSACTIONAL_ID_CONFIG:
                return "transactions are not part of the ordering protocol in this release";
            case ProducerConfig.PARTITIONER_CLASS_CONFIG:
                return "it places records itself";
            default:
                return "its inner client sees serialized records only";
        }
    }

    static long positiveLong(Map<String, ?> settings, String key, long dflt) {
        long n = DkgRouter.longConfig(settings, key, dflt);
        if (n <= 0) {
            throw new ConfigException(key, settings.get(key), "must be > 0");
        }
        return n;
    }

    static List<String> topicList(Object v) {
        List<String> out = new ArrayList<>();
        if (v instanceof List<?>) {
            ((List<?>) v).forEach(x -> out.add(x.toString().trim()));
        } else if (v != null) {
            out.addAll(Arrays.asList(v.toString().split(",")));
        }
        out.replaceAll(String::trim);
        out.removeIf(String::isEmpty);
        return out;
    }

    static Map<String, Object> withByteSerializersIfMissing(Map<String, Object> settings, Serializer<?> k,
            Serializer<?> v) {
        Map<String, Object> out = withoutDkgKeys(settings);
        if (k != null || !out.containsKey(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG)) {
            out.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        }
        if (v != null || !out.containsKey(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG)) {
            out.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        }
        return out;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static <T> Serializer<T> configured(ProducerConfig parsed, String key, Map<String, Object> settings,
            boolean isKey) {
        Serializer s = parsed.getConfiguredInstance(key, Serializer.class);
        s.configure(settings, isKey);
        return s;
    }

    static Map<String, Object> withoutDkgKeys(Map<String, Object> settings) {
        Map<String, Object> out = new HashMap<>(settings);
        out.keySet().removeIf(k -> k.startsWith("dkg."));
        return out;
    }

    /** The data producer: the user's settings, byte serializers, idempotence and acks=all made explicit. */
    static Map<String, Object> innerConfig(Map<String, Object> settings) {
        Map<String, Object> out = withoutDkgKeys(settings);
        out.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        out.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        out.put(ProducerConfig.ACKS_CONFIG, "all");
        out.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        return out;
    }

    /** The handoff producer: connection settings, idempotent, acks=all, room for the largest history document. */
    static Map<String, Object> handoffConfig(Map<String, Object> connection, Map<String, Object> settings) {
        Map<String, Object> out = new HashMap<>(connection);
        out.put(ProducerConfig.CLIENT_ID_CONFIG,
                ControlFollower.internalClientId(settings.get(ProducerConfig.CLIENT_ID_CONFIG), "handoff"));
        out.put(ProducerConfig.ACKS_CONFIG, "all");
        out.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        out.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
        out.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, Handoff.MAX_MESSAGE_BYTES);
        out.put(ProducerConfig.LINGER_MS_CONFIG, 0);
        return out;
    }

    static Map<String, Object> propertiesToMap(Properties properties) {
        Map<String, Object> out = new HashMap<>();
        properties.stringPropertyNames().forEach(k -> out.put(k, properties.getProperty(k)));
        properties.forEach((k, v) -> out.putIfAbsent(k.toString(), v));
        return out;
    }
}
