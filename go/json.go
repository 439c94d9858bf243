package dkg

// A strict reader of the assignment document that accepts and rejects exactly what the Rust decoder
// (serde_json with deny_unknown_fields) does; a port of the Java plug-in's StrictJson. Generic JSON
// libraries (encoding/json included) take duplicate members, invalid UTF-8 and case-insensitive
// names, which the spec rejects. It reads in two passes: readHeader (format and version, every other
// value skipped with grammar checks only, spec 4.4 steps 2-3) and readDocument (everything).

// errMalformed carries the parser's message; the caller maps it to ReasonMalformedJSON.
type errMalformed struct{ msg string }

func (e *errMalformed) Error() string { return e.msg }

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
