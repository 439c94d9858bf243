//! Prometheus metrics of `dkg-sampler run` (names: the Sampler section of METRICS.md, binding).
//!
//! Labels are bounded: `topic`, `partition`, `placement` (hash|current|fresh), `reason`
//! (unknown_epoch|count_changed), and for the top-N heavy keys
//! `rank` and `key` (N <= 20, keys truncated to 64 characters and escaped to printable ASCII). The hot
//! consume loop never touches these: the driver adds each interval's totals in one call per metric.

use prometheus::{Encoder, GaugeVec, IntCounterVec, Opts, Registry, TextEncoder};

use super::misplaced::{PlacementCounts, Skip};
use super::window::Weight;

/// Largest `--top-n`.
pub const MAX_TOP_N: usize = 20;
/// Longest `key` label value (characters, after escaping).
pub const MAX_KEY_LABEL_CHARS: usize = 64;

/// The sampler's metrics, registered in one registry.
#[derive(Debug, Clone)]
pub struct SamplerMetrics {
    registry: Registry,
    topic: String,
    /// dkg_sampler_partition_records_per_second{topic,partition}
    pub partition_rate: GaugeVec,
    /// dkg_sampler_partition_bytes_per_second{topic,partition}
    pub partition_byte_rate: GaugeVec,
    /// dkg_sampler_weight_info{topic,weight}
    pub weight_info: GaugeVec,
    /// dkg_sampler_partition_share_ratio{topic,partition}
    pub partition_share: GaugeVec,
    /// dkg_sampler_observed_imbalance_ratio{topic}
    pub observed_imbalance: GaugeVec,
    /// dkg_sampler_predicted_imbalance_ratio{topic,placement}
    pub predicted_imbalance: GaugeVec,
    /// dkg_sampler_heavy_hitters{topic}
    pub heavy_hitters: GaugeVec,
    /// dkg_sampler_heavy_key_share_ratio{topic,rank,key}
    pub heavy_key_share: GaugeVec,
    /// dkg_sampler_split_keys{topic}
    pub split_keys: GaugeVec,
    /// dkg_sampler_epoch{topic}
    pub epoch: GaugeVec,
    /// dkg_sampler_publishes_total{topic}
    pub publishes: IntCounterVec,
    /// dkg_sampler_epochs_exhausted{topic}
    pub epochs_exhausted: GaugeVec,
    /// dkg_sampler_sketches_rejected_total{topic}
    pub sketches_rejected: IntCounterVec,
    /// dkg_sampler_moved_load_share_ratio{topic}
    pub moved_share: GaugeVec,
    /// dkg_sampler_gained_imbalance_ratio{topic}
    pub gained_imbalance: GaugeVec,
    /// dkg_sampler_window_noise_ratio{topic}
    pub window_noise: GaugeVec,
    /// dkg_sampler_records_sampled_total{topic}
    pub records_sampled: IntCounterVec,
    /// dkg_sampler_records_consumed_total{topic}
    pub records_consumed: IntCounterVec,
    /// dkg_sampler_records_skipped_total{topic}
    pub records_skipped: IntCounterVec,
    /// dkg_sampler_consumer_lag_records{topic,partition}
    pub consumer_lag: GaugeVec,
    /// dkg_sampler_key_grouping_bound_ratio{topic}
    pub bound: GaugeVec,
    /// dkg_sampler_misplaced_records_ratio{topic}
    pub misplaced_ratio: GaugeVec,
    /// dkg_sampler_placement_checked_records_total{topic}
    pub placement_checked: IntCounterVec,
    /// dkg_sampler_misplaced_records_total{topic}
    pub misplaced: IntCounterVec,
    /// dkg_sampler_placement_unchecked_records_total{topic,reason}
    pub placement_unchecked: IntCounterVec,
}

fn gauge(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<GaugeVec> {
    let g = GaugeVec::new(Opts::new(name, help), labels)?;
    registry.register(Box::new(g.clone()))?;
    Ok(g)
}

fn counter(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<IntCounterVec> {
    let c = IntCounterVec::new(Opts::new(name, help), labels)?;
    registry.register(Box::new(c.clone()))?;
    Ok(c)
}

impl SamplerMetrics {
    /// Create and register all sampler metrics for `topic` in `registry`.
    pub fn new(registry: &Registry, topic: &str, weight: Weight) -> prometheus::Result<Self> {
        let r = registry;
        let m = Self {
            registry: registry.clone(),
            topic: topic.to_owned(),
            partition_rate: gauge(
                r,
                "dkg_sampler_partition_records_per_second",
                "Records per second observed on each partition over the last interval.",
                &["topic", "partition"],
            )?,
            partition_byte_rate: gauge(
                r,
                "dkg_sampler_partition_bytes_per_second",
                "Bytes per second observed on each partition over the last interval: key + value, \
                 and with --weight bytes the headers too.",
                &["topic", "partition"],
            )?,
            weight_info: gauge(
                r,
                "dkg_sampler_weight_info",
                "1 for the unit records are weighed in (--weight records|bytes): the unit of the share, \
                 imbalance, bound and heavy-key gauges.",
                &["topic", "weight"],
            )?,
            partition_share: gauge(
                r,
                "dkg_sampler_partition_share_ratio",
                "Share of the window's load (in the unit of --weight) observed on each partition.",
                &["topic", "partition"],
            )?,
            observed_imbalance: gauge(
                r,
                "dkg_sampler_observed_imbalance_ratio",
                "Observed load imbalance max/mean - 1 over the partitions in the last interval.",
                &["topic"],
            )?,
            predicted_imbalance: gauge(
                r,
                "dkg_sampler_predicted_imbalance_ratio",
                "Predicted load imbalance max/mean - 1 on the window, under Kafka's hash placement, the \
                 current assignment and a fresh one.",
                &["topic", "placement"],
            )?,
            heavy_hitters: gauge(
                r,
                "dkg_sampler_heavy_hitters",
                "Heavy hitters in the fresh assignment built on the window.",
                &["topic"],
            )?,
            split_keys: gauge(
                r,
                "dkg_sampler_split_keys",
                "Heavy keys split over several partitions in the last published (or, with --dry-run, \
                 served) assignment (--split-keys).",
                &["topic"],
            )?,
            heavy_key_share: gauge(
                r,
                "dkg_sampler_heavy_key_share_ratio",
                "Estimated share of the window's load (in the unit of --weight) of the top-N keys \
                 (bounded N).",
                &["topic", "rank", "key"],
            )?,
            epoch: gauge(
                r,
                "dkg_sampler_epoch",
                "Epoch of the topic's current assignment (0 = none).",
                &["topic"],
            )?,
            publishes: counter(
                r,
                "dkg_sampler_publishes_total",
                "Assignments this sampler published (in --dry-run: would have published).",
                &["topic"],
            )?,
            epochs_exhausted: gauge(
                r,
                "dkg_sampler_epochs_exhausted",
                "1 when the control topic holds the largest epoch (2^53 - 1) for the topic, so no \
                 higher one can be published: the sampler stopped publishing (recover with a new \
                 control-topic generation, docs/spec.md 6.2); else 0.",
                &["topic"],
            )?,
            sketches_rejected: counter(
                r,
                "dkg_sampler_sketches_rejected_total",
                "Documents on the sketches topic not merged: malformed, of another format, or \
                 forged (a timestamp ahead of this clock by more than 60 s, counts above the \
                 window total they claim, non-finite rates).",
                &["topic"],
            )?,
            moved_share: gauge(
                r,
                "dkg_sampler_moved_load_share_ratio",
                "Share of the load moved to another partition by the last publish.",
                &["topic"],
            )?,
            gained_imbalance: gauge(
                r,
                "dkg_sampler_gained_imbalance_ratio",
                "Predicted imbalance the last publish removed: the replaced assignment's minus the \
                 published one's on the same window (0 for a first epoch).",
                &["topic"],
            )?,
            window_noise: gauge(
                r,
                "dkg_sampler_window_noise_ratio",
                "Imbalance that sampling noise alone gives an assignment fitted to the window (95th \
                 percentile, z_k * sqrt((k - 1) / n)); the first epoch waits until it is at most \
                 --first-epoch-noise.",
                &["topic"],
            )?,
            records_sampled: counter(
                r,
                "dkg_sampler_records_sampled_total",
                "Records observed into the sketch (keyed and kept by --sample-ratio).",
                &["topic"],
            )?,
            records_consumed: counter(
                r,
                "dkg_sampler_records_consumed_total",
                "Records this sampler consumed.",
                &["topic"],
            )?,
            records_skipped: counter(
                r,
                "dkg_sampler_records_skipped_total",
                "Offsets of the topic this sampler skipped unread (--read-fraction < 1; gaps of compacted \
                 or transactional logs count as records).",
                &["topic"],
            )?,
            consumer_lag: gauge(
                r,
                "dkg_sampler_consumer_lag_records",
                "The sampler's own consumer lag on each partition it owns.",
                &["topic", "partition"],
            )?,
            bound: gauge(
                r,
                "dkg_sampler_key_grouping_bound_ratio",
                "Key-grouping lower bound max(1, k * p1) - 1 on the window.",
                &["topic"],
            )?,
            misplaced_ratio: gauge(
                r,
                "dkg_sampler_misplaced_records_ratio",
                "Misplaced / checked keyed records this sampler read in the last interval: records on a \
                 partition that no placement in effect (allowing for adoption lag, the fallback, split \
                 keys and stamped older epochs) gives their key; 0 when none was checked.",
                &["topic"],
            )?,
            placement_checked: counter(
                r,
                "dkg_sampler_placement_checked_records_total",
                "Keyed records whose partition was checked against the placement in effect.",
                &["topic"],
            )?,
            misplaced: counter(
                r,
                "dkg_sampler_misplaced_records_total",
                "Checked records on a partition no placement in effect gives their key.",
                &["topic"],
            )?,
            placement_unchecked: counter(
                r,
                "dkg_sampler_placement_unchecked_records_total",
                "Keyed records not checked: reason unknown_epoch (stamped with an epoch no longer \
                 known, or older than the known history) or count_changed (just after a \
                 partition-count change).",
                &["topic", "reason"],
            )?,
        };
        // Series that exist from the start, so dashboards see 0 rather than nothing.
        m.epoch.with_label_values(&[topic]).set(0.0);
        m.epochs_exhausted.with_label_values(&[topic]).set(0.0);
        m.sketches_rejected.with_label_values(&[topic]);
        m.weight_info
            .with_label_values(&[topic, weight.as_str()])
            .set(1.0);
        m.publishes.with_label_values(&[topic]);
        m.records_consumed.with_label_values(&[topic]);
        m.records_sampled.with_label_values(&[topic]);
        m.records_skipped.with_label_values(&[topic]);
        m.misplaced_ratio.with_label_values(&[topic]).set(0.0);
        m.placement_checked.with_label_values(&[topic]);
        m.misplaced.with_label_values(&[topic]);
        for reason in [Skip::UnknownEpoch, Skip::Unsettled] {
            m.placement_unchecked
                .with_label_values(&[topic, reason.as_str()]);
        }
        Ok(m)
    }

    /// One interval's misplacement verdicts.
    pub fn observe_placement(&self, c: &PlacementCounts) {
        let topic = self.topic.as_str();
        self.misplaced_ratio
            .with_label_values(&[topic])
            .set(c.ratio());
        self.placement_checked
            .with_label_values(&[topic])
            .inc_by(c.checked);
        self.misplaced
            .with_label_values(&[topic])
            .inc_by(c.misplaced);
        for (reason, n) in [
            (Skip::UnknownEpoch, c.unknown_epoch),
            (Skip::Unsettled, c.unsettled),
        ] {
            self.placement_unchecked
                .with_label_values(&[topic, reason.as_str()])
                .inc_by(n);
        }
    }

    /// The topic all series are labelled with.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Replace the per-partition gauges of `vec` with `values` (index = partition); stale partitions vanish.
    pub fn set_per_partition(&self, vec: &GaugeVec, values: &[(u32, f64)]) {
        vec.reset();
        for (p, v) in values {
            vec.with_label_values(&[self.topic.as_str(), &p.to_string()])
                .set(*v);
        }
    }

    /// Replace the top-N heavy key series.
    pub fn set_top_keys(&self, keys: &[(Vec<u8>, f64)]) {
        self.heavy_key_share.reset();
        for (rank, (key, share)) in keys.iter().take(MAX_TOP_N).enumerate() {
            self.heavy_key_share
                .with_label_values(&[
                    self.topic.as_str(),
                    &(rank + 1).to_string(),
                    &key_label(key),
                ])
                .set(*share);
        }
    }

    /// Remove the series that only the publishing (leader) instance reports, so that several instances of
    /// one topic never export conflicting global gauges.
    pub fn clear_global(&self) {
        self.partition_rate.reset();
        self.partition_byte_rate.reset();
        self.partition_share.reset();
        self.observed_imbalance.reset();
        self.predicted_imbalance.reset();
        self.heavy_hitters.reset();
        self.split_keys.reset();
        self.heavy_key_share.reset();
        self.bound.reset();
        self.window_noise.reset();
    }

    /// The registry in Prometheus text format.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 * 1024);
        // Encoding into a Vec cannot fail except for invalid metric families, which we never register.
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::error!("encoding metrics failed: {e}");
        }
        out
    }
}

/// A bounded, printable label for a raw key: printable ASCII stays as is, a backslash is doubled, every
/// other byte becomes `\xNN`; at most [`MAX_KEY_LABEL_CHARS`] characters, `...` marks a cut.
pub fn key_label(key: &[u8]) -> String {
    let mut out = String::with_capacity(MAX_KEY_LABEL_CHARS);
    for &b in key {
        let piece = if (0x20..0x7f).contains(&b) && b != b'\\' {
            (b as char).to_string()
        } else if b == b'\\' {
            "\\\\".to_owned()
        } else {
            format!("\\x{b:02x}")
        };
        if out.len() + piece.len() > MAX_KEY_LABEL_CHARS - 3 {
            out.push_str("...");
            return out;
        }
        out.push_str(&piece);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn key_labels_are_printable_and_bounded() {
        let cases: &[(&[u8], &str)] = &[
            (b"user-42", "user-42"),
            (b"a\\b", "a\\\\b"),
            (b"\x00\xffz", "\\x00\\xffz"),
            (b"caf\xc3\xa9", "caf\\xc3\\xa9"),
        ];
        for (key, want) in cases {
            assert_eq!(key_label(key), *want);
        }
        let long = key_label(&[b'x'; 500]);
        assert!(
            long.len() <= MAX_KEY_LABEL_CHARS && long.ends_with("..."),
            "{long}"
        );
        let long = key_label(&[0u8; 500]);
        assert!(
            long.len() <= MAX_KEY_LABEL_CHARS && long.ends_with("..."),
            "{long}"
        );
    }

    #[test]
    fn renders_all_names_of_the_contract() {
        let registry = Registry::new();
        let m = SamplerMetrics::new(&registry, "orders", Weight::Bytes).unwrap();
        m.set_per_partition(&m.partition_rate, &[(0, 1.0), (1, 2.0)]);
        m.set_per_partition(&m.partition_byte_rate, &[(0, 100.0), (1, 2000.0)]);
        m.set_per_partition(&m.partition_share, &[(0, 0.5)]);
        m.set_per_partition(&m.consumer_lag, &[(0, 3.0)]);
        m.observed_imbalance.with_label_values(&["orders"]).set(0.1);
        m.predicted_imbalance
            .with_label_values(&["orders", "hash"])
            .set(0.2);
        m.heavy_hitters.with_label_values(&["orders"]).set(3.0);
        m.split_keys.with_label_values(&["orders"]).set(1.0);
        m.set_top_keys(&[(b"k1".to_vec(), 0.3)]);
        m.moved_share.with_label_values(&["orders"]).set(0.0);
        m.gained_imbalance.with_label_values(&["orders"]).set(0.0);
        m.window_noise.with_label_values(&["orders"]).set(0.02);
        m.bound.with_label_values(&["orders"]).set(0.0);
        let text = String::from_utf8(m.render()).unwrap();
        for name in [
            "dkg_sampler_partition_records_per_second",
            "dkg_sampler_partition_bytes_per_second",
            "dkg_sampler_weight_info",
            "dkg_sampler_partition_share_ratio",
            "dkg_sampler_observed_imbalance_ratio",
            "dkg_sampler_predicted_imbalance_ratio",
            "dkg_sampler_heavy_hitters",
            "dkg_sampler_split_keys",
            "dkg_sampler_heavy_key_share_ratio",
            "dkg_sampler_epoch",
            "dkg_sampler_publishes_total",
            "dkg_sampler_moved_load_share_ratio",
            "dkg_sampler_gained_imbalance_ratio",
            "dkg_sampler_window_noise_ratio",
            "dkg_sampler_records_sampled_total",
            "dkg_sampler_records_consumed_total",
            "dkg_sampler_records_skipped_total",
            "dkg_sampler_consumer_lag_records",
            "dkg_sampler_key_grouping_bound_ratio",
        ] {
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} missing:\n{text}"
            );
        }
        assert!(
            text.contains(
                r#"dkg_sampler_heavy_key_share_ratio{key="k1",rank="1",topic="orders"} 0.3"#
            ),
            "{text}"
        );
        for series in [
            r#"dkg_sampler_weight_info{topic="orders",weight="bytes"} 1"#,
            r#"dkg_sampler_partition_bytes_per_second{partition="1",topic="orders"} 2000"#,
        ] {
            assert!(text.contains(series), "{series} missing:\n{text}");
        }
        m.set_per_partition(&m.partition_rate, &[(1, 5.0)]);
        let text = String::from_utf8(m.render()).unwrap();
        assert!(
            !text.contains(r#"dkg_sampler_partition_records_per_second{partition="0""#),
            "{text}"
        );
    }

    #[test]
    fn top_keys_are_capped() {
        let registry = Registry::new();
        let m = SamplerMetrics::new(&registry, "t", Weight::Records).unwrap();
        let keys: Vec<(Vec<u8>, f64)> = (0..50)
            .map(|i| (format!("k{i}").into_bytes(), 0.01))
            .collect();
        m.set_top_keys(&keys);
        let text = String::from_utf8(m.render()).unwrap();
        let series = text
            .lines()
            .filter(|l| l.starts_with("dkg_sampler_heavy_key_share_ratio{"))
            .count();
        assert_eq!(series, MAX_TOP_N);
    }
}
