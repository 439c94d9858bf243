package dkg

import (
	"fmt"
	"unicode/utf8"
)

// GenerationKey is the key of the control topic's generation record (not a legal topic name).
const GenerationKey = "@generation"

// Outcome is what one control record did to a Book.
type Outcome int

// The outcomes of spec 6.3 and 6.4.
const (
	Accepted Outcome = iota
	Unchanged
	Retracted
	Rejected
	Reset
	Reread
)

var outcomeLabels = [...]string{"accepted", "unchanged", "retracted", "rejected", "reset", "reread"}

// String is the vectors' label.
func (o Outcome) String() string {
	return labelOf(outcomeLabels[:], int(o))
}

// Update is the result of Book.Apply.
type Update struct {
	Outcome Outcome
	// Topic is the record key ("" when the key was missing or not UTF-8).
	Topic string
	// Assignment is the adopted assignment (Accepted only).
	Assignment *Assignment
	// Err is the rejection (Rejected only): its Reason is the metric label.
	Err *Error
}

// Book is the control topic's state (spec 6.3, 6.4): per data topic the current assignment or a
// retraction floor, and the generation in force. Pure and not safe for concurrent use: one
// follower feeds it records in log order; readers get assignments through Update or Get.
type Book struct {
	current       map[string]*Assignment
	floors        map[string]*Retraction
	maxValueBytes int
	generation    string
	rereadFor     map[string]bool
	rereadOrder   []string
}

const maxRereadsRemembered = 1024

// NewBook returns an empty book accepting values up to maxValueBytes (clamped to 0..=8 MiB; 0 or
// less means the spec's limit).
func NewBook(maxValueBytes int) *Book {
	if maxValueBytes <= 0 || maxValueBytes > MaxAssignmentBytes {
		maxValueBytes = MaxAssignmentBytes
	}
	return &Book{
		current: map[string]*Assignment{}, floors: map[string]*Retraction{},
		maxValueBytes: maxValueBytes, rereadFor: map[string]bool{},
	}
}

// Get returns the current assignment of topic, or nil.
func (b *Book) Get(topic string) *Assignment { return b.current[topic] }

// Floor returns the epoch floor a retraction document left on topic.
func (b *Book) Floor(topic string) (uint64, bool) {
	r := b.floors[topic]
	if r == nil {
		return 0, false
	}
	return r.Epoch, true
}

// Generation returns the generation in force ("" when none).
func (b *Book) Generation() string { return b.generation }

// Snapshot returns a copy of the current assignments by topic.
func (b *Book) Snapshot() map[string]*Assignment {
	out := make(map[string]*Assignment, len(b.current))
	for k, v := range b.current {
		out[k] = v
	}
	return out
}

func rejected(topic string, r Reason, format string, args ...any) Update {
	return Update{Outcome: Rejected, Topic: topic, Err: &Error{Reason: r, Detail: fmt.Sprintf(format, args...)}}
}

// Apply applies one control record (value nil: a tombstone) in log order. Never panics.
func (b *Book) Apply(key, value []byte) (u Update) {
	if len(key) == 0 {
		return rejected("", ReasonBadKey, "record has no key")
	}
	if !utf8.Valid(key) {
		return rejected("", ReasonBadKey, "record key is not UTF-8")
	}
	topic := string(key)
	if value == nil {
		delete(b.floors, topic)
		if _, ok := b.current[topic]; ok {
			delete(b.current, topic)
			return Update{Outcome: Retracted, Topic: topic}
		}
		return Update{Outcome: Unchanged, Topic: topic}
	}
	if len(value) > b.maxValueBytes {
		return rejected(topic, ReasonOversize, "value is %d bytes, limit %d", len(value), b.maxValueBytes)
	}
	defer func() {
		// A decoder bug must not stop the follower: the record is refused like any bad document.
		if p := recover(); p != nil {
			u = rejected(topic, ReasonInvalid, "decoder failure: %v", p)
		}
	}()
	decoded, err := Decode(value)
	if err != nil {
		e := err.(*Error)
		return Update{Outcome: Rejected, Topic: topic, Err: e}
	}
	var docTopic, docGeneration string
	var epoch uint64
	switch v := decoded.(type) {
	case *Generation:
		return b.applyGeneration(topic, v.ID)
	case *Assignment:
		docTopic, docGeneration, epoch = v.Topic, v.Generation, v.Epoch
	case *Retraction:
		docTopic, docGeneration, epoch = v.Topic, v.Generation, v.Epoch
	}
	if docTopic != topic {
		return rejected(topic, ReasonTopicMismatch, "record key %q but the document is for topic %q", display(topic), docTopic)
	}
	if docGeneration != "" && docGeneration != b.generation {
		// Spec 6.4 G5/G6: a generation not in force (also when none is), one re-read per id.
		if b.rereadFor[docGeneration] {
			return rejected(topic, ReasonGenerationMismatch, "generation %s is not in force (also after a re-read)", docGeneration)
		}
		b.rereadFor[docGeneration] = true
		b.rereadOrder = append(b.rereadOrder, docGeneration)
		if len(b.rereadOrder) > maxRereadsRemembered {
			delete(b.rereadFor, b.rereadOrder[0])
			b.rereadOrder = b.rereadOrder[1:]
		}
		b.clear()
		b.generation = ""
		return Update{Outcome: Reread, Topic: topic}
	}
	now := b.current[topic]
	floor := b.floors[topic]
	if now != nil || floor != nil {
		floorEpoch := uint64(0)
		if now != nil {
			floorEpoch = now.Epoch
		} else {
			floorEpoch = floor.Epoch
		}
		if epoch < floorEpoch {
			return rejected(topic, ReasonStaleEpoch, "epoch %d is older than the current epoch %d", epoch, floorEpoch)
		}
		if epoch == floorEpoch {
			equal := false
			switch v := decoded.(type) {
			case *Assignment:
				equal = now != nil && v.Equal(now)
			case *Retraction:
				equal = now == nil && floor != nil && *v == *floor
			}
			if equal {
				return Update{Outcome: Unchanged, Topic: topic}
			}
			return rejected(topic, ReasonEpochConflict, "a different document under the current epoch %d", floorEpoch)
		}
	}
	if r, ok := decoded.(*Retraction); ok {
		b.floors[topic] = r
		if now != nil {
			delete(b.current, topic)
			return Update{Outcome: Retracted, Topic: topic}
		}
		return Update{Outcome: Unchanged, Topic: topic}
	}
	a := decoded.(*Assignment)
	delete(b.floors, topic)
	b.current[topic] = a
	return Update{Outcome: Accepted, Topic: topic, Assignment: a}
}

func (b *Book) applyGeneration(key, id string) Update {
	if key != GenerationKey {
		return rejected(key, ReasonInvalid, "a generation record under key %q, expected %q", display(key), GenerationKey)
	}
	old := b.generation
	b.generation = id
	if old == "" || old == id {
		return Update{Outcome: Unchanged, Topic: key}
	}
	b.clear()
	return Update{Outcome: Reset, Topic: key}
}

func (b *Book) clear() {
	clear(b.current)
	clear(b.floors)
}
