// Package dkgkafkago places segmentio/kafka-go's keyed messages by the dkg spec through a
// router.Router. It is a package of its own so the core does not depend on kafka-go.
//
//	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "orders", Balancer: dkgkafkago.NewBalancer(r, "orders")}
//
// kafka-go's default balancer is round-robin and its Hash balancer FNV-1a; this one places keys as
// Kafka's Java client does (murmur2) before an assignment exists, so moving an existing kafka-go
// topic to dkg moves its keys once, at adoption.
package dkgkafkago

import (
	"github.com/segmentio/kafka-go"

	"dkg.dev/dkg-go/router"
)

// Balancer is a kafka.Balancer over a router.Router.
type Balancer struct {
	r *router.Router
	// Topic is used for messages whose Topic is empty (kafka-go passes the message as written,
	// without the Writer's Topic).
	Topic   string
	keyless kafka.RoundRobin
}

// NewBalancer returns a Balancer over r; topic is the Writer's Topic ("" if every message names its own).
func NewBalancer(r *router.Router, topic string) *Balancer { return &Balancer{r: r, Topic: topic} }

// Balance places keyed messages by the spec; keyless ones round-robin, untouched and uncounted.
// kafka-go passes partitions 0..n-1 in order.
func (b *Balancer) Balance(msg kafka.Message, partitions ...int) int {
	if len(partitions) == 0 {
		return 0 // kafka-go never asks without partitions; never panic if it does
	}
	if msg.Key == nil {
		return b.keyless.Balance(msg, partitions...)
	}
	topic := msg.Topic
	if topic == "" {
		topic = b.Topic
	}
	p, _ := b.r.Place(topic, msg.Key, len(partitions))
	return partitions[p]
}
