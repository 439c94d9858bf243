package dev.dkg.kafka;

/** An assignment document that cannot be used; {@link #reason()} says which rule it breaks. */
public final class AssignmentException extends Exception {
    private static final long serialVersionUID = 1L;

    private final RejectReason reason;

    /** A rejection for {@code reason} with a human-readable {@code message}. */
    public AssignmentException(RejectReason reason, String message) {
        super(reason.label() + ": " + message);
        this.reason = reason;
    }

    /** Why the document was rejected. */
    public RejectReason reason() {
        return reason;
    }
}
