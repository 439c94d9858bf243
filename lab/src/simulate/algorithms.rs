//! The algorithms `simulate` compares, and the load-imbalance metric.
//!
//! Every algorithm except `pkg` is a key grouping: a deterministic map key -> partition, so a
//! partition's load is the sum of the counts of its keys. `pkg` (partial key grouping, Nasir et al.,
//! ICDE 2015) sends each record to the less loaded of two hashed choices and so splits keys; it is a
//! reference for what giving up key grouping buys, not a competitor. `dkg-split` is DKG with split
//! placement (`SplitKeys::Auto`, issue 15): key grouping except for the few keys whose share exceeds a
//! fair share `1/k`, whose records go one by one through the assignment's lookup, which spreads them
//! over their parts by the producers' smooth weighted round robin (`docs/spec.md`).

use std::fmt;
use std::str::FromStr;

use anyhow::Context;
use clap::ValueEnum;
use dkg_core::dkg::{DkgConfig, Sketch, SplitKeys};
use dkg_core::hash::{KAFKA_MURMUR2_SEED, kafka_partition, murmur2_seeded, to_positive};
use dkg_core::lpt::lpt;

use super::stream::Stream;
use dkg_sampler::sidecar::window::Weight;

/// Seeds of pkg's two hash choices. The first is Kafka's, so pkg's first choice is the default placement.
pub const PKG_SEEDS: [u32; 2] = [KAFKA_MURMUR2_SEED, 0x3c6e_f372];

/// An algorithm (or reference value) evaluated by `simulate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ValueEnum)]
pub enum Algorithm {
    /// Kafka's default: toPositive(murmur2(key)) % k.
    Hash,
    /// DKG with the paper's parameters (theta 0.1, mu 2, eps theta/2).
    DkgPaper,
    /// DKG with the project's defaults (or --theta/--mu).
    Dkg,
    /// `dkg` with split placement (`--split-keys auto`): keys over a fair share are spread over several
    /// partitions, every other key keeps key grouping.
    DkgSplit,
    /// LPT on the exact per-key counts of the learning prefix; keys unseen there go by Kafka hash. What
    /// exact memory of the prefix gives (not a strict floor: unseen keys are hashed blindly); its gap to
    /// lpt-full is mostly the prefix's sampling noise, not DKG's sketching.
    LptLearn,
    /// LPT on the exact per-key counts of the evaluated stream (full knowledge; the practical optimum).
    LptFull,
    /// The key-grouping lower bound max(1, k * p1) - 1, p1 = share of the top key in the stream.
    Bound,
    /// Partial key grouping: two hash choices, each record to the less loaded (splits keys; reference).
    Pkg,
}

impl Algorithm {
    /// Every algorithm, in table column order.
    pub const ALL: [Algorithm; 8] = [
        Algorithm::Hash,
        Algorithm::DkgPaper,
        Algorithm::Dkg,
        Algorithm::DkgSplit,
        Algorithm::LptLearn,
        Algorithm::LptFull,
        Algorithm::Bound,
        Algorithm::Pkg,
    ];

    /// The name used on the command line and in the output.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Hash => "hash",
            Algorithm::DkgPaper => "dkg-paper",
            Algorithm::Dkg => "dkg",
            Algorithm::DkgSplit => "dkg-split",
            Algorithm::LptLearn => "lpt-learn",
            Algorithm::LptFull => "lpt-full",
            Algorithm::Bound => "bound",
            Algorithm::Pkg => "pkg",
        }
    }
}

impl Algorithm {
    /// What the algorithm's column of the table means, in one line (the legend under the table).
    pub fn explained(self) -> &'static str {
        match self {
            Algorithm::Hash => "Kafka's default partitioner: murmur2(key) mod k",
            Algorithm::DkgPaper => "DKG with the paper's parameters (theta 0.1, mu 2)",
            Algorithm::Dkg => {
                "DKG with this project's defaults (theta, mu above): what `dkg-sampler run` publishes"
            }
            Algorithm::DkgSplit => {
                "dkg, keys above a fair share spread over several partitions (--split-keys auto)"
            }
            Algorithm::LptLearn => {
                "LPT on the exact key counts of the learning prefix (unseen keys hashed): exact memory instead of DKG's sketch"
            }
            Algorithm::LptFull => {
                "LPT on the exact key counts of the whole stream: full knowledge, the practical optimum"
            }
            Algorithm::Bound => {
                "the key-grouping lower bound max(1, k * p1) - 1 (p1: the top key's share); no placement that keeps a key on one partition does better"
            }
            Algorithm::Pkg => {
                "partial key grouping: each record to the less loaded of two hash choices (splits every key; a reference)"
            }
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A heavy-hitter threshold: a fixed share, or `c / k` (a share that scales with the partition count).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ThetaRule {
    /// The same theta for every k.
    Fixed(f64),
    /// theta = c / k.
    PerPartition(f64),
}

impl ThetaRule {
    /// The theta this rule gives for `k` partitions.
    pub fn theta_for(self, k: u32) -> f64 {
        match self {
            ThetaRule::Fixed(t) => t,
            ThetaRule::PerPartition(c) => c / f64::from(k.max(1)),
        }
    }
}

impl FromStr for ThetaRule {
    type Err = String;

    /// `0.05` (fixed) or `0.5/k` (per partition).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (number, per_k) = match s.strip_suffix("/k") {
            Some(c) => (c.trim(), true),
            None => (s, false),
        };
        let value: f64 = number
            .parse()
            .map_err(|_| format!("expected a number like 0.05 or a rule like 0.5/k, got {s:?}"))?;
        if !(value.is_finite() && value > 0.0 && value <= 1.0) {
            return Err(format!("theta must be in (0, 1], got {value}"));
        }
        Ok(if per_k {
            ThetaRule::PerPartition(value)
        } else {
            ThetaRule::Fixed(value)
        })
    }
}

impl fmt::Display for ThetaRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThetaRule::Fixed(t) => write!(f, "{t}"),
            ThetaRule::PerPartition(c) => write!(f, "{c}/k"),
        }
    }
}

/// Overrides of the project defaults for the `dkg` algorithm.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DkgOverrides {
    /// Replaces `default_theta(k)`.
    pub theta: Option<ThetaRule>,
    /// Replaces `default_mu(k)`.
    pub mu: Option<f64>,
}

/// The DKG configuration `algorithm` uses for `k` partitions (`None` for non-DKG algorithms).
pub fn dkg_config(algorithm: Algorithm, k: u32, overrides: &DkgOverrides) -> Option<DkgConfig> {
    match algorithm {
        Algorithm::DkgPaper => Some(DkgConfig::paper()),
        Algorithm::Dkg | Algorithm::DkgSplit => {
            let mut config = DkgConfig::default();
            if let Some(rule) = overrides.theta {
                config.theta = Some(rule.theta_for(k));
            }
            if let Some(mu) = overrides.mu {
                config.mu = Some(mu);
            }
            if algorithm == Algorithm::DkgSplit {
                config.split = SplitKeys::Auto;
            }
            Some(config)
        }
        _ => None,
    }
}

/// Load imbalance lambda = max_i L_i / (m / k) - 1, with m = sum of loads and k = `loads.len()`.
/// 0 for no partitions or no records.
pub fn lambda(loads: &[u64]) -> f64 {
    let total: u64 = loads.iter().sum();
    let max = loads.iter().copied().max().unwrap_or(0);
    if total == 0 {
        return 0.0;
    }
    max as f64 * loads.len() as f64 / total as f64 - 1.0
}

/// The key-grouping lower bound max(1, k * p1) - 1 for per-key `counts` over `k` partitions.
pub fn bound(counts: &[u64], k: u32) -> f64 {
    let total: u64 = counts.iter().sum();
    let top = counts.iter().copied().max().unwrap_or(0);
    if total == 0 {
        return 0.0;
    }
    (f64::from(k) * top as f64 / total as f64).max(1.0) - 1.0
}

/// What one algorithm did on one stream for one k.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outcome {
    /// Load imbalance lambda (a ratio, not percent), of the partitions' records.
    pub lambda: f64,
    /// Load imbalance of the partitions' bytes (with `--value-bytes`, else `None`).
    pub lambda_bytes: Option<f64>,
    /// Heavy hitters in the assignment (DKG variants only).
    pub heavy_hitters: Option<u64>,
    /// Keys whose records went to more than one partition (`dkg-split`, `pkg`; `None` for key
    /// groupings, which split none).
    pub split_keys: Option<u64>,
    /// Of those, keys whose share of the evaluated stream is at most `1/k` (`dkg-split` only): a
    /// split that was not needed.
    pub split_at_most_fair: Option<u64>,
}

impl Outcome {
    /// The PKG papers' metric (max - mean) / m; equals lambda / k.
    pub fn max_minus_mean_over_m(&self, k: u32) -> f64 {
        self.lambda / f64::from(k)
    }
}

/// One stream prepared for evaluation: exact whole-stream counts and the learning prefix.
#[derive(Debug)]
pub struct Prepared<'a> {
    /// The stream.
    pub stream: &'a Stream,
    /// Exact per-key counts over the whole stream.
    pub counts: Vec<u64>,
    /// Records in the learning prefix (>= 1).
    pub learn_len: usize,
    /// Per-key record size in bytes (key + value; `--value-bytes`), `None` without sizes.
    sizes: Option<Vec<u64>>,
    /// What the learning algorithms balance (`--weight`; bytes needs `sizes`).
    weight: Weight,
}

/// Per-partition loads of one placement: records, and bytes when the stream has sizes.
struct Loads<'s> {
    records: Vec<u64>,
    bytes: Option<(Vec<u64>, &'s [u64])>,
}

impl<'s> Loads<'s> {
    fn new(k: u32, sizes: Option<&'s [u64]>) -> Self {
        Self {
            records: vec![0; k as usize],
            bytes: sizes.map(|sizes| (vec![0; k as usize], sizes)),
        }
    }

    /// `n` records of `key` on partition `p`.
    fn add(&mut self, p: u32, key: u32, n: u64) {
        self.records[p as usize] += n;
        if let Some((bytes, sizes)) = &mut self.bytes {
            bytes[p as usize] += n * sizes[key as usize];
        }
    }

    /// The load in the unit `weight` balances (pkg's choice).
    fn of(&self, p: u32, weight: Weight) -> u64 {
        match (&self.bytes, weight) {
            (Some((bytes, _)), Weight::Bytes) => bytes[p as usize],
            _ => self.records[p as usize],
        }
    }

    fn outcome(&self) -> Outcome {
        Outcome {
            lambda: lambda(&self.records),
            lambda_bytes: self.bytes.as_ref().map(|(b, _)| lambda(b)),
            heavy_hitters: None,
            split_keys: None,
            split_at_most_fair: None,
        }
    }
}

impl<'a> Prepared<'a> {
    /// Counts the stream and fixes the learning prefix to `ceil(learn_fraction * m)` records.
    pub fn new(stream: &'a Stream, learn_fraction: f64) -> Self {
        let m = stream.len();
        let learn_len = ((learn_fraction * m as f64).ceil() as usize).clamp(1.min(m), m);
        Self {
            stream,
            counts: stream.counts(),
            learn_len,
            sizes: None,
            weight: Weight::Records,
        }
    }

    /// Gives key `i`'s values `value_bytes[i]` bytes (a record: key + value) and balances by `weight`.
    pub fn with_sizes(mut self, value_bytes: &[u64], weight: Weight) -> Self {
        let sizes = (0..self.stream.distinct() as u32)
            .map(|key| {
                let value = value_bytes.get(key as usize).copied().unwrap_or(0);
                self.stream.key(key).len() as u64 + value
            })
            .collect();
        self.sizes = Some(sizes);
        self.weight = weight;
        self
    }

    /// What one record of `key` weighs for the learning algorithms: 1, or its size with bytes.
    fn key_weight(&self, key: u32) -> u64 {
        match (&self.sizes, self.weight) {
            (Some(sizes), Weight::Bytes) => sizes[key as usize],
            _ => 1,
        }
    }

    /// Per-key totals in the unit balanced (`counts` for records): the input of LPT and the bound.
    pub fn weighted(&self) -> Vec<u64> {
        self.weighted_of(&self.counts)
    }

    fn weighted_of(&self, counts: &[u64]) -> Vec<u64> {
        (0..counts.len() as u32)
            .map(|key| counts[key as usize] * self.key_weight(key))
            .collect()
    }

    fn learning_prefix(&self) -> &[u32] {
        &self.stream.records()[..self.learn_len]
    }

    fn loads(&self, k: u32) -> Loads<'_> {
        Loads::new(k, self.sizes.as_deref())
    }

    /// Whole-stream partition loads of a key grouping given as a per-key partition table.
    fn loads_of(&self, placement: &[u32], k: u32) -> Loads<'_> {
        let mut loads = self.loads(k);
        for (key, (&p, &c)) in placement.iter().zip(&self.counts).enumerate() {
            loads.add(p, key as u32, c);
        }
        loads
    }

    /// Evaluates `algorithm` for `k` partitions.
    pub fn evaluate(
        &self,
        algorithm: Algorithm,
        k: u32,
        overrides: &DkgOverrides,
    ) -> anyhow::Result<Outcome> {
        let stream = self.stream;
        let keys = 0..stream.distinct() as u32;
        let grouping = |placement: Vec<u32>| self.loads_of(&placement, k).outcome();
        Ok(match algorithm {
            Algorithm::Hash => grouping(
                keys.map(|key| kafka_partition(stream.key(key), k))
                    .collect(),
            ),
            Algorithm::Dkg | Algorithm::DkgPaper | Algorithm::DkgSplit => {
                let config = dkg_config(algorithm, k, overrides)
                    .context("internal error: DKG variant without a configuration")?;
                let mut sketch = Sketch::new(&config, k)
                    .with_context(|| format!("{algorithm}: invalid DKG configuration for k={k}"))?;
                for &r in self.learning_prefix() {
                    sketch.observe_weighted(stream.key(r), self.key_weight(r));
                }
                let build = sketch
                    .build("simulate", 0, 0, None)
                    .with_context(|| format!("{algorithm}: building the assignment for k={k}"))?;
                let assignment = &build.assignment;
                // The assignment applies to the whole stream, learning prefix included (as in the
                // paper's evaluation); a live producer routes the prefix by Kafka hash instead.
                // Whole keys by their per-key count; a split key's records one by one through the
                // lookup, which spreads them by the producers' weighted round robin.
                let mut loads = self.loads(k);
                let mut split = vec![false; stream.distinct()];
                let mut at_most_fair = 0u64;
                let weighted = self.weighted();
                let total: u64 = weighted.iter().sum();
                for key in keys {
                    if assignment.split_of(stream.key(key)).is_some() {
                        split[key as usize] = true;
                        let share = weighted[key as usize];
                        if u128::from(share) * u128::from(k) <= u128::from(total) {
                            at_most_fair += 1;
                        }
                    } else {
                        let p = assignment.partition_for(stream.key(key));
                        loads.add(p, key, self.counts[key as usize]);
                    }
                }
                for &r in stream.records() {
                    if split[r as usize] {
                        loads.add(assignment.partition_for(stream.key(r)), r, 1);
                    }
                }
                let splits = algorithm == Algorithm::DkgSplit;
                Outcome {
                    heavy_hitters: Some(build.heavy_hitters as u64),
                    split_keys: splits.then_some(build.split_keys as u64),
                    split_at_most_fair: splits.then_some(at_most_fair),
                    ..loads.outcome()
                }
            }
            Algorithm::LptLearn => {
                let learned = self.weighted_of(&stream.counts_of(self.learning_prefix()));
                let seen: Vec<u32> = keys
                    .clone()
                    .filter(|&key| learned[key as usize] > 0)
                    .collect();
                let weights: Vec<u64> = seen.iter().map(|&key| learned[key as usize]).collect();
                let schedule = lpt(&weights, k).context("lpt-learn")?;
                let mut placement: Vec<u32> = keys
                    .map(|key| kafka_partition(stream.key(key), k))
                    .collect();
                for (&key, &p) in seen.iter().zip(&schedule.placement) {
                    placement[key as usize] = p;
                }
                grouping(placement)
            }
            Algorithm::LptFull => {
                let schedule = lpt(&self.weighted(), k).context("lpt-full")?;
                grouping(schedule.placement)
            }
            Algorithm::Bound => Outcome {
                lambda: bound(&self.counts, k),
                lambda_bytes: self.sizes.as_ref().map(|sizes| {
                    let bytes: Vec<u64> =
                        self.counts.iter().zip(sizes).map(|(c, s)| c * s).collect();
                    bound(&bytes, k)
                }),
                heavy_hitters: None,
                split_keys: None,
                split_at_most_fair: None,
            },
            Algorithm::Pkg => {
                let choices: Vec<[u32; 2]> = keys
                    .map(|key| {
                        PKG_SEEDS.map(|seed| to_positive(murmur2_seeded(stream.key(key), seed)) % k)
                    })
                    .collect();
                let mut loads = self.loads(k);
                // Bit 0: a record of the key took its first choice, bit 1: its second (when distinct).
                let mut took = vec![0u8; choices.len()];
                for &r in stream.records() {
                    let [a, b] = choices[r as usize];
                    let p = if loads.of(b, self.weight) < loads.of(a, self.weight) {
                        took[r as usize] |= 2;
                        b
                    } else {
                        took[r as usize] |= 1;
                        a
                    };
                    loads.add(p, r, 1);
                }
                Outcome {
                    split_keys: Some(took.iter().filter(|&&t| t == 3).count() as u64),
                    ..loads.outcome()
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn lambda_table() {
        let cases: &[(&[u64], f64)] = &[
            (&[], 0.0),
            (&[0, 0], 0.0),
            (&[5], 0.0),
            (&[10, 10, 10, 10], 0.0),
            (&[20, 0], 1.0),
            (&[30, 10], 0.5),
            (&[4, 3, 3], 0.2),
            (&[100, 0, 0, 0, 0], 4.0),
            (&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0], 9.0),
        ];
        for &(loads, expected) in cases {
            let got = lambda(loads);
            assert!(
                (got - expected).abs() < 1e-12,
                "{loads:?}: {got} != {expected}"
            );
        }
    }

    #[test]
    fn bound_table() {
        let cases: &[(&[u64], u32, f64)] = &[
            (&[], 4, 0.0),
            (&[10, 10, 10, 10], 4, 0.0),
            // p1 = 0.5: k=2 -> 0, k=4 -> 1, k=10 -> 4.
            (&[50, 30, 20], 2, 0.0),
            (&[50, 30, 20], 4, 1.0),
            (&[50, 30, 20], 10, 4.0),
            // A single key: all load on one partition.
            (&[7], 5, 4.0),
        ];
        for &(counts, k, expected) in cases {
            let got = bound(counts, k);
            assert!(
                (got - expected).abs() < 1e-12,
                "{counts:?} k={k}: {got} != {expected}"
            );
        }
    }

    #[test]
    fn pkg_metric_is_lambda_over_k() {
        let o = Outcome {
            lambda: 0.5,
            lambda_bytes: None,
            heavy_hitters: None,
            split_keys: None,
            split_at_most_fair: None,
        };
        // loads [30, 10]: (30 - 20) / 40 = 0.25 = 0.5 / 2.
        assert!((o.max_minus_mean_over_m(2) - 0.25).abs() < 1e-12);
    }

    #[test]
    fn theta_rules_parse() {
        assert_eq!("0.1".parse::<ThetaRule>().unwrap(), ThetaRule::Fixed(0.1));
        assert_eq!(
            "0.5/k".parse::<ThetaRule>().unwrap(),
            ThetaRule::PerPartition(0.5)
        );
        assert_eq!(
            " 1 /k".parse::<ThetaRule>().unwrap(),
            ThetaRule::PerPartition(1.0)
        );
        assert!((ThetaRule::PerPartition(0.5).theta_for(50) - 0.01).abs() < 1e-15);
        for bad in ["", "abc", "0", "-0.1", "1.5", "NaN", "inf", "0.5/n", "/k"] {
            assert!(bad.parse::<ThetaRule>().is_err(), "{bad:?} parsed");
        }
    }

    fn skewed_stream() -> Stream {
        // Key "hot" holds 40% of 1000 records, 60 cold keys share the rest.
        let mut keys = vec!["hot".to_string()];
        keys.extend((0..60).map(|i| format!("cold-{i}")));
        let mut records = Vec::new();
        for i in 0..1000u32 {
            records.push(if i % 5 < 2 { 0 } else { 1 + i % 60 });
        }
        Stream::from_parts(keys, records)
    }

    #[test]
    fn key_groupings_respect_the_bound_and_lpt_full_is_best() {
        let stream = skewed_stream();
        let prepared = Prepared::new(&stream, 0.1);
        assert_eq!(prepared.learn_len, 100);
        for k in [2u32, 4, 8] {
            let eval = |a| {
                prepared
                    .evaluate(a, k, &DkgOverrides::default())
                    .unwrap()
                    .lambda
            };
            let b = eval(Algorithm::Bound);
            assert!((b - (0.4 * f64::from(k)).max(1.0) + 1.0).abs() < 1e-12);
            let full = eval(Algorithm::LptFull);
            for a in [Algorithm::Hash, Algorithm::LptLearn, Algorithm::LptFull] {
                assert!(eval(a) >= b - 1e-12, "{a} below the bound for k={k}");
                assert!(
                    eval(a) >= full - 1e-12 || a == Algorithm::LptFull,
                    "{a} beat lpt-full"
                );
            }
            // pkg splits the hot key, so it may go below the key-grouping bound but never below 0.
            assert!(eval(Algorithm::Pkg) >= 0.0);
        }
    }

    #[test]
    fn dkg_split_breaks_the_bound_by_splitting_only_the_hot_key() {
        let stream = skewed_stream();
        let prepared = Prepared::new(&stream, 1.0);
        let o = |a| prepared.evaluate(a, 8, &DkgOverrides::default()).unwrap();
        let (dkg, split, pkg) = (o(Algorithm::Dkg), o(Algorithm::DkgSplit), o(Algorithm::Pkg));
        // "hot" is 40% of 8 partitions: the bound is 220%, and dkg sits on it.
        assert!((o(Algorithm::Bound).lambda - 2.2).abs() < 1e-9);
        assert!((dkg.lambda - 2.2).abs() < 1e-9, "{}", dkg.lambda);
        assert_eq!((dkg.split_keys, dkg.split_at_most_fair), (None, None));
        // dkg-split gives it ceil(3.2) = 4 parts of 10% each, 2.5 points under 1/8 each.
        assert_eq!(split.split_keys, Some(1));
        assert_eq!(split.split_at_most_fair, Some(0));
        assert!(split.lambda < 0.1, "{}", split.lambda);
        // pkg splits the hot key and cold keys whose two choices differ.
        assert!(pkg.split_keys.unwrap() >= 1);
    }

    #[test]
    fn learn_prefix_is_clamped() {
        let stream = skewed_stream();
        assert_eq!(Prepared::new(&stream, 1.0).learn_len, 1000);
        assert_eq!(Prepared::new(&stream, 1e-9).learn_len, 1);
        assert_eq!(Prepared::new(&stream, 0.0015).learn_len, 2);
    }
}
