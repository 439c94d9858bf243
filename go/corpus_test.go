package dkg

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// TestCorpusVerdicts is the differential check of the assignment decoder: every input of the
// committed fuzz corpus (spec/corpus/assignment/, minimised by cargo fuzz cmin) gets from
// DecodeAssignment the verdict the Rust decoder gives it (spec/corpus/assignment.json, regenerated
// and compared by crates/dkg-protocol/tests/corpus_verdicts.rs): accepted, or rejected with the
// same reason label.
func TestCorpusVerdicts(t *testing.T) {
	dir := filepath.Join("..", "spec", "corpus")
	raw, err := os.ReadFile(filepath.Join(dir, "assignment.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Verdicts map[string]string `json:"verdicts"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "assignment"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 300 || len(entries) != len(file.Verdicts) {
		t.Fatalf("%d corpus inputs, %d verdicts", len(entries), len(file.Verdicts))
	}
	var failures []string
	for _, e := range entries {
		want, ok := file.Verdicts[e.Name()]
		if !ok {
			t.Fatalf("%s has no verdict", e.Name())
		}
		value, err := os.ReadFile(filepath.Join(dir, "assignment", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got := "accept"
		a, err := DecodeAssignment(value)
		if err != nil {
			got = err.(*Error).Reason.String()
		} else {
			for _, key := range [][]byte{nil, []byte("hot"), []byte("cold"), value} {
				if p, _ := a.Lookup(key); p < 0 || uint32(p) >= a.Partitions {
					t.Errorf("%s: partition %d of %d", e.Name(), p, a.Partitions)
				}
			}
		}
		if got != want {
			failures = append(failures, e.Name()+": "+got+", Rust: "+want)
		}
	}
	sort.Strings(failures)
	for _, f := range failures {
		t.Error(f)
	}
}
