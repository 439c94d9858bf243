package dkgsarama

import (
	"testing"

	"github.com/IBM/sarama"

	"dkg.dev/dkg-go/internal/adaptertest"
	"dkg.dev/dkg-go/router"
)

// Before epoch 1 the adapter places keys as Kafka does (murmur2), not as sarama's default
// (FNV-1a): moving an existing sarama topic to dkg moves most keys once, at adoption.
func TestFallbackIsKafkaPlacementNotSaramasFNV(t *testing.T) {
	r, _ := router.NewOffline(nil)
	dkgPart := NewPartitioner(r)("orders")
	saramaDefault := sarama.NewHashPartitioner("orders")
	const n = 12
	partition := func(p sarama.Partitioner, key []byte) int {
		q, err := p.Partition(&sarama.ProducerMessage{Topic: "orders", Key: sarama.ByteEncoder(key)}, n)
		if err != nil {
			t.Fatal(err)
		}
		return int(q)
	}
	moved := adaptertest.KafkaFallbackMoves(t, n,
		func(key []byte) int { return partition(dkgPart, key) },
		func(key []byte) int { return partition(saramaDefault, key) })
	t.Logf("%d keys move at adoption (sarama FNV-1a -> murmur2)", moved)
}

func TestKeylessAndConsistency(t *testing.T) {
	r, _ := router.NewOffline(nil)
	p := NewPartitioner(r)("orders")
	for i := 0; i < 50; i++ {
		q, err := p.Partition(&sarama.ProducerMessage{Topic: "orders"}, 5)
		if err != nil || q < 0 || q >= 5 {
			t.Fatalf("keyless: %d %v", q, err)
		}
	}
	dc := p.(sarama.DynamicConsistencyPartitioner)
	if dc.MessageRequiresConsistency(&sarama.ProducerMessage{}) || !dc.MessageRequiresConsistency(&sarama.ProducerMessage{Key: sarama.StringEncoder("k")}) {
		t.Fatal("consistency: keyed only")
	}
}
