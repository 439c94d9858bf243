//! Producer-side metrics, registered in the caller's [`prometheus::Registry`]. The names are
//! normative for every producer implementation: `docs/spec.md` section 10.
//!
//! Names follow `dkg_<what>_<unit>[_total]` with bounded labels (`docs/metrics.md`):
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `dkg_producer_records_total` | counter | `topic`, `route` | keyed records routed; `route` = `heavy` / `bucket` / `split` (by the assignment; `split`: a split heavy key of format version 2) or `fallback` (Kafka's default murmur2 placement) |
//! | `dkg_producer_partition_records_total` | counter | `topic`, `partition` | keyed records routed to each partition |
//! | `dkg_producer_epoch` | gauge | `topic` | epoch of the topic's current assignment, 0 = none |
//! | `dkg_producer_assignment_in_effect` | gauge | `topic` | 1 while the current assignment routes records, 0 while it waits for the topic's partition count to match (or there is none) |
//! | `dkg_producer_assignment_age_seconds` | gauge | `topic` | now minus the assignment's `created_at_ms` (the publisher's clock), computed at scrape; absent without an assignment |
//! | `dkg_producer_assignments_rejected_total` | counter | `topic`, `reason` | control-topic records rejected, by [`RejectReason`] and the data topic the record names: one this producer writes to (or declared), else [`OTHER_TOPIC`] (another producer's topic, or no topic at all), so the series stay bounded by the producer's own topics |
//! | `dkg_producer_partition_count_changes_total` | counter | `topic` | changes of the topic's partition count seen after the first: each moves keys (to Kafka's placement over the new count) with no marker and no `dkg-epoch` stamp, outside the ordering guarantee |
//! | `dkg_producer_stamp_windows_closed_total` | counter | `topic`, `reason` | ordering producers: stamp windows closed (`docs/spec.md` 9.2.2), `reason` = `settled` (every followed consumer group settled the switch) or `timed_out` (open for the bound) |
//!
//! Records the wrapper leaves alone (keyless, or with an explicit partition) are not counted.
//! Records routed before the topic's partition count is known go to librdkafka's partitioner: they
//! count as `fallback` but under no partition.
//!
//! **Cost on the hot path.** Counter handles are resolved once per topic (and per partition when
//! the partition count changes) and cached in the topic's state, so routing a record costs two
//! atomic increments; `with_label_values` never runs per record. Epoch, age and in-effect are read
//! from the routing state when Prometheus scrapes, so adopting an assignment touches no metric.
//!
//! The age is measured from `created_at_ms`, not from adoption, because it answers the operator's
//! question "how old is the key distribution this producer routes by?"; it includes clock skew
//! between the publisher's host and this one (negative ages are clamped to 0).

use std::sync::{Arc, Mutex};

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry};

use crate::error::Result;
use crate::kafka::control::RejectReason;

/// The `topic` label of rejected control records that name no topic of this producer (another
/// producer's topic, or none): not a legal topic name, so it never collides with one.
pub const OTHER_TOPIC: &str = "(other)";

/// Per-topic route counters, resolved once.
#[derive(Clone, Debug)]
pub(crate) struct RouteCounters {
    pub(crate) heavy: IntCounter,
    pub(crate) bucket: IntCounter,
    pub(crate) split: IntCounter,
    pub(crate) fallback: IntCounter,
}

/// A topic's routing status, read at scrape time.
#[derive(Clone, Debug)]
pub(crate) struct TopicStatus {
    pub(crate) topic: Arc<str>,
    pub(crate) epoch: u64,
    pub(crate) created_at_ms: Option<u64>,
    pub(crate) in_effect: bool,
}

type Snapshot = Box<dyn Fn() -> Vec<TopicStatus> + Send + Sync>;

/// The metric vectors of one router. Cheap to clone (handles are `Arc`s).
#[derive(Clone, Debug)]
pub(crate) struct ProducerMetrics {
    records: IntCounterVec,
    partition_records: IntCounterVec,
    rejected_vec: IntCounterVec,
    count_changes: IntCounterVec,
    windows_closed: IntCounterVec,
    epoch: IntGaugeVec,
    in_effect: IntGaugeVec,
    age: GaugeVec,
}

impl ProducerMetrics {
    pub(crate) fn new() -> Result<Self> {
        let records = IntCounterVec::new(
            Opts::new(
                "dkg_producer_records_total",
                "Keyed records routed by the DKG producer wrapper, by route (heavy, bucket, split, fallback).",
            ),
            &["topic", "route"],
        )?;
        let partition_records = IntCounterVec::new(
            Opts::new(
                "dkg_producer_partition_records_total",
                "Keyed records routed by the DKG producer wrapper to each partition.",
            ),
            &["topic", "partition"],
        )?;
        let rejected_vec = IntCounterVec::new(
            Opts::new(
                "dkg_producer_assignments_rejected_total",
                "Control-topic records rejected by the DKG producer wrapper, by reason.",
            ),
            &["topic", "reason"],
        )?;
        let count_changes = IntCounterVec::new(
            Opts::new(
                "dkg_producer_partition_count_changes_total",
                "Changes of the topic's partition count after the first seen: each moves keys \
                 without a marker or an epoch stamp (outside the ordering guarantee).",
            ),
            &["topic"],
        )?;
        let windows_closed = IntCounterVec::new(
            Opts::new(
                "dkg_producer_stamp_windows_closed_total",
                "Stamp windows closed by an ordering producer, by reason (settled: every followed \
                 consumer group settled the switch; timed_out: open for the bound).",
            ),
            &["topic", "reason"],
        )?;
        // One series per reason from the start (here for other topics, for each of the
        // producer's topics when it is first used), so dashboards see zeros rather than gaps.
        for r in RejectReason::ALL {
            rejected_vec.with_label_values(&[OTHER_TOPIC, r.as_str()]);
        }
        let epoch = IntGaugeVec::new(
            Opts::new(
                "dkg_producer_epoch",
                "Epoch of the topic's current DKG assignment (0 = none).",
            ),
            &["topic"],
        )?;
        let in_effect = IntGaugeVec::new(
            Opts::new(
                "dkg_producer_assignment_in_effect",
                "1 while the topic's current assignment routes records; 0 while there is none or its \
                 partition count differs from the topic's.",
            ),
            &["topic"],
        )?;
        let age = GaugeVec::new(
            Opts::new(
                "dkg_producer_assignment_age_seconds",
                "Seconds since the topic's current assignment was created (its created_at_ms), at scrape.",
            ),
            &["topic"],
        )?;
        Ok(Self {
            records,
            partition_records,
            rejected_vec,
            count_changes,
            windows_closed,
            epoch,
            in_effect,
            age,
        })
    }

    /// The route counters of `topic` (resolved once per topic, when it is first used: its
    /// rejection series start then too).
    pub(crate) fn route_counters(&self, topic: &str) -> RouteCounters {
        for r in RejectReason::ALL {
            self.rejected_vec.with_label_values(&[topic, r.as_str()]);
        }
        RouteCounters {
            heavy: self.records.with_label_values(&[topic, "heavy"]),
            bucket: self.records.with_label_values(&[topic, "bucket"]),
            split: self.records.with_label_values(&[topic, "split"]),
            fallback: self.records.with_label_values(&[topic, "fallback"]),
        }
    }

    /// The per-partition counter of `topic`/`partition`.
    pub(crate) fn partition_counter(&self, topic: &str, partition: u32) -> IntCounter {
        self.partition_records
            .with_label_values(&[topic, &partition.to_string()])
    }

    /// The partition-count change counter of `topic` (its series exists once the count is known).
    pub(crate) fn count_changes(&self, topic: &str) -> IntCounter {
        self.count_changes.with_label_values(&[topic])
    }

    /// Count stamp windows of `topic` closed for `reason` (`settled` or `timed_out`).
    pub(crate) fn windows_closed(&self, topic: &str, reason: &str) {
        self.windows_closed
            .with_label_values(&[topic, reason])
            .inc();
    }

    /// Count a control record rejected for `reason` under the `topic` label (one of the
    /// producer's topics, or [`OTHER_TOPIC`]). Rare: the label lookup is paid per rejection.
    pub(crate) fn rejected(&self, topic: &str, reason: RejectReason) {
        self.rejected_vec
            .with_label_values(&[topic, reason.as_str()])
            .inc();
    }

    /// Register everything in `registry` as one collector (all or nothing); `snapshot` supplies the
    /// per-topic routing status at scrape time.
    pub(crate) fn register(
        &self,
        registry: &Registry,
        snapshot: impl Fn() -> Vec<TopicStatus> + Send + Sync + 'static,
    ) -> Result<()> {
        registry.register(Box::new(ProducerCollector {
            metrics: self.clone(),
            snapshot: Box::new(snapshot),
            scrape: Mutex::new(()),
        }))?;
        Ok(())
    }
}

struct ProducerCollector {
    metrics: ProducerMetrics,
    snapshot: Snapshot,
    /// Scrapes reset and refill the gauges: one at a time.
    scrape: Mutex<()>,
}

impl ProducerCollector {
    /// Every metric this collector exposes, in exposition order.
    fn parts(&self) -> [&dyn Collector; 8] {
        let m = &self.metrics;
        [
            &m.records,
            &m.partition_records,
            &m.rejected_vec,
            &m.count_changes,
            &m.windows_closed,
            &m.epoch,
            &m.in_effect,
            &m.age,
        ]
    }
}

impl Collector for ProducerCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.parts().into_iter().flat_map(|c| c.desc()).collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let m = &self.metrics;
        let _one_at_a_time = self.scrape.lock().unwrap_or_else(|p| p.into_inner());
        m.epoch.reset();
        m.in_effect.reset();
        m.age.reset();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        for status in (self.snapshot)() {
            let topic: &str = &status.topic;
            m.epoch
                .with_label_values(&[topic])
                .set(i64::try_from(status.epoch).unwrap_or(i64::MAX));
            m.in_effect
                .with_label_values(&[topic])
                .set(i64::from(status.in_effect));
            if let Some(created) = status.created_at_ms {
                let age_ms = now_ms.saturating_sub(created);
                #[allow(clippy::cast_precision_loss)]
                m.age
                    .with_label_values(&[topic])
                    .set(age_ms as f64 / 1000.0);
            }
        }
        self.parts().into_iter().flat_map(|c| c.collect()).collect()
    }
}
