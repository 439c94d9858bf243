package dev.dkg.kafka;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

/**
 * The JSON grammar under the assignment document reader ({@code StrictJson}), which extends it: objects with known
 * member names (unknown, repeated and missing members are errors), arrays, strings (strict UTF-8, escapes, paired
 * surrogates), integers in the exact range of their Rust type, finite floats, skipping any value the way
 * serde_json's {@code ignore_value} does, and whitespace. Every failure is a {@link Malformed} naming the byte.
 */
abstract class JsonReader {
    /** Not a v1 document's JSON (syntax, types, ranges, missing / unknown / duplicate fields). */
    static final class Malformed extends Exception {
        private static final long serialVersionUID = 1L;

        Malformed(String message) {
            super(message, null, false, false);
        }
    }

    private static final long U32_MAX = 0xffff_ffffL;
    /** floor((2^64 - 1) / 10); the remainder is 5. */
    private static final long U64_MAX_DIV_10 = 1844674407370955161L;


    final byte[] b;
    int pos;

    JsonReader(byte[] bytes) {
        this.b = bytes;
    }

    // ---------------------------------------------------------------------------------------------------------
    // Objects and arrays of known shape.

    /** serde's {@code Obj}: only a JSON object (not the array form serde's derive also takes). */
    void expectObjectStart() throws Malformed {
        if (peekValueStart() != '{') {
            throw error("invalid type: expected a JSON object");
        }
        pos++;
    }

    @FunctionalInterface
    interface Member {
        void read(int field) throws Malformed;
    }

    @FunctionalInterface
    interface Element {
        void read() throws Malformed;
    }

    /** An object with exactly the members {@code names}, in any order, each once; {@code member} reads values. */
    void readStruct(String[] names, Member member) throws Malformed {
        requireAll(names, readObject(names, names.length, member));
    }

    /**
     * An object of some of the first {@code known} of {@code names}, in any order, each at most once (others are
     * unknown fields); {@code member} reads values. Returns the members present (bit i: {@code names[i]}), for the
     * caller to check.
     */
    int readObject(String[] names, int known, Member member) throws Malformed {
        expectObjectStart();
        int seen = 0;
        if (peekWs() == '}') {
            pos++;
        } else {
            do {
                int field = field(names, known, seen);
                seen |= 1 << field;
                member.read(field);
            } while (moreFields());
        }
        return seen;
    }

    /**
     * {@link #readObject} for handoff values (spec 9.1): members not in {@code names} are skipped, not rejected; a
     * repeated member is still an error.
     */
    int readObjectSkippingUnknown(String[] names, Member member) throws Malformed {
        expectObjectStart();
        int seen = 0;
        if (peekWs() == '}') {
            pos++;
            return seen;
        }
        do {
            expectWs('"');
            String key = readStringBody();
            expectWs(':');
            int field = List.of(names).indexOf(key);
            if (field < 0) {
                skipValue();
                continue;
            }
            if ((seen & (1 << field)) != 0) {
                throw error("duplicate field `" + key + "`");
            }
            seen |= 1 << field;
            member.read(field);
        } while (moreFields());
        return seen;
    }

    /** An array; {@code element} reads each element. */
    void readArray(Element element) throws Malformed {
        expectWs('[');
        if (peekWs() == ']') {
            pos++;
            return;
        }
        do {
            element.read();
        } while (moreElements());
    }

    /** Reads {@code "name":} and returns the field's index; unknown or repeated fields are errors. */
    private int field(String[] names, int known, int seen) throws Malformed {
        expectWs('"');
        String key = readStringBody();
        for (int i = 0; i < known; i++) {
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
    boolean moreFields() throws Malformed {
        return more('}');
    }

    /** After an element: true if {@code ,} (another element follows), false on {@code ]}. */
    private boolean moreElements() throws Malformed {
        return more(']');
    }

    /** True if {@code ,} follows, false on {@code close}; anything else is an error. */
    private boolean more(char close) throws Malformed {
        int c = nextWs();
        if (c == ',') {
            return true;
        }
        if (c == close) {
            return false;
        }
        throw error("expected `,` or `" + close + "`");
    }

    void requireAll(String[] names, int seen) throws Malformed {
        for (int i = 0; i < names.length; i++) {
            if ((seen & (1 << i)) == 0) {
                throw error("missing field `" + names[i] + "`");
            }
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // Scalars.

    /** A JSON string, strictly: valid UTF-8, no control characters, valid escapes, paired surrogates. */
    String readString() throws Malformed {
        if (peekValueStart() != '"') {
            throw error("invalid type: expected a string");
        }
        pos++;
        return readStringBody();
    }

    /** The rest of a string whose opening quote was consumed. */
    String readStringBody() throws Malformed {
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
            int c = nextStringByte();
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
            n = escape(buf, n);
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

    /**
     * After a backslash: one escape, decoded into {@code buf} at {@code n} (returns the new length); with
     * {@code buf == null} only checked, as serde_json's {@code ignore_str} does (surrogates of a {@code \\u}
     * escape are not).
     */
    private int escape(byte[] buf, int n) throws Malformed {
        if (pos >= b.length) {
            throw error("EOF while parsing a string");
        }
        int e = b[pos++];
        byte out;
        switch (e) {
            case '"':
            case '\\':
            case '/':
                out = (byte) e;
                break;
            case 'b':
                out = '\b';
                break;
            case 'f':
                out = '\f';
                break;
            case 'n':
                out = '\n';
                break;
            case 'r':
                out = '\r';
                break;
            case 't':
                out = '\t';
                break;
            case 'u':
                if (buf == null) {
                    hex4();
                    return n;
                }
                return unicodeEscape(buf, n);
            default:
                throw error("invalid escape");
        }
        if (buf != null) {
            buf[n++] = out;
        }
        return n;
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
    int readU32() throws Malformed {
        long v = readUnsigned();
        if (Long.compareUnsigned(v, U32_MAX) > 0) {
            throw error("invalid value: integer `" + Long.toUnsignedString(v) + "`, expected u32");
        }
        return (int) v;
    }

    /** A {@code u64}: a plain JSON integer in 0..=18446744073709551615, returned as its 64 bits. */
    long readU64() throws Malformed {
        return readUnsigned();
    }

    long readUnsigned() throws Malformed {
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
    double readF64() throws Malformed {
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

    void skipValue() throws Malformed {
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
                case '{':
                    if (peekWs() == (c == '[' ? ']' : '}')) {
                        pos++;
                    } else {
                        stack = push(stack, depth++, (byte) c);
                        if (c == '{') {
                            skipKey();
                        }
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
            int c = nextStringByte();
            if (c == '"') {
                return;
            }
            if (c < 0x20) {
                throw error("control character (\\u0000-\\u001F) found while parsing a string");
            }
            if (c == '\\') {
                escape(null, 0);
            }
        }
    }

    /** The next byte of a string, consumed; the end of input is an error. */
    private int nextStringByte() throws Malformed {
        if (pos >= b.length) {
            throw error("EOF while parsing a string");
        }
        return b[pos++] & 0xff;
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
    int peekWs() {
        skipWs();
        return peekByte();
    }

    private int peekByte() {
        return pos < b.length ? b[pos] & 0xff : -1;
    }

    /** Like {@link #peekWs} but the end of input is an error (a value was expected). */
    int peekValueStart() throws Malformed {
        int c = peekWs();
        if (c < 0) {
            throw error("EOF while parsing a value");
        }
        return c;
    }

    /** The next non-whitespace byte, consumed; the end of input is an error. */
    int nextWs() throws Malformed {
        int c = peekValueStart();
        pos++;
        return c;
    }

    void expectWs(char want) throws Malformed {
        int c = nextWs();
        if (c != want) {
            throw error("expected `" + want + "`");
        }
    }

    /** Only whitespace may follow the document. */
    void end() throws Malformed {
        skipWs();
        if (pos != b.length) {
            throw error("trailing characters");
        }
    }

    static boolean isDigit(int c) {
        return c >= '0' && c <= '9';
    }

    Malformed error(String what) {
        return new Malformed(what + " at byte " + pos);
    }
}
