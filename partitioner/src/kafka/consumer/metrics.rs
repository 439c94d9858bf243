//! Consumer-side metrics, registered in the caller's [`prometheus::Registry`].
//!
//! Names follow the table of `docs/metrics.md`. Every series carries the constant label
//! `member` (the builder's [`member`](super::DkgConsumerBuilder::member) name), so several
//! consumers of one process can share a registry and dashboards can `sum by (partition)`:
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `dkg_consumer_records_total` | counter | `topic`, `partition`, `member` | records handed to the application (`rate()` = records/s per partition) |
//! | `dkg_consumer_member_records_total` | counter | `topic`, `member` | the same per member |
//! | `dkg_consumer_lag_records` | gauge | `topic`, `partition`, `member` | end of the partition (last stable offset) minus the lowest unprocessed offset: held records count as lag |
//! | `dkg_consumer_held_records` | gauge | `topic`, `partition`, `member` | records of moved keys held back right now |
//! | `dkg_consumer_hold_seconds` | histogram | `topic`, `member` | how long each held record was held (arrival to release) |
//! | `dkg_consumer_split_records_total` | counter | `topic`, `member` | records handed out whose key is split in their epoch ([`DkgMessage::split_parts`](super::DkgMessage::split_parts)) |
//! | `dkg_consumer_untrusted_records_total` | counter | `topic`, `reason`, `member` | records whose `dkg-*` headers the protocol could not trust, handed to the application as data; `reason` = `unknown_epoch` (stamped with an epoch still unknown after [`unknown_epoch_wait`](super::ConsumerConfig::unknown_epoch_wait): released without the guarantee) |
//! | `dkg_consumer_clamped_leases_total` | counter | `topic`, `member` | lease reads whose expiry lay beyond [`max_lease`](super::ConsumerConfig::max_lease) from now, clamped to it |
//! | `dkg_consumer_commit_windows_left_out_total` | counter | `topic`, `member` | commits whose metadata left out the skip window (`n`, `u`: over [`max_metadata_bytes`](super::ConsumerConfig::max_metadata_bytes), about 900 unprocessed offsets): a next owner re-processes what was processed above the committed offset. Keep [`max_held_records`](super::ConsumerConfig::max_held_records) below about 900 |
//! | `dkg_consumer_markers_rejected_total` | counter | `topic`, `reason`, `member` | marker records of marker-mode producers that were skipped; `reason` = `oversize`, `malformed_json`, `key_mismatch`, `invalid`, `partition_count` (spec 9.1) |
//!
//! Per-partition series are removed when the partition is revoked, so a partition's gauges come
//! from its current owner only. Hot path: a plain per-partition count, added to the record counters
//! at housekeeping (every 100 ms while records flow, and when the consumer is dropped).

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry,
};

use dkg_kafka_protocol::consumer::core::Anomalies;
use dkg_kafka_protocol::handoff::MarkerReject;

use crate::error::Result;

/// The metric handles of one consumer.
#[derive(Clone, Debug)]
pub(crate) struct ConsumerMetrics {
    topic: String,
    records: IntCounterVec,
    member_records: IntCounter,
    lag: IntGaugeVec,
    held: IntGaugeVec,
    hold: Histogram,
    split_records: IntCounter,
    unknown_epoch: IntCounter,
    clamped_leases: IntCounter,
    windows_left_out: IntCounter,
    /// Per [`MarkerReject::index`].
    markers_rejected: Vec<IntCounter>,
    /// Split records handed out since the last [`ConsumerMetrics::flush`].
    pending_split: u64,
    /// `records` per partition, resolved once.
    per_partition: Vec<Option<IntCounter>>,
    /// Records handed out per partition since the last [`ConsumerMetrics::flush`].
    pending: Vec<u64>,
}

impl ConsumerMetrics {
    /// Create the vectors for `topic` labelled with `member` and register them in `registry`
    /// (if any).
    pub(crate) fn new(topic: &str, member: &str, registry: Option<&Registry>) -> Result<Self> {
        let records = IntCounterVec::new(
            Opts::new(
                "dkg_consumer_records_total",
                "Records handed to the application by the DKG consumer, per partition.",
            )
            .const_label("member", member),
            &["topic", "partition"],
        )?;
        let member_records = IntCounterVec::new(
            Opts::new(
                "dkg_consumer_member_records_total",
                "Records handed to the application by the DKG consumer, per group member.",
            )
            .const_label("member", member),
            &["topic"],
        )?;
        let lag = IntGaugeVec::new(
            Opts::new(
                "dkg_consumer_lag_records",
                "Records behind the end of each partition (end minus lowest unprocessed offset).",
            )
            .const_label("member", member),
            &["topic", "partition"],
        )?;
        let held = IntGaugeVec::new(
            Opts::new(
                "dkg_consumer_held_records",
                "Records of keys that an epoch moved, held back until the key's older records on \
                 its previous partition are processed (ordering-safe migration).",
            )
            .const_label("member", member),
            &["topic", "partition"],
        )?;
        let hold = HistogramVec::new(
            HistogramOpts::new(
                "dkg_consumer_hold_seconds",
                "How long records of moved keys were held.",
            )
            .const_label("member", member)
            // 50 ms steps from 0.1 s to 0.3 s, where moved keys' p99 lies on a local broker: a
            // comparison of two consumers' p99 "within 50 ms" needs that resolution.
            .buckets(vec![
                0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4,
                0.5, 0.75, 1.0, 2.0, 5.0, 10.0, 30.0,
            ]),
            &["topic"],
        )?;
        let split_records = IntCounterVec::new(
            Opts::new(
                "dkg_consumer_split_records_total",
                "Records handed to the application whose key is split over several partitions in \
                 their epoch (no per-key order across the parts).",
            )
            .const_label("member", member),
            &["topic"],
        )?;
        let untrusted = IntCounterVec::new(
            Opts::new(
                "dkg_consumer_untrusted_records_total",
                "Records whose dkg-* headers the ordering protocol could not trust, handed to the \
                 application as data, by reason.",
            )
            .const_label("member", member),
            &["topic", "reason"],
        )?;
        let clamped_leases = IntCounterVec::new(
            Opts::new(
                "dkg_consumer_clamped_leases_total",
                "Producer leases read with an expiry beyond the consumer's max_lease from now \
                 (clamped to it).",
            )
            .const_label("member", member),
            &["topic"],
        )?;
        let windows_left_out = IntCounterVec::new(
            Opts::new(
                "dkg_consumer_commit_windows_left_out_total",
                "Offset commits whose metadata left out the skip window (unprocessed offsets over \
                 the metadata limit): a next owner re-processes the records processed above the \
                 committed offset.",
            )
            .const_label("member", member),
            &["topic"],
        )?;
        let markers_rejected = IntCounterVec::new(
            Opts::new(
                "dkg_consumer_markers_rejected_total",
                "Marker records on the handoff topic skipped by the consumer, by reason.",
            )
            .const_label("member", member),
            &["topic", "reason"],
        )?;
        if let Some(registry) = registry {
            registry.register(Box::new(markers_rejected.clone()))?;
            registry.register(Box::new(untrusted.clone()))?;
            registry.register(Box::new(clamped_leases.clone()))?;
            registry.register(Box::new(windows_left_out.clone()))?;
            registry.register(Box::new(split_records.clone()))?;
            registry.register(Box::new(records.clone()))?;
            registry.register(Box::new(member_records.clone()))?;
            registry.register(Box::new(lag.clone()))?;
            registry.register(Box::new(held.clone()))?;
            registry.register(Box::new(hold.clone()))?;
        }
        Ok(Self {
            topic: topic.to_owned(),
            member_records: member_records.with_label_values(&[topic]),
            hold: hold.with_label_values(&[topic]),
            split_records: split_records.with_label_values(&[topic]),
            unknown_epoch: untrusted.with_label_values(&[topic, "unknown_epoch"]),
            clamped_leases: clamped_leases.with_label_values(&[topic]),
            windows_left_out: windows_left_out.with_label_values(&[topic]),
            markers_rejected: MarkerReject::ALL
                .iter()
                .map(|r| markers_rejected.with_label_values(&[topic, r.as_str()]))
                .collect(),
            pending_split: 0,
            records,
            lag,
            held,
            per_partition: Vec::new(),
            pending: Vec::new(),
        })
    }

    /// Count one record handed to the application (locally: an atomic increment of a shared
    /// counter per record would cost about a tenth of the consumer's own time per record).
    #[inline]
    pub(crate) fn record(&mut self, partition: u32) {
        match self.pending.get_mut(partition as usize) {
            Some(n) => *n += 1,
            None => self.grow(partition),
        }
    }

    /// Count a record handed out with its split label.
    #[inline]
    pub(crate) fn split(&mut self, split: Option<u32>) {
        if split.is_some() {
            self.pending_split += 1;
        }
    }

    #[cold]
    fn grow(&mut self, partition: u32) {
        self.pending.resize(partition as usize + 1, 0);
        self.pending[partition as usize] = 1;
    }

    /// Add the records counted since the last flush to the counters.
    pub(crate) fn flush(&mut self) {
        let mut total = 0;
        for p in 0..self.pending.len() {
            let n = std::mem::take(&mut self.pending[p]);
            if n > 0 {
                total += n;
                self.counter(p).inc_by(n);
            }
        }
        if total > 0 {
            self.member_records.inc_by(total);
        }
        let split = std::mem::take(&mut self.pending_split);
        if split > 0 {
            self.split_records.inc_by(split);
        }
    }

    /// The `records` counter of partition `p`, resolved once.
    fn counter(&mut self, p: usize) -> &IntCounter {
        if self.per_partition.len() <= p {
            self.per_partition.resize(p + 1, None);
        }
        let (records, topic) = (&self.records, self.topic.as_str());
        self.per_partition[p]
            .get_or_insert_with(|| records.with_label_values(&[topic, &p.to_string()]))
    }

    /// Count what the core could not trust (see [`Anomalies`]).
    pub(crate) fn anomalies(&self, a: Anomalies) {
        self.unknown_epoch.inc_by(a.unknown_epoch_records);
        self.clamped_leases.inc_by(a.clamped_leases);
        self.windows_left_out.inc_by(a.windows_left_out);
        for (counter, &n) in self.markers_rejected.iter().zip(&a.rejected_markers) {
            counter.inc_by(n);
        }
    }

    pub(crate) fn observe_hold(&self, seconds: f64) {
        self.hold.observe(seconds);
    }

    pub(crate) fn set_held(&self, partition: u32, held: usize) {
        self.held
            .with_label_values(&[self.topic.as_str(), &partition.to_string()])
            .set(i64::try_from(held).unwrap_or(i64::MAX));
    }

    pub(crate) fn set_lag(&self, partition: u32, lag: i64) {
        self.lag
            .with_label_values(&[self.topic.as_str(), &partition.to_string()])
            .set(lag.max(0));
    }

    /// Forget a revoked partition's gauges (its new owner reports them).
    pub(crate) fn forget(&mut self, partition: u32) {
        let p = partition.to_string();
        let labels = [self.topic.as_str(), p.as_str()];
        let _ = self.held.remove_label_values(&labels);
        let _ = self.lag.remove_label_values(&labels);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn value(registry: &Registry, name: &str) -> Option<f64> {
        registry
            .gather()
            .iter()
            .find(|f| f.name() == name)
            .map(|f| f.get_metric()[0].get_counter().get_value())
    }

    #[test]
    fn commits_that_left_out_their_window_are_counted() {
        let registry = Registry::new();
        let m = ConsumerMetrics::new("orders", "m1", Some(&registry)).unwrap();
        let name = "dkg_consumer_commit_windows_left_out_total";
        assert_eq!(
            value(&registry, name),
            Some(0.0),
            "registered from the start"
        );
        m.anomalies(Anomalies::default());
        assert_eq!(
            value(&registry, name),
            Some(0.0),
            "commits that fit count nothing"
        );
        m.anomalies(Anomalies {
            windows_left_out: 2,
            ..Anomalies::default()
        });
        assert_eq!(value(&registry, name), Some(2.0));
    }
}
