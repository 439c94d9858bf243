package brokertest

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func bootstrap(t *testing.T) string {
	t.Helper()
	b := os.Getenv("DKG_TEST_BOOTSTRAP")
	if b == "" {
		t.Fatal("DKG_TEST_BOOTSTRAP is not set: the broker tests need a broker (scripts/kafka start; scripts/test sets it)")
	}
	return b
}

// samplerBin is the product binary (dkg-sampler run), labBin the lab's (dkg-lab loadgen).
func samplerBin(t *testing.T) string {
	t.Helper()
	return workspaceBin(t, "dkg-sampler", "DKG_SAMPLER_BIN")
}

func labBin(t *testing.T) string { t.Helper(); return workspaceBin(t, "dkg-lab", "DKG_LAB_BIN") }

func workspaceBin(t *testing.T, name, envVar string) string {
	t.Helper()
	bin := os.Getenv(envVar)
	if bin == "" {
		bin, _ = filepath.Abs("../../target/debug/" + name)
	}
	if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("the binary %s is missing: cargo build -p %s (scripts/test does) or set %s", bin, name, envVar)
	}
	return bin
}

var seq atomic.Int64

func unique(prefix string) string {
	return fmt.Sprintf("go-%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000_000, seq.Add(1))
}

func admin(t *testing.T) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func kadmClient(cl *kgo.Client) *kadm.Client { return kadm.NewClient(cl) }

func createTopic(t *testing.T, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := admin(t).CreateTopic(ctx, partitions, 1, configs, name)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", name, err, resp.Err)
	}
}

// dataAndControl is most broker tests' start: the bootstrap servers, a new data topic named after
// prefix and a new control topic.
func dataAndControl(t *testing.T, prefix string, partitions int32) (b, topic, control string) {
	t.Helper()
	return bootstrap(t), newTopic(t, prefix, partitions), createControlTopic(t)
}

// newTopic creates a data topic named after prefix; returns its unique name.
func newTopic(t *testing.T, prefix string, partitions int32) string {
	t.Helper()
	name := unique(prefix)
	createTopic(t, name, partitions, nil)
	return name
}

// createControlTopic: one partition, cleanup.policy=compact, room for an 8 MiB document (spec 6.1).
func createControlTopic(t *testing.T) string {
	name := unique("control")
	compact, maxBytes := "compact", "9437184"
	createTopic(t, name, 1, map[string]*string{"cleanup.policy": &compact, "max.message.bytes": &maxBytes})
	return name
}

func producer(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap(t)), kgo.ProducerBatchMaxBytes(9437184),
		kgo.ProducerLinger(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func publish(t *testing.T, cl *kgo.Client, control string, key, value []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: control, Key: key, Value: value}).FirstErr(); err != nil {
		t.Fatalf("publish on %s: %v", control, err)
	}
}

func endOffsets(t *testing.T, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listed, err := admin(t).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// readAll reads topic from the beginning to its current end offsets.
func readAll(t *testing.T, topic string) []*kgo.Record {
	t.Helper()
	end := endOffsets(t, topic)
	want := int64(0)
	starts := map[int32]kgo.Offset{}
	for p, o := range end {
		want += o
		starts[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap(t)),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []*kgo.Record
	next := map[int32]int64{}
	done := func() bool {
		for p, o := range end {
			if next[p] < o {
				return false
			}
		}
		return true
	}
	for !done() {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %d records, next %v, end %v", topic, len(out), next, end)
		}
		f.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = r.Offset + 1
			out = append(out, r)
		})
	}
	return out
}

// document builds a valid version 1 document: partitions, a random table of 4 buckets per
// partition, and heavy keys on partitions chosen at random.
func document(topic string, partitions int, epoch uint64, heavy []string, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, epoch))
	table := make([]string, 4*partitions)
	for i := range table {
		table[i] = fmt.Sprint(rng.IntN(partitions))
	}
	entries := make([]string, len(heavy))
	for i, k := range heavy {
		entries[i] = fmt.Sprintf(`{"key_b64":%q,"partition":%d,"weight":%d}`,
			base64.StdEncoding.EncodeToString([]byte(k)), rng.IntN(partitions), 1000-i)
	}
	load := make([]string, partitions)
	for i := range load {
		load[i] = "0.1"
	}
	return []byte(fmt.Sprintf(`{"format":"dkg.assignment","version":1,"topic":%q,"partitions":%d,"epoch":%d,`+
		`"bucket_hash":{"function":"murmur2","seed":%d},"buckets":%d,"table":[%s],"heavy":[%s],`+
		`"params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000},"created_at_ms":%d,"predicted_load":[%s]}`,
		topic, partitions, epoch, rng.Uint32(), len(table), strings.Join(table, ","), strings.Join(entries, ","),
		time.Now().UnixMilli(), strings.Join(load, ",")))
}

func waitUntil(t *testing.T, what string, deadline time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %s waiting for %s", deadline, what)
		}
		time.Sleep(time.Millisecond)
	}
}
