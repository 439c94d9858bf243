package dev.dkg.kafka;

/**
 * C1 (spec 9.3, section 8): a record's epoch is its last well-formed {@code dkg-epoch} header, plain decimal ASCII (no
 * sign, no spaces) that fits a {@code u64}; malformed values are ignored. The Rust {@code dkg_kafka_protocol::headers}.
 */
final class EpochHeader {
    /** No epoch: an unstamped record. */
    static final long NONE = -1;

    private EpochHeader() {}

    /**
     * A header value as an epoch, or {@link #NONE} if malformed. A well-formed value of 2^63 or above (no assignment
     * has such an epoch) reads as {@link Long#MAX_VALUE}: above every known epoch either way (C19).
     */
    static long parse(byte[] v) {
        if (v == null || v.length == 0 || v.length > 20) {
            return NONE;
        }
        for (byte b : v) {
            if (b < '0' || b > '9') {
                return NONE;
            }
        }
        long n;
        try {
            n = Long.parseUnsignedLong(new String(v, java.nio.charset.StandardCharsets.US_ASCII));
        } catch (NumberFormatException e) {
            return NONE; // above u64
        }
        return n < 0 ? Long.MAX_VALUE : n;
    }

    /** Folds one more header: {@code name}'s well-formed epoch value replaces {@code epoch}, anything else keeps it. */
    static long fold(long epoch, String name, byte[] value) {
        if (!DkgKafkaProducer.EPOCH_HEADER.equals(name)) {
            return epoch;
        }
        long e = parse(value);
        return e == NONE ? epoch : e;
    }
}
