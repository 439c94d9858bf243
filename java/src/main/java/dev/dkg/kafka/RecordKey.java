package dev.dkg.kafka;

import java.util.Arrays;

/** A record key as a map key: equal, hashed and ordered (unsigned bytes, as Rust's {@code [u8]}) by content. */
final class RecordKey implements Comparable<RecordKey> {
    private final byte[] bytes;
    private final int hash;

    /** Wraps {@code bytes} without copying: the caller must not change them afterwards. */
    RecordKey(byte[] bytes) {
        this.bytes = bytes;
        this.hash = Arrays.hashCode(bytes);
    }

    /** The key's bytes (a copy). */
    byte[] bytes() {
        return bytes.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof RecordKey && Arrays.equals(bytes, ((RecordKey) o).bytes);
    }

    @Override
    public int hashCode() {
        return hash;
    }

    @Override
    public int compareTo(RecordKey o) {
        return Arrays.compareUnsigned(bytes, o.bytes);
    }

    @Override
    public String toString() {
        return new String(bytes, java.nio.charset.StandardCharsets.UTF_8);
    }
}
