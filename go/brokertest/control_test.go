package brokertest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	dkg "dkg.dev/dkg-go"
	"dkg.dev/dkg-go/router"
)

// A running router adopts each new epoch (publish-to-effect latency measured); hostile records on
// the control topic leave placement unchanged and are counted by reason; a router started after
// all of it reads the same state.
func TestSwitchesAreAdoptedAndHostileRecordsChangeNothing(t *testing.T) {
	const partitions = 3
	b, topic, control := dataAndControl(t, "switch", partitions)
	reg := prometheus.NewRegistry()
	ctx := context.Background()
	r, err := router.New(ctx, router.Config{Seeds: []string{b}, ControlTopic: control, Registerer: reg, Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pub := producer(t)
	heavy := []string{"hot", "warm", ""}

	var latencies []time.Duration
	for epoch := uint64(1); epoch <= 6; epoch++ {
		value := document(topic, partitions, epoch, heavy, 1)
		start := time.Now()
		publish(t, pub, control, []byte(topic), value)
		waitUntil(t, fmt.Sprintf("epoch %d to be adopted", epoch), 30*time.Second, func() bool { return r.Epoch(topic) == epoch })
		latencies = append(latencies, time.Since(start))
	}
	sorted := slices.Clone(latencies)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	t.Logf("publish-to-effect latency (send of the publication to the router's swap), 6 switches: median %s, max %s, all %v",
		sorted[len(sorted)/2], sorted[len(sorted)-1], latencies)

	// Records produced now follow epoch 6.
	a := r.Assignment(topic)
	cl := producer(t, kgo.RecordPartitioner(r.Partitioner()), kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	for i := 0; i < 500; i++ {
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i%50)), Value: []byte("e6")})
	}
	for _, h := range heavy {
		recs = append(recs, &kgo.Record{Key: []byte(h), Value: []byte("e6")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, rec := range readAll(t, topic) {
		if p, _ := dkg.Place(a, partitions, rec.Key); int32(p) != rec.Partition {
			t.Fatalf("%q on %d, epoch 6 says %d", rec.Key, rec.Partition, p)
		}
	}

	// Hostile records: each rejected, nothing changes.
	base := string(document(topic, partitions, 9, heavy, 2))
	hostile := []struct {
		key    []byte
		value  []byte
		reason dkg.Reason
	}{
		// (A null key cannot be written to a compacted topic: the broker refuses it.)
		{[]byte{}, []byte(base), dkg.ReasonBadKey},
		{[]byte{0xff, 0xfe}, []byte(base), dkg.ReasonBadKey},
		{[]byte(topic), []byte{}, dkg.ReasonMalformedJSON},
		{[]byte(topic), []byte("not json"), dkg.ReasonMalformedJSON},
		{[]byte(topic), []byte(strings.Replace(base, `"heavy":[`, `"heavy":[{"key_b64":"aG90","partition":0,"weight":1,"x":1},`, 1)), dkg.ReasonMalformedJSON},
		{[]byte(topic), []byte(strings.Replace(base, `"version":1`, `"version":3`, 1)), dkg.ReasonUnsupportedVersion},
		{[]byte(topic), document(topic, partitions, 5, heavy, 3), dkg.ReasonStaleEpoch},
		{[]byte(topic), document(topic, partitions, 6, heavy, 4), dkg.ReasonEpochConflict},
		{[]byte(topic), document("another-topic", partitions, 9, heavy, 2), dkg.ReasonTopicMismatch},
		{[]byte(topic), []byte(strings.Replace(base, `"table":[`, `"table":[7,`, 1)), dkg.ReasonInvalid},
		{[]byte(topic), []byte(strings.Replace(base, `"epoch":9`, `"epoch":9007199254740992`, 1)), dkg.ReasonOutOfRange},
		{[]byte(topic), append([]byte(base), bytes.Repeat([]byte(" "), dkg.MaxAssignmentBytes+1-len(base))...), dkg.ReasonOversize},
	}
	before := map[dkg.Reason]uint64{}
	for _, reason := range dkg.AllReasons {
		before[reason] = r.Rejected(reason)
	}
	for _, h := range hostile {
		publish(t, pub, control, h.key, h.value)
	}
	// A sentinel after them: once it is adopted, every hostile record has been applied.
	sentinel := unique("sentinel")
	publish(t, pub, control, []byte(sentinel), document(sentinel, 2, 1, nil, 5))
	waitUntil(t, "the sentinel", 30*time.Second, func() bool { return r.Epoch(sentinel) == 1 })
	if r.Assignment(topic) != a {
		t.Fatalf("a hostile record changed the assignment: epoch %d", r.Epoch(topic))
	}
	want := map[dkg.Reason]uint64{}
	for _, h := range hostile {
		want[h.reason]++
	}
	for _, reason := range dkg.AllReasons {
		if got := r.Rejected(reason) - before[reason]; got != want[reason] {
			t.Errorf("%s: %d rejections, want %d", reason, got, want[reason])
		}
	}
	families, _ := reg.Gather()
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	for _, n := range []string{"dkg_producer_records_total", "dkg_producer_assignments_rejected_total", "dkg_producer_epoch",
		"dkg_producer_assignment_in_effect", "dkg_producer_assignment_age_seconds", "dkg_producer_partition_records_total"} {
		if !names[n] {
			t.Errorf("metric %s missing (have %v)", n, names)
		}
	}

	// A router started now reads everything above at start and ends in the same state.
	fresh, err := router.New(ctx, router.Config{Seeds: []string{b}, ControlTopic: control})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if got := fresh.Assignment(topic); got == nil || !got.Equal(a) || fresh.Epoch(sentinel) != 1 {
		t.Fatalf("a fresh router disagrees: %v", got)
	}
	// PartitionFor (clients without a partitioner hook) learns the count from metadata, then places
	// like the adapters.
	waitUntil(t, "PartitionFor to know the partition count", 30*time.Second, func() bool {
		_, ok := r.PartitionFor(topic, []byte("hot"))
		return ok
	})
	for _, k := range []string{"hot", "warm", "", "k1", "k2", "k3"} {
		p, ok := r.PartitionFor(topic, []byte(k))
		if want, _ := dkg.Place(a, partitions, []byte(k)); !ok || int(p) != want {
			t.Fatalf("PartitionFor(%q) = %d %v, want %d", k, p, ok, want)
		}
	}
	// A tombstone retracts: Kafka's placement again.
	publish(t, pub, control, []byte(topic), nil)
	waitUntil(t, "the retraction", 30*time.Second, func() bool { return r.Assignment(topic) == nil })
	if p, route := r.Place(topic, []byte("hot"), partitions); route != dkg.RouteFallback || p != dkg.KafkaPartition([]byte("hot"), partitions) {
		t.Fatalf("after the tombstone: %d %s", p, route)
	}
}
