package dev.dkg.kafka;

import static dev.dkg.kafka.Assignment.FORMAT_NAME;
import static dev.dkg.kafka.Assignment.FORMAT_VERSION;
import static dev.dkg.kafka.Assignment.MAX_ASSIGNMENT_BYTES;
import static dev.dkg.kafka.Assignment.MAX_FORMAT_VERSION;
import static dev.dkg.kafka.Assignment.MAX_SPLIT_PARTS;
import static dev.dkg.kafka.Assignment.MAX_SPLIT_WEIGHT_SUM;
import static dev.dkg.kafka.Assignment.checkEpoch;
import static dev.dkg.kafka.Assignment.display;
import static dev.dkg.kafka.Assignment.invalid;
import static dev.dkg.kafka.Assignment.outOfRange;
import static dev.dkg.kafka.Assignment.tooLarge;
import static dev.dkg.kafka.Assignment.validateTopic;

import java.util.Base64;

/**
 * The decoding of a control-topic value ({@code docs/spec.md} 4.4 and 6.4; the Rust {@code assignment/json.rs} and
 * {@code assignment/control.rs}): the header and the document read by {@link StrictJson}, then the checks that need
 * the document rather than the assignment (its kind, the compact table, base64 keys, split parts, the generation);
 * the order of all checks is in {@link Assignment}'s class comment.
 */
final class AssignmentJson {
    private AssignmentJson() {}

    /**
     * Decodes and validates a control-topic value of any kind: an assignment (version 1 or 2), a retraction or a
     * generation record (version 2).
     */
    static ControlValue decode(byte[] bytes) throws AssignmentException {
        if (bytes.length > MAX_ASSIGNMENT_BYTES) {
            throw tooLarge("assignment bytes", bytes.length, MAX_ASSIGNMENT_BYTES);
        }
        StrictJson.Document doc;
        try {
            // Format and version first, so a newer document reports its version rather than its shape.
            StrictJson.Header header = StrictJson.readHeader(bytes);
            if (!FORMAT_NAME.equals(header.format)) {
                throw new AssignmentException(RejectReason.MALFORMED_JSON, "not a DKG assignment: format \""
                        + display(header.format) + "\", expected \"" + FORMAT_NAME + "\"");
            }
            if (header.version != FORMAT_VERSION && header.version != MAX_FORMAT_VERSION) {
                throw new AssignmentException(RejectReason.UNSUPPORTED_VERSION, "unsupported assignment format version "
                        + Long.toUnsignedString(header.version) + " (this build reads versions " + FORMAT_VERSION
                        + " and " + MAX_FORMAT_VERSION + ")");
            }
            doc = StrictJson.readDocument(bytes, header.version);
        } catch (StrictJson.Malformed e) {
            throw new AssignmentException(RejectReason.MALFORMED_JSON, "malformed assignment JSON: " + e.getMessage());
        }
        switch (doc.kind) {
            case StrictJson.KIND_RETRACTION:
                validateTopic(doc.topic);
                validateGeneration(doc.generation);
                checkEpoch(doc.epoch);
                return new ControlValue.Retraction(doc.topic, doc.epoch, doc.generation, doc.createdAtMs);
            case StrictJson.KIND_GENERATION:
                validateGeneration(doc.generation);
                return new ControlValue.Generation(doc.generation);
            default:
                break;
        }
        if (doc.tableB64 != null) {
            doc.table = compactTable(doc);
        }
        if (doc.table.length != (doc.buckets & 0xffff_ffffL)) {
            throw invalid("bucket table has " + doc.table.length + " entries, expected "
                    + Integer.toUnsignedString(doc.buckets));
        }
        StrictJson.HeavyIn[] heavy = doc.heavy;
        byte[][] keys = new byte[heavy.length][];
        for (int i = 0; i < heavy.length; i++) {
            keys[i] = decodeKey(i, heavy[i].keyB64);
        }
        validateGeneration(doc.generation);
        return new Assignment(doc, keys);
    }

    /**
     * The entries of a compact table ({@code table_b64}, {@code table_width}; spec 4.6): canonical base64 of
     * {@code buckets} little-endian unsigned integers of the smallest width (1, 2 or 4 bytes) that holds
     * {@code partitions - 1}. Entries are range-checked with the JSON table's.
     */
    private static int[] compactTable(StrictJson.Document doc) throws AssignmentException {
        // The Rust decode_compact_table's order: the width, the base64, then the length.
        long last = Math.max(0, (doc.partitions & 0xffff_ffffL) - 1);
        int width = last <= 0xff ? 1 : last <= 0xffff ? 2 : 4;
        if (doc.tableWidth != width) {
            throw invalid("table_width is " + Integer.toUnsignedString(doc.tableWidth) + ", the smallest width that "
                    + "holds partition " + last + " is " + width);
        }
        byte[] raw = decodeBase64(doc.tableB64, "table_b64");
        long want = (doc.buckets & 0xffff_ffffL) * width;
        if (raw.length != want) {
            throw invalid("table_b64 holds " + raw.length + " bytes, " + Integer.toUnsignedString(doc.buckets)
                    + " buckets of width " + width + " take " + want);
        }
        int[] table = new int[raw.length / width];
        for (int i = 0; i < table.length; i++) {
            int v = 0;
            for (int j = width - 1; j >= 0; j--) {
                v = (v << 8) | (raw[i * width + j] & 0xff);
            }
            table[i] = v;
        }
        return table;
    }

    /**
     * A split key's parts (spec 4.6, step 14; the Rust {@code validate_split}): 2 to
     * {@value Assignment#MAX_SPLIT_PARTS}, then part by part in range, no partition twice, weight at least 1; then the
     * weights' sum at most {@value Assignment#MAX_SPLIT_WEIGHT_SUM}.
     */
    static void validateSplit(StrictJson.Document d, int[] parts, int[] weights) throws AssignmentException {
        if (parts.length < 2 || parts.length > MAX_SPLIT_PARTS) {
            throw invalid("a split key has " + parts.length + " parts, it must have 2 to " + MAX_SPLIT_PARTS);
        }
        long sum = 0;
        for (int j = 0; j < parts.length; j++) {
            int p = parts[j];
            if (Integer.compareUnsigned(p, d.partitions) >= 0) {
                throw outOfRange(d.topic, p, d.partitions);
            }
            for (int k = 0; k < j; k++) {
                if (parts[k] == p) {
                    throw invalid("a split key names partition " + p + " twice");
                }
            }
            if (weights[j] == 0) {
                throw invalid("a split part's weight must be at least 1");
            }
            sum += weights[j] & 0xffff_ffffL;
        }
        if (sum > MAX_SPLIT_WEIGHT_SUM) {
            throw invalid("a split key's weights sum to " + sum + ", at most " + MAX_SPLIT_WEIGHT_SUM + " are allowed");
        }
    }

    /** A {@code generation} member, if present: 32 lowercase hex digits (spec 6.4). */
    private static void validateGeneration(String generation) throws AssignmentException {
        if (generation != null && !(generation.length() == 32 && generation.chars()
                .allMatch(c -> (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))) {
            throw invalid("generation \"" + display(generation) + "\" is not 32 lowercase hex digits");
        }
    }

    private static byte[] decodeKey(int index, String text) throws AssignmentException {
        return decodeBase64(text, "heavy key #" + index);
    }

    /** Standard alphabet with canonical padding (what the Rust {@code base64} STANDARD engine accepts). */
    private static byte[] decodeBase64(String text, String what) throws AssignmentException {
        byte[] bytes;
        try {
            bytes = Base64.getDecoder().decode(text);
        } catch (IllegalArgumentException e) {
            throw invalid(what + ": invalid base64: " + e.getMessage());
        }
        // Java's decoder also takes missing padding and non-zero trailing bits; canonical text re-encodes to itself.
        if (!Base64.getEncoder().encodeToString(bytes).equals(text)) {
            throw invalid(what + ": invalid base64: not canonical padded base64");
        }
        return bytes;
    }
}
