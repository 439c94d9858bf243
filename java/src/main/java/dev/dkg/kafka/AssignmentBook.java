package dev.dkg.kafka;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

/**
 * The validated state of the control topic: the current assignment per data topic. Pure (no I/O): feed it the
 * control topic's records in log order with {@link #apply}. Not thread-safe (one follower thread owns it); readers
 * take {@link #snapshot()}s.
 *
 * <p>Rules (the Rust {@code AssignmentBook}, {@code partitioner/src/kafka/control.rs}): record key = the data
 * topic's name (UTF-8, non-empty; else {@code bad_key}); a null value (tombstone) retracts the topic's assignment
 * and clears its epoch floor; a value over the size limit is {@code oversize} before parsing; then the decoder's
 * reasons ({@link Assignment#fromJson}); a document for another topic than the key is {@code topic_mismatch}; an
 * epoch below the current one is {@code stale_epoch}, the same epoch with a different document
 * {@code epoch_conflict}, the same document again a no-op. A rejected record leaves the last good assignment in
 * force. A partition count differing from the topic's is not checked here (the router falls back until they match).
 */
public final class AssignmentBook {
    private final Map<String, Assignment> current = new HashMap<>();
    private final int maxValueBytes;

    /** An empty book accepting values up to {@link Assignment#MAX_ASSIGNMENT_BYTES}. */
    public AssignmentBook() {
        this(Assignment.MAX_ASSIGNMENT_BYTES);
    }

    /** An empty book with a lower value size limit (never above {@link Assignment#MAX_ASSIGNMENT_BYTES}). */
    public AssignmentBook(int maxValueBytes) {
        this.maxValueBytes = Math.max(0, Math.min(maxValueBytes, Assignment.MAX_ASSIGNMENT_BYTES));
    }

    /** The value size limit in force. */
    public int maxValueBytes() {
        return maxValueBytes;
    }

    /** The current assignment of {@code topic}, or {@code null}. */
    public Assignment get(String topic) {
        return current.get(topic);
    }

    /** An immutable copy of the current assignments by topic. */
    public Map<String, Assignment> snapshot() {
        return Map.copyOf(current);
    }

    /** Number of topics with a current assignment. */
    public int size() {
        return current.size();
    }

    /** Applies one control-topic record ({@code value == null}: a tombstone). Never throws. */
    public ControlUpdate apply(byte[] key, byte[] value) {
        if (key == null || key.length == 0) {
            return ControlUpdate.rejected(null, RejectReason.BAD_KEY, "record has no key");
        }
        String topic;
        try {
            topic = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(key))
                    .toString();
        } catch (CharacterCodingException e) {
            return ControlUpdate.rejected(null, RejectReason.BAD_KEY, "record key is not UTF-8");
        }
        if (value == null) {
            return current.remove(topic) != null ? ControlUpdate.retracted(topic) : ControlUpdate.unchanged(topic);
        }
        if (value.length > maxValueBytes) {
            return ControlUpdate.rejected(topic, RejectReason.OVERSIZE,
                    "value is " + value.length + " bytes, limit " + maxValueBytes);
        }
        Assignment assignment;
        try {
            assignment = Assignment.fromJson(value);
        } catch (AssignmentException e) {
            return ControlUpdate.rejected(topic, e.reason(), e.getMessage());
        } catch (RuntimeException e) {
            // A decoder bug must not stop the follower; the record is refused like any bad document.
            return ControlUpdate.rejected(topic, RejectReason.INVALID, "decoder failure: " + e);
        }
        if (!assignment.topic().equals(topic)) {
            return ControlUpdate.rejected(topic, RejectReason.TOPIC_MISMATCH, "record key \"" + Assignment.display(topic)
                    + "\" but the document is for topic \"" + assignment.topic() + "\"");
        }
        Assignment now = current.get(topic);
        if (now != null) {
            int order = Long.compareUnsigned(assignment.epoch(), now.epoch());
            if (order < 0) {
                return ControlUpdate.rejected(topic, RejectReason.STALE_EPOCH, "epoch "
                        + Long.toUnsignedString(assignment.epoch()) + " is older than the current epoch "
                        + Long.toUnsignedString(now.epoch()));
            }
            if (order == 0) {
                if (assignment.equals(now)) {
                    return ControlUpdate.unchanged(topic);
                }
                return ControlUpdate.rejected(topic, RejectReason.EPOCH_CONFLICT,
                        "a different document under the current epoch " + Long.toUnsignedString(now.epoch()));
            }
        }
        current.put(topic, assignment);
        return ControlUpdate.accepted(assignment);
    }
}
