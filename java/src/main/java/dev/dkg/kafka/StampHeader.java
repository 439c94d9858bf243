package dev.dkg.kafka;

import org.apache.kafka.common.header.Header;

/**
 * A stamp header of a {@link DkgKafkaProducer}'s records ({@code dkg-epoch}, {@code dkg-producer}; Kafka's own
 * {@code Header} implementation is internal).
 */
final class StampHeader implements Header {
    private final String key;
    private final byte[] value;

    StampHeader(String key, byte[] value) {
        this.key = key;
        this.value = value;
    }

    @Override
    public String key() {
        return key;
    }

    @Override
    public byte[] value() {
        return value;
    }
}
