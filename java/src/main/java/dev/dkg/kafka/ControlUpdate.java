package dev.dkg.kafka;

/**
 * What one control-topic record did to an {@link AssignmentBook} (the Rust {@code ControlUpdate}).
 *
 * @param outcome what happened
 * @param topic the data topic (the record key), {@code null} if the key was missing or not UTF-8
 * @param assignment the adopted assignment ({@link Outcome#ACCEPTED} of an assignment), else {@code null}
 * @param reason why it was rejected ({@link Outcome#REJECTED} only), else {@code null}
 * @param detail a human-readable explanation for the log ({@link Outcome#REJECTED} only), else {@code null}
 * @param reread {@link Outcome#RESET} by a document of another generation: the reader must re-read the control
 *     topic from its beginning (the record itself was not applied)
 */
public record ControlUpdate(Outcome outcome, String topic, Assignment assignment, RejectReason reason, String detail,
        boolean reread) {
    /** The effect of a control-topic record. */
    public enum Outcome {
        /**
         * A new assignment is current for its topic, or (key {@value AssignmentBook#GENERATION_KEY},
         * {@code assignment} null) the first control topic generation was adopted.
         */
        ACCEPTED("accepted"),
        /** Nothing changed: an identical re-publication, or a tombstone for a topic without an assignment. */
        UNCHANGED("unchanged"),
        /**
         * A tombstone or a retraction document removed the topic's assignment (producers fall back to Kafka's
         * default placement); a retraction document keeps its epoch as the topic's floor.
         */
        RETRACTED("retracted"),
        /** The record was rejected; the topic's last good assignment stays. */
        REJECTED("rejected"),
        /**
         * The whole state was dropped (every topic's assignment and floor): a new control topic generation, from its
         * {@value AssignmentBook#GENERATION_KEY} record or (with {@link ControlUpdate#reread}) from a document.
         */
        RESET("reset");

        private final String label;

        Outcome(String label) {
            this.label = label;
        }

        /** The label the golden vectors use, e.g. {@code "accepted"}. */
        public String label() {
            return label;
        }

        @Override
        public String toString() {
            return label;
        }
    }

    static ControlUpdate accepted(Assignment a) {
        return new ControlUpdate(Outcome.ACCEPTED, a.topic(), a, null, null, false);
    }

    /** The first generation record adopted. */
    static ControlUpdate generation(String key) {
        return new ControlUpdate(Outcome.ACCEPTED, key, null, null, null, false);
    }

    static ControlUpdate unchanged(String topic) {
        return new ControlUpdate(Outcome.UNCHANGED, topic, null, null, null, false);
    }

    static ControlUpdate retracted(String topic) {
        return new ControlUpdate(Outcome.RETRACTED, topic, null, null, null, false);
    }

    static ControlUpdate rejected(String topic, RejectReason reason, String detail) {
        return new ControlUpdate(Outcome.REJECTED, topic, null, reason, detail, false);
    }

    static ControlUpdate reset(String topic, boolean reread) {
        return new ControlUpdate(Outcome.RESET, topic, null, null, null, reread);
    }
}
