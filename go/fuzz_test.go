package dkg

import (
	"os"
	"testing"
)

// FuzzDecode: any bytes decode to a value or a typed *Error, never a panic; an accepted assignment
// places any key on a valid partition. Seeds: the vector files' base documents.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(baseDocument))
	f.Add([]byte(`{"format":"dkg.assignment","version":2,"kind":"retraction","topic":"orders","epoch":3,"created_at_ms":1}`))
	f.Add([]byte(`{"format":"dkg.assignment","version":2,"kind":"generation","generation":"0123456789abcdef0123456789abcdef"}`))
	if raw, err := os.ReadFile(vectorPath("v2/split.json")); err == nil && len(raw) < 1<<16 {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		v, err := Decode(value)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("untyped error %T", err)
			}
			return
		}
		if a, ok := v.(*Assignment); ok {
			for _, key := range [][]byte{nil, {}, value[:len(value)/2], []byte("hot")} {
				for _, n := range []int{1, 3, int(a.Partitions)} {
					if p, _ := Place(a, n, key); p < 0 || p >= n {
						t.Fatalf("partition %d of %d", p, n)
					}
				}
			}
		}
		NewBook(0).Apply([]byte("orders"), value)
	})
}

func TestPlaceAlwaysValid(t *testing.T) {
	a, err := DecodeAssignment([]byte(baseDocument))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{-1, 0, 1, 2, 3, 4, 1000} {
		for _, key := range [][]byte{nil, {}, []byte("hot"), []byte("user-42")} {
			p, r := Place(a, n, key)
			if n >= 1 && (p < 0 || p >= n) || n < 1 && p != 0 {
				t.Errorf("n=%d key=%q: %d", n, key, p)
			}
			if (n == 3) == (r == RouteFallback) {
				t.Errorf("n=%d: route %s", n, r)
			}
		}
	}
	if p, r := Place(nil, 7, []byte("kafka")); r != RouteFallback || p != KafkaPartition([]byte("kafka"), 7) {
		t.Errorf("no assignment: %d %s", p, r)
	}
}
