package dev.dkg.kafka;

/**
 * A decoded control-topic value ({@link Assignment#decode}): an {@link Assignment} (versions 1 and 2), or one of
 * version 2's other kinds, a {@link Retraction} that keeps its epoch or the control topic's {@link Generation}
 * record ({@code docs/spec.md} section 6.4).
 */
// Implemented by Assignment, Retraction and Generation only (a sealed interface before the Java 11 level).
interface ControlValue {
    /** The {@code kind} member's value. */
    String kind();

    /**
     * {@code {"kind":"retraction",...}}: producers return to Kafka's placement as after a tombstone, but the epoch
     * floor stays at {@code epoch} (a later document needs a higher one).
     *
     * <p>{@code topic}: the data topic
     * <p>{@code epoch}: the retraction's epoch (unsigned 64-bit)
     * <p>{@code generation}: the control topic generation it was written under, or null
     * <p>{@code createdAtMs}: creation time, Unix milliseconds (informational)
     */
    final class Retraction extends Value implements ControlValue {
        final String topic;
        final long epoch;
        final String generation;
        final long createdAtMs;

        Retraction(String topic, long epoch, String generation, long createdAtMs) {
            this.topic = topic;
            this.epoch = epoch;
            this.generation = generation;
            this.createdAtMs = createdAtMs;
        }

        @Override
        Object[] components() {
            return new Object[] {topic, epoch, generation, createdAtMs};
        }

        @Override
        public String kind() {
            return StrictJson.KIND_RETRACTION;
        }
    }

    /**
     * {@code {"kind":"generation",...}}, the value of the {@code @generation} record: the control topic's
     * incarnation.
     *
     * <p>{@code id}: 32 lowercase hex digits
     */
    final class Generation extends Value implements ControlValue {
        final String id;

        Generation(String id) {
            this.id = id;
        }

        @Override
        Object[] components() {
            return new Object[] {id};
        }

        @Override
        public String kind() {
            return StrictJson.KIND_GENERATION;
        }
    }
}
