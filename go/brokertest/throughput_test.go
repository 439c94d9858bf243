package brokertest

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dkg.dev/dkg-go/router"
)

// BenchmarkProduceThroughput: a franz-go producer with the dkg partitioner against the same producer
// with franz-go's default partitioner, on the local broker, in interleaved rounds (the order
// alternates); reports the median of the per-round ratios (dkg/default records per second) and
// their spread. DKG_BENCH_ROUNDS (10) and DKG_BENCH_RECORDS (200000) size it. Run with -benchtime=1x.
func BenchmarkProduceThroughput(b *testing.B) {
	rounds := envInt("DKG_BENCH_ROUNDS", 10)
	records := envInt("DKG_BENCH_RECORDS", 200000)
	bs := os.Getenv("DKG_TEST_BOOTSTRAP")
	if bs == "" {
		b.Fatal("DKG_TEST_BOOTSTRAP is not set")
	}
	const partitions = 12
	topic := unique("throughput")
	createTopicB(b, bs, topic, partitions)
	control := unique("control")
	createTopicB(b, bs, control, 1)
	// A Zipf(1.1) stream over 10^4 keys; the 50 hottest are the assignment's heavy keys.
	zipf := rand.NewZipf(rand.New(rand.NewPCG(8, 8)), 1.1, 1, 9999)
	keys := make([][]byte, records)
	for i := range keys {
		keys[i] = []byte("user-" + strconv.FormatUint(zipf.Uint64(), 10))
	}
	// Like a sampler's: every partition the same share of buckets, the hot keys spread greedily by
	// weight (a random table would skew the load and measure the placement, not the partitioner).
	heavyKeys := 50
	weight := func(k int) float64 { return math.Pow(float64(1+k), -1.1) }
	total, heavyShare := 0.0, 0.0
	for k := 0; k < 10000; k++ {
		total += weight(k)
		if k < heavyKeys {
			heavyShare += weight(k)
		}
	}
	load := make([]float64, partitions)
	for p := range load {
		load[p] = (total - heavyShare) / partitions
	}
	var heavy []string
	var heavyPart []int
	for k := 0; k < heavyKeys; k++ {
		best := 0
		for p := range load {
			if load[p] < load[best] {
				best = p
			}
		}
		load[best] += weight(k)
		heavy = append(heavy, "user-"+strconv.Itoa(k))
		heavyPart = append(heavyPart, best)
	}
	pub, err := kgo.NewClient(kgo.SeedBrokers(bs))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	doc := balancedDocument(topic, partitions, heavy, heavyPart)
	if os.Getenv("DKG_BENCH_PLACEMENT") == "kafka" {
		// The same placement as the default partitioner's (spec 3.4: one bucket per partition, the
		// identity table, Kafka's seed), so the two runs differ only by the partitioner's own cost,
		// not by how the load spreads over the partitions (which changes the batches).
		doc = kafkaPlacementDocument(topic, partitions)
	}
	if err := pub.ProduceSync(ctx, &kgo.Record{Topic: control, Key: []byte(topic), Value: doc}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	pub.Close()
	r, err := router.New(ctx, router.Config{Seeds: []string{bs}, ControlTopic: control})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if r.Epoch(topic) != 1 {
		b.Fatal("no assignment")
	}
	value := make([]byte, 100)
	run := func(dkgPartitioner bool) float64 {
		opts := []kgo.Opt{kgo.SeedBrokers(bs), kgo.DefaultProduceTopic(topic)}
		if dkgPartitioner {
			opts = append(opts, kgo.RecordPartitioner(r.Partitioner()))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		if err := cl.Ping(ctx); err != nil {
			b.Fatal(err)
		}
		failed := make(chan error, 1)
		start := time.Now()
		for _, k := range keys {
			cl.Produce(ctx, &kgo.Record{Key: k, Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					select {
					case failed <- err:
					default:
					}
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		select {
		case err := <-failed:
			b.Fatal(err)
		default:
		}
		return float64(len(keys)) / elapsed.Seconds()
	}
	run(false) // warm-up: connections, topic metadata, the broker's page cache
	var ratios, dkgRates, defRates []float64
	for i := 0; i < rounds; i++ {
		var d, k float64
		if i%2 == 0 {
			d, k = run(false), run(true)
		} else {
			k, d = run(true), run(false)
		}
		ratios = append(ratios, k/d)
		dkgRates = append(dkgRates, k)
		defRates = append(defRates, d)
	}
	med := func(xs []float64) float64 {
		s := append([]float64(nil), xs...)
		sort.Float64s(s)
		return s[len(s)/2]
	}
	sorted := append([]float64(nil), ratios...)
	sort.Float64s(sorted)
	b.ReportMetric(med(ratios), "ratio_median")
	b.ReportMetric(sorted[0], "ratio_min")
	b.ReportMetric(sorted[len(sorted)-1], "ratio_max")
	b.ReportMetric(med(dkgRates), "dkg_rec/s")
	b.ReportMetric(med(defRates), "default_rec/s")
	b.Logf("rounds %d x %d records: ratio median %.3f (min %.3f, max %.3f); dkg %.0f rec/s, default %.0f rec/s; ratios %s",
		rounds, records, med(ratios), sorted[0], sorted[len(sorted)-1], med(dkgRates), med(defRates), fmt.Sprint(ratios))
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func createTopicB(b *testing.B, bs, name string, partitions int32) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bs))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	configs := map[string]*string{}
	if partitions == 1 {
		compact := "compact"
		configs["cleanup.policy"] = &compact
	}
	if _, err := kadmClient(cl).CreateTopic(ctx, partitions, 1, configs, name); err != nil {
		b.Fatal(err)
	}
}

// balancedDocument: 32 buckets per partition, bucket b on partition b % partitions, heavy[i] on heavyPart[i].
func balancedDocument(topic string, partitions int, heavy []string, heavyPart []int) []byte {
	table := make([]string, 32*partitions)
	for i := range table {
		table[i] = strconv.Itoa(i % partitions)
	}
	entries := make([]string, len(heavy))
	for i, k := range heavy {
		entries[i] = fmt.Sprintf(`{"key_b64":%q,"partition":%d,"weight":%d}`, base64.StdEncoding.EncodeToString([]byte(k)), heavyPart[i], 1000-i)
	}
	load := strings.TrimSuffix(strings.Repeat("0.08,", partitions), ",")
	return []byte(fmt.Sprintf(`{"format":"dkg.assignment","version":1,"topic":%q,"partitions":%d,"epoch":1,`+
		`"bucket_hash":{"function":"murmur2","seed":625341585},"buckets":%d,"table":[%s],"heavy":[%s],`+
		`"params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000},"created_at_ms":0,"predicted_load":[%s]}`,
		topic, partitions, len(table), strings.Join(table, ","), strings.Join(entries, ","), load))
}

// kafkaPlacementDocument places every key where Kafka's default partitioner does: one bucket per
// partition, the identity table and Kafka's murmur2 seed (spec 3.4), no heavy keys.
func kafkaPlacementDocument(topic string, partitions int) []byte {
	table := make([]string, partitions)
	for i := range table {
		table[i] = strconv.Itoa(i)
	}
	load := strings.TrimSuffix(strings.Repeat("0.08,", partitions), ",")
	return []byte(fmt.Sprintf(`{"format":"dkg.assignment","version":1,"topic":%q,"partitions":%d,"epoch":1,`+
		`"bucket_hash":{"function":"murmur2","seed":2538058380},"buckets":%d,"table":[%s],"heavy":[],`+
		`"params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000},"created_at_ms":0,"predicted_load":[%s]}`,
		topic, partitions, partitions, strings.Join(table, ","), load))
}
