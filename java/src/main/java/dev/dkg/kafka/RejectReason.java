package dev.dkg.kafka;

/**
 * Why a control-topic record (or an assignment document) was rejected. {@link #label()} is the {@code reason}
 * tag of the {@code dkg-producer-assignments-rejected-total} metric and the label the golden vectors use; the
 * same labels as the Rust {@code RejectReason} ({@code partitioner/src/kafka/control.rs}).
 */
public enum RejectReason {
    /** The record has no key, an empty key, or a key that is not UTF-8. */
    BAD_KEY("bad_key"),
    /** The value exceeds the size limit (checked before parsing), or a count exceeds its limit. */
    OVERSIZE("oversize"),
    /** Not JSON, wrong shape (types, missing or unknown fields), or not a DKG assignment document. */
    MALFORMED_JSON("malformed_json"),
    /** A format version this build does not read. */
    UNSUPPORTED_VERSION("unsupported_version"),
    /** A partition number outside the document's own partition count. */
    OUT_OF_RANGE("out_of_range"),
    /** Any other violated invariant of the document. */
    INVALID("invalid"),
    /** The record key differs from the document's topic. */
    TOPIC_MISMATCH("topic_mismatch"),
    /** The epoch is below the current assignment's. */
    STALE_EPOCH("stale_epoch"),
    /** The epoch equals the current assignment's but the content differs. */
    EPOCH_CONFLICT("epoch_conflict"),
    /**
     * The document's control topic generation differs from the one in force, still after a re-read from the
     * beginning (version 2, spec 6.4).
     */
    GENERATION_MISMATCH("generation_mismatch");

    private final String label;

    RejectReason(String label) {
        this.label = label;
    }

    /** The metric / vector label, e.g. {@code "malformed_json"}. */
    public String label() {
        return label;
    }

    /** The reason with this label. */
    public static RejectReason ofLabel(String label) {
        for (RejectReason r : values()) {
            if (r.label.equals(label)) {
                return r;
            }
        }
        throw new IllegalArgumentException("unknown reject reason label: " + label);
    }

    /** The label. */
    @Override
    public String toString() {
        return label;
    }
}
