package dkgkafkago

import (
	"testing"

	"github.com/segmentio/kafka-go"

	dkg "dkg.dev/dkg-go"
	"dkg.dev/dkg-go/internal/adaptertest"
	"dkg.dev/dkg-go/router"
)

// Before epoch 1 the balancer places keys as Kafka does (murmur2), not as kafka-go's Hash
// balancer (FNV-1a) or its round-robin default: an existing kafka-go topic moves its keys once.
func TestFallbackIsKafkaPlacementNotFNV(t *testing.T) {
	r, _ := router.NewOffline(nil)
	b := NewBalancer(r, "orders")
	parts := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	moved := adaptertest.KafkaFallbackMoves(t, len(parts),
		func(key []byte) int { return b.Balance(kafka.Message{Key: key}, parts...) },
		func(key []byte) int { return (&kafka.Hash{}).Balance(kafka.Message{Key: key}, parts...) })
	t.Logf("%d keys move at adoption (kafka-go Hash FNV-1a -> murmur2)", moved)
}

func TestAssignmentAndTopicOfMessage(t *testing.T) {
	r, _ := router.NewOffline(nil)
	d := `{"format":"dkg.assignment","version":1,"topic":"other","partitions":3,"epoch":1,"bucket_hash":{"function":"murmur2","seed":1},"buckets":1,"table":[2],"heavy":[],"params":{"theta":0,"epsilon":0,"mu":1,"window_records":0},"created_at_ms":0,"predicted_load":[0,0,1]}`
	if u := r.Apply([]byte("other"), []byte(d)); u.Outcome != dkg.Accepted {
		t.Fatal(u.Err)
	}
	b := NewBalancer(r, "orders")
	if p := b.Balance(kafka.Message{Topic: "other", Key: []byte("k")}, 0, 1, 2); p != 2 {
		t.Fatalf("message topic: %d", p)
	}
	if p := b.Balance(kafka.Message{Key: []byte("k")}, 0, 1, 2); p != dkg.KafkaPartition([]byte("k"), 3) {
		t.Fatalf("writer topic: %d", p)
	}
	if p := b.Balance(kafka.Message{}, 0, 1, 2); p < 0 || p > 2 {
		t.Fatalf("keyless: %d", p)
	}
	if p := b.Balance(kafka.Message{Key: []byte("k")}); p != 0 {
		t.Fatalf("no partitions: %d", p)
	}
}
