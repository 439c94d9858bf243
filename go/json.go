package dkg

import (
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
)

// A strict reader of the assignment document that accepts and rejects exactly what the Rust decoder
// (serde_json with deny_unknown_fields) does; a port of the Java plug-in's StrictJson. Generic JSON
// libraries (encoding/json included) take duplicate members, invalid UTF-8 and case-insensitive
// names, which the spec rejects. It reads in two passes: readHeader (format and version, every other
// value skipped with grammar checks only, spec 4.4 steps 2-3) and readDocument (everything).

// errMalformed carries the parser's message; the caller maps it to ReasonMalformedJSON.
type errMalformed struct{ msg string }

func (e *errMalformed) Error() string { return e.msg }

type jsonReader struct {
	b   []byte
	pos int
}

func (r *jsonReader) fail(what string) error {
	return &errMalformed{what + " at byte " + strconv.Itoa(r.pos)}
}

// header is pass 1.
type header struct {
	format  string
	version uint64
}

func readHeader(b []byte) (header, error) {
	r := &jsonReader{b: b}
	var h header
	haveFormat, haveVersion := false, false
	c, err := r.peekValueStart()
	if err != nil {
		return h, err
	}
	if c != '{' {
		return h, r.fail("invalid type: expected struct Header")
	}
	r.pos++
	if r.peekWs() == '}' {
		r.pos++
	} else {
		for {
			if err := r.expectWs('"'); err != nil {
				return h, err
			}
			key, err := r.readStringBody()
			if err != nil {
				return h, err
			}
			if err := r.expectWs(':'); err != nil {
				return h, err
			}
			switch key {
			case "format":
				if haveFormat {
					return h, r.fail("duplicate field `format`")
				}
				if h.format, err = r.readString(); err != nil {
					return h, err
				}
				haveFormat = true
			case "version":
				if haveVersion {
					return h, r.fail("duplicate field `version`")
				}
				if h.version, err = r.readU64(); err != nil {
					return h, err
				}
				haveVersion = true
			default:
				if err := r.skipValue(); err != nil {
					return h, err
				}
			}
			next, err := r.nextWs()
			if err != nil {
				return h, err
			}
			if next == '}' {
				break
			}
			if next != ',' {
				return h, r.fail("expected `,` or `}`")
			}
		}
	}
	if err := r.end(); err != nil {
		return h, err
	}
	if !haveFormat {
		return h, r.fail("missing field `format`")
	}
	if !haveVersion {
		return h, r.fail("missing field `version`")
	}
	return h, nil
}

const (
	kindAssignment = "assignment"
	kindRetraction = "retraction"
	kindGeneration = "generation"
)

// heavyIn is a heavy entry as read (key still base64; split nil for a whole key).
type heavyIn struct {
	keyB64    string
	partition uint32
	weight    uint64
	split     []SplitPart
	isSplit   bool
}

// document is pass 2: every member, unvalidated beyond its JSON type and integer range.
type document struct {
	kind          string
	version       uint64
	generation    *string
	tableB64      *string
	tableWidth    uint32
	topic         string
	partitions    uint32
	epoch         uint64
	seed          uint32
	buckets       uint32
	table         []uint32
	heavy         []heavyIn
	theta         float64
	epsilon       float64
	mu            float64
	windowRecords uint64
	createdAtMs   uint64
	predictedLoad []float64
}

var docFields = []string{
	"format", "version", "topic", "partitions", "epoch", "bucket_hash", "buckets", "table", "heavy", "params",
	"created_at_ms", "predicted_load", "kind", "generation", "table_b64", "table_width",
}

const (
	v1Fields            = 12
	fTable              = 1 << 7
	fKind               = 1 << 12
	fGeneration         = 1 << 13
	fTableB64           = 1 << 14
	fTableWidth         = 1 << 15
	fFormatVersion      = 0b11
	fAssignmentCore     = 0b1111_0111_1111
	fRetractionRequired = fFormatVersion | fKind | 1<<2 | 1<<4 | 1<<10
	fGenerationRequired = fFormatVersion | fKind | fGeneration
)

func readDocument(b []byte, version uint64) (*document, error) {
	r := &jsonReader{b: b}
	d := &document{kind: kindAssignment, version: version}
	known := len(docFields)
	if version == 1 {
		known = v1Fields
	}
	seen, err := r.readObject(docFields, known, func(field int) error {
		var err error
		switch field {
		case 0:
			_, err = r.readString()
		case 1:
			_, err = r.readU64()
		case 2:
			d.topic, err = r.readString()
		case 3:
			d.partitions, err = r.readU32()
		case 4:
			d.epoch, err = r.readU64()
		case 5:
			d.seed, err = r.readBucketHash()
		case 6:
			d.buckets, err = r.readU32()
		case 7:
			d.table, err = r.readU32Array()
		case 8:
			d.heavy, err = r.readHeavy(version)
		case 9:
			err = r.readParams(d)
		case 10:
			d.createdAtMs, err = r.readU64()
		case 11:
			d.predictedLoad, err = r.readF64Array()
		case 12:
			d.kind, err = r.readString()
		case 13:
			var s string
			s, err = r.readString()
			d.generation = &s
		case 14:
			var s string
			s, err = r.readString()
			d.tableB64 = &s
		default:
			d.tableWidth, err = r.readU32()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	if err := r.checkMembers(d, seen, version); err != nil {
		return nil, err
	}
	return d, nil
}

// checkMembers: the member set of the document's kind; a member its kind lacks is unknown.
func (r *jsonReader) checkMembers(d *document, seen int, version uint64) error {
	var required, optional int
	switch d.kind {
	case kindAssignment:
		table := fTable
		if seen&fTableB64 != 0 {
			table = fTableB64 | fTableWidth
		}
		if seen&fTable != 0 && seen&fTableB64 != 0 {
			return r.fail("both `table` and `table_b64`: a document has exactly one of them")
		}
		required = fAssignmentCore | table
		if version != 1 {
			optional = fKind | fGeneration
		}
	case kindRetraction:
		required = fRetractionRequired
		optional = fGeneration
	case kindGeneration:
		required = fGenerationRequired
	default:
		return r.fail("unknown variant `" + display(d.kind) + "`, expected `assignment`, `retraction` or `generation`")
	}
	for i, name := range docFields {
		bit := 1 << i
		if seen&bit != 0 && required&bit == 0 && optional&bit == 0 {
			return r.fail("unknown field `" + name + "` in a document of kind `" + d.kind + "`")
		}
	}
	for i, name := range docFields {
		if required&(1<<i) != 0 && seen&(1<<i) == 0 {
			return r.fail("missing field `" + name + "`")
		}
	}
	return nil
}

var bucketFields = []string{"function", "seed"}

func (r *jsonReader) readBucketHash() (uint32, error) {
	var function string
	var seed uint32
	err := r.readStruct(bucketFields, func(field int) error {
		var err error
		if field == 0 {
			function, err = r.readString()
		} else {
			seed, err = r.readU32()
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	if function != "murmur2" {
		return 0, r.fail("unknown variant `" + display(function) + "`, expected `murmur2`")
	}
	return seed, nil
}

var heavyFields = []string{"key_b64", "partition", "weight", "split"}
var splitFields = []string{"partition", "weight"}

const (
	hPartition = 1 << 1
	hSplit     = 1 << 3
)

func (r *jsonReader) readHeavy(version uint64) ([]heavyIn, error) {
	var out []heavyIn
	known := len(heavyFields)
	if version == 1 {
		known = 3
	}
	err := r.readArray(func() error {
		var h heavyIn
		seen, err := r.readObject(heavyFields, known, func(field int) error {
			var err error
			switch field {
			case 0:
				h.keyB64, err = r.readString()
			case 1:
				h.partition, err = r.readU32()
			case 2:
				h.weight, err = r.readU64()
			default:
				h.split = []SplitPart{}
				err = r.readArray(func() error {
					var p SplitPart
					err := r.readStruct(splitFields, func(f int) error {
						v, err := r.readU32()
						if f == 0 {
							p.Partition = v
						} else {
							p.Weight = v
						}
						return err
					})
					h.split = append(h.split, p)
					return err
				})
			}
			return err
		})
		if err != nil {
			return err
		}
		h.isSplit = seen&hSplit != 0
		if h.isSplit && seen&hPartition != 0 {
			return r.fail("a heavy entry has both `partition` and `split`")
		}
		extra := hSplit
		if h.isSplit {
			extra |= hPartition
		}
		if err := r.requireAll(heavyFields, seen|extra); err != nil {
			return err
		}
		out = append(out, h)
		return nil
	})
	return out, err
}

var paramFields = []string{"theta", "epsilon", "mu", "window_records"}

func (r *jsonReader) readParams(d *document) error {
	return r.readStruct(paramFields, func(field int) error {
		var err error
		switch field {
		case 0:
			d.theta, err = r.readF64()
		case 1:
			d.epsilon, err = r.readF64()
		case 2:
			d.mu, err = r.readF64()
		default:
			d.windowRecords, err = r.readU64()
		}
		return err
	})
}

func (r *jsonReader) readU32Array() ([]uint32, error) {
	out := []uint32{}
	err := r.readArray(func() error {
		v, err := r.readU32()
		out = append(out, v)
		return err
	})
	return out, err
}

func (r *jsonReader) readF64Array() ([]float64, error) {
	out := []float64{}
	err := r.readArray(func() error {
		v, err := r.readF64()
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
