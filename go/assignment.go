// Package dkg places Kafka record keys exactly as the dkg wire specification (docs/spec.md) says:
// the strict decoder of assignment documents (versions 1 and 2) with every accept and reject rule,
// the lookup (heavy keys, split keys, the bucket table), Kafka's murmur2 placement as the fallback,
// the control-topic book and the partition-count rule. It is pure (no I/O, no dependencies); the
// router package follows the control topic with franz-go and adapts it to Go's Kafka clients.
package dkg

import (
	"bytes"
	"encoding/base64"
	"math"
	"math/bits"
	"sync/atomic"
)

// Limits of the spec (4.2, 4.6, 6.2).
const (
	FormatName          = "dkg.assignment"
	MaxFormatVersion    = 2
	MaxAssignmentBytes  = 8 * 1024 * 1024
	MaxPartitions       = 1_000_000
	MaxBuckets          = 1 << 22
	MaxHeavyKeys        = 1_000_000
	MaxHeavyPerBucket   = 16
	MaxKeyBytes         = 64 * 1024
	MaxHeavyKeyBytes    = 256 * 1024 * 1024
	MaxSplitParts       = 64
	MaxSplitWeightSum   = 4096
	MaxSplitWeightTotal = 1 << 20
	MaxTopicLen         = 249
	// MaxEpoch is the largest epoch accepted (2^53-1, exact in every language's double): a larger
	// one is out_of_range, checked after spec 4.4 step 11 and before step 12.
	MaxEpoch uint64 = 1<<53 - 1
)

// Route is how a key was placed (the route label of dkg_producer_records_total).
type Route int

// The routes of spec 5.
const (
	RouteFallback Route = iota
	RouteHeavy
	RouteBucket
	RouteSplit
)

var routeLabels = [...]string{"fallback", "heavy", "bucket", "split"}

// String is the metric label.
func (r Route) String() string {
	return labelOf(routeLabels[:], int(r))
}

// labelOf is value i's label of an enumeration whose labels are labels, "unknown" outside them.
func labelOf(labels []string, i int) string {
	if i >= 0 && i < len(labels) {
		return labels[i]
	}
	return "unknown"
}

// SplitPart is one part of a split heavy key (version 2).
type SplitPart struct {
	Partition uint32
	Weight    uint32
}

// HeavyKey is one heavy entry of a document: a whole key (Split nil) or a split key.
type HeavyKey struct {
	Key       []byte
	Partition uint32 // a split key's first part's partition
	Weight    uint64
	Split     []SplitPart
}

// ControlValue is a decoded control-topic value: *Assignment, *Retraction or *Generation.
type ControlValue interface{ kind() string }

// Retraction is a version 2 retraction document (spec 6.4): it retracts like a tombstone but keeps
// its epoch as the topic's floor.
type Retraction struct {
	Topic       string
	Epoch       uint64
	Generation  string // "" when absent
	CreatedAtMs uint64
}

// Generation is the control topic's @generation record (spec 6.4).
type Generation struct{ ID string }

func (*Retraction) kind() string { return kindRetraction }
func (*Generation) kind() string { return kindGeneration }
func (*Assignment) kind() string { return kindAssignment }

// Assignment is a validated assignment document with its lookup index. Immutable, but for the
// per-instance record counts of split keys (shared by all goroutines using it).
type Assignment struct {
	Version       uint64
	Topic         string
	Partitions    uint32
	Epoch         uint64
	Seed          uint32
	Table         []uint32
	Heavy         []HeavyKey
	Theta         float64
	Epsilon       float64
	Mu            float64
	WindowRecords uint64
	CreatedAtMs   uint64
	PredictedLoad []float64
	Generation    string // "" when absent

	// The index, one word per bucket, so a light key costs one load and one compare: the murmur2
	// hash of the bucket's single heavy key (bits 0-31; for a bucket without one, a hash that cannot
	// fall in the bucket), the bucket's partition (bits 32-62) and bit 63 for a bucket of several
	// heavy keys. A hash match or bit 63 takes the slow path: entries[start[b]:start[b+1]], at most 16
	// (a bounded scan), compared by hash, length and bytes.
	slots   []uint64
	start   []uint32
	entries []entry
	splits  []*splitKey
	// fastmod multiplier of len(Table) (Lemire, Kaser, Kurz 2019): the bucket without a division.
	mult uint64
}

// entry: a heavy key and its answer, the partition (>= 0) or -1-s for split key s.
type entry struct {
	key    string
	hash   uint32 // murmur2(key, seed): most misses end at this compare
	answer int32
}

type splitKey struct {
	parts []uint32
	order []uint8
	n     atomic.Uint64
	_     [40]byte // keeps counters of different keys off one cache line
}

// Decode decodes and validates a control-topic value of any kind (spec 4.4, 4.6, 6.4). A failure
// is an *Error with the spec's reason.
func Decode(value []byte) (ControlValue, error) {
	if len(value) > MaxAssignmentBytes {
		return nil, reject(ReasonOversize, "value is %d bytes, limit %d", len(value), MaxAssignmentBytes)
	}
	h, err := readHeader(value)
	if err != nil {
		return nil, reject(ReasonMalformedJSON, "malformed assignment JSON: %v", err)
	}
	if h.format != FormatName {
		return nil, reject(ReasonMalformedJSON, "not a DKG assignment: format %q", display(h.format))
	}
	if h.version != 1 && h.version != 2 {
		return nil, reject(ReasonUnsupportedVersion, "unsupported format version %d (this build reads 1 and 2)", h.version)
	}
	d, err := readDocument(value, h.version)
	if err != nil {
		return nil, reject(ReasonMalformedJSON, "malformed assignment JSON: %v", err)
	}
	switch d.kind {
	case kindRetraction:
		if err := validateTopic(d.topic); err != nil {
			return nil, err
		}
		if err := validateGeneration(d.generation); err != nil {
			return nil, err
		}
		if d.epoch > MaxEpoch {
			return nil, epochOutOfRange(d.epoch)
		}
		return &Retraction{Topic: d.topic, Epoch: d.epoch, Generation: deref(d.generation), CreatedAtMs: d.createdAtMs}, nil
	case kindGeneration:
		if err := validateGeneration(d.generation); err != nil {
			return nil, err
		}
		return &Generation{ID: *d.generation}, nil
	}
	if d.tableB64 != nil {
		if d.table, err = compactTable(d); err != nil {
			return nil, err
		}
	}
	if uint64(len(d.table)) != uint64(d.buckets) {
		return nil, reject(ReasonInvalid, "bucket table has %d entries, expected %d", len(d.table), d.buckets)
	}
	keys := make([][]byte, len(d.heavy))
	for i, h := range d.heavy {
		if keys[i], err = decodeBase64(h.keyB64); err != nil {
			return nil, reject(ReasonInvalid, "heavy key #%d: invalid base64: not canonical padded base64", i)
		}
	}
	if err := validateGeneration(d.generation); err != nil {
		return nil, err
	}
	return build(d, keys)
}

// DecodeAssignment decodes an assignment document; another kind of valid value is invalid here.
func DecodeAssignment(value []byte) (*Assignment, error) {
	v, err := Decode(value)
	if err != nil {
		return nil, err
	}
	a, ok := v.(*Assignment)
	if !ok {
		return nil, reject(ReasonInvalid, "a %s document, not an assignment", v.kind())
	}
	return a, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func epochOutOfRange(epoch uint64) *Error {
	return reject(ReasonOutOfRange, "epoch %d is above 2^53-1", epoch)
}

// tooLarge is a limit inside the document: oversize in version 1 (gap G2), invalid in version 2.
func tooLarge(d *document, what string, actual, limit uint64) *Error {
	r := ReasonOversize
	if d.version != 1 {
		r = ReasonInvalid
	}
	return reject(r, "assignment too large: %s is %d, limit %d", what, actual, limit)
}

func outOfRange(p, partitions uint32) *Error {
	return reject(ReasonOutOfRange, "partition %d out of range (the document has %d partitions)", p, partitions)
}

func build(d *document, keys [][]byte) (*Assignment, error) {
	if err := validateTopic(d.topic); err != nil {
		return nil, err
	}
	if d.partitions == 0 {
		return nil, reject(ReasonInvalid, "partitions must be at least 1")
	}
	if d.partitions > MaxPartitions {
		return nil, tooLarge(d, "partitions", uint64(d.partitions), MaxPartitions)
	}
	if len(d.table) == 0 {
		return nil, reject(ReasonInvalid, "the bucket table must have at least 1 bucket")
	}
	if len(d.table) > MaxBuckets {
		return nil, tooLarge(d, "buckets", uint64(len(d.table)), MaxBuckets)
	}
	if d.epoch > MaxEpoch {
		return nil, epochOutOfRange(d.epoch)
	}
	for _, p := range d.table {
		if p >= d.partitions {
			return nil, outOfRange(p, d.partitions)
		}
	}
	if len(d.heavy) > MaxHeavyKeys {
		return nil, tooLarge(d, "heavy keys", uint64(len(d.heavy)), MaxHeavyKeys)
	}
	heavy := make([]HeavyKey, len(d.heavy))
	var keyBytes, splitWeight uint64
	splitCount := 0
	for i, h := range d.heavy {
		if len(keys[i]) > MaxKeyBytes {
			return nil, tooLarge(d, "heavy key bytes", uint64(len(keys[i])), MaxKeyBytes)
		}
		if !h.isSplit && h.partition >= d.partitions {
			return nil, outOfRange(h.partition, d.partitions)
		}
		heavy[i] = HeavyKey{Key: keys[i], Partition: h.partition, Weight: h.weight}
		if h.isSplit {
			if err := validateSplit(d, h.split); err != nil {
				return nil, err
			}
			heavy[i].Split = h.split
			heavy[i].Partition = h.split[0].Partition
			for _, p := range h.split {
				splitWeight += uint64(p.Weight)
			}
			splitCount++
		}
		keyBytes += uint64(len(keys[i]))
	}
	if keyBytes > MaxHeavyKeyBytes {
		return nil, tooLarge(d, "total heavy key bytes", keyBytes, MaxHeavyKeyBytes)
	}
	if splitWeight > MaxSplitWeightTotal {
		return nil, reject(ReasonInvalid, "the split weights of all keys sum to %d, limit %d", splitWeight, MaxSplitWeightTotal)
	}
	if uint64(len(d.predictedLoad)) != uint64(d.partitions) {
		return nil, reject(ReasonInvalid, "predicted_load has %d entries, expected %d", len(d.predictedLoad), d.partitions)
	}
	for i, v := range d.predictedLoad {
		if !finiteNonNegative(v) {
			return nil, reject(ReasonInvalid, "predicted_load[%d] = %v is not a finite non-negative share", i, v)
		}
	}
	for i, v := range []float64{d.theta, d.epsilon, d.mu} {
		if !finiteNonNegative(v) {
			return nil, reject(ReasonInvalid, "params.%s = %v is not a finite non-negative number",
				[]string{"theta", "epsilon", "mu"}[i], v)
		}
	}
	a := &Assignment{
		Version: d.version, Topic: d.topic, Partitions: d.partitions, Epoch: d.epoch, Seed: d.seed,
		Table: d.table, Heavy: heavy, Theta: d.theta, Epsilon: d.epsilon, Mu: d.mu,
		WindowRecords: d.windowRecords, CreatedAtMs: d.createdAtMs, PredictedLoad: d.predictedLoad,
		Generation: deref(d.generation),
	}
	if err := a.index(splitCount); err != nil {
		return nil, err
	}
	return a, nil
}

// index builds the bucket -> heavy keys index and checks step 18 bucket by bucket (ascending): at
// most 16 heavy keys, then no key twice (byte-equal keys share a bucket).
func (a *Assignment) index(splitCount int) error {
	buckets := uint32(len(a.Table))
	a.mult = ^uint64(0)/uint64(buckets) + 1
	a.slots = make([]uint64, buckets)
	for b, p := range a.Table {
		// A hash no key of bucket b has (its bucket is b+1); with one bucket any value will do,
		// the slow path then finds no heavy key.
		a.slots[b] = uint64(p)<<32 | uint64((uint32(b)+1)%buckets)
	}
	if len(a.Heavy) == 0 {
		return nil
	}
	bucketOf := make([]uint32, len(a.Heavy))
	start := make([]uint32, buckets+1)
	for i, h := range a.Heavy {
		bucketOf[i] = Bucket(h.Key, a.Seed, buckets)
		start[bucketOf[i]+1]++
	}
	for b := uint32(0); b < buckets; b++ {
		start[b+1] += start[b]
	}
	next := append([]uint32(nil), start[:buckets]...)
	sorted := make([]int, len(a.Heavy))
	for i := range a.Heavy {
		sorted[next[bucketOf[i]]] = i
		next[bucketOf[i]]++
	}
	for b := uint32(0); b < buckets; b++ {
		from, to := start[b], start[b+1]
		if to-from > MaxHeavyPerBucket {
			return reject(ReasonInvalid, "bucket %d holds %d heavy keys, at most %d are allowed", b, to-from, MaxHeavyPerBucket)
		}
		for x := from + 1; x < to; x++ {
			for y := from; y < x; y++ {
				if bytes.Equal(a.Heavy[sorted[x]].Key, a.Heavy[sorted[y]].Key) {
					return reject(ReasonInvalid, "heavy key listed twice (base64 %s)",
						display(base64.StdEncoding.EncodeToString(a.Heavy[sorted[x]].Key)))
				}
			}
		}
	}
	a.entries = make([]entry, len(a.Heavy))
	a.splits = make([]*splitKey, 0, splitCount)
	schedules := map[string][]uint8{}
	for at, i := range sorted {
		h := a.Heavy[i]
		a.entries[at] = entry{key: string(h.Key), hash: Murmur2(h.Key, a.Seed), answer: int32(h.Partition)}
	}
	// Split keys are numbered in document order.
	splitIndex := make([]int32, len(a.Heavy))
	for i, h := range a.Heavy {
		if h.Split == nil {
			continue
		}
		w := make([]uint32, len(h.Split))
		parts := make([]uint32, len(h.Split))
		for j, p := range h.Split {
			w[j], parts[j] = p.Weight, p.Partition
		}
		sig := string(weightsKey(w))
		order, ok := schedules[sig]
		if !ok {
			order = Schedule(w)
			schedules[sig] = order
		}
		splitIndex[i] = int32(len(a.splits))
		a.splits = append(a.splits, &splitKey{parts: parts, order: order})
	}
	for at, i := range sorted {
		if a.Heavy[i].Split != nil {
			a.entries[at].answer = -1 - splitIndex[i]
		}
	}
	a.start = start
	for b := uint32(0); b < buckets; b++ {
		switch start[b+1] - start[b] {
		case 0:
		case 1:
			a.slots[b] = uint64(a.Table[b])<<32 | uint64(a.entries[start[b]].hash)
		default:
			a.slots[b] = uint64(a.Table[b])<<32 | 1<<63
		}
	}
	return nil
}

func weightsKey(w []uint32) []byte {
	out := make([]byte, 0, 4*len(w))
	for _, v := range w {
		out = append(out, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	return out
}

// Schedule is one period of the smooth weighted round robin over weights (spec 4.6), as part
// indices: each part i appears weights[i] times, evenly spread (3:1 gives 0 0 1 0).
func Schedule(weights []uint32) []uint8 {
	var sum int64
	for _, w := range weights {
		sum += int64(w)
	}
	credit := make([]int64, len(weights))
	order := make([]uint8, sum)
	for n := range order {
		best := 0
		for i, w := range weights {
			credit[i] += int64(w)
			if credit[i] > credit[best] {
				best = i
			}
		}
		credit[best] -= sum
		order[n] = uint8(best)
	}
	return order
}

// Lookup is the placement of key by this assignment (spec 5, the assignment in effect): the
// partition and its route. For a split key each call counts one record of the key. Never panics.
func (a *Assignment) Lookup(key []byte) (int32, Route) {
	h := Murmur2(key, a.Seed)
	// to_positive(h) % buckets by multiplication: exact for every 32-bit value (fastmod).
	b, _ := bits.Mul64(a.mult*uint64(ToPositive(h)), uint64(len(a.slots)))
	slot := a.slots[b]
	if uint32(slot) != h && int64(slot) >= 0 {
		return int32(slot >> 32), RouteBucket
	}
	if e := a.heavyIn(b, h, key); e != nil {
		if e.answer >= 0 {
			return e.answer, RouteHeavy
		}
		s := a.splits[-1-e.answer]
		n := s.n.Add(1) - 1
		return int32(s.parts[s.order[n%uint64(len(s.order))]]), RouteSplit
	}
	return int32((slot >> 32) & 0x7fffffff), RouteBucket
}

// heavyIn finds key among bucket b's heavy keys, or nil.
func (a *Assignment) heavyIn(b uint64, h uint32, key []byte) *entry {
	if a.start == nil {
		return nil
	}
	for i := a.start[b]; i < a.start[b+1]; i++ {
		e := &a.entries[i]
		if e.hash == h && len(e.key) == len(key) && e.key == string(key) {
			return e
		}
	}
	return nil
}

// RouteOf is the route Lookup takes for key, counting nothing.
func (a *Assignment) RouteOf(key []byte) Route {
	h := Murmur2(key, a.Seed)
	b, _ := bits.Mul64(a.mult*uint64(ToPositive(h)), uint64(len(a.slots)))
	if e := a.heavyIn(b, h, key); e != nil {
		if e.answer >= 0 {
			return RouteHeavy
		}
		return RouteSplit
	}
	return RouteBucket
}

// Place is the producer's placement of spec 5 over a topic of topicPartitions partitions: Kafka's
// murmur2 placement when a is nil or made for another partition count, else a's lookup. The result
// is in [0, topicPartitions) (0 when topicPartitions < 1).
func Place(a *Assignment, topicPartitions int, key []byte) (int, Route) {
	if a == nil || int64(a.Partitions) != int64(topicPartitions) {
		return KafkaPartition(key, topicPartitions), RouteFallback
	}
	p, r := a.Lookup(key)
	return int(p), r
}

// Equal compares decoded members (spec 6.3 rule 8): floats with == (-0.0 equals 0.0), the order of
// heavy included; the version is not a member that counts (a compact twin equals its JSON table).
func (a *Assignment) Equal(o *Assignment) bool {
	if a == o {
		return true
	}
	if a == nil || o == nil {
		return false
	}
	if a.Topic != o.Topic || a.Partitions != o.Partitions || a.Epoch != o.Epoch || a.Seed != o.Seed ||
		a.Theta != o.Theta || a.Epsilon != o.Epsilon || a.Mu != o.Mu || a.WindowRecords != o.WindowRecords ||
		a.CreatedAtMs != o.CreatedAtMs || a.Generation != o.Generation ||
		len(a.Table) != len(o.Table) || len(a.Heavy) != len(o.Heavy) || len(a.PredictedLoad) != len(o.PredictedLoad) {
		return false
	}
	for i := range a.Table {
		if a.Table[i] != o.Table[i] {
			return false
		}
	}
	for i := range a.PredictedLoad {
		if a.PredictedLoad[i] != o.PredictedLoad[i] {
			return false
		}
	}
	for i, h := range a.Heavy {
		g := o.Heavy[i]
		if !bytes.Equal(h.Key, g.Key) || h.Partition != g.Partition || h.Weight != g.Weight ||
			(h.Split == nil) != (g.Split == nil) || len(h.Split) != len(g.Split) {
			return false
		}
		for j := range h.Split {
			if h.Split[j] != g.Split[j] {
				return false
			}
		}
	}
	return true
}

func finiteNonNegative(v float64) bool { return !math.IsInf(v, 0) && !math.IsNaN(v) && v >= 0 }

func validateSplit(d *document, split []SplitPart) error {
	if len(split) < 2 || len(split) > MaxSplitParts {
		return reject(ReasonInvalid, "a split key has %d parts, it must have 2 to %d", len(split), MaxSplitParts)
	}
	var sum uint64
	for j, p := range split {
		if p.Partition >= d.partitions {
			return outOfRange(p.Partition, d.partitions)
		}
		for k := 0; k < j; k++ {
			if split[k].Partition == p.Partition {
				return reject(ReasonInvalid, "a split key names partition %d twice", p.Partition)
			}
		}
		if p.Weight == 0 {
			return reject(ReasonInvalid, "a split part's weight must be at least 1")
		}
		sum += uint64(p.Weight)
	}
	if sum > MaxSplitWeightSum {
		return reject(ReasonInvalid, "a split key's weights sum to %d, at most %d are allowed", sum, MaxSplitWeightSum)
	}
	return nil
}

// compactTable decodes table_b64 (spec 4.6 step 5: the width, the base64, then the length).
func compactTable(d *document) ([]uint32, error) {
	last := uint64(0)
	if d.partitions > 0 {
		last = uint64(d.partitions) - 1
	}
	width := uint32(4)
	if last <= 0xff {
		width = 1
	} else if last <= 0xffff {
		width = 2
	}
	if d.tableWidth != width {
		return nil, reject(ReasonInvalid, "table_width is %d, the smallest width that holds partition %d is %d", d.tableWidth, last, width)
	}
	raw, err := decodeBase64(*d.tableB64)
	if err != nil {
		return nil, reject(ReasonInvalid, "table_b64: invalid base64: not canonical padded base64")
	}
	want := uint64(d.buckets) * uint64(width)
	if uint64(len(raw)) != want {
		return nil, reject(ReasonInvalid, "table_b64 holds %d bytes, %d buckets of width %d take %d", len(raw), d.buckets, width, want)
	}
	table := make([]uint32, len(raw)/int(width))
	for i := range table {
		var v uint32
		for j := int(width) - 1; j >= 0; j-- {
			v = v<<8 | uint32(raw[i*int(width)+j])
		}
		table[i] = v
	}
	return table, nil
}

// decodeBase64: standard alphabet, canonical padding; the Go decoder skips \r and \n, so the text
// must also re-encode to itself.
func decodeBase64(text string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil, err
	}
	if base64.StdEncoding.EncodeToString(b) != text {
		return nil, base64.CorruptInputError(0)
	}
	return b, nil
}

func validateGeneration(g *string) error {
	if g == nil {
		return nil
	}
	ok := len(*g) == 32
	for i := 0; ok && i < len(*g); i++ {
		c := (*g)[i]
		ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')
	}
	if !ok {
		return reject(ReasonInvalid, "generation %q is not 32 lowercase hex digits", display(*g))
	}
	return nil
}

// ValidTopic reports whether name is a legal Kafka topic name (spec 1).
func ValidTopic(name string) bool { return validateTopic(name) == nil }

func validateTopic(t string) error {
	why := ""
	switch {
	case t == "":
		why = "empty"
	case len(t) > MaxTopicLen:
		why = "longer than 249 characters"
	case t == "." || t == "..":
		why = "'.' and '..' are reserved"
	default:
		for i := 0; i < len(t); i++ {
			c := t[i]
			if !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-') {
				why = "only ASCII letters, digits, '.', '_' and '-' are allowed"
				break
			}
		}
	}
	if why != "" {
		return reject(ReasonInvalid, "invalid topic name %q: %s", display(t), why)
	}
	return nil
}
