package dev.dkg.kafka;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * Reads the handoff topic's records as a consumer does (spec 9.1; the Rust {@code dkg_kafka_protocol::handoff::decode}):
 * keys parsed from the right, values decoded and checked against their key. Unknown keys and values that do not
 * decode are skipped by the caller; markers are decoded strictly, each reject with its reason.
 */
final class HandoffReader {
    /** The Rust {@code MAX_MARKER_PARTITIONS}. */
    static final int MAX_MARKER_PARTITIONS = 1_000_000;
    /** The Rust {@code MAX_MARKER_BYTES}. */
    static final int MAX_MARKER_BYTES = 24 * MAX_MARKER_PARTITIONS;

    private HandoffReader() {}

    /** A parsed handoff key. */
    static final class Key extends Value {
        enum Kind { LEASE, MARKER, ASSIGNMENT, PROGRESS }

        final Kind kind;
        final String topic;
        /** The producer (lease, marker) or group (progress), else null. */
        final String name;
        /** The epoch (assignment) or partition (progress), else -1. */
        final long number;

        Key(Kind kind, String topic, String name, long number) {
            this.kind = kind;
            this.topic = topic;
            this.name = name;
            this.number = number;
        }

        @Override
        Object[] components() {
            return new Object[] {kind, topic, name, number};
        }
    }

    /** Thrown for a marker record that is rejected, with its reason. */
    static final class Rejected extends Exception {
        private static final long serialVersionUID = 1L;
        final HandoffRecords.MarkerReject reason;

        Rejected(HandoffRecords.MarkerReject reason) {
            super(reason.label, null, false, false);
            this.reason = reason;
        }
    }

    /** Parses a handoff key, or null if it is not one this version knows. */
    static Key parseKey(byte[] raw) {
        if (raw == null) {
            return null;
        }
        String key;
        try {
            key = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(raw)).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
        int slash = key.indexOf('/');
        if (slash < 0) {
            return null;
        }
        String kind = key.substring(0, slash);
        String rest = key.substring(slash + 1);
        int last = rest.lastIndexOf('/');
        if (last < 0) {
            return null;
        }
        String head = rest.substring(0, last);
        String tail = rest.substring(last + 1);
        switch (kind) {
            case "lease2":
            case "marker":
                if (head.isEmpty() || !isProducerId(tail)) {
                    return null;
                }
                return new Key(kind.equals("lease2") ? Key.Kind.LEASE : Key.Kind.MARKER, head, tail, -1);
            case "assignment": {
                long epoch = parseUnsigned(tail);
                return head.isEmpty() || epoch < 0 ? null : new Key(Key.Kind.ASSIGNMENT, head, null, epoch);
            }
            case "progress": {
                long partition = parseUnsigned(tail);
                int g = head.lastIndexOf('/');
                if (g < 0 || partition < 0 || partition > 0xffff_ffffL) {
                    return null;
                }
                String group = head.substring(0, g);
                String topic = head.substring(g + 1);
                return group.isEmpty() || topic.isEmpty() ? null
                        : new Key(Key.Kind.PROGRESS, topic, group, partition);
            }
            default:
                return null;
        }
    }

    /** A decimal as Rust's {@code u64::from_str} reads it (an optional {@code +}), or -1. */
    private static long parseUnsigned(String s) {
        String d = s.startsWith("+") ? s.substring(1) : s;
        if (d.isEmpty()) {
            return -1;
        }
        for (int i = 0; i < d.length(); i++) {
            if (d.charAt(i) < '0' || d.charAt(i) > '9') {
                return -1;
            }
        }
        try {
            return Long.parseLong(d);
        } catch (NumberFormatException e) {
            return -1; // above 2^63: no epoch or partition this side reaches
        }
    }

    static boolean isProducerId(String s) {
        if (s.length() != 32) {
            return false;
        }
        for (int i = 0; i < 32; i++) {
            char c = s.charAt(i);
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
                return false;
            }
        }
        return true;
    }

    /** A marker value under {@code marker/<topic>/<producer>}, strictly (9.1), or its reject reason. */
    static HandoffRecords.Marker decodeMarker(String topic, String producer, byte[] value) throws Rejected {
        if (value.length > MAX_MARKER_BYTES) {
            throw new Rejected(HandoffRecords.MarkerReject.OVERSIZE);
        }
        HandoffRecords.Marker m;
        try {
            m = StrictJson.readMarker(value);
        } catch (StrictJson.Malformed e) {
            throw new Rejected(HandoffRecords.MarkerReject.MALFORMED_JSON);
        }
        if (!m.topic.equals(topic) || !m.producer.equals(producer)) {
            throw new Rejected(HandoffRecords.MarkerReject.KEY_MISMATCH);
        }
        if (m.length() > MAX_MARKER_PARTITIONS) {
            throw new Rejected(HandoffRecords.MarkerReject.OVERSIZE);
        }
        boolean negative = false;
        for (int p = 0; p < m.length(); p++) {
            negative |= m.end(p) < 0;
        }
        if (m.epoch == 0 || m.length() == 0 || negative) {
            throw new Rejected(HandoffRecords.MarkerReject.INVALID);
        }
        return m;
    }

    /** A lease value under {@code lease2/<topic>/<producer>}, checked against its key. */
    static HandoffRecords.Lease decodeLease(Key key, byte[] value) throws StrictJson.Malformed {
        HandoffRecords.Lease l = StrictJson.readLease(value);
        if (!l.topic.equals(key.topic) || !l.producer.equals(key.name)) {
            throw new StrictJson.Malformed("lease value for " + l.topic + "/" + l.producer + " under another key");
        }
        return l;
    }

    /** A progress value under {@code progress/<group>/<topic>/<partition>}, checked against its key. */
    static HandoffRecords.Progress decodeProgress(Key key, byte[] value) throws StrictJson.Malformed {
        HandoffRecords.Progress p = StrictJson.readFullProgress(value);
        if (!p.group.equals(key.name) || !p.topic.equals(key.topic) || p.partition != key.number) {
            throw new StrictJson.Malformed("progress value under another key");
        }
        return p;
    }

    /** An assignment value under {@code assignment/<topic>/<epoch>}, checked against its key. */
    static Assignment decodeHistory(Key key, byte[] value) throws AssignmentException {
        Assignment a = Assignment.fromJson(value);
        if (!a.topic().equals(key.topic) || a.epoch() != key.number) {
            throw new AssignmentException(RejectReason.INVALID, "assignment of " + a.topic() + "/" + a.epoch()
                    + " under another key");
        }
        return a;
    }
}
