package dev.dkg.kafka;

import java.util.Arrays;
import java.util.Collections;
import java.util.Map;
import java.util.TreeMap;

/**
 * The handoff topic's values as a consumer reads them (docs/spec.md 9.1), decoded: the Rust
 * {@code dkg_kafka_protocol::handoff} {@code Lease}, {@code Marker}, {@code MarkerReject} and {@code Progress}. Epochs and
 * times are unsigned 64-bit in the spec; they stay below 2^63 here (epochs are at most 2^53 - 1, wall clocks in
 * milliseconds), so plain {@code long} comparisons are exact. Producer ids are their 32 lowercase hex digits, whose
 * {@code String} order is the Rust {@code BTreeMap} order.
 */
final class HandoffRecords {
    private HandoffRecords() {}

    /** No {@code closed_at_epoch}: the producer runs. */
    static final long NOT_CLOSED = -1;

    /** A lease (9.1): who may still write records of epochs below a marker. */
    static final class Lease extends Value {
        final String producer;
        final String topic;
        final long firstEpoch;
        final long leaseMs;
        final long expiresAtMs;
        /** {@link #NOT_CLOSED} while the producer runs. */
        final long closedAtEpoch;

        Lease(String producer, String topic, long firstEpoch, long leaseMs, long expiresAtMs, long closedAtEpoch) {
            this.producer = producer;
            this.topic = topic;
            this.firstEpoch = firstEpoch;
            this.leaseMs = leaseMs;
            this.expiresAtMs = expiresAtMs;
            this.closedAtEpoch = closedAtEpoch;
        }

        /** The same lease expiring at {@code expiresAtMs} (the consumer's {@code max_lease} clamp, C2). */
        Lease withExpiry(long expiresAtMs) {
            return new Lease(producer, topic, firstEpoch, leaseMs, expiresAtMs, closedAtEpoch);
        }

        boolean isLive(long nowMs) {
            return Long.compareUnsigned(nowMs, expiresAtMs) < 0;
        }

        /**
         * Whether consumers may still have to wait for one of this producer's markers: live, or closed (a clean close
         * wrote its markers first; a closed lease stops counting only when it is tombstoned).
         */
        boolean isAwaitable(long nowMs) {
            return closedAtEpoch != NOT_CLOSED || isLive(nowMs);
        }

        /**
         * Whether consumers wait for this producer's marker of {@code epoch} (9.1): possibly routed under an earlier
         * epoch, and either closed at {@code epoch} or later (whatever the expiry says) or running with a live lease.
         */
        boolean awaitedFor(long epoch, long nowMs) {
            return firstEpoch < epoch && (closedAtEpoch != NOT_CLOSED ? epoch <= closedAtEpoch : isLive(nowMs));
        }

        @Override
        Object[] components() {
            return new Object[] {producer, topic, firstEpoch, leaseMs, expiresAtMs, closedAtEpoch};
        }
    }

    /** A marker (9.1): every record {@code producer} routed under an epoch below {@code epoch} to p is below ends[p]. */
    static final class Marker extends Value {
        final String producer;
        final String topic;
        final long epoch;
        private final long[] ends;

        Marker(String producer, String topic, long epoch, long[] ends) {
            this.producer = producer;
            this.topic = topic;
            this.epoch = epoch;
            this.ends = ends.clone();
        }

        int length() {
            return ends.length;
        }

        /** The end on {@code partition}. */
        long end(int partition) {
            return ends[partition];
        }

        @Override
        Object[] components() {
            return new Object[] {producer, topic, epoch, Arrays.toString(ends)};
        }
    }

    /** Why a marker record was rejected: the {@code reason} label of {@code dkg-consumer-markers-rejected-total}. */
    enum MarkerReject {
        OVERSIZE("oversize"),
        MALFORMED_JSON("malformed_json"),
        KEY_MISMATCH("key_mismatch"),
        INVALID("invalid"),
        PARTITION_COUNT("partition_count");

        final String label;

        MarkerReject(String label) {
            this.label = label;
        }
    }

    /** A progress announcement (9.1, C7). */
    static final class Progress extends Value {
        final String group;
        final String topic;
        final int partition;
        final long drained;
        /** Producer -> passed epoch (informative). */
        final Map<String, Long> passed;
        final long committedOffset;
        final long updatedAtMs;

        Progress(String group, String topic, int partition, long drained, Map<String, Long> passed,
                long committedOffset, long updatedAtMs) {
            this.group = group;
            this.topic = topic;
            this.partition = partition;
            this.drained = drained;
            this.passed = Collections.unmodifiableMap(new TreeMap<>(passed));
            this.committedOffset = committedOffset;
            this.updatedAtMs = updatedAtMs;
        }

        /** Its handoff key, {@code progress/<group>/<topic>/<partition>}. */
        String key() {
            return "progress/" + group + "/" + topic + "/" + Integer.toUnsignedString(partition);
        }

        /** Its value, byte for byte as the Rust encoder writes it (members in declaration order, serde's escapes). */
        String encode() {
            StringBuilder b = new StringBuilder(128 + passed.size() * 44);
            b.append("{\"group\":");
            json(b, group);
            b.append(",\"topic\":");
            json(b, topic);
            b.append(",\"partition\":").append(Integer.toUnsignedString(partition));
            b.append(",\"drained\":").append(Long.toUnsignedString(drained));
            b.append(",\"passed\":{");
            boolean first = true;
            for (Map.Entry<String, Long> e : passed.entrySet()) {
                if (!first) {
                    b.append(',');
                }
                first = false;
                json(b, e.getKey());
                b.append(':').append(Long.toUnsignedString(e.getValue()));
            }
            b.append("},\"committed_offset\":").append(committedOffset);
            b.append(",\"updated_at_ms\":").append(Long.toUnsignedString(updatedAtMs));
            return b.append('}').toString();
        }

        @Override
        Object[] components() {
            return new Object[] {group, topic, partition, drained, passed, committedOffset, updatedAtMs};
        }
    }

    /** A JSON string as serde_json writes it: {@code "} and {@code \\} escaped, control characters as its short escapes or {@code \\u00XX}. */
    static void json(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    b.append("\\\"");
                    break;
                case '\\':
                    b.append("\\\\");
                    break;
                case '\n':
                    b.append("\\n");
                    break;
                case '\r':
                    b.append("\\r");
                    break;
                case '\t':
                    b.append("\\t");
                    break;
                case '\b':
                    b.append("\\b");
                    break;
                case '\f':
                    b.append("\\f");
                    break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        b.append('"');
    }
}
