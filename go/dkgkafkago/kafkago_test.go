package dkgkafkago

import (
	"fmt"
	"testing"

	"github.com/segmentio/kafka-go"

	dkg "dkg.dev/dkg-go"
	"dkg.dev/dkg-go/router"
)

// Before epoch 1 the balancer places keys as Kafka does (murmur2), not as kafka-go's Hash
// balancer (FNV-1a) or its round-robin default: an existing kafka-go topic moves its keys once.
func TestFallbackIsKafkaPlacementNotFNV(t *testing.T) {
	r, _ := router.NewOffline(nil)
	b := NewBalancer(r, "orders")
	parts := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	moved := 0
	const keys = 10000
	for i := 0; i < keys; i++ {
		m := kafka.Message{Key: []byte(fmt.Sprintf("user-%d", i))}
		p := b.Balance(m, parts...)
		if p != dkg.KafkaPartition(m.Key, len(parts)) {
			t.Fatalf("%s: %d", m.Key, p)
		}
		if p != (&kafka.Hash{}).Balance(m, parts...) {
			moved++
		}
	}
	if moved < keys*8/10 {
		t.Fatalf("only %d of %d keys differ from kafka-go's FNV-1a", moved, keys)
	}
	t.Logf("%d of %d keys move at adoption (kafka-go Hash FNV-1a -> murmur2)", moved, keys)
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
