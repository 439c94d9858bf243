package dkg

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
)

// The JSON grammar under the document reader of json.go: objects with known member names (duplicates,
// unknown and missing members rejected), arrays, strings (escapes and UTF-8 checked), numbers in the
// ranges the spec allows, and skipping any value with grammar checks only. The same rules as the Java
// plug-in's StrictJson and serde_json.

type jsonReader struct {
	b   []byte
	pos int
}

func (r *jsonReader) fail(what string) error {
	return &errMalformed{what + " at byte " + strconv.Itoa(r.pos)}
}

func (r *jsonReader) readU32Array() ([]uint32, error) {
	return readArrayOf(r, r.readU32)
}

func (r *jsonReader) readF64Array() ([]float64, error) {
	return readArrayOf(r, r.readF64)
}

// readArrayOf reads an array whose elements read reads.
func readArrayOf[T any](r *jsonReader, read func() (T, error)) ([]T, error) {
	out := []T{}
	err := r.readArray(func() error {
		v, err := read()
		out = append(out, v)
		return err
	})
	return out, err
}

// ---- objects and arrays of known shape

func (r *jsonReader) readStruct(names []string, member func(int) error) error {
	seen, err := r.readObject(names, len(names), member)
	if err != nil {
		return err
	}
	return r.requireAll(names, seen)
}

// readObject reads an object of some of the first known names, each at most once, in any order;
// returns the members present as bits.
func (r *jsonReader) readObject(names []string, known int, member func(int) error) (int, error) {
	c, err := r.peekValueStart()
	if err != nil {
		return 0, err
	}
	if c != '{' {
		return 0, r.fail("invalid type: expected a JSON object")
	}
	r.pos++
	seen := 0
	if r.peekWs() == '}' {
		r.pos++
		return 0, nil
	}
	for {
		field, err := r.field(names, known, seen)
		if err != nil {
			return 0, err
		}
		seen |= 1 << field
		if err := member(field); err != nil {
			return 0, err
		}
		c, err := r.nextWs()
		if err != nil {
			return 0, err
		}
		if c == '}' {
			return seen, nil
		}
		if c != ',' {
			return 0, r.fail("expected `,` or `}`")
		}
	}
}

func (r *jsonReader) readArray(element func() error) error {
	if err := r.expectWs('['); err != nil {
		return err
	}
	if r.peekWs() == ']' {
		r.pos++
		return nil
	}
	for {
		if err := element(); err != nil {
			return err
		}
		c, err := r.nextWs()
		if err != nil {
			return err
		}
		if c == ']' {
			return nil
		}
		if c != ',' {
			return r.fail("expected `,` or `]`")
		}
	}
}

func (r *jsonReader) field(names []string, known, seen int) (int, error) {
	if err := r.expectWs('"'); err != nil {
		return 0, err
	}
	key, err := r.readStringBody()
	if err != nil {
		return 0, err
	}
	for i := 0; i < known; i++ {
		if names[i] == key {
			if seen&(1<<i) != 0 {
				return 0, r.fail("duplicate field `" + key + "`")
			}
			if err := r.expectWs(':'); err != nil {
				return 0, err
			}
			return i, nil
		}
	}
	return 0, r.fail("unknown field `" + display(key) + "`")
}

func (r *jsonReader) requireAll(names []string, seen int) error {
	for i, name := range names {
		if seen&(1<<i) == 0 {
			return r.fail("missing field `" + name + "`")
		}
	}
	return nil
}

// ---- scalars

func (r *jsonReader) readString() (string, error) {
	c, err := r.peekValueStart()
	if err != nil {
		return "", err
	}
	if c != '"' {
		return "", r.fail("invalid type: expected a string")
	}
	r.pos++
	return r.readStringBody()
}

// readStringBody reads the rest of a string whose opening quote was consumed: valid UTF-8, no
// control characters, valid escapes, paired surrogates.
func (r *jsonReader) readStringBody() (string, error) {
	start := r.pos
	b := r.b
	for r.pos < len(b) {
		c := b[r.pos]
		if c == '"' {
			s := b[start:r.pos]
			r.pos++
			if !utf8.Valid(s) {
				return "", r.fail("invalid unicode code point")
			}
			return string(s), nil
		}
		if c < 0x20 || c == '\\' {
			break
		}
		r.pos++
	}
	buf := append([]byte(nil), b[start:r.pos]...)
	for {
		if r.pos >= len(b) {
			return "", r.fail("EOF while parsing a string")
		}
		c := b[r.pos]
		r.pos++
		if c == '"' {
			break
		}
		if c < 0x20 {
			return "", r.fail("control character (\\u0000-\\u001F) found while parsing a string")
		}
		if c != '\\' {
			buf = append(buf, c)
			continue
		}
		var err error
		if buf, err = r.escape(buf, true); err != nil {
			return "", err
		}
	}
	if !utf8.Valid(buf) {
		return "", r.fail("invalid unicode code point")
	}
	return string(buf), nil
}

// escape handles one escape after a backslash, appended to buf if decode; else only checked (as
// serde_json's ignore_str: surrogates of a \u escape are not checked).
func (r *jsonReader) escape(buf []byte, decode bool) ([]byte, error) {
	if r.pos >= len(r.b) {
		return buf, r.fail("EOF while parsing a string")
	}
	e := r.b[r.pos]
	r.pos++
	var out byte
	switch e {
	case '"', '\\', '/':
		out = e
	case 'b':
		out = '\b'
	case 'f':
		out = '\f'
	case 'n':
		out = '\n'
	case 'r':
		out = '\r'
	case 't':
		out = '\t'
	case 'u':
		cp, err := r.hex4()
		if err != nil || !decode {
			return buf, err
		}
		if cp >= 0xDC00 && cp <= 0xDFFF {
			return buf, r.fail("lone leading surrogate in hex escape")
		}
		if cp >= 0xD800 && cp <= 0xDBFF {
			if r.pos+1 >= len(r.b) || r.b[r.pos] != '\\' || r.b[r.pos+1] != 'u' {
				return buf, r.fail("unexpected end of hex escape")
			}
			r.pos += 2
			low, err := r.hex4()
			if err != nil {
				return buf, err
			}
			if low < 0xDC00 || low > 0xDFFF {
				return buf, r.fail("lone leading surrogate in hex escape")
			}
			cp = ((cp-0xD800)<<10 | (low - 0xDC00)) + 0x10000
		}
		return utf8.AppendRune(buf, rune(cp)), nil
	default:
		return buf, r.fail("invalid escape")
	}
	if decode {
		buf = append(buf, out)
	}
	return buf, nil
}

func (r *jsonReader) hex4() (int, error) {
	if r.pos+4 > len(r.b) {
		return 0, r.fail("EOF while parsing a string")
	}
	v := 0
	for i := 0; i < 4; i++ {
		c := r.b[r.pos]
		r.pos++
		var d int
		switch {
		case c >= '0' && c <= '9':
			d = int(c - '0')
		case c >= 'a' && c <= 'f':
			d = int(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = int(c-'A') + 10
		default:
			return 0, r.fail("invalid escape")
		}
		v = v<<4 | d
	}
	return v, nil
}

func (r *jsonReader) readU32() (uint32, error) {
	v, err := r.readU64()
	if err != nil {
		return 0, err
	}
	if v > math.MaxUint32 {
		return 0, r.fail("invalid value: integer `" + strconv.FormatUint(v, 10) + "`, expected u32")
	}
	return uint32(v), nil
}

// readU64 reads a plain JSON integer in 0..=2^64-1 (no sign, fraction or exponent).
func (r *jsonReader) readU64() (uint64, error) {
	c, err := r.peekValueStart()
	if err != nil {
		return 0, err
	}
	if c == '-' {
		if err := r.scanNumber(); err != nil {
			return 0, err
		}
		return 0, r.fail("invalid value: expected an unsigned integer")
	}
	if !isDigit(c) {
		return 0, r.fail("invalid type: expected an unsigned integer")
	}
	start := r.pos
	var v uint64
	overflow := false
	if c == '0' {
		r.pos++
	} else {
		for r.pos < len(r.b) && isDigit(int(r.b[r.pos])) {
			d := uint64(r.b[r.pos] - '0')
			if v > (math.MaxUint64-d)/10 {
				overflow = true
			}
			v = v*10 + d
			r.pos++
		}
	}
	if r.pos < len(r.b) {
		n := r.b[r.pos]
		if n == '.' || n == 'e' || n == 'E' || (c == '0' && isDigit(int(n))) {
			r.pos = start
			if err := r.scanNumber(); err != nil {
				return 0, err
			}
			return 0, r.fail("invalid type: floating point, expected an unsigned integer")
		}
	}
	if overflow {
		// serde_json reads an integer past u64 as a float: a type error for an integer field.
		return 0, r.fail("invalid type: floating point, expected an unsigned integer")
	}
	return v, nil
}

// readF64 reads any JSON number whose value is finite as the nearest double.
func (r *jsonReader) readF64() (float64, error) {
	c, err := r.peekValueStart()
	if err != nil {
		return 0, err
	}
	if c != '-' && !isDigit(c) {
		return 0, r.fail("invalid type: expected f64")
	}
	start := r.pos
	if err := r.scanNumber(); err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(string(r.b[start:r.pos]), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, r.fail("invalid number")
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, r.fail("number out of range")
	}
	return v, nil
}

// scanNumber skips one number, checking JSON's grammar.
func (r *jsonReader) scanNumber() error {
	b := r.b
	if r.pos < len(b) && b[r.pos] == '-' {
		r.pos++
	}
	if r.pos >= len(b) || !isDigit(int(b[r.pos])) {
		return r.fail("invalid number")
	}
	if b[r.pos] == '0' {
		r.pos++
		if r.pos < len(b) && isDigit(int(b[r.pos])) {
			return r.fail("invalid number")
		}
	} else {
		for r.pos < len(b) && isDigit(int(b[r.pos])) {
			r.pos++
		}
	}
	if r.pos < len(b) && b[r.pos] == '.' {
		r.pos++
		if r.pos >= len(b) || !isDigit(int(b[r.pos])) {
			return r.fail("invalid number")
		}
		for r.pos < len(b) && isDigit(int(b[r.pos])) {
			r.pos++
		}
	}
	if r.pos < len(b) && (b[r.pos] == 'e' || b[r.pos] == 'E') {
		r.pos++
		if r.pos < len(b) && (b[r.pos] == '+' || b[r.pos] == '-') {
			r.pos++
		}
		if r.pos >= len(b) || !isDigit(int(b[r.pos])) {
			return r.fail("invalid number")
		}
		for r.pos < len(b) && isDigit(int(b[r.pos])) {
			r.pos++
		}
	}
	return nil
}

// skipValue skips one value as serde_json's ignore_value: grammar checked, skipped strings not
// UTF-8-checked, numbers without range; iterative, so any nesting depth is fine.
func (r *jsonReader) skipValue() error {
	var stack []byte
	for {
		c, err := r.nextWs()
		if err != nil {
			return err
		}
		complete := true
		switch {
		case c == 'n':
			err = r.literal("ull")
		case c == 't':
			err = r.literal("rue")
		case c == 'f':
			err = r.literal("alse")
		case c == '"':
			err = r.skipStringBody()
		case c == '[':
			if r.peekWs() == ']' {
				r.pos++
			} else {
				stack = append(stack, '[')
				complete = false
			}
		case c == '{':
			if r.peekWs() == '}' {
				r.pos++
			} else {
				stack = append(stack, '{')
				err = r.skipKey()
				complete = false
			}
		case c == '-' || isDigit(c):
			r.pos--
			err = r.scanNumber()
		default:
			err = r.fail("expected value")
		}
		if err != nil {
			return err
		}
		if !complete {
			continue
		}
		another := false
		for len(stack) > 0 && !another {
			next, err := r.nextWs()
			if err != nil {
				return err
			}
			frame := stack[len(stack)-1]
			closer := int(']')
			if frame == '{' {
				closer = '}'
			}
			switch next {
			case ',':
				if frame == '{' {
					if err := r.skipKey(); err != nil {
						return err
					}
				}
				another = true
			case closer:
				stack = stack[:len(stack)-1]
			default:
				return r.fail("expected `,` or `" + string(rune(closer)) + "`")
			}
		}
		if len(stack) == 0 {
			return nil
		}
	}
}

func (r *jsonReader) skipKey() error {
	if err := r.expectWs('"'); err != nil {
		return err
	}
	if err := r.skipStringBody(); err != nil {
		return err
	}
	return r.expectWs(':')
}

func (r *jsonReader) skipStringBody() error {
	for {
		if r.pos >= len(r.b) {
			return r.fail("EOF while parsing a string")
		}
		c := r.b[r.pos]
		r.pos++
		if c == '"' {
			return nil
		}
		if c < 0x20 {
			return r.fail("control character (\\u0000-\\u001F) found while parsing a string")
		}
		if c == '\\' {
			if _, err := r.escape(nil, false); err != nil {
				return err
			}
		}
	}
}

func (r *jsonReader) literal(rest string) error {
	for i := 0; i < len(rest); i++ {
		if r.pos >= len(r.b) || r.b[r.pos] != rest[i] {
			return r.fail("expected ident")
		}
		r.pos++
	}
	return nil
}

// ---- whitespace and single bytes

func (r *jsonReader) skipWs() {
	for r.pos < len(r.b) {
		switch r.b[r.pos] {
		case ' ', '\n', '\t', '\r':
			r.pos++
		default:
			return
		}
	}
}

// peekWs returns the next non-whitespace byte without consuming it; -1 at the end.
func (r *jsonReader) peekWs() int {
	r.skipWs()
	if r.pos < len(r.b) {
		return int(r.b[r.pos])
	}
	return -1
}

func (r *jsonReader) peekValueStart() (int, error) {
	c := r.peekWs()
	if c < 0 {
		return 0, r.fail("EOF while parsing a value")
	}
	return c, nil
}

func (r *jsonReader) nextWs() (int, error) {
	c, err := r.peekValueStart()
	if err == nil {
		r.pos++
	}
	return c, err
}

func (r *jsonReader) expectWs(want byte) error {
	c, err := r.nextWs()
	if err != nil {
		return err
	}
	if c != int(want) {
		return r.fail("expected `" + string(want) + "`")
	}
	return nil
}

func (r *jsonReader) end() error {
	r.skipWs()
	if r.pos != len(r.b) {
		return r.fail("trailing characters")
	}
	return nil
}

func isDigit(c int) bool { return c >= '0' && c <= '9' }
