package brokertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
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
	var heavy []string
	for i := 0; i < 50; i++ {
		heavy = append(heavy, "user-"+strconv.Itoa(i))
	}
	pub, err := kgo.NewClient(kgo.SeedBrokers(bs))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := pub.ProduceSync(ctx, &kgo.Record{Topic: control, Key: []byte(topic), Value: document(topic, partitions, 1, heavy, 1)}).FirstErr(); err != nil {
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
