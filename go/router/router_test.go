package router

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	dkg "dkg.dev/dkg-go"
)

// doc is the spec 4.1 document with epoch and table replaced.
func doc(topic string, epoch int, table string) []byte {
	return []byte(fmt.Sprintf(`{"format":"dkg.assignment","version":1,"topic":%q,"partitions":3,"epoch":%d,"bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4,"table":%s,"heavy":[{"key_b64":"aG90","partition":1,"weight":1200}],"params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000},"created_at_ms":1700000000000,"predicted_load":[0.5,0.25,0.25]}`, topic, epoch, table))
}

func keys(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf("user-%d", i))
	}
	out = append(out, []byte("hot"), []byte{})
	return out
}

func TestOfflineRouterPlacesBySpec(t *testing.T) {
	reg := prometheus.NewRegistry()
	r, err := NewOffline(reg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, k := range keys(200) {
		if p, route := r.Place("orders", k, 3); p != dkg.KafkaPartition(k, 3) || route != dkg.RouteFallback {
			t.Fatalf("before epoch 1: %q -> %d %s", k, p, route)
		}
	}
	if u := r.Apply([]byte("orders"), doc("orders", 1, "[0,1,2,0]")); u.Outcome != dkg.Accepted {
		t.Fatalf("%v %v", u.Outcome, u.Err)
	}
	a := r.Assignment("orders")
	routes := map[dkg.Route]int{}
	for _, k := range keys(200) {
		p, route := r.Place("orders", k, 3)
		wp, wr := dkg.Place(a, 3, k)
		if p != wp || route != wr {
			t.Fatalf("%q -> %d %s, want %d %s", k, p, route, wp, wr)
		}
		routes[route]++
	}
	if routes[dkg.RouteHeavy] != 1 || routes[dkg.RouteBucket] != 201 {
		t.Fatalf("routes %v", routes)
	}
	// Another partition count: every key falls back (spec 5).
	if p, route := r.Place("orders", []byte("hot"), 4); route != dkg.RouteFallback || p != dkg.KafkaPartition([]byte("hot"), 4) {
		t.Fatalf("count mismatch: %d %s", p, route)
	}
	// Hostile records leave the assignment in place and are counted by reason.
	hostile := []struct {
		key, value []byte
		reason     dkg.Reason
	}{
		{nil, doc("orders", 9, "[0,0,0,0]"), dkg.ReasonBadKey},
		{[]byte("orders"), []byte("{"), dkg.ReasonMalformedJSON},
		{[]byte("orders"), []byte{}, dkg.ReasonMalformedJSON},
		{[]byte("orders"), doc("orders", 0, "[0,0,0,0]"), dkg.ReasonStaleEpoch},
		{[]byte("orders"), doc("orders", 1, "[0,0,0,0]"), dkg.ReasonEpochConflict},
		{[]byte("orders"), doc("other", 9, "[0,0,0,0]"), dkg.ReasonTopicMismatch},
		{[]byte("orders"), doc("orders", 9, "[0,0,0,7]"), dkg.ReasonOutOfRange},
		{[]byte("orders"), []byte(strings.Replace(string(doc("orders", 9, "[0,0,0,0]")), `"version":1`, `"version":3`, 1)), dkg.ReasonUnsupportedVersion},
	}
	for _, h := range hostile {
		if u := r.Apply(h.key, h.value); u.Outcome != dkg.Rejected || u.Err.Reason != h.reason {
			t.Fatalf("%q: %v %v, want %s", h.value, u.Outcome, u.Err, h.reason)
		}
	}
	if r.Assignment("orders") != a {
		t.Fatal("a rejected record changed the assignment")
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, f := range families {
		got[f.GetName()] = len(f.GetMetric())
		if f.GetName() == "dkg_producer_assignments_rejected_total" {
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				want := 0.0
				if labels["reason"] == "stale_epoch" && labels["topic"] == "orders" {
					want = 1
				} else if labels["reason"] == "bad_key" && labels["topic"] == OtherTopic {
					want = 1
				} else if labels["reason"] == "malformed_json" && labels["topic"] == "orders" {
					want = 2
				} else if labels["reason"] == "epoch_conflict" || labels["reason"] == "topic_mismatch" ||
					labels["reason"] == "out_of_range" || labels["reason"] == "unsupported_version" {
					if labels["topic"] == "orders" {
						want = 1
					}
				}
				if m.GetCounter().GetValue() != want {
					t.Errorf("rejected %v counted %v, want %v", labels, m.GetCounter().GetValue(), want)
				}
			}
		}
	}
	want := map[string]int{
		"dkg_producer_assignments_rejected_total": 20, "dkg_producer_records_total": 4,
		"dkg_producer_partition_records_total": 3 + dkg.KafkaPartition([]byte("hot"), 4)/3, "dkg_producer_epoch": 1, "dkg_producer_assignment_in_effect": 1,
		"dkg_producer_assignment_age_seconds": 1, "dkg_producer_partition_count_changes_total": 1,
	}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("%s: %d series, want %d (all: %v)", name, got[name], n, got)
		}
	}
	// A tombstone retracts: Kafka's placement again.
	if u := r.Apply([]byte("orders"), nil); u.Outcome != dkg.Retracted || r.Assignment("orders") != nil {
		t.Fatalf("tombstone: %v", u.Outcome)
	}
}

func TestKgoPartitioner(t *testing.T) {
	r, _ := NewOffline(nil)
	r.Apply([]byte("orders"), doc("orders", 1, "[2,2,2,2]"))
	tp := r.Partitioner().ForTopic("orders")
	for _, k := range keys(100) {
		rec := &kgo.Record{Key: k}
		want, _ := dkg.Place(r.Assignment("orders"), 3, k)
		if got := tp.Partition(rec, 3); got != want || !tp.RequiresConsistency(rec) {
			t.Fatalf("%q: %d, want %d", k, got, want)
		}
	}
	for i := 0; i < 100; i++ {
		if p := tp.Partition(&kgo.Record{}, 3); p < 0 || p >= 3 {
			t.Fatalf("keyless: %d", p)
		}
	}
	if tp.RequiresConsistency(&kgo.Record{}) {
		t.Fatal("keyless records need no consistency")
	}
}
