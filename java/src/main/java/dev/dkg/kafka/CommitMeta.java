package dev.dkg.kafka;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The metadata of a DKG consumer's offset commits (spec 9.3, C7; the Rust {@code consumer::progress::CommitMeta}):
 * {@code {"v":1,"d":<drained>,"p":{"<producer>":[<epoch>,<marker end>],...},"n":<next offset>,
 * "u":[<unprocessed offsets in [committed, n), as deltas from the committed offset>]}}, {@code n} left out when
 * absent and {@code u} when empty. Java and Rust members of one group read each other's commits.
 */
final class CommitMeta extends Value {
    /** The format version written and read. */
    static final long VERSION = 1;
    /** Kafka's default {@code offset.metadata.max.bytes}. */
    static final int DEFAULT_MAX_METADATA_BYTES = 4096;
    /** No {@code n}. */
    static final long NO_NEXT = Long.MIN_VALUE;

    /** A passed marker: its epoch and its end on the partition. */
    static final class PassedAt extends Value {
        final long epoch;
        final long offset;

        PassedAt(long epoch, long offset) {
            this.epoch = epoch;
            this.offset = offset;
        }

        @Override
        Object[] components() {
            return new Object[] {epoch, offset};
        }
    }

    final long version;
    final long drained;
    final Map<String, PassedAt> passed;
    /** Fetch position when committed, or {@link #NO_NEXT}. */
    final long next;
    /** Unprocessed offsets in {@code [committed, next)}, ascending, as deltas from the committed offset. */
    final List<Long> unprocessed;

    CommitMeta(long version, long drained, Map<String, PassedAt> passed, long next, List<Long> unprocessed) {
        this.version = version;
        this.drained = drained;
        this.passed = Collections.unmodifiableMap(new TreeMap<>(passed));
        this.next = next;
        this.unprocessed = Collections.unmodifiableList(new ArrayList<>(unprocessed));
    }

    /**
     * Parses commit metadata: null for an empty string or null (a fresh group, offsets reset by a tool). One trailing
     * NUL is ignored (spec C7): confluent-kafka (Python) commits its C string's terminator with the metadata.
     *
     * @throws StrictJson.Malformed for anything this build does not read (the caller logs it and starts without
     *     skip rules)
     */
    static CommitMeta parse(String s) throws StrictJson.Malformed {
        if (s != null && s.endsWith("\u0000")) {
            s = s.substring(0, s.length() - 1);
        }
        if (s == null || s.isEmpty()) {
            return null;
        }
        CommitMeta m = StrictJson.readCommitMeta(s.getBytes(java.nio.charset.StandardCharsets.UTF_8));
        if (m.version != VERSION) {
            throw new StrictJson.Malformed("unsupported metadata version " + Long.toUnsignedString(m.version));
        }
        return m;
    }

    /** The JSON, members in the Rust encoder's order. */
    String encode() {
        StringBuilder b = new StringBuilder(64 + passed.size() * 56 + unprocessed.size() * 4);
        b.append("{\"v\":").append(Long.toUnsignedString(version));
        b.append(",\"d\":").append(Long.toUnsignedString(drained));
        b.append(",\"p\":{");
        boolean first = true;
        for (Map.Entry<String, PassedAt> e : passed.entrySet()) {
            if (!first) {
                b.append(',');
            }
            first = false;
            // Producer ids are 32 hex digits: nothing to escape.
            b.append('"').append(e.getKey()).append("\":[").append(Long.toUnsignedString(e.getValue().epoch))
                    .append(',').append(e.getValue().offset).append(']');
        }
        b.append('}');
        if (next != NO_NEXT) {
            b.append(",\"n\":").append(next);
        }
        if (!unprocessed.isEmpty()) {
            b.append(",\"u\":[");
            for (int i = 0; i < unprocessed.size(); i++) {
                if (i > 0) {
                    b.append(',');
                }
                b.append(unprocessed.get(i).longValue());
            }
            b.append(']');
        }
        return b.append('}').toString();
    }

    @Override
    Object[] components() {
        return new Object[] {version, drained, passed, next, unprocessed};
    }
}
