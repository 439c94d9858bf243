package dev.dkg.kafka;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A small, strict reader of the assignment document (format {@code dkg.assignment}, version 1) that accepts and
 * rejects exactly what the Rust decoder does ({@code Assignment::from_json} in {@code partitioner/src/assignment.rs},
 * which is serde_json 1.x with {@code deny_unknown_fields} and {@code float_roundtrip}).
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
 *       shape error. Like serde's derived struct visitor, it also takes the two-element array form
 *       {@code ["dkg.assignment", 1]};</li>
 *   <li>{@link #readDocument}: the whole document, an object with exactly the v1 fields.</li>
 * </ol>
 * Every failure is a {@link Malformed}; the caller maps it to {@link RejectReason#MALFORMED_JSON}.
 */
final class StrictJson {
    /** Not a v1 document's JSON (syntax, types, ranges, missing / unknown / duplicate fields). */
    static final class Malformed extends Exception {
        private static final long serialVersionUID = 1L;

        Malformed(String message) {
            super(message, null, false, false);
        }
    }

    /** The first pass: the format name and version ({@code version} as unsigned 64-bit bits). */
    record Header(String format, long version) {}

    /** The heavy keys as read: key text still base64. */
    record HeavyIn(String keyB64, int partition, long weight) {}

    /** The second pass: every v1 field, unvalidated beyond its JSON type and integer range. */
    record Document(
            String topic,
            int partitions,
            long epoch,
            int bucketSeed,
            int buckets,
            int[] table,
            HeavyIn[] heavy,
            double theta,
            double epsilon,
            double mu,
            long windowRecords,
            long createdAtMs,
            double[] predictedLoad) {}

    private static final long U32_MAX = 0xffff_ffffL;
    /** floor((2^64 - 1) / 10); the remainder is 5. */
    private static final long U64_MAX_DIV_10 = 1844674407370955161L;

    private final byte[] b;
    private int pos;

    private StrictJson(byte[] bytes) {
        this.b = bytes;
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
        } else if (c == '[') {
            // serde's derived visit_seq: the fields by position, exactly two elements.
            r.pos++;
            if (r.peekWs() == ']') {
                throw r.error("invalid length 0, expected struct Header with 2 elements");
            }
            format = r.readString();
            if (r.nextWs() != ',') {
                throw r.error("invalid length 1, expected struct Header with 2 elements");
            }
            version = r.readU64();
            haveVersion = true;
            if (r.nextWs() != ']') {
                throw r.error("trailing elements in the header array");
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

    // ---------------------------------------------------------------------------------------------------------
    // Pass 2: the document.

    private static final String[] DOC_FIELDS = {
        "format", "version", "topic", "partitions", "epoch", "bucket_hash", "buckets", "table", "heavy", "params",
        "created_at_ms", "predicted_load"
    };

    static Document readDocument(byte[] bytes) throws Malformed {
        StrictJson r = new StrictJson(bytes);
        String topic = null;
        int partitions = 0;
        long epoch = 0;
        long bucketSeed = -1;
        int buckets = 0;
        int[] table = null;
        HeavyIn[] heavy = null;
        double[] params = null;
        long windowRecords = 0;
        long createdAtMs = 0;
        double[] predictedLoad = null;
        int seen = 0;
        r.expectObjectStart();
        if (!r.emptyObject()) {
            do {
                int field = r.field(DOC_FIELDS, seen);
                seen |= 1 << field;
                switch (field) {
                    case 0:
                        r.readString();
                        break;
                    case 1:
                        r.readU64();
                        break;
                    case 2:
                        topic = r.readString();
                        break;
                    case 3:
                        partitions = r.readU32();
                        break;
                    case 4:
                        epoch = r.readU64();
                        break;
                    case 5:
                        bucketSeed = r.readBucketHash();
                        break;
                    case 6:
                        buckets = r.readU32();
                        break;
                    case 7:
                        table = r.readU32Array();
                        break;
                    case 8:
                        heavy = r.readHeavy();
                        break;
                    case 9: {
                        long[] window = new long[1];
                        params = r.readParams(window);
                        windowRecords = window[0];
                        break;
                    }
                    case 10:
                        createdAtMs = r.readU64();
                        break;
                    default:
                        predictedLoad = r.readF64Array();
                        break;
                }
            } while (r.moreFields());
        }
        r.requireAll(DOC_FIELDS, seen);
        r.end();
        return new Document(topic, partitions, epoch, (int) bucketSeed, buckets,
                table, heavy, params[0], params[1], params[2], windowRecords, createdAtMs, predictedLoad);
    }

    private static final String[] BUCKET_FIELDS = {"function", "seed"};

    /** {@code {"function":"murmur2","seed":N}} (serde's internally tagged enum): the seed's 32 bits. */
    private long readBucketHash() throws Malformed {
        expectObjectStart();
        String function = null;
        long seed = 0;
        int seen = 0;
        if (!emptyObject()) {
            do {
                int field = field(BUCKET_FIELDS, seen);
                seen |= 1 << field;
                if (field == 0) {
                    function = readString();
                } else {
                    seed = readU32() & U32_MAX;
                }
            } while (moreFields());
        }
        if ((seen & 1) == 0) {
            throw error("missing field `function`");
        }
        if (!"murmur2".equals(function)) {
            throw error("unknown variant `" + function + "`, expected `murmur2`");
        }
        requireAll(BUCKET_FIELDS, seen);
        return seed;
    }

    private static final String[] HEAVY_FIELDS = {"key_b64", "partition", "weight"};

    private HeavyIn[] readHeavy() throws Malformed {
        expectWs('[');
        HeavyIn[] out = new HeavyIn[8];
        int n = 0;
        if (peekWs() == ']') {
            pos++;
            return new HeavyIn[0];
        }
        do {
            expectObjectStart();
            String key = null;
            int partition = 0;
            long weight = 0;
            int seen = 0;
            if (!emptyObject()) {
                do {
                    int field = field(HEAVY_FIELDS, seen);
                    seen |= 1 << field;
                    switch (field) {
                        case 0:
                            key = readString();
                            break;
                        case 1:
                            partition = readU32();
                            break;
                        default:
                            weight = readU64();
                            break;
                    }
                } while (moreFields());
            }
            requireAll(HEAVY_FIELDS, seen);
            if (n == out.length) {
                out = Arrays.copyOf(out, n * 2);
            }
            out[n++] = new HeavyIn(key, partition, weight);
        } while (moreElements());
        return Arrays.copyOf(out, n);
    }

    private static final String[] PARAM_FIELDS = {"theta", "epsilon", "mu", "window_records"};

    private double[] readParams(long[] windowRecords) throws Malformed {
        expectObjectStart();
        double[] out = new double[3];
        int seen = 0;
        if (!emptyObject()) {
            do {
                int field = field(PARAM_FIELDS, seen);
                seen |= 1 << field;
                if (field == 3) {
                    windowRecords[0] = readU64();
                } else {
                    out[field] = readF64();
                }
            } while (moreFields());
        }
        requireAll(PARAM_FIELDS, seen);
        return out;
    }

    private int[] readU32Array() throws Malformed {
        expectWs('[');
        if (peekWs() == ']') {
            pos++;
            return new int[0];
        }
        int[] out = new int[16];
        int n = 0;
        do {
            if (n == out.length) {
                out = Arrays.copyOf(out, n * 2);
            }
            out[n++] = readU32();
        } while (moreElements());
        return Arrays.copyOf(out, n);
    }

    private double[] readF64Array() throws Malformed {
        expectWs('[');
        if (peekWs() == ']') {
            pos++;
            return new double[0];
        }
        double[] out = new double[16];
        int n = 0;
        do {
            if (n == out.length) {
                out = Arrays.copyOf(out, n * 2);
            }
            out[n++] = readF64();
        } while (moreElements());
        return Arrays.copyOf(out, n);
    }

    // ---------------------------------------------------------------------------------------------------------
    // Objects and arrays of known shape.

    /** serde's {@code Obj}: only a JSON object (not the array form serde's derive also takes). */
    private void expectObjectStart() throws Malformed {
        if (peekValueStart() != '{') {
            throw error("invalid type: expected a JSON object");
        }
        pos++;
    }

    /** After {@code {}: true (and consumed) if the object is empty. */
    private boolean emptyObject() throws Malformed {
        if (peekWs() == '}') {
            pos++;
            return true;
        }
        return false;
    }

    /** Reads {@code "name":} and returns the field's index; unknown or repeated fields are errors. */
    private int field(String[] names, int seen) throws Malformed {
        expectWs('"');
        String key = readStringBody();
        for (int i = 0; i < names.length; i++) {
            if (names[i].equals(key)) {
                if ((seen & (1 << i)) != 0) {
                    throw error("duplicate field `" + key + "`");
                }
                expectWs(':');
                return i;
            }
        }
        throw error("unknown field `" + key + "`");
    }

    /** After a member: true if {@code ,} (another member follows), false on {@code }}. */
    private boolean moreFields() throws Malformed {
        int c = nextWs();
        if (c == ',') {
            return true;
        }
        if (c == '}') {
            return false;
        }
        throw error("expected `,` or `}`");
    }

    /** After an element: true if {@code ,} (another element follows), false on {@code ]}. */
    private boolean moreElements() throws Malformed {
        int c = nextWs();
        if (c == ',') {
            return true;
        }
        if (c == ']') {
            return false;
        }
        throw error("expected `,` or `]`");
    }

    private void requireAll(String[] names, int seen) throws Malformed {
        for (int i = 0; i < names.length; i++) {
            if ((seen & (1 << i)) == 0) {
                throw error("missing field `" + names[i] + "`");
            }
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // Scalars.

    /** A JSON string, strictly: valid UTF-8, no control characters, valid escapes, paired surrogates. */
    private String readString() throws Malformed {
        if (peekValueStart() != '"') {
            throw error("invalid type: expected a string");
        }
        pos++;
        return readStringBody();
    }

    /** The rest of a string whose opening quote was consumed. */
    private String readStringBody() throws Malformed {
        final int start = pos;
        // Fast path: printable ASCII without escapes.
        while (pos < b.length) {
            int c = b[pos];
            if (c == '"') {
                String s = new String(b, start, pos - start, StandardCharsets.ISO_8859_1);
                pos++;
                return s;
            }
            if (c < 0x20 || c == '\\') {
                break;
            }
            pos++;
        }
        byte[] buf = new byte[Math.max(16, (pos - start) * 2)];
        int n = pos - start;
        System.arraycopy(b, start, buf, 0, n);
        while (true) {
            if (pos >= b.length) {
                throw error("EOF while parsing a string");
            }
            int c = b[pos++] & 0xff;
            if (c == '"') {
                break;
            }
            if (n + 4 > buf.length) {
                buf = Arrays.copyOf(buf, buf.length * 2);
            }
            if (c < 0x20) {
                throw error("control character (\\u0000-\\u001F) found while parsing a string");
            }
            if (c != '\\') {
                buf[n++] = (byte) c;
                continue;
            }
            if (pos >= b.length) {
                throw error("EOF while parsing a string");
            }
            int e = b[pos++];
            switch (e) {
                case '"':
                case '\\':
                case '/':
                    buf[n++] = (byte) e;
                    break;
                case 'b':
                    buf[n++] = '\b';
                    break;
                case 'f':
                    buf[n++] = '\f';
                    break;
                case 'n':
                    buf[n++] = '\n';
                    break;
                case 'r':
                    buf[n++] = '\r';
                    break;
                case 't':
                    buf[n++] = '\t';
                    break;
                case 'u':
                    n = unicodeEscape(buf, n);
                    break;
                default:
                    throw error("invalid escape");
            }
        }
        try {
            CharBuffer chars = StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(buf, 0, n));
            return chars.toString();
        } catch (CharacterCodingException e) {
            throw error("invalid unicode code point");
        }
    }

    /** After {@code \\u}: decodes the escape (and its low surrogate) into UTF-8 at {@code buf[n]}. */
    private int unicodeEscape(byte[] buf, int n) throws Malformed {
        int cp = hex4();
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
            throw error("lone leading surrogate in hex escape");
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (pos + 1 >= b.length || b[pos] != '\\' || b[pos + 1] != 'u') {
                throw error("unexpected end of hex escape");
            }
            pos += 2;
            int low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) {
                throw error("lone leading surrogate in hex escape");
            }
            cp = (((cp - 0xD800) << 10) | (low - 0xDC00)) + 0x10000;
        }
        if (cp < 0x80) {
            buf[n++] = (byte) cp;
        } else if (cp < 0x800) {
            buf[n++] = (byte) (0xC0 | (cp >> 6));
            buf[n++] = (byte) (0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            buf[n++] = (byte) (0xE0 | (cp >> 12));
            buf[n++] = (byte) (0x80 | ((cp >> 6) & 0x3F));
            buf[n++] = (byte) (0x80 | (cp & 0x3F));
        } else {
            buf[n++] = (byte) (0xF0 | (cp >> 18));
            buf[n++] = (byte) (0x80 | ((cp >> 12) & 0x3F));
            buf[n++] = (byte) (0x80 | ((cp >> 6) & 0x3F));
            buf[n++] = (byte) (0x80 | (cp & 0x3F));
        }
        return n;
    }

    private int hex4() throws Malformed {
        if (pos + 4 > b.length) {
            throw error("EOF while parsing a string");
        }
        int v = 0;
        for (int i = 0; i < 4; i++) {
            int c = b[pos++];
            int d;
            if (c >= '0' && c <= '9') {
                d = c - '0';
            } else if (c >= 'a' && c <= 'f') {
                d = c - 'a' + 10;
            } else if (c >= 'A' && c <= 'F') {
                d = c - 'A' + 10;
            } else {
                throw error("invalid escape");
            }
            v = (v << 4) | d;
        }
        return v;
    }

    /** A {@code u32}: a plain JSON integer in 0..=4294967295, returned as its 32 bits. */
    private int readU32() throws Malformed {
        long v = readUnsigned();
        if (Long.compareUnsigned(v, U32_MAX) > 0) {
            throw error("invalid value: integer `" + Long.toUnsignedString(v) + "`, expected u32");
        }
        return (int) v;
    }

    /** A {@code u64}: a plain JSON integer in 0..=18446744073709551615, returned as its 64 bits. */
    private long readU64() throws Malformed {
        return readUnsigned();
    }

    private long readUnsigned() throws Malformed {
        int c = peekValueStart();
        if (c == '-') {
            // A valid negative number is an "invalid value" or "invalid type" for an unsigned field.
            scanNumber();
            throw error("invalid value: expected an unsigned integer");
        }
        if (c < '0' || c > '9') {
            throw error("invalid type: expected an unsigned integer");
        }
        final int start = pos;
        long v = 0;
        boolean overflow = false;
        if (c == '0') {
            pos++;
        } else {
            while (pos < b.length && b[pos] >= '0' && b[pos] <= '9') {
                int d = b[pos] - '0';
                // v * 10 + d overflows u64 iff v > floor((2^64 - 1) / 10), or equals it and d > 5.
                if (Long.compareUnsigned(v, U64_MAX_DIV_10) > 0 || (v == U64_MAX_DIV_10 && d > 5)) {
                    overflow = true;
                }
                v = v * 10 + d;
                pos++;
            }
        }
        if (pos < b.length && (b[pos] == '.' || b[pos] == 'e' || b[pos] == 'E' || (c == '0' && isDigit(b[pos])))) {
            pos = start;
            scanNumber();
            throw error("invalid type: floating point, expected an unsigned integer");
        }
        if (overflow) {
            // serde_json reads an integer past u64 as a float: a type error for an integer field.
            throw error("invalid type: floating point, expected an unsigned integer");
        }
        return v;
    }

    /** An {@code f64}: any JSON number whose value is finite (serde_json: "number out of range"). */
    private double readF64() throws Malformed {
        if (peekValueStart() != '-' && !isDigit(peekByte())) {
            throw error("invalid type: expected f64");
        }
        final int start = pos;
        scanNumber();
        double v = Double.parseDouble(new String(b, start, pos - start, StandardCharsets.ISO_8859_1));
        if (Double.isInfinite(v)) {
            throw error("number out of range");
        }
        return v;
    }

    /** Skips one number, checking JSON's grammar (no leading zeros, digits after `.` and in the exponent). */
    private void scanNumber() throws Malformed {
        if (pos < b.length && b[pos] == '-') {
            pos++;
        }
        if (pos >= b.length || !isDigit(b[pos])) {
            throw error("invalid number");
        }
        if (b[pos] == '0') {
            pos++;
            if (pos < b.length && isDigit(b[pos])) {
                throw error("invalid number");
            }
        } else {
            while (pos < b.length && isDigit(b[pos])) {
                pos++;
            }
        }
        if (pos < b.length && b[pos] == '.') {
            pos++;
            if (pos >= b.length || !isDigit(b[pos])) {
                throw error("invalid number");
            }
            while (pos < b.length && isDigit(b[pos])) {
                pos++;
            }
        }
        if (pos < b.length && (b[pos] == 'e' || b[pos] == 'E')) {
            pos++;
            if (pos < b.length && (b[pos] == '+' || b[pos] == '-')) {
                pos++;
            }
            if (pos >= b.length || !isDigit(b[pos])) {
                throw error("invalid number");
            }
            while (pos < b.length && isDigit(b[pos])) {
                pos++;
            }
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // Skipping (serde_json's ignore_value): iterative, so any nesting depth is fine.

    private void skipValue() throws Malformed {
        byte[] stack = new byte[16];
        int depth = 0;
        while (true) {
            int c = nextWs();
            boolean complete = true;
            switch (c) {
                case 'n':
                    literal("ull");
                    break;
                case 't':
                    literal("rue");
                    break;
                case 'f':
                    literal("alse");
                    break;
                case '"':
                    skipStringBody();
                    break;
                case '[':
                    if (peekWs() == ']') {
                        pos++;
                    } else {
                        stack = push(stack, depth++, (byte) '[');
                        complete = false;
                    }
                    break;
                case '{':
                    if (peekWs() == '}') {
                        pos++;
                    } else {
                        stack = push(stack, depth++, (byte) '{');
                        skipKey();
                        complete = false;
                    }
                    break;
                default:
                    if (c == '-' || isDigit(c)) {
                        pos--;
                        scanNumber();
                    } else {
                        throw error("expected value");
                    }
            }
            if (!complete) {
                continue;
            }
            // A value ended: close containers until one continues with another member.
            boolean another = false;
            while (depth > 0 && !another) {
                int next = nextWs();
                byte frame = stack[depth - 1];
                if (next == ',') {
                    if (frame == '{') {
                        skipKey();
                    }
                    another = true;
                } else if (next == (frame == '{' ? '}' : ']')) {
                    depth--;
                } else {
                    throw error(frame == '{' ? "expected `,` or `}`" : "expected `,` or `]`");
                }
            }
            if (depth == 0) {
                return;
            }
        }
    }

    private static byte[] push(byte[] stack, int depth, byte frame) {
        byte[] s = depth == stack.length ? Arrays.copyOf(stack, depth * 2) : stack;
        s[depth] = frame;
        return s;
    }

    /** {@code "key":} inside a skipped object (the key's text is not checked beyond the syntax). */
    private void skipKey() throws Malformed {
        expectWs('"');
        skipStringBody();
        expectWs(':');
    }

    /** A skipped string: control characters and escapes are checked, UTF-8 and surrogates are not. */
    private void skipStringBody() throws Malformed {
        while (true) {
            if (pos >= b.length) {
                throw error("EOF while parsing a string");
            }
            int c = b[pos++] & 0xff;
            if (c == '"') {
                return;
            }
            if (c < 0x20) {
                throw error("control character (\\u0000-\\u001F) found while parsing a string");
            }
            if (c == '\\') {
                if (pos >= b.length) {
                    throw error("EOF while parsing a string");
                }
                int e = b[pos++];
                switch (e) {
                    case '"':
                    case '\\':
                    case '/':
                    case 'b':
                    case 'f':
                    case 'n':
                    case 'r':
                    case 't':
                        break;
                    case 'u':
                        hex4();
                        break;
                    default:
                        throw error("invalid escape");
                }
            }
        }
    }

    private void literal(String rest) throws Malformed {
        for (int i = 0; i < rest.length(); i++) {
            if (pos >= b.length || b[pos] != rest.charAt(i)) {
                throw error("expected ident");
            }
            pos++;
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // Whitespace and single bytes (JSON whitespace: space, \t, \n, \r).

    private void skipWs() {
        while (pos < b.length) {
            byte c = b[pos];
            if (c != ' ' && c != '\n' && c != '\t' && c != '\r') {
                return;
            }
            pos++;
        }
    }

    /** The next non-whitespace byte, not consumed; -1 at the end. */
    private int peekWs() {
        skipWs();
        return peekByte();
    }

    private int peekByte() {
        return pos < b.length ? b[pos] & 0xff : -1;
    }

    /** Like {@link #peekWs} but the end of input is an error (a value was expected). */
    private int peekValueStart() throws Malformed {
        int c = peekWs();
        if (c < 0) {
            throw error("EOF while parsing a value");
        }
        return c;
    }

    /** The next non-whitespace byte, consumed; the end of input is an error. */
    private int nextWs() throws Malformed {
        int c = peekValueStart();
        pos++;
        return c;
    }

    private void expectWs(char want) throws Malformed {
        int c = nextWs();
        if (c != want) {
            throw error("expected `" + want + "`");
        }
    }

    /** Only whitespace may follow the document. */
    private void end() throws Malformed {
        skipWs();
        if (pos != b.length) {
            throw error("trailing characters");
        }
    }

    private static boolean isDigit(int c) {
        return c >= '0' && c <= '9';
    }

    private Malformed error(String what) {
        return new Malformed(what + " at byte " + pos);
    }
}
