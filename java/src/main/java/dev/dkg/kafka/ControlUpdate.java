package dev.dkg.kafka;

/**
 * What one control-topic record did to an {@link AssignmentBook} (the Rust {@code ControlUpdate}).
 *
 * @param outcome what happened
 * @param topic the data topic (the record key), {@code null} if the key was missing or not UTF-8
 * @param assignment the adopted assignment ({@link Outcome#ACCEPTED} only), else {@code null}
 * @param reason why it was rejected ({@link Outcome#REJECTED} only), else {@code null}
 * @param detail a human-readable explanation for the log ({@link Outcome#REJECTED} only), else {@code null}
 */
public record ControlUpdate(Outcome outcome, String topic, Assignment assignment, RejectReason reason, String detail) {
    /** The effect of a control-topic record. */
    public enum Outcome {
        /** A new assignment is current for its topic. */
        ACCEPTED("accepted"),
        /** Nothing changed: an identical re-publication, or a tombstone for a topic without an assignment. */
        UNCHANGED("unchanged"),
        /** A tombstone removed the topic's assignment (producers fall back to Kafka's default placement). */
        RETRACTED("retracted"),
        /** The record was rejected; the topic's last good assignment stays. */
        REJECTED("rejected");

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
        return new ControlUpdate(Outcome.ACCEPTED, a.topic(), a, null, null);
    }

    static ControlUpdate unchanged(String topic) {
        return new ControlUpdate(Outcome.UNCHANGED, topic, null, null, null);
    }

    static ControlUpdate retracted(String topic) {
        return new ControlUpdate(Outcome.RETRACTED, topic, null, null, null);
    }

    static ControlUpdate rejected(String topic, RejectReason reason, String detail) {
        return new ControlUpdate(Outcome.REJECTED, topic, null, reason, detail);
    }
}
