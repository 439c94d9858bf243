package dkgsarama

import (
	"fmt"
	"testing"

	"github.com/IBM/sarama"

	dkg "dkg.dev/dkg-go"
	"dkg.dev/dkg-go/router"
)

// Before epoch 1 the adapter places keys as Kafka does (murmur2), not as sarama's default
// (FNV-1a): moving an existing sarama topic to dkg moves most keys once, at adoption.
func TestFallbackIsKafkaPlacementNotSaramasFNV(t *testing.T) {
	r, _ := router.NewOffline(nil)
	dkgPart := NewPartitioner(r)("orders")
	saramaDefault := sarama.NewHashPartitioner("orders")
	const n, keys = 12, 10000
	moved := 0
	for i := 0; i < keys; i++ {
		key := sarama.StringEncoder(fmt.Sprintf("user-%d", i))
		m := &sarama.ProducerMessage{Topic: "orders", Key: key}
		p, err := dkgPart.Partition(m, n)
		if err != nil {
			t.Fatal(err)
		}
		if int(p) != dkg.KafkaPartition([]byte(key), n) {
			t.Fatalf("%s: %d, want Kafka's %d", key, p, dkg.KafkaPartition([]byte(key), n))
		}
		q, _ := saramaDefault.Partition(m, n)
		if p != q {
			moved++
		}
	}
	// About (n-1)/n of the keys land elsewhere than under FNV-1a.
	if moved < keys*8/10 {
		t.Fatalf("only %d of %d keys differ from sarama's FNV-1a placement", moved, keys)
	}
	t.Logf("%d of %d keys move at adoption (sarama FNV-1a -> murmur2)", moved, keys)
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
