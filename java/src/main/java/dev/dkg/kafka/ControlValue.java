package dev.dkg.kafka;

import java.util.Objects;

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
    final class Retraction implements ControlValue {
        private final String topic;
        private final long epoch;
        private final String generation;
        private final long createdAtMs;

        Retraction(String topic, long epoch, String generation, long createdAtMs) {
            this.topic = topic;
            this.epoch = epoch;
            this.generation = generation;
            this.createdAtMs = createdAtMs;
        }

        String topic() {
            return topic;
        }

        long epoch() {
            return epoch;
        }

        String generation() {
            return generation;
        }

        long createdAtMs() {
            return createdAtMs;
        }

        @Override
        public boolean equals(Object o) {
            if (!(o instanceof Retraction)) {
                return false;
            }
            Retraction r = (Retraction) o;
            return topic.equals(r.topic) && epoch == r.epoch && Objects.equals(generation, r.generation)
                    && createdAtMs == r.createdAtMs;
        }

        @Override
        public int hashCode() {
            return Objects.hash(topic, epoch, generation, createdAtMs);
        }

        @Override
        public String toString() {
            return "Retraction[topic=" + topic + ", epoch=" + Long.toUnsignedString(epoch) + ", generation="
                    + generation + ", createdAtMs=" + createdAtMs + "]";
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
    final class Generation implements ControlValue {
        private final String id;

        Generation(String id) {
            this.id = id;
        }

        String id() {
            return id;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Generation && id.equals(((Generation) o).id);
        }

        @Override
        public int hashCode() {
            return id.hashCode();
        }

        @Override
        public String toString() {
            return "Generation[id=" + id + "]";
        }

        @Override
        public String kind() {
            return StrictJson.KIND_GENERATION;
        }
    }
}
