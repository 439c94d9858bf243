package router

import "github.com/twmb/franz-go/pkg/kgo"

// Partitioner is the franz-go partitioner over r: keyed records are placed by the spec (the
// current assignment, else Kafka's murmur2 placement, which is also franz-go's default for keys);
// keyless records go to franz-go's sticky partitioner, untouched and uncounted (spec 7.1).
//
//	kgo.NewClient(kgo.SeedBrokers(...), kgo.RecordPartitioner(r.Partitioner()))
func (r *Router) Partitioner() kgo.Partitioner { return partitioner{r} }

type partitioner struct{ r *Router }

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	t := p.r.topic(topic)
	t.used.Store(true)
	return &topicPartitioner{t: t, keyless: kgo.StickyKeyPartitioner(nil).ForTopic(topic)}
}

type topicPartitioner struct {
	t       *topicState
	keyless kgo.TopicPartitioner
}

// RequiresConsistency: a keyed record's partition is its key's, even while that partition is down.
func (tp *topicPartitioner) RequiresConsistency(r *kgo.Record) bool { return r.Key != nil }

func (tp *topicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Key == nil {
		return tp.keyless.Partition(r, n)
	}
	p, _ := tp.t.place(r.Key, n)
	return p
}

// OnNewBatch lets the sticky partitioner of keyless records move on.
func (tp *topicPartitioner) OnNewBatch() {
	if nb, ok := tp.keyless.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}
