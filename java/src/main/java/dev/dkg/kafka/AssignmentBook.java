package dev.dkg.kafka;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;

/**
 * The validated state of the control topic: the current assignment per data topic. Pure (no I/O): feed it the
 * control topic's records in log order with {@link #apply}. Not thread-safe (one follower thread owns it); readers
 * take {@link #snapshot()}s.
 *
 * <p>Rules (the Rust {@code AssignmentBook}, {@code partitioner/src/kafka/control.rs}; {@code docs/spec.md} 6.3):
 * record key = the data topic's name (UTF-8, non-empty; else {@code bad_key}); a null value (tombstone) retracts
 * the topic's assignment and clears its epoch floor; a value over the size limit is {@code oversize} before
 * parsing; then the decoder's reasons ({@link Assignment#decode}); a document for another topic than the key is
 * {@code topic_mismatch}; an epoch below the current one is {@code stale_epoch}, the same epoch with a different
 * document {@code epoch_conflict}, the same document again a no-op. A rejected record leaves the last good
 * assignment in force. A partition count differing from the topic's is not checked here (the router falls back
 * until they match).
 *
 * <p>Version 2 (spec 6.4): a <b>retraction document</b> retracts like a tombstone but keeps its epoch as the
 * topic's floor (the same epoch rules apply to it and against it). The record keyed {@value #GENERATION_KEY}
 * carries the control topic's generation: the first one read is adopted, a different one later drops the whole
 * state (a recreated control topic; outcome {@link ControlUpdate.Outcome#RESET}, nothing to re-read). A document
 * naming a generation not in force (also when none is) drops the whole state and asks the reader to re-read the
 * control topic from its beginning ({@link ControlUpdate.Outcome#REREAD}), once per generation id; after that,
 * documents of that generation are rejected as {@code generation_mismatch}.
 */
public final class AssignmentBook {
    /** Key of the control topic's generation record (not a legal topic name, so no data topic has it). */
    public static final String GENERATION_KEY = "@generation";

    private final Map<String, Assignment> current = new HashMap<>();
    /** Topics whose last word was a retraction document: their epoch floor. */
    private final Map<String, ControlValue.Retraction> retracted = new HashMap<>();
    private final int maxValueBytes;
    /** The generation in force (the last {@value #GENERATION_KEY} record's id), or null. */
    private String generation;
    /**
     * The generations whose documents already made the reader re-read: one re-read each (the re-read meets the
     * same log, so re-reading again could loop), then their documents are rejected. Bounded (oldest dropped).
     */
    private final Set<String> rereadFor = new LinkedHashSet<>();
    private static final int MAX_REREADS_REMEMBERED = 1024;

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

    /** The epoch floor a retraction document left on {@code topic} (unsigned), or empty. */
    public OptionalLong retractedAt(String topic) {
        ControlValue.Retraction r = retracted.get(topic);
        return r == null ? OptionalLong.empty() : OptionalLong.of(r.epoch);
    }

    /** The control topic generation in force (the last {@value #GENERATION_KEY} record's), or null. */
    public String generation() {
        return generation;
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
            // A tombstone also clears a retraction's floor (spec 6.4: tombstones keep their v1 meaning).
            retracted.remove(topic);
            return current.remove(topic) != null ? ControlUpdate.retracted(topic) : ControlUpdate.unchanged(topic);
        }
        if (value.length > maxValueBytes) {
            return ControlUpdate.rejected(topic, RejectReason.OVERSIZE,
                    "value is " + value.length + " bytes, limit " + maxValueBytes);
        }
        ControlValue decoded;
        try {
            decoded = Assignment.decode(value);
        } catch (AssignmentException e) {
            return ControlUpdate.rejected(topic, e.reason(), e.getMessage());
        } catch (RuntimeException e) {
            // A decoder bug must not stop the follower; the record is refused like any bad document.
            return ControlUpdate.rejected(topic, RejectReason.INVALID, "decoder failure: " + e);
        }
        if (decoded instanceof ControlValue.Generation) {
            return applyGeneration(topic, ((ControlValue.Generation) decoded).id);
        }
        String docTopic;
        String docGeneration;
        long epoch;
        if (decoded instanceof Assignment) {
            Assignment a = (Assignment) decoded;
            docTopic = a.topic();
            docGeneration = a.generation();
            epoch = a.epoch();
        } else {
            ControlValue.Retraction r = (ControlValue.Retraction) decoded;
            docTopic = r.topic;
            docGeneration = r.generation;
            epoch = r.epoch;
        }
        if (!docTopic.equals(topic)) {
            return ControlUpdate.rejected(topic, RejectReason.TOPIC_MISMATCH, "record key \"" + Assignment.display(topic)
                    + "\" but the document is for topic \"" + docTopic + "\"");
        }
        if (docGeneration != null && !docGeneration.equals(generation)) {
            // Spec 6.4 G5/G6: a generation not in force (also when none is), once per id.
            if (!rereadFor.add(docGeneration)) {
                return ControlUpdate.rejected(topic, RejectReason.GENERATION_MISMATCH, "generation " + docGeneration
                        + " but " + (generation == null ? "none" : generation) + " is in force (also after a re-read)");
            }
            if (rereadFor.size() > MAX_REREADS_REMEMBERED) {
                rereadFor.remove(rereadFor.iterator().next());
            }
            clear();
            generation = null;
            return ControlUpdate.reread(topic);
        }
        // The epoch floor: the current assignment's epoch, or the retraction's.
        Assignment now = current.get(topic);
        ControlValue floor = now != null ? now : retracted.get(topic);
        if (floor != null) {
            long floorEpoch = now != null ? now.epoch() : ((ControlValue.Retraction) floor).epoch;
            int order = Long.compareUnsigned(epoch, floorEpoch);
            if (order < 0) {
                return ControlUpdate.rejected(topic, RejectReason.STALE_EPOCH, "epoch " + Long.toUnsignedString(epoch)
                        + " is older than the current epoch " + Long.toUnsignedString(floorEpoch));
            }
            if (order == 0) {
                if (decoded.equals(floor)) {
                    return ControlUpdate.unchanged(topic);
                }
                return ControlUpdate.rejected(topic, RejectReason.EPOCH_CONFLICT,
                        "a different document under the current epoch " + Long.toUnsignedString(floorEpoch));
            }
        }
        if (decoded instanceof ControlValue.Retraction) {
            retracted.put(topic, (ControlValue.Retraction) decoded);
            // Spec 6.4 R4: "retracted" only if an assignment goes; the floor is set either way.
            return current.remove(topic) != null ? ControlUpdate.retracted(topic) : ControlUpdate.unchanged(topic);
        }
        Assignment assignment = (Assignment) decoded;
        retracted.remove(topic);
        current.put(topic, assignment);
        return ControlUpdate.accepted(assignment);
    }

    /**
     * A generation record (spec 6.4 G1-G4): only under {@value #GENERATION_KEY}; the first id is adopted keeping
     * the state (a control topic written before generations), a new one drops every topic's state.
     */
    private ControlUpdate applyGeneration(String key, String id) {
        if (!GENERATION_KEY.equals(key)) {
            return ControlUpdate.rejected(key, RejectReason.INVALID, "a generation record under key \""
                    + Assignment.display(key) + "\", expected \"" + GENERATION_KEY + "\"");
        }
        String old = generation;
        generation = id;
        if (old == null || old.equals(id)) {
            return ControlUpdate.unchanged(key);
        }
        clear();
        return ControlUpdate.reset(key);
    }

    private void clear() {
        current.clear();
        retracted.clear();
    }
}
