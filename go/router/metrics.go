package router

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	dkg "dkg.dev/dkg-go"
)

// The dkg_producer_* metrics of spec 10, with the Rust and Python producers' names, labels and help.
var (
	descRecords = prometheus.NewDesc("dkg_producer_records_total",
		"Keyed records routed by the DKG producer wrapper, by route (heavy, bucket, split, fallback).",
		[]string{"topic", "route"}, nil)
	descPartitionRecords = prometheus.NewDesc("dkg_producer_partition_records_total",
		"Keyed records routed by the DKG producer wrapper to each partition.",
		[]string{"topic", "partition"}, nil)
	descRejected = prometheus.NewDesc("dkg_producer_assignments_rejected_total",
		"Control-topic records rejected by the DKG producer wrapper, by topic (this producer's, else (other)) and reason.",
		[]string{"topic", "reason"}, nil)
	descCountChanges = prometheus.NewDesc("dkg_producer_partition_count_changes_total",
		"Changes of the topic's partition count after the first seen: each moves keys without a marker or an epoch stamp (outside the ordering guarantee).",
		[]string{"topic"}, nil)
	descEpoch = prometheus.NewDesc("dkg_producer_epoch",
		"Epoch of the topic's current DKG assignment (0 = none).",
		[]string{"topic"}, nil)
	descInEffect = prometheus.NewDesc("dkg_producer_assignment_in_effect",
		"1 while the topic's current assignment routes records; 0 while there is none or its partition count differs from the topic's.",
		[]string{"topic"}, nil)
	descAge = prometheus.NewDesc("dkg_producer_assignment_age_seconds",
		"Seconds since the topic's current assignment was created (its created_at_ms), at scrape.",
		[]string{"topic"}, nil)
)

// collector reads the router's atomics at scrape time, so placing a record never touches
// client_golang.
type collector struct{ r *Router }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRecords, descPartitionRecords, descRejected, descCountChanges,
		descEpoch, descInEffect, descAge} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for _, reason := range dkg.AllReasons {
		ch <- prometheus.MustNewConstMetric(descRejected, prometheus.CounterValue,
			float64(c.r.rejected[reason].Load()), OtherTopic, reason.String())
	}
	nowMs := float64(time.Now().UnixMilli())
	c.r.topics.Range(func(_, v any) bool {
		t := v.(*topicState)
		if !t.used.Load() {
			return true
		}
		var routes [4]uint64
		routes[dkg.RouteFallback] = t.unknown.Load() // left to the client: fallback under no partition (spec 10)
		if cells := t.cells.Load(); cells != nil {
			for p := 0; p < len(*cells)/4; p++ {
				sum := uint64(0)
				for route := 0; route < 4; route++ {
					n := (*cells)[4*p+route].Load()
					routes[route] += n
					sum += n
				}
				ch <- prometheus.MustNewConstMetric(descPartitionRecords, prometheus.CounterValue,
					float64(sum), t.name, strconv.Itoa(p))
			}
		}
		for _, route := range []dkg.Route{dkg.RouteHeavy, dkg.RouteBucket, dkg.RouteSplit, dkg.RouteFallback} {
			ch <- prometheus.MustNewConstMetric(descRecords, prometheus.CounterValue,
				float64(routes[route]), t.name, route.String())
		}
		ch <- prometheus.MustNewConstMetric(descCountChanges, prometheus.CounterValue, float64(t.changes.Load()), t.name)
		for _, reason := range dkg.AllReasons {
			ch <- prometheus.MustNewConstMetric(descRejected, prometheus.CounterValue,
				float64(t.rejected[reason].Load()), t.name, reason.String())
		}
		a := t.assignment.Load()
		epoch, inEffect := 0.0, 0.0
		if a != nil {
			epoch = float64(a.Epoch)
			if int64(a.Partitions) == t.count.Load() {
				inEffect = 1
			}
			ch <- prometheus.MustNewConstMetric(descAge, prometheus.GaugeValue,
				max(0, nowMs-float64(a.CreatedAtMs))/1000, t.name)
		}
		ch <- prometheus.MustNewConstMetric(descEpoch, prometheus.GaugeValue, epoch, t.name)
		ch <- prometheus.MustNewConstMetric(descInEffect, prometheus.GaugeValue, inEffect, t.name)
		return true
	})
}
