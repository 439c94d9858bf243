package dev.dkg.kafka;

import java.util.Arrays;

/**
 * An immutable value that is equal to, hashes and prints as its components, what a record does from Java 16: the
 * package's small internal values (the build targets Java 11), each of which names its components once.
 */
abstract class Value {
    /** The components, in declaration order; values of the same class are equal when these are. */
    abstract Object[] components();

    @Override
    public final boolean equals(Object other) {
        return other != null && other.getClass() == getClass()
                && Arrays.equals(components(), ((Value) other).components());
    }

    @Override
    public final int hashCode() {
        return Arrays.hashCode(components());
    }

    /** {@code Name[component, ...]}. */
    @Override
    public String toString() {
        return getClass().getSimpleName() + Arrays.toString(components());
    }
}
