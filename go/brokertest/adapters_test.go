package brokertest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	dkg "dkg.dev/dkg-go"
	"dkg.dev/dkg-go/dkgkafkago"
	"dkg.dev/dkg-go/dkgsarama"
	"dkg.dev/dkg-go/router"
)

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func runBin(t *testing.T, timeout time.Duration, bin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "DKG_FIRST_EPOCH_NOISE=1", "DKG_LOG=warn")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
}

// The sampler (Rust) learns a Zipf stream and publishes an assignment; the Rust DKG producer
// (dkg-lab loadgen) and each Go adapter (franz-go, sarama, kafka-go) then write the same keys:
// every record of every producer must be where the spec's placement (the Go lookup, which passes
// the golden vectors) puts it, so the Go adapters and the Rust producer agree record by record.
func TestSamplerAssignmentPlacesEveryAdapterLikeRust(t *testing.T) {
	bin, lab := samplerBin(t), labBin(t)
	const partitions = 6
	b, topic, control := dataAndControl(t, "adapters", partitions)

	// Phase 1: Kafka's placement (the Rust plain producer), learned by the sampler, which publishes once.
	runBin(t, 60*time.Second, lab, "loadgen", "--bootstrap-servers", b, "--topic", topic, "--plain",
		"--alpha", "1.1", "--keys", "2000", "--count", "30000", "--seed", "3", "--value-prefix", "plain")
	runBin(t, 120*time.Second, bin, "run", "--bootstrap-servers", b, "--topic", topic, "--control-topic", control,
		"--sketches-topic", unique("sketches"), "--interval-secs", "2", "--metrics-addr",
		fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--auto-offset-reset", "earliest", "--min-samples", "1000", "--once")

	// A router started now reads the (transactional) publication at start.
	ctx := context.Background()
	r, err := router.New(ctx, router.Config{Seeds: []string{b}, ControlTopic: control, StartupTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a := r.Assignment(topic)
	if a == nil || a.Epoch < 1 || a.Partitions != partitions {
		t.Fatalf("no assignment for %s after start-up: %+v", topic, a)
	}
	t.Logf("sampler's assignment: epoch %d, %d buckets, %d heavy keys", a.Epoch, len(a.Table), len(a.Heavy))

	// Phase 2: the Rust DKG producer places the same stream by the assignment.
	runBin(t, 60*time.Second, lab, "loadgen", "--bootstrap-servers", b, "--topic", topic, "--control-topic", control,
		"--alpha", "1.1", "--keys", "2000", "--count", "20000", "--seed", "3", "--value-prefix", "rust")
	// The Rust stream in send order (values are rust:SEQ:...).
	stream := make([][]byte, 20000)
	rustPartition := make([]int32, len(stream))
	seen := 0
	for _, rec := range readAll(t, topic) {
		if bytes.HasPrefix(rec.Value, []byte("rust:")) {
			var n int
			if _, err := fmt.Sscanf(string(rec.Value), "rust:%d:", &n); err != nil || n < 0 || n >= len(stream) || stream[n] != nil {
				t.Fatalf("rust value %q", rec.Value)
			}
			stream[n] = rec.Key
			rustPartition[n] = rec.Partition
			seen++
		}
	}
	if seen != len(stream) {
		t.Fatalf("%d rust records", seen)
	}
	const perAdapter = 4000
	stream = stream[:perAdapter]
	// Where the Rust producer put these records, per partition: each Go adapter must match it exactly.
	var rustParts [partitions]int
	for _, p := range rustPartition[:perAdapter] {
		rustParts[p]++
	}

	// Phase 3: the same keys through each Go adapter.
	kcl := producer(t, kgo.RecordPartitioner(r.Partitioner()), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	recs := make([]*kgo.Record, len(stream))
	for i, k := range stream {
		recs[i] = &kgo.Record{Key: k, Value: []byte(fmt.Sprintf("kgo:%d", i))}
	}
	if err := kcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	sc := sarama.NewConfig()
	sc.Version = sarama.V3_0_0_0
	sc.Producer.Partitioner = dkgsarama.NewPartitioner(r)
	sc.Producer.RequiredAcks = sarama.WaitForAll
	sc.Producer.Idempotent = true
	sc.Net.MaxOpenRequests = 1
	sc.Producer.Return.Successes = true
	sp, err := sarama.NewSyncProducer([]string{b}, sc)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]*sarama.ProducerMessage, len(stream))
	for i, k := range stream {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(k), Value: sarama.StringEncoder(fmt.Sprintf("sarama:%d", i))}
	}
	if err := sp.SendMessages(msgs); err != nil {
		t.Fatal(err)
	}
	sp.Close()

	w := &kafka.Writer{Addr: kafka.TCP(b), Topic: topic, Balancer: dkgkafkago.NewBalancer(r, topic),
		RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond, BatchSize: 1000}
	kmsgs := make([]kafka.Message, len(stream))
	for i, k := range stream {
		kmsgs[i] = kafka.Message{Key: k, Value: []byte(fmt.Sprintf("kafkago:%d", i))}
	}
	if err := w.WriteMessages(ctx, kmsgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()

	if r.Epoch(topic) != a.Epoch {
		t.Fatalf("the epoch moved during the test: %d -> %d", a.Epoch, r.Epoch(topic))
	}
	// Every record where the spec puts it; per producer, the routes it took and the per-partition counts.
	type tally struct {
		n      int
		routes map[dkg.Route]int
		parts  [partitions]int
	}
	tallies := map[string]*tally{}
	for _, rec := range readAll(t, topic) {
		who, _, _ := bytes.Cut(rec.Value, []byte(":"))
		if string(who) == "plain" {
			continue
		}
		tl := tallies[string(who)]
		if tl == nil {
			tl = &tally{routes: map[dkg.Route]int{}}
			tallies[string(who)] = tl
		}
		want := a.RouteOf(rec.Key)
		p, _ := dkg.Place(a, partitions, rec.Key)
		if int32(p) != rec.Partition {
			t.Errorf("%s record %q: partition %d, the spec says %d (%s)", who, rec.Key, rec.Partition, p, want)
		}
		tl.n++
		tl.routes[want]++
		tl.parts[rec.Partition]++
	}
	for _, who := range []string{"rust", "kgo", "sarama", "kafkago"} {
		tl := tallies[who]
		if tl == nil || (who == "rust" && tl.n != 20000) || (who != "rust" && tl.n != perAdapter) {
			t.Fatalf("%s: %+v", who, tl)
		}
		if tl.routes[dkg.RouteHeavy] == 0 || tl.routes[dkg.RouteBucket] == 0 {
			t.Errorf("%s: routes %v (the stream should hit heavy and bucket routes)", who, tl.routes)
		}
		if who != "rust" && tl.parts != rustParts {
			t.Errorf("%s per partition %v, the Rust producer's for the same keys %v", who, tl.parts, rustParts)
		}
		t.Logf("%s: %d records, routes %v, per partition %v", who, tl.n, tl.routes, tl.parts)
	}
}
