package dev.dkg.kafka;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.DoubleStream;
import java.util.stream.IntStream;

/**
 * A small, strict reader of the assignment document (format {@code dkg.assignment}, versions 1 and 2) that accepts and
 * rejects exactly what the Rust decoder does ({@code Assignment::from_json}, {@code crates/dkg-core/src/assignment/},
 * which is serde_json 1.x with {@code deny_unknown_fields} and {@code float_roundtrip}). The JSON grammar beneath it
 * is {@link JsonReader}'s.
 *
 * <p>Why not a general JSON library: none is on kafka-clients' classpath for users, and the rules that matter here
 * are the ones generic parsers make awkward: unknown or duplicate fields are errors at every level, integers must
 * be plain JSON integers inside the exact range of their Rust type ({@code u32}, {@code u64}: no sign, fraction or
 * exponent), strings must be valid UTF-8 without lone surrogates, and nothing may follow the document.
 *
 * <p>Like the Rust decoder it reads in two passes:
 * <ol>
 *   <li>{@link #readHeader}: {@code format} and {@code version} only, skipping every other value the way
 *       serde_json's {@code ignore_value} does (syntax checked, but skipped strings are not UTF-8-checked, skipped
 *       numbers have no range, and nesting is unbounded), so a newer document reports its version rather than a
 *       shape error. It requires an object: version 1 readers also took the two-element array form
 *       {@code ["dkg.assignment", 2]} (serde's derived struct visitor; spec gap G1, fixed for readers of version
 *       2, which reject it as malformed whatever its version);</li>
 *   <li>{@link #readDocument}: the whole document, an object with exactly the fields of its version and kind
 *       (version 2, {@code docs/spec.md} section 11: split heavy keys, the compact table, retraction and generation
 *       records).</li>
 * </ol>
 * Every failure is a {@link Malformed}; the caller maps it to {@link RejectReason#MALFORMED_JSON}.
 */
final class StrictJson extends JsonReader {
    /** The first pass: the format name and version ({@code version} as unsigned 64-bit bits). */
    static final class Header {
        final String format;
        final long version;

        Header(String format, long version) {
            this.format = format;
            this.version = version;
        }
    }

    /**
     * A heavy key as read: key text still base64; {@code splitPartitions} and {@code splitWeights} null for a whole
     * key, else version 2's parts in document order.
     */
    static final class HeavyIn {
        final String keyB64;
        final int partition;
        final long weight;
        final int[] splitPartitions;
        final int[] splitWeights;

        HeavyIn(String keyB64, int partition, long weight, int[] splitPartitions, int[] splitWeights) {
            this.keyB64 = keyB64;
            this.partition = partition;
            this.weight = weight;
            this.splitPartitions = splitPartitions;
            this.splitWeights = splitWeights;
        }
    }

    /**
     * The second pass: every field, unvalidated beyond its JSON type and integer range, and which kind of
     * document's members it has (version 2 documents are assignments, retractions or generation records).
     */
    static final class Document {
        /** {@code kind} ({@link #KIND_ASSIGNMENT} when absent, always for version 1). */
        String kind = KIND_ASSIGNMENT;
        /** {@code version} (1 or 2). */
        long version;
        /** {@code generation}, or null when absent. */
        String generation;
        /** {@code table_b64} and {@code table_width} (version 2's compact table), or null / 0 when absent. */
        String tableB64;
        int tableWidth;
        String topic;
        int partitions;
        long epoch;
        int bucketSeed;
        int buckets;
        int[] table;
        HeavyIn[] heavy;
        double theta;
        double epsilon;
        double mu;
        long windowRecords;
        long createdAtMs;
        double[] predictedLoad;
    }


    private StrictJson(byte[] bytes) {
        super(bytes);
    }


    // ---------------------------------------------------------------------------------------------------------
    // Pass 1: the header.

    static Header readHeader(byte[] bytes) throws Malformed {
        StrictJson r = new StrictJson(bytes);
        String format = null;
        long version = 0;
        boolean haveVersion = false;
        int c = r.peekValueStart();
        if (c == '{') {
            r.pos++;
            if (r.peekWs() == '}') {
                r.pos++;
            } else {
                while (true) {
                    r.expectWs('"');
                    String key = r.readStringBody();
                    r.expectWs(':');
                    switch (key) {
                        case "format":
                            if (format != null) {
                                throw r.error("duplicate field `format`");
                            }
                            format = r.readString();
                            break;
                        case "version":
                            if (haveVersion) {
                                throw r.error("duplicate field `version`");
                            }
                            version = r.readU64();
                            haveVersion = true;
                            break;
                        default:
                            r.skipValue();
                    }
                    int next = r.nextWs();
                    if (next == '}') {
                        break;
                    }
                    if (next != ',') {
                        throw r.error("expected `,` or `}`");
                    }
                }
            }
        } else {
            throw r.error("invalid type: expected struct Header");
        }
        r.end();
        if (format == null) {
            throw r.error("missing field `format`");
        }
        if (!haveVersion) {
            throw r.error("missing field `version`");
        }
        return new Header(format, version);
    }

    /** The members of a handoff {@code progress/} value an ordering producer reads (spec 9.1). */
    static final class Progress extends Value {
        final String group;
        final String topic;
        final int partition;
        final long drained;

        Progress(String group, String topic, int partition, long drained) {
            this.group = group;
            this.topic = topic;
            this.partition = partition;
            this.drained = drained;
        }

        @Override
        Object[] components() {
            return new Object[] {group, topic, partition, drained};
        }
    }

    /**
     * A handoff {@code Progress} value: {@code group}, {@code topic}, {@code partition} ({@code u32}) and
     * {@code drained} ({@code u64}) required, each once; other members skipped (handoff values ignore unknown
     * members, spec 9.1), as the Rust {@code Progress} decoder does.
     */
    static Progress readProgress(byte[] bytes) throws Malformed {
        StrictJson r = new StrictJson(bytes);
        String[] text = new String[2];
        long[] number = new long[2];
        int seen = r.readObjectSkippingUnknown(PROGRESS_FIELDS, field -> {
            switch (field) {
                case 0:
                case 1:
                    text[field] = r.readString();
                    break;
                case 2:
                    number[0] = Integer.toUnsignedLong(r.readU32());
                    break;
                default:
                    number[1] = r.readU64();
                    break;
            }
        });
        r.end();
        r.requireAll(PROGRESS_FIELDS, seen);
        if (number[0] > Integer.MAX_VALUE) {
            throw r.error("partition out of range");
        }
        return new Progress(text[0], text[1], (int) number[0], number[1]);
    }

    private static final String[] PROGRESS_FIELDS = {"group", "topic", "partition", "drained"};

    // ---------------------------------------------------------------------------------------------------------
    // The consumer's handoff values (spec 9.1) and commit metadata (C7): unknown members skipped, as serde's
    // derived decoders without deny_unknown_fields do; each member at most once.

    private static final String[] LEASE_FIELDS = {
        "producer", "topic", "first_epoch", "lease_ms", "expires_at_ms", "closed_at_epoch"
    };

    /** A {@code lease2/} value; {@code closed_at_epoch} optional (absent or null: the producer runs). */
    static HandoffRecords.Lease readLease(byte[] bytes) throws Malformed {
        StrictJson r = new StrictJson(bytes);
        String[] text = new String[2];
        long[] number = {0, 0, 0, HandoffRecords.NOT_CLOSED};
        int seen = r.readObjectSkippingUnknown(LEASE_FIELDS, field -> {
            if (field < 2) {
                text[field] = r.readString();
            } else if (field < 5) {
                number[field - 2] = r.readU64();
            } else if (!r.readNull()) {
                number[3] = r.readU64();
            }
        });
        r.end();
        r.requireAll(java.util.Arrays.copyOf(LEASE_FIELDS, 5), seen);
        r.producerId(text[0]);
        return new HandoffRecords.Lease(text[0], text[1], number[0], number[1], number[2], number[3]);
    }

    private static final String[] MARKER_FIELDS = {"producer", "topic", "epoch", "ends"};

    /** A {@code marker/} value's members, unchecked beyond their JSON types ({@link Handoff} checks the rest). */
    static HandoffRecords.Marker readMarker(byte[] bytes) throws Malformed {
        StrictJson r = new StrictJson(bytes);
        String[] text = new String[2];
        long[] epoch = new long[1];
        long[][] ends = new long[1][];
        int seen = r.readObjectSkippingUnknown(MARKER_FIELDS, field -> {
            if (field < 2) {
                text[field] = r.readString();
            } else if (field == 2) {
                epoch[0] = r.readU64();
            } else {
                java.util.stream.LongStream.Builder out = java.util.stream.LongStream.builder();
                r.readArray(() -> out.add(r.readI64()));
                ends[0] = out.build().toArray();
            }
        });
        r.end();
        r.requireAll(MARKER_FIELDS, seen);
        r.producerId(text[0]);
        return new HandoffRecords.Marker(text[0], text[1], epoch[0], ends[0]);
    }

    private static final String[] FULL_PROGRESS_FIELDS = {
        "group", "topic", "partition", "drained", "committed_offset", "updated_at_ms", "passed"
    };

    /** A whole {@code progress/} value, as a consumer reads another member's announcement. */
    static HandoffRecords.Progress readFullProgress(byte[] bytes) throws Malformed {
        StrictJson r = new StrictJson(bytes);
        String[] text = new String[2];
        long[] number = new long[4];
        java.util.TreeMap<String, Long> passed = new java.util.TreeMap<>();
        int seen = r.readObjectSkippingUnknown(FULL_PROGRESS_FIELDS, field -> {
            switch (field) {
                case 0:
                case 1:
                    text[field] = r.readString();
                    break;
                case 2:
                    number[0] = Integer.toUnsignedLong(r.readU32());
                    break;
                case 3:
                    number[1] = r.readU64();
                    break;
                case 4:
                    number[2] = r.readI64();
                    break;
                case 5:
                    number[3] = r.readU64();
                    break;
                default:
                    r.readMap(key -> {
                        r.producerId(key);
                        if (passed.put(key, r.readU64()) != null) {
                            throw r.error("duplicate producer");
                        }
                    });
                    break;
            }
        });
        r.end();
        r.requireAll(java.util.Arrays.copyOf(FULL_PROGRESS_FIELDS, 6), seen);
        if (number[0] > Integer.MAX_VALUE) {
            throw r.error("partition out of range");
        }
        return new HandoffRecords.Progress(text[0], text[1], (int) number[0], number[1], passed, number[2],
                number[3]);
    }

    private static final String[] META_FIELDS = {"v", "d", "p", "n", "u"};

    /** Commit metadata ({@link CommitMeta}); {@code v}, {@code d} and {@code p} required, {@code n} and {@code u} not. */
    static CommitMeta readCommitMeta(byte[] bytes) throws Malformed {
        StrictJson r = new StrictJson(bytes);
        long[] number = {0, 0, CommitMeta.NO_NEXT};
        java.util.TreeMap<String, CommitMeta.PassedAt> passed = new java.util.TreeMap<>();
        List<Long> unprocessed = new ArrayList<>();
        int seen = r.readObjectSkippingUnknown(META_FIELDS, field -> {
            switch (field) {
                case 0:
                case 1:
                    number[field] = r.readU64();
                    break;
                case 2:
                    r.readMap(key -> {
                        r.producerId(key);
                        long[] at = new long[2];
                        int[] n = new int[1];
                        r.readArray(() -> {
                            if (n[0] >= 2) {
                                throw r.error("invalid length, expected a tuple of size 2");
                            }
                            at[n[0]] = n[0] == 0 ? r.readU64() : r.readI64();
                            n[0]++;
                        });
                        if (n[0] != 2) {
                            throw r.error("invalid length, expected a tuple of size 2");
                        }
                        if (passed.put(key, new CommitMeta.PassedAt(at[0], at[1])) != null) {
                            throw r.error("duplicate producer");
                        }
                    });
                    break;
                case 3:
                    if (!r.readNull()) {
                        number[2] = r.readI64();
                    }
                    break;
                default:
                    r.readArray(() -> unprocessed.add(r.readI64()));
                    break;
            }
        });
        r.end();
        r.requireAll(java.util.Arrays.copyOf(META_FIELDS, 3), seen);
        return new CommitMeta(number[0], number[1], passed, number[2], unprocessed);
    }

    /** A handoff producer id: 32 lowercase hex digits. */
    private void producerId(String s) throws Malformed {
        boolean ok = s.length() == 32;
        for (int i = 0; ok && i < s.length(); i++) {
            char c = s.charAt(i);
            ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        }
        if (!ok) {
            throw error("not a producer id (32 lowercase hex digits)");
        }
    }

    /** Consumes a JSON {@code null} if one is next. */
    private boolean readNull() throws Malformed {
        if (peekValueStart() == 'n') {
            if (pos + 4 <= b.length && b[pos + 1] == 'u' && b[pos + 2] == 'l' && b[pos + 3] == 'l') {
                pos += 4;
                return true;
            }
            throw error("expected null");
        }
        return false;
    }

    @FunctionalInterface
    private interface Entry {
        void read(String key) throws Malformed;
    }

    /** An object of arbitrary member names; {@code entry} reads each value. */
    private void readMap(Entry entry) throws Malformed {
        expectObjectStart();
        if (peekWs() == '}') {
            pos++;
            return;
        }
        do {
            expectWs('"');
            String key = readStringBody();
            expectWs(':');
            entry.read(key);
        } while (moreFields());
    }

    /** An {@code i64}: a plain JSON integer in its range. */
    private long readI64() throws Malformed {
        boolean negative = peekValueStart() == '-';
        if (negative) {
            pos++;
            if (pos >= b.length || !isDigit(b[pos])) {
                throw error("invalid number");
            }
        }
        long v = readUnsigned();
        if (negative) {
            if (Long.compareUnsigned(v, Long.MIN_VALUE) > 0) {
                throw error("invalid type: floating point, expected i64");
            }
            return -v;
        }
        if (v < 0) {
            throw error("invalid value: integer out of range for i64");
        }
        return v;
    }

    // ---------------------------------------------------------------------------------------------------------
    // Pass 2: the document.

    /** {@code kind} of an assignment document (the default). */
    static final String KIND_ASSIGNMENT = "assignment";
    /** {@code kind} of a retraction that keeps its epoch (version 2, spec 6.4). */
    static final String KIND_RETRACTION = "retraction";
    /** {@code kind} of the control topic's {@code @generation} record (version 2, spec 6.4). */
    static final String KIND_GENERATION = "generation";

    /** The members of every version, by index; version 1 has the first {@link #V1_FIELDS}. */
    private static final String[] DOC_FIELDS = {
        "format", "version", "topic", "partitions", "epoch", "bucket_hash", "buckets", "table", "heavy", "params",
        "created_at_ms", "predicted_load", "kind", "generation", "table_b64", "table_width"
    };
    private static final int V1_FIELDS = 12;
    private static final int TABLE = 1 << 7;
    private static final int KIND = 1 << 12;
    private static final int GENERATION = 1 << 13;
    private static final int TABLE_B64 = 1 << 14;
    private static final int TABLE_WIDTH = 1 << 15;
    private static final int FORMAT_VERSION = 0b11;
    /** An assignment's members but the table (v2: {@code table} or {@code table_b64} + {@code table_width}). */
    private static final int ASSIGNMENT_CORE = 0b1111_0111_1111;
    /** A retraction's members: format, version, kind, topic, epoch, created_at_ms, optional generation. */
    private static final int RETRACTION_REQUIRED = FORMAT_VERSION | KIND | (1 << 2) | (1 << 4) | (1 << 10);
    private static final int GENERATION_REQUIRED = FORMAT_VERSION | KIND | GENERATION;

    /**
     * The whole document of {@code version} (1 or 2; the caller read it with {@link #readHeader}): an object with
     * exactly the members of its kind. Version 1 knows only assignments and none of version 2's members.
     */
    static Document readDocument(byte[] bytes, long version) throws Malformed {
        StrictJson r = new StrictJson(bytes);
        Document d = new Document();
        d.version = version;
        int known = version == 1 ? V1_FIELDS : DOC_FIELDS.length;
        int seen = r.readObject(DOC_FIELDS, known, field -> {
            switch (field) {
                case 0:
                    r.readString();
                    break;
                case 1:
                    r.readU64();
                    break;
                case 2:
                    d.topic = r.readString();
                    break;
                case 3:
                    d.partitions = r.readU32();
                    break;
                case 4:
                    d.epoch = r.readU64();
                    break;
                case 5:
                    d.bucketSeed = r.readBucketHash();
                    break;
                case 6:
                    d.buckets = r.readU32();
                    break;
                case 7:
                    d.table = r.readU32Array();
                    break;
                case 8:
                    d.heavy = r.readHeavy(version);
                    break;
                case 9:
                    r.readParams(d);
                    break;
                case 10:
                    d.createdAtMs = r.readU64();
                    break;
                case 11:
                    d.predictedLoad = r.readF64Array();
                    break;
                case 12:
                    d.kind = r.readString();
                    break;
                case 13:
                    d.generation = r.readString();
                    break;
                case 14:
                    d.tableB64 = r.readString();
                    break;
                default:
                    d.tableWidth = r.readU32();
                    break;
            }
        });
        r.end();
        r.checkMembers(d, seen, version);
        return d;
    }

    /**
     * The member set of the document's kind (version 2 makes some members optional or kind-specific): a missing
     * member, or one its kind does not have, is malformed (the latter as an unknown field).
     */
    private void checkMembers(Document d, int seen, long version) throws Malformed {
        int required;
        int optional;
        switch (d.kind) {
            case KIND_ASSIGNMENT:
                int table = (seen & TABLE_B64) != 0 ? TABLE_B64 | TABLE_WIDTH : TABLE;
                if ((seen & TABLE) != 0 && (seen & TABLE_B64) != 0) {
                    throw error("both `table` and `table_b64`: a document has exactly one of them");
                }
                required = ASSIGNMENT_CORE | table;
                optional = version == 1 ? 0 : KIND | GENERATION;
                break;
            case KIND_RETRACTION:
                required = RETRACTION_REQUIRED;
                optional = GENERATION;
                break;
            case KIND_GENERATION:
                required = GENERATION_REQUIRED;
                optional = 0;
                break;
            default:
                throw error("unknown variant `" + d.kind + "`, expected `assignment`, `retraction` or `generation`");
        }
        for (int i = 0; i < DOC_FIELDS.length; i++) {
            int bit = 1 << i;
            if ((seen & bit) != 0 && (required & bit) == 0 && (optional & bit) == 0) {
                throw error("unknown field `" + DOC_FIELDS[i] + "` in a document of kind `" + d.kind + "`");
            }
        }
        for (int i = 0; i < DOC_FIELDS.length; i++) {
            if ((required & (1 << i)) != 0 && (seen & (1 << i)) == 0) {
                throw error("missing field `" + DOC_FIELDS[i] + "`");
            }
        }
    }

    private static final String[] BUCKET_FIELDS = {"function", "seed"};

    /** {@code {"function":"murmur2","seed":N}} (serde's internally tagged enum): the seed's 32 bits. */
    private int readBucketHash() throws Malformed {
        String[] function = new String[1];
        int[] seed = new int[1];
        readStruct(BUCKET_FIELDS, field -> {
            if (field == 0) {
                function[0] = readString();
            } else {
                seed[0] = readU32();
            }
        });
        if (!"murmur2".equals(function[0])) {
            throw error("unknown variant `" + function[0] + "`, expected `murmur2`");
        }
        return seed[0];
    }

    /** A heavy entry's members; version 1 has the first three. */
    private static final String[] HEAVY_FIELDS = {"key_b64", "partition", "weight", "split"};
    private static final int HEAVY_PARTITION = 1 << 1;
    private static final int HEAVY_SPLIT = 1 << 3;
    private static final String[] SPLIT_FIELDS = {"partition", "weight"};

    /**
     * The heavy entries; in version 2 an entry has exactly one of {@code partition} and {@code split} (the parts
     * of a split key; spec 4.6).
     */
    private HeavyIn[] readHeavy(long version) throws Malformed {
        List<HeavyIn> out = new ArrayList<>();
        int known = version == 1 ? 3 : HEAVY_FIELDS.length;
        readArray(() -> {
            String[] key = new String[1];
            long[] numbers = new long[2];
            IntStream.Builder parts = IntStream.builder();
            IntStream.Builder weights = IntStream.builder();
            int seen = readObject(HEAVY_FIELDS, known, field -> {
                if (field == 0) {
                    key[0] = readString();
                } else if (field == 3) {
                    readArray(() -> {
                        int[] part = new int[2];
                        readStruct(SPLIT_FIELDS, f -> part[f] = readU32());
                        parts.add(part[0]);
                        weights.add(part[1]);
                    });
                } else {
                    numbers[field - 1] = field == 1 ? readU32() : readU64();
                }
            });
            boolean isSplit = (seen & HEAVY_SPLIT) != 0;
            if (isSplit && (seen & HEAVY_PARTITION) != 0) {
                throw error("a heavy entry has both `partition` and `split`");
            }
            requireAll(HEAVY_FIELDS, seen | HEAVY_SPLIT | (isSplit ? HEAVY_PARTITION : 0));
            out.add(new HeavyIn(key[0], (int) numbers[0], numbers[1], isSplit ? parts.build().toArray() : null,
                    isSplit ? weights.build().toArray() : null));
        });
        return out.toArray(new HeavyIn[0]);
    }

    private static final String[] PARAM_FIELDS = {"theta", "epsilon", "mu", "window_records"};

    private void readParams(Document d) throws Malformed {
        readStruct(PARAM_FIELDS, field -> {
            switch (field) {
                case 0:
                    d.theta = readF64();
                    break;
                case 1:
                    d.epsilon = readF64();
                    break;
                case 2:
                    d.mu = readF64();
                    break;
                default:
                    d.windowRecords = readU64();
                    break;
            }
        });
    }

    private int[] readU32Array() throws Malformed {
        IntStream.Builder out = IntStream.builder();
        readArray(() -> out.add(readU32()));
        return out.build().toArray();
    }

    private double[] readF64Array() throws Malformed {
        DoubleStream.Builder out = DoubleStream.builder();
        readArray(() -> out.add(readF64()));
        return out.build().toArray();
    }
}
