package dev.dkg.kafka;

/**
 * What one control-topic record did to an {@link AssignmentBook} (the Rust {@code ControlUpdate}): an immutable
 * value (a record before the Java 11 level).
 */
public final class ControlUpdate {
    private final Outcome outcome;
    private final String topic;
    private final Assignment assignment;
    private final RejectReason reason;
    private final String detail;

    /** An update; see the class description for the fields. */
    public ControlUpdate(Outcome outcome, String topic, Assignment assignment, RejectReason reason, String detail) {
        this.outcome = outcome;
        this.topic = topic;
        this.assignment = assignment;
        this.reason = reason;
        this.detail = detail;
    }

    /** What happened. */
    public Outcome outcome() {
        return outcome;
    }

    /** The data topic (the record key), {@code null} if the key was missing or not UTF-8. */
    public String topic() {
        return topic;
    }

    /** The adopted assignment ({@link Outcome#ACCEPTED} of an assignment), else {@code null}. */
    public Assignment assignment() {
        return assignment;
    }

    /** Why it was rejected ({@link Outcome#REJECTED} only), else {@code null}. */
    public RejectReason reason() {
        return reason;
    }

    /** A human-readable explanation for the log ({@link Outcome#REJECTED} only), else {@code null}. */
    public String detail() {
        return detail;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof ControlUpdate)) {
            return false;
        }
        ControlUpdate u = (ControlUpdate) o;
        return outcome == u.outcome && java.util.Objects.equals(topic, u.topic)
                && java.util.Objects.equals(assignment, u.assignment) && reason == u.reason
                && java.util.Objects.equals(detail, u.detail);
    }

    @Override
    public int hashCode() {
        return java.util.Objects.hash(outcome, topic, assignment, reason, detail);
    }

    @Override
    public String toString() {
        return "ControlUpdate[outcome=" + outcome + ", topic=" + topic + ", assignment=" + assignment + ", reason="
                + reason + ", detail=" + detail + "]";
    }

    /** The effect of a control-topic record. */
    public enum Outcome {
        /** A new assignment is current for its topic. */
        ACCEPTED("accepted"),
        /**
         * No assignment changed: an identical re-publication, a tombstone for a topic without an assignment, a
         * retraction document for a topic without one (it sets the floor), a generation record adopting the first
         * or the same generation.
         */
        UNCHANGED("unchanged"),
        /**
         * A tombstone or a retraction document removed the topic's assignment (producers fall back to Kafka's
         * default placement); a retraction document keeps its epoch as the topic's floor.
         */
        RETRACTED("retracted"),
        /** The record was rejected; the topic's last good assignment stays. */
        REJECTED("rejected"),
        /**
         * The whole state was dropped (every topic's assignment and floor): a {@value AssignmentBook#GENERATION_KEY}
         * record with a new id (the control topic was recreated).
         */
        RESET("reset"),
        /**
         * The whole state was dropped by a document of a generation not in force: the reader must re-read the
         * control topic from its beginning (the record itself was not applied).
         */
        REREAD("reread");

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

    /** Whether the reader must re-read the control topic from its beginning ({@link Outcome#REREAD}). */
    public boolean reread() {
        return outcome == Outcome.REREAD;
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

    static ControlUpdate reset(String key) {
        return new ControlUpdate(Outcome.RESET, key, null, null, null);
    }

    static ControlUpdate reread(String topic) {
        return new ControlUpdate(Outcome.REREAD, topic, null, null, null);
    }
}
