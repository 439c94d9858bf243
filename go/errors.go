package dkg

import "fmt"

// Reason is why a control-topic record was rejected (spec 6.3); its String is the metric label.
type Reason int

// The reject reasons, in the order of spec 6.3 (and of the metric series, spec 10).
const (
	ReasonBadKey Reason = iota
	ReasonOversize
	ReasonMalformedJSON
	ReasonUnsupportedVersion
	ReasonOutOfRange
	ReasonInvalid
	ReasonTopicMismatch
	ReasonStaleEpoch
	ReasonEpochConflict
	ReasonGenerationMismatch
)

// NumReasons is the number of reject reasons.
const NumReasons = 10

// AllReasons lists every Reason in label order.
var AllReasons = []Reason{
	ReasonBadKey, ReasonOversize, ReasonMalformedJSON, ReasonUnsupportedVersion, ReasonOutOfRange,
	ReasonInvalid, ReasonTopicMismatch, ReasonStaleEpoch, ReasonEpochConflict, ReasonGenerationMismatch,
}

var reasonLabels = [...]string{
	"bad_key", "oversize", "malformed_json", "unsupported_version", "out_of_range", "invalid",
	"topic_mismatch", "stale_epoch", "epoch_conflict", "generation_mismatch",
}

// String is the spec's label, e.g. "malformed_json".
func (r Reason) String() string {
	if r >= 0 && int(r) < len(reasonLabels) {
		return reasonLabels[r]
	}
	return fmt.Sprintf("Reason(%d)", int(r))
}

// Error is a rejected document or control record: the spec's reason and a human-readable detail.
// Decode and Book.Apply return it; match with errors.As.
type Error struct {
	Reason Reason
	Detail string
}

func (e *Error) Error() string { return e.Reason.String() + ": " + e.Detail }

func reject(r Reason, format string, args ...any) *Error {
	return &Error{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// display shortens strings echoed from untrusted documents.
func display(s string) string {
	r := []rune(s)
	if len(r) <= 64 {
		return s
	}
	return string(r[:64]) + "..."
}
