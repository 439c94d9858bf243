//! The learning window of `dkg-sampler run`: a DKG [`Sketch`] (SpaceSaving, Metwally et al. 2005, plus the
//! bucket counters of the DKG paper, Rivetti et al. DEBS 2015) fed by the consumed records, and the observed
//! per-partition record counts.
//!
//! # Why exponential decay and not a ring of per-interval sketches
//! At the end of every interval the sketch is snapshotted (the snapshot is what assignments are built from)
//! and then multiplied by `decay` (default 0.5): an interval `j` steps old weighs `decay^j`, so the window
//! follows drift with a half-life of one interval at the default. Compared with a ring of `R` per-interval
//! sketches merged at each build, decay
//! - keeps ONE sketch of the configured capacity (memory stays at its bound whatever `R` would be),
//! - never merges on the hot path; merging SpaceSaving summaries adds error (Agarwal et al., PODS 2012),
//!   and a ring would pay that error `R - 1` times per build, while decay keeps the relative error bound of
//!   a single summary (counts and errors scale together),
//! - has no cliff: a ring forgets an interval all at once, so a one-interval burst makes two decisions
//!   (when it enters and when it leaves), while decay fades it out smoothly.
//!
//! The cost is that old data never reaches exactly zero; at 0.5 an interval three steps old weighs 12.5%,
//! which is what "the recent window" means here. `--decay 0` makes the window exactly the last interval.
//!
//! # Sampling
//! With `--sample-ratio r < 1` each record is kept independently with probability `r` (a fast per-record
//! RNG, NOT a key hash: hashing the key would keep or drop whole keys and bias the frequencies), and a
//! kept record is observed with weight `1/r`, randomly rounded to one of the two neighbouring integers so
//! that the expected weight is exactly `1/r`: frequency estimates stay unbiased for any ratio.
//!
//! # Weight (`--weight`)
//! With [`Weight::Records`] (the default) a kept record adds its sampling weight to its key's count; with
//! [`Weight::Bytes`] it adds that weight times its size (key + value + header names and values,
//! `ingest::record_bytes`), so the sketch, the bucket counters and every prediction built on them are in bytes.
//! SpaceSaving's bounds hold for weighted updates with the total weight as `N` (see
//! `dkg_core::space_saving`). The sample size behind the estimates ([`IntervalSnapshot::window_samples`])
//! stays a count of records in both modes: the sampling noise depends on how many records were drawn,
//! not on how many bytes they carry.
//!
//! This module is also compiled into the benches (`benches/common/sidecar.rs`, via `#[path]`), so it
//! depends only on the core crate (and clap and serde, for the `--weight` values) and
//! `misplaced.rs`'s counts.

use std::time::{Duration, Instant};

use dkg_core::dkg::{DkgConfig, Sketch};

use super::misplaced::PlacementCounts;
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

/// What one record weighs in the window (`--weight`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Weight {
    /// Every record counts 1 (balance record rates).
    #[default]
    Records,
    /// Every record counts its size in bytes: key + value + header names and values (balance bytes/s).
    Bytes,
}

impl Weight {
    /// The flag value, also the unit of the imbalance the sampler reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Records => "records",
            Self::Bytes => "bytes",
        }
    }

    /// The default (for `skip_serializing_if`: documents of record-weighted windows stay as they were).
    pub fn is_records(&self) -> bool {
        *self == Self::Records
    }
}

/// Bernoulli record sampler with unbiased integer weights.
#[derive(Debug, Clone)]
pub struct RecordSampler {
    /// Keep a record when `rng < keep_below` (`None` = keep all).
    keep_below: Option<u64>,
    /// Integer part of `1/ratio`.
    weight_floor: u64,
    /// Choose `weight_floor + 1` when `rng < frac_below`.
    frac_below: u64,
    rng: SmallRng,
}

impl RecordSampler {
    /// `ratio` in (0, 1]; `seed` makes runs reproducible in tests.
    pub fn new(ratio: f64, seed: u64) -> Self {
        let ratio = if ratio.is_finite() && ratio > 0.0 {
            ratio.min(1.0)
        } else {
            1.0
        };
        let inverse = 1.0 / ratio;
        let weight_floor = inverse.floor().max(1.0) as u64;
        let frac = inverse - weight_floor as f64;
        Self {
            keep_below: (ratio < 1.0).then_some((ratio * u64::MAX as f64) as u64),
            weight_floor,
            frac_below: (frac.clamp(0.0, 1.0) * u64::MAX as f64) as u64,
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// The weight to observe this record with, or `None` to skip it.
    #[inline]
    pub fn sample(&mut self) -> Option<u64> {
        let Some(keep_below) = self.keep_below else {
            return Some(1);
        };
        if self.rng.next_u64() >= keep_below {
            return None;
        }
        if self.frac_below == 0 {
            return Some(self.weight_floor);
        }
        Some(self.weight_floor + u64::from(self.rng.next_u64() < self.frac_below))
    }

    /// Whether every record is kept.
    #[cfg(test)]
    pub fn keeps_all(&self) -> bool {
        self.keep_below.is_none()
    }
}

/// What one interval produced: the window as of the end of the interval, and the interval's own counts.
#[derive(Debug, Clone)]
pub struct IntervalSnapshot {
    /// The decayed window, including this interval at full weight (snapshotted before decaying).
    pub window: Sketch,
    /// Sampled records in the window, decayed like the sketch: the effective sample size behind the
    /// window's estimates (for noise-aware hysteresis). With [`Weight::Bytes`] each interval adds Kish's
    /// effective size of its sampled record sizes, `(sum w)^2 / sum w^2` (Kish 1965), not its record
    /// count: unequal sizes make a byte estimate as noisy as one from fewer, equal records.
    pub window_samples: f64,
    /// Records consumed per partition during this interval (index = partition; all records, sampled or not,
    /// keyless included: this is the observed load).
    pub partition_counts: Vec<u64>,
    /// Bytes (`ingest::record_bytes`: key + value, headers too with [`Weight::Bytes`]) consumed per
    /// partition during this interval, like `partition_counts`.
    pub partition_bytes: Vec<u64>,
    /// Records consumed during this interval.
    pub consumed: u64,
    /// Records observed into the sketch during this interval (keyed and sampled).
    pub sampled: u64,
    /// Keyless records consumed during this interval (counted as load, never observed: DKG routes keys).
    pub keyless: u64,
    /// Offsets skipped unread during this interval (`--read-fraction`).
    pub skipped: u64,
    /// Length of the interval.
    pub elapsed: Duration,
    /// The misplacement detector's verdicts in this interval (all zero when it is off).
    pub placement: PlacementCounts,
}

/// The sampler's learning state for one topic and partition count.
#[derive(Debug)]
pub struct Window {
    config: DkgConfig,
    sketch: Sketch,
    sampler: RecordSampler,
    weight: Weight,
    window_samples: f64,
    /// This interval's sum and sum of squares of the sampled records' byte weights ([`Weight::Bytes`]).
    size_sum: f64,
    size_sum_sq: f64,
    partition_counts: Vec<u64>,
    partition_bytes: Vec<u64>,
    consumed: u64,
    sampled: u64,
    keyless: u64,
    skipped: u64,
    started: Instant,
}

/// A sketch for `partitions` partitions; warns when its documents may not fit a control topic with the
/// broker's default `max.message.bytes` (they still fit one this project created), so the operator learns
/// it at startup rather than from a rejected publication.
fn new_sketch(config: &DkgConfig, partitions: u32) -> dkg_partitioner::Result<Sketch> {
    let sketch = Sketch::new(config, partitions)?;
    if !config.fits_default_limits(partitions) {
        tracing::warn!(
            partitions,
            mu = sketch.mu(),
            buckets = sketch.buckets(),
            document_bytes = config.fixed_document_bytes_for(partitions),
            "assignment documents will exceed Kafka's default message limits (about 1 MB with the heavy \
             keys): the control topic needs max.message.bytes >= 9437184 (the sampler creates it so); \
             a lower --mu makes them fit"
        );
    }
    Ok(sketch)
}

impl Window {
    /// A fresh window for `partitions` partitions.
    pub fn new(
        config: &DkgConfig,
        partitions: u32,
        sampler: RecordSampler,
    ) -> dkg_partitioner::Result<Self> {
        Ok(Self {
            config: config.clone(),
            sketch: new_sketch(config, partitions)?,
            sampler,
            weight: Weight::Records,
            window_samples: 0.0,
            size_sum: 0.0,
            size_sum_sq: 0.0,
            partition_counts: vec![0; partitions as usize],
            partition_bytes: vec![0; partitions as usize],
            consumed: 0,
            sampled: 0,
            keyless: 0,
            skipped: 0,
            started: Instant::now(),
        })
    }

    /// Weigh records by `weight` from now on (`--weight`; [`Weight::Records`] by default).
    #[must_use]
    pub fn weighing(mut self, weight: Weight) -> Self {
        self.weight = weight;
        self
    }

    /// What a record weighs (the consume loop parses a record's headers only for [`Weight::Bytes`]).
    #[inline]
    pub fn weight(&self) -> Weight {
        self.weight
    }

    /// The partition count this window learns for.
    #[cfg(test)]
    pub fn partitions(&self) -> u32 {
        self.sketch.partitions()
    }

    /// Observe one consumed record of unknown size (the benches' and tests' shorthand).
    #[cfg_attr(not(test), allow(dead_code))]
    #[inline]
    pub fn observe(&mut self, partition: i32, key: Option<&[u8]>) {
        self.observe_sized(partition, key, 1, 0);
    }

    /// Observe one consumed record of `bytes` bytes (`ingest::record_bytes`) that stands for `offsets`
    /// records of the log (1, or more with `--read-fraction`, see `fraction.rs`): the partition's record
    /// load grows by `offsets`, its byte load by `offsets * bytes`, and the key's count by `offsets`, or
    /// with [`Weight::Bytes`] by `offsets * bytes` (at least 1 per offset: an empty record still costs a
    /// log entry). Hot path: no allocation, no lock.
    #[inline]
    pub fn observe_sized(&mut self, partition: i32, key: Option<&[u8]>, offsets: u64, bytes: u64) {
        self.consumed += 1;
        let per_offset = match self.weight {
            Weight::Records => 1,
            Weight::Bytes => bytes.max(1),
        };
        if let Ok(p) = usize::try_from(partition) {
            if p >= self.partition_counts.len() {
                // The topic grew before our metadata said so; count it anyway.
                self.partition_counts.resize(p + 1, 0);
                self.partition_bytes.resize(p + 1, 0);
            }
            self.partition_counts[p] += offsets;
            self.partition_bytes[p] =
                self.partition_bytes[p].saturating_add(offsets.saturating_mul(bytes));
        }
        let Some(key) = key else {
            self.keyless += 1;
            return;
        };
        if let Some(weight) = self.sampler.sample() {
            let weight = weight.saturating_mul(offsets).saturating_mul(per_offset);
            self.sampled += 1;
            if self.weight == Weight::Bytes {
                let w = per_offset as f64;
                self.size_sum += w;
                self.size_sum_sq += w * w;
            }
            if weight == 1 {
                self.sketch.observe(key);
            } else {
                self.sketch.observe_weighted(key, weight);
            }
        }
    }

    /// The sample size this interval adds to the window: its sampled records, or with [`Weight::Bytes`]
    /// Kish's effective size of their byte weights (equal sizes give the record count back).
    fn interval_effective_samples(&self) -> f64 {
        if self.weight == Weight::Bytes && self.size_sum_sq > 0.0 {
            (self.size_sum * self.size_sum / self.size_sum_sq).min(self.sampled as f64)
        } else {
            self.sampled as f64
        }
    }

    /// Count `offsets` skipped unread (`--read-fraction`).
    pub fn note_skipped(&mut self, offsets: u64) {
        self.skipped += offsets;
    }

    /// Close the interval: snapshot the window and the interval's counts, then decay the window by `decay`
    /// (in [0, 1]) and start the next interval.
    pub fn end_interval(&mut self, decay: f64) -> IntervalSnapshot {
        let now = Instant::now();
        let partitions = self.sketch.partitions() as usize;
        let mut counts = std::mem::replace(&mut self.partition_counts, vec![0; partitions]);
        counts.resize(counts.len().max(partitions), 0);
        let mut bytes = std::mem::replace(&mut self.partition_bytes, vec![0; partitions]);
        bytes.resize(counts.len(), 0);
        self.window_samples += self.interval_effective_samples();
        (self.size_sum, self.size_sum_sq) = (0.0, 0.0);
        let snapshot = IntervalSnapshot {
            window: self.sketch.clone(),
            window_samples: self.window_samples,
            partition_counts: counts,
            partition_bytes: bytes,
            consumed: std::mem::take(&mut self.consumed),
            sampled: std::mem::take(&mut self.sampled),
            keyless: std::mem::take(&mut self.keyless),
            skipped: std::mem::take(&mut self.skipped),
            elapsed: now.duration_since(self.started),
            placement: PlacementCounts::default(),
        };
        let decay = if decay.is_finite() {
            decay.clamp(0.0, 1.0)
        } else {
            0.0
        };
        if decay == 0.0 {
            self.sketch.clear();
        } else {
            self.sketch.decay(decay);
        }
        self.window_samples *= decay;
        self.started = now;
        snapshot
    }

    /// Forget everything and learn for `partitions` partitions from now on (the topic's partition count
    /// changed: old frequencies say nothing about the new placement).
    pub fn reset(&mut self, partitions: u32) -> dkg_partitioner::Result<()> {
        self.sketch = new_sketch(&self.config, partitions)?;
        self.window_samples = 0.0;
        (self.size_sum, self.size_sum_sq) = (0.0, 0.0);
        self.partition_counts = vec![0; partitions as usize];
        self.partition_bytes = vec![0; partitions as usize];
        self.consumed = 0;
        self.sampled = 0;
        self.keyless = 0;
        self.skipped = 0;
        self.started = Instant::now();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    // unused_imports: benches/consume_throughput.rs includes this file without the test harness.
    #![allow(clippy::unwrap_used, unused_imports)]
    use super::*;

    #[test]
    fn sampler_keeps_everything_at_ratio_one() {
        let mut s = RecordSampler::new(1.0, 7);
        assert!(s.keeps_all());
        assert!((0..1000).all(|_| s.sample() == Some(1)));
    }

    #[test]
    fn sampler_is_unbiased_for_non_integer_inverse_ratios() {
        for ratio in [0.5, 0.3, 0.1, 0.07] {
            let mut s = RecordSampler::new(ratio, 42);
            let n = 400_000u64;
            let total: u64 = (0..n).filter_map(|_| s.sample()).sum();
            let rel = (total as f64 - n as f64).abs() / n as f64;
            assert!(
                rel < 0.03,
                "ratio {ratio}: estimated {total} for {n} records"
            );
        }
    }

    #[test]
    fn sampler_rejects_nonsense_ratios_by_keeping_all() {
        for ratio in [0.0, -1.0, f64::NAN, 2.0] {
            assert!(RecordSampler::new(ratio, 1).keeps_all(), "{ratio}");
        }
    }

    #[test]
    fn window_counts_partitions_and_decays() {
        let config = DkgConfig::default();
        let mut w = Window::new(&config, 4, RecordSampler::new(1.0, 1)).unwrap();
        for i in 0..1000u32 {
            w.observe((i % 4) as i32, Some(b"hot"));
        }
        w.observe(2, None);
        w.observe(9, Some(b"late")); // a partition beyond the known count is still counted
        let snap = w.end_interval(0.5);
        assert_eq!(snap.consumed, 1002);
        assert_eq!(snap.sampled, 1001);
        assert_eq!(snap.keyless, 1);
        assert_eq!(snap.partition_counts.len(), 10);
        assert_eq!(snap.partition_counts[2], 251);
        assert_eq!(snap.partition_counts[9], 1);
        assert_eq!(snap.window.total(), 1001);
        assert!((snap.window_samples - 1001.0).abs() < 1e-9);
        // decayed: the next snapshot without new data holds about half
        let next = w.end_interval(0.5);
        assert_eq!(next.consumed, 0);
        assert!(
            next.window.total() <= 501 && next.window.total() >= 499,
            "{}",
            next.window.total()
        );
        assert!((next.window_samples - 500.5).abs() < 1e-9);
        assert_eq!(next.partition_counts, vec![0; 4]);
    }

    #[test]
    fn weighted_records_count_for_the_offsets_they_stand_for() {
        let config = DkgConfig::default();
        let mut w = Window::new(&config, 2, RecordSampler::new(1.0, 1)).unwrap();
        w.observe_sized(0, Some(b"a"), 10, 0);
        w.observe_sized(1, Some(b"b"), 3, 0);
        w.observe_sized(1, None, 4, 0);
        w.note_skipped(90);
        let snap = w.end_interval(0.0);
        assert_eq!(snap.partition_counts, vec![10, 7]);
        assert_eq!(snap.window.total(), 13);
        assert_eq!(snap.window.summary().get(b"a").map(|c| c.count), Some(10));
        // The sample size behind the estimates is the records read, not their weights.
        assert_eq!((snap.consumed, snap.sampled, snap.keyless), (3, 2, 1));
        assert!((snap.window_samples - 2.0).abs() < 1e-9);
        assert_eq!(snap.skipped, 90);
        assert_eq!(w.end_interval(0.0).skipped, 0);
    }

    #[test]
    fn bytes_weigh_keys_and_partitions_by_size_but_samples_stay_records() {
        let config = DkgConfig::default();
        let mut w = Window::new(&config, 2, RecordSampler::new(1.0, 1))
            .unwrap()
            .weighing(Weight::Bytes);
        assert_eq!(w.weight(), Weight::Bytes);
        for _ in 0..10 {
            w.observe_sized(0, Some(b"many-small"), 1, 10);
        }
        w.observe_sized(1, Some(b"few-large"), 1, 1000);
        w.observe_sized(1, Some(b"few-large"), 3, 1000); // read-fraction weight multiplies
        w.observe_sized(1, Some(b"empty"), 1, 0); // counts 1, not 0
        w.observe_sized(0, None, 1, 50);
        let snap = w.end_interval(0.0);
        let count = |k: &[u8]| snap.window.summary().get(k).map(|c| c.count);
        assert_eq!(count(b"many-small"), Some(100));
        assert_eq!(count(b"few-large"), Some(4000));
        assert_eq!(count(b"empty"), Some(1));
        assert_eq!(snap.window.total(), 4101);
        assert_eq!(snap.partition_counts, vec![11, 5]);
        assert_eq!(snap.partition_bytes, vec![150, 4000]);
        assert_eq!((snap.sampled, snap.keyless), (13, 1));
        // Kish: (10*10 + 2*1000 + 1)^2 / (10*100 + 2*1000^2 + 1) = 2101^2 / 2001001, about 2.2 of 13.
        let kish = 2101.0_f64 * 2101.0 / 2_001_001.0;
        assert!((snap.window_samples - kish).abs() < 1e-9);

        // Records (the default) weighs every record 1 and only counts the bytes.
        let mut r = Window::new(&config, 2, RecordSampler::new(1.0, 1)).unwrap();
        assert_eq!(r.weight(), Weight::Records);
        r.observe_sized(1, Some(b"few-large"), 3, 1000);
        let snap = r.end_interval(0.0);
        assert_eq!(snap.window.total(), 3);
        assert_eq!(snap.partition_bytes, vec![0, 3000]);
    }

    #[test]
    fn window_with_zero_decay_is_the_last_interval() {
        let config = DkgConfig::default();
        let mut w = Window::new(&config, 2, RecordSampler::new(1.0, 1)).unwrap();
        w.observe(0, Some(b"a"));
        let _ = w.end_interval(0.0);
        w.observe(1, Some(b"b"));
        let snap = w.end_interval(0.0);
        assert_eq!(snap.window.total(), 1);
        assert!(snap.window.summary().get(b"a").is_none());
    }

    #[test]
    fn reset_changes_the_partition_count() {
        let config = DkgConfig::default();
        let mut w = Window::new(&config, 2, RecordSampler::new(1.0, 1)).unwrap();
        w.observe(0, Some(b"a"));
        w.reset(6).unwrap();
        assert_eq!(w.partitions(), 6);
        let snap = w.end_interval(0.5);
        assert_eq!(snap.window.total(), 0);
        assert_eq!(snap.partition_counts, vec![0; 6]);
    }
}
