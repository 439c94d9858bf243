// Package dkgsarama places IBM/sarama's keyed records by the dkg spec through a router.Router.
// It is a package of its own so the core and the franz-go router do not depend on sarama.
//
//	config.Producer.Partitioner = dkgsarama.NewPartitioner(r)
//
// sarama's default partitioner hashes keys with FNV-1a; this one places them as Kafka's Java
// client does (murmur2) before an assignment exists, so moving an existing sarama topic to dkg
// moves its keys once, at adoption.
package dkgsarama

import (
	"github.com/IBM/sarama"

	"dkg.dev/dkg-go/router"
)

// NewPartitioner returns a sarama.PartitionerConstructor over r. Keyless messages go to sarama's
// random partitioner (as sarama's default does), untouched and uncounted.
func NewPartitioner(r *router.Router) sarama.PartitionerConstructor {
	return func(topic string) sarama.Partitioner {
		return &partitioner{r: r, topic: topic, keyless: sarama.NewRandomPartitioner(topic)}
	}
}

type partitioner struct {
	r       *router.Router
	topic   string
	keyless sarama.Partitioner
}

func (p *partitioner) Partition(m *sarama.ProducerMessage, numPartitions int32) (int32, error) {
	if m.Key == nil {
		return p.keyless.Partition(m, numPartitions)
	}
	key, err := m.Key.Encode()
	if err != nil {
		return -1, err
	}
	if key == nil {
		return p.keyless.Partition(m, numPartitions)
	}
	part, _ := p.r.Place(p.topic, key, int(numPartitions))
	return int32(part), nil
}

// RequiresConsistency: keyed messages keep their partition even while it is unavailable.
func (p *partitioner) RequiresConsistency() bool { return true }

// MessageRequiresConsistency: only keyed messages do.
func (p *partitioner) MessageRequiresConsistency(m *sarama.ProducerMessage) bool { return m.Key != nil }
