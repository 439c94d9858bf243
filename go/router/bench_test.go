package router

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	dkg "dkg.dev/dkg-go"
)

// benchAssignment is shaped like the sampler's (12 partitions, 32 buckets per partition, 100 heavy
// keys of the benchmark's length), so the lookup meets heavy and light keys.
func benchAssignment(b *testing.B, keyLen int) (*dkg.Assignment, [][]byte) {
	rng := rand.New(rand.NewPCG(1, uint64(keyLen)))
	keys := make([][]byte, 4096)
	for i := range keys {
		k := make([]byte, keyLen)
		for j := range k {
			k[j] = byte('a' + rng.IntN(26))
		}
		keys[i] = k
	}
	const partitions, buckets = 12, 384
	table := make([]string, buckets)
	for i := range table {
		table[i] = fmt.Sprint(i % partitions)
	}
	var heavy []string
	for i := 0; i < 100; i++ {
		heavy = append(heavy, fmt.Sprintf(`{"key_b64":%q,"partition":%d,"weight":%d}`,
			base64.StdEncoding.EncodeToString(keys[i*40]), i%partitions, 1000-i))
	}
	load := strings.TrimSuffix(strings.Repeat("0.08,", partitions), ",")
	doc := fmt.Sprintf(`{"format":"dkg.assignment","version":1,"topic":"bench","partitions":%d,"epoch":1,"bucket_hash":{"function":"murmur2","seed":625341585},"buckets":%d,"table":[%s],"heavy":[%s],"params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000},"created_at_ms":0,"predicted_load":[%s]}`,
		partitions, buckets, strings.Join(table, ","), strings.Join(heavy, ","), load)
	a, err := dkg.DecodeAssignment([]byte(doc))
	if err != nil {
		b.Fatal(err)
	}
	return a, keys
}

var sink int

// BenchmarkPartition: per keyed record, franz-go's own Kafka placement
// (StickyKeyPartitioner(nil) = KafkaHasher(murmur2)) next to the dkg lookup alone and the dkg
// franz-go partitioner (lookup + counters), at 6, 16 and 36-byte keys.
func BenchmarkPartition(b *testing.B) {
	for _, n := range []int{6, 16, 36} {
		a, keys := benchAssignment(b, n)
		recs := make([]*kgo.Record, len(keys))
		for i, k := range keys {
			recs[i] = &kgo.Record{Key: k}
		}
		b.Run(fmt.Sprintf("len=%d/kafka_sticky_key", n), func(b *testing.B) {
			tp := kgo.StickyKeyPartitioner(nil).ForTopic("bench")
			for i := 0; b.Loop(); i++ {
				sink += tp.Partition(recs[i&4095], 12)
			}
		})
		b.Run(fmt.Sprintf("len=%d/dkg_kafka_partition", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				sink += dkg.KafkaPartition(keys[i&4095], 12)
			}
		})
		b.Run(fmt.Sprintf("len=%d/dkg_lookup", n), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				p, _ := dkg.Place(a, 12, keys[i&4095])
				sink += p
			}
		})
		b.Run(fmt.Sprintf("len=%d/dkg_kgo_partitioner", n), func(b *testing.B) {
			r, _ := NewOffline(nil)
			r.topic("bench").assignment.Store(a)
			tp := r.Partitioner().ForTopic("bench")
			for i := 0; b.Loop(); i++ {
				sink += tp.Partition(recs[i&4095], 12)
			}
		})
	}
}
