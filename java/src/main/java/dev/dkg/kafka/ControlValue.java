package dev.dkg.kafka;

/**
 * A decoded control-topic value ({@link Assignment#decode}): an {@link Assignment} (versions 1 and 2), or one of
 * version 2's other kinds, a {@link Retraction} that keeps its epoch or the control topic's {@link Generation}
 * record ({@code docs/spec.md} section 6.4).
 */
sealed interface ControlValue permits Assignment, ControlValue.Retraction, ControlValue.Generation {
    /** The {@code kind} member's value. */
    String kind();

    /**
     * {@code {"kind":"retraction",...}}: producers return to Kafka's placement as after a tombstone, but the epoch
     * floor stays at {@code epoch} (a later document needs a higher one).
     *
     * @param topic the data topic
     * @param epoch the retraction's epoch (unsigned 64-bit)
     * @param generation the control topic generation it was written under, or null
     * @param createdAtMs creation time, Unix milliseconds (informational)
     */
    record Retraction(String topic, long epoch, String generation, long createdAtMs) implements ControlValue {
        @Override
        public String kind() {
            return StrictJson.KIND_RETRACTION;
        }
    }

    /**
     * {@code {"kind":"generation",...}}, the value of the {@code @generation} record: the control topic's
     * incarnation.
     *
     * @param id 32 lowercase hex digits
     */
    record Generation(String id) implements ControlValue {
        @Override
        public String kind() {
            return StrictJson.KIND_GENERATION;
        }
    }
}
