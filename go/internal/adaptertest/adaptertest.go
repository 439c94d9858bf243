// Package adaptertest holds what the client adapters' tests share.
package adaptertest

import (
	"fmt"
	"testing"

	dkg "dkg.dev/dkg-go"
)

// KafkaFallbackMoves checks that, before any assignment, place puts each of 10000 keys
// ("user-0", "user-1", ...) where Kafka does (murmur2 over n partitions), and that most of them
// (80% at least; about (n-1)/n) land elsewhere under the client's own default, own: a topic the
// client wrote moves its keys once, at adoption. It returns how many moved.
func KafkaFallbackMoves(t *testing.T, n int, place, own func(key []byte) int) int {
	t.Helper()
	const keys = 10000
	moved := 0
	for i := 0; i < keys; i++ {
		key := []byte(fmt.Sprintf("user-%d", i))
		p := place(key)
		if want := dkg.KafkaPartition(key, n); p != want {
			t.Fatalf("%s: %d, want Kafka's %d", key, p, want)
		}
		if p != own(key) {
			moved++
		}
	}
	if moved < keys*8/10 {
		t.Fatalf("only %d of %d keys differ from the client's default placement", moved, keys)
	}
	return moved
}
