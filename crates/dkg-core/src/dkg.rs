//! The DKG learner and builder.
//!
//! Reference: N. Rivetti, L. Querzoni, E. Anceaume, Y. Busnel, B. Sericola, "Efficient Key Grouping for
//! Near-Optimal Load Balancing in Stream Processing Systems", ACM DEBS 2015 (Distribution-aware Key
//! Grouping). Building blocks: SpaceSaving (Metwally et al., ICDT 2005, see [`crate::space_saving`]) and
//! LPT (Graham 1969, see [`mod@crate::lpt`]).
//!
//! # Method
//! A [`Sketch`] learns over a window of records:
//! - a SpaceSaving summary with `ceil(1 / epsilon)` counters (`epsilon` defaults to `theta / 2`, as in the
//!   authors' code);
//! - `ceil(mu * k)` bucket counters, bucket = [`BucketHash::bucket`]; every record increments its bucket.
//!
//! [`Sketch::build`] then takes the heavy hitters (keys whose guaranteed count `count - error` is at least
//! `theta * N`), weighs each by its guaranteed count and subtracts that weight from its bucket (so buckets
//! carry only the other keys), and places the jobs = heavy keys (sorted by key bytes) + buckets on the `k`
//! partitions with LPT, or with [`lpt_sticky`](crate::lpt::lpt_sticky) against a previous assignment of the same shape
//! (migration-aware: keep jobs where they are unless moving lowers the max load).
//!
//! Beyond the paper: buckets that saw no record in the window carry no evidence, so instead of piling them
//! all on one partition (which is where LPT puts zero-weight jobs) they are spread round-robin over the
//! partitions at or below the mean load on a fresh build, and left where they were on a migration-aware
//! build. Keys never seen while learning then spread like hashed keys, away from dominant keys.
//!
//! Also beyond the paper (issue 15): no key grouping beats `max(1, k * p1) - 1`, so a heavy key whose
//! share exceeds what one partition should carry may be split ([`SplitKeys`], off by default): it
//! becomes the fewest parts that each stay under the mean load `1/k`, LPT places the parts like the
//! other jobs but on distinct partitions ([`crate::lpt::lpt_grouped`]), the parts are
//! re-sized to level their partitions, and the assignment lists the key's partitions with integer
//! weights (`docs/spec.md` 4.6). A split key gives
//! up per-key order; every other key keeps strict key grouping.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::assignment::{
    Assignment, AssignmentParts, DEFAULT_LIMITS_DOCUMENT_BYTES, HeavyKey, MAX_ASSIGNMENT_BYTES,
    MAX_BUCKETS, MAX_HEAVY_KEYS, MAX_HEAVY_KEYS_PER_BUCKET, MAX_KEY_BYTES, MAX_PARTITIONS,
    MAX_SPLIT_PARTS, MAX_SPLIT_WEIGHT_SUM, Params, SplitPart,
};
use crate::error::{Error, Result};
use crate::hash::{BucketHash, kafka_partition};
use crate::lpt::{Schedule, lpt_grouped, lpt_sticky_grouped};
use crate::space_saving::{Counter, MAX_CAPACITY, SpaceSaving};

/// Default heavy-hitter threshold numerator: `theta = DEFAULT_THETA_PER_PARTITION / k`.
///
/// Why `1/(4k)`: a key is worth pinning as soon as it is a sizeable fraction of one partition's fair share
/// (`1/k`); with the paper's fixed `theta = 0.1`, keys between `1/(4k)` and `0.1` are hashed into buckets and
/// can leave one partition tens of points above the others when `k >= 10` (see `paper-notes.md`). A quarter
/// of a fair share keeps the heavy list short (at most `4k` keys, `8k` SpaceSaving counters) while the buckets
/// only carry keys small enough for LPT to even out (a list schedule ends within one job of the mean).
///
/// Measured (`dkg-lab simulate`, BENCHMARKS.md "Balance (simulate)"): over alpha 0.5..2.0 x k 5..100,
/// n = 10^4..10^6, the rules `c / k` for c in {0.05, 0.1, 0.25, 0.5, 1} give the same gap to lpt-full
/// within seed noise once mu >= 32 (paired over 20 seeds at mu = 64, c = 0.1, 0.5, 1 differ from c = 0.25
/// by -0.004, +0.013, +0.006 points, all within 1.5 standard errors). So c is chosen for the worst case,
/// not the averages: 0.25 bounds a bucketed key at a quarter of a fair share at negligible cost.
pub const DEFAULT_THETA_PER_PARTITION: f64 = 0.25;

/// Upper cap of the default theta: `default_theta(k) <= DEFAULT_THETA_MAX` (the paper's value), so small
/// partition counts still pin every key above 10% of the stream.
pub const DEFAULT_THETA_MAX: f64 = 0.1;

/// Default buckets per partition (`mu`): `64 * k` buckets.
///
/// Why 64: LPT balances buckets well when each partition receives many of them (its makespan is within
/// one job of the mean), so the residual imbalance of the sparse keys shrinks roughly as `1/mu`; the
/// paper's `mu = 2` leaves 10-50 points of avoidable imbalance. A bucket costs one `u32` in the assignment
/// and one `u64` in the sketch, so 64 per partition is free for a Kafka producer (6400 entries at
/// `k = 100`).
///
/// Measured (`dkg-lab simulate`, BENCHMARKS.md "Balance (simulate)"), mean of dkg minus lpt-full over the
/// 30 cells alpha 0.5..2.0 x k 5..100, m = 10^6, theta = 0.25/k:
/// - learning on 10% of the stream, n = 10^4, 20 seeds: mu 16/24/32/64/128 -> 0.88/0.84/0.78/0.87/1.00 points;
///   n = 10^6: 32/64/128 -> 0.98/0.90/1.13. Gaps > 2 points remain only where no key exceeds 1/k and k >= 20:
///   there the learned loads carry binomial noise ~ sqrt(k / 10^5) per partition that no mapping can undo.
/// - learning the whole stream (the mapping alone): worst cell 4.3 (mu 8), 1.9 (16), 0.7 (32), 0.3 (64),
///   0.1 (128) points at n = 10^4; 2.0 (32), 1.0 (64), 0.4 (128) at n = 10^6.
///
/// 64 is the best compromise: a finer table helps the mapping, but with a short window it also leaves more
/// buckets empty (no evidence), and keys first seen after the window land in those. The numbers above were
/// taken while empty buckets were spread `bucket % k`; spreading them over the partitions at or below the
/// mean load instead (the current rule) gives, 3 seeds, learning on 10%: mean gap 0.71 points with mu = 64,
/// 0.75 with mu = 128, and dkg equal to the bound on every cell where the top key exceeds 1/k.
///
/// This is the default up to about 1,600 partitions; above, [`default_mu`] lowers it so the assignment
/// document still fits Kafka's default message limits.
pub const DEFAULT_MU: f64 = 64.0;

/// Lowest mu [`default_mu`] goes to for large partition counts.
///
/// Measured (`dkg-lab simulate`, BENCHMARKS.md "Scale: 1,000 and 10,000 partitions"), 10,000
/// partitions, 10^8 records over 10^8 distinct keys, learning on 10%: with Zipf 0.8, 1.0 and 1.2 the top
/// key exceeds 1/k and every mu gives the key-grouping bound; with Zipf 0.5 (no dominant key) lambda
/// is 9.1 / 13.5 / 17.1 / 23.3 % for mu 64 / 10 / 8 / 4 (lpt-full 0.0; learning the whole stream,
/// 0.8 % with mu 64 and 7.8 % with mu 10). Below 8 the loss grows quickly, so 8 is the floor; it is reached at about 11,000 partitions, beyond which default documents
/// outgrow [`DEFAULT_LIMITS_DOCUMENT_BYTES`] anyway (see [`default_mu`]).
pub const DEFAULT_MU_FLOOR: f64 = 8.0;

/// Share of [`DEFAULT_LIMITS_DOCUMENT_BYTES`] the default configuration may fill with the members whose
/// size it fixes (`table`, `predicted_load`, the header); the rest is left to the heavy-key list.
pub const DEFAULT_FIXED_DOCUMENT_SHARE: f64 = 0.75;

/// The default buckets per partition for a topic of `partitions` partitions (`k = 0` counts as 1):
/// [`DEFAULT_MU`], lowered for large `k` so the assignment document fits Kafka's default limits.
///
/// `min(DEFAULT_MU, floor(budget / (k * table_entry)))`, at least [`DEFAULT_MU_FLOOR`], where `budget`
/// is [`DEFAULT_FIXED_DOCUMENT_SHARE`] of [`DEFAULT_LIMITS_DOCUMENT_BYTES`] minus the `predicted_load`
/// and header text ([`DkgConfig::fixed_document_bytes_for`]) and `table_entry` the mean JSON bytes of
/// one table entry (its digits and a comma). That leaves a quarter of the limit (250 kB, about 4,000
/// heavy keys of 8 bytes) to the heavy list. 64 up to about 1,600 partitions; 32 at 3,000, 10 at
/// 10,000; [`DEFAULT_MU_FLOOR`] from about 11,000 partitions on, where default documents exceed the
/// default limits (they still fit a control topic created by this project, which allows 9 MiB). The
/// spec's compact table (`docs/spec.md` 4.6) and chunked documents (a design, its gap G6) would
/// remove the need for this rule.
#[must_use]
pub fn default_mu(partitions: u32) -> f64 {
    let k = partitions.max(1);
    let budget = DEFAULT_LIMITS_DOCUMENT_BYTES as f64 * DEFAULT_FIXED_DOCUMENT_SHARE
        - other_fixed_bytes(k) as f64;
    let fit = (budget / (f64::from(k) * table_entry_bytes(k))).floor();
    fit.clamp(DEFAULT_MU_FLOOR, DEFAULT_MU)
}

/// Mean JSON bytes of one `table` entry for `k` partitions: its decimal digits (the mean over the
/// partition numbers `0..k`, which LPT uses about equally often) and a comma.
fn table_entry_bytes(k: u32) -> f64 {
    let k = u64::from(k.max(1));
    // Partition numbers below 10 have 1 digit, below 100 2, ...
    let (mut digits, mut low, mut width) = (0u64, 0u64, 1u64);
    while low < k {
        let high = (low.max(1) * 10).min(k);
        digits += (high - low) * width;
        low = high;
        width += 1;
    }
    digits as f64 / k as f64 + 1.0
}

/// JSON bytes of everything but `table` and `heavy` in a document for `k` partitions: `predicted_load`
/// (at most 24 characters per share, as ryu writes a double in `[0, 1]`, and a comma) and 1 KiB for
/// the header members (topic name at most 249 bytes, numbers, member names).
fn other_fixed_bytes(k: u32) -> u64 {
    u64::from(k) * 25 + 1024
}

/// How much worse than a fresh LPT, as a share of the mean partition load, a migration-aware rebuild may be
/// in max load to keep jobs where they are.
///
/// A fresh LPT over thousands of small buckets packs every partition to within a fraction of a percent of
/// the mean, while the window's own sampling noise is larger (about `1 / sqrt(records per partition)`):
/// matching the fresh makespan exactly made a stationary re-learn move ~75% of the load (12 partitions,
/// Zipf 0.8, 2 x 10^5-record windows) for no measurable gain. With 2% it moves almost nothing (test
/// `rebuilding_on_a_fresh_sample_of_the_same_distribution_moves_little`).
pub const DEFAULT_MIGRATION_SLACK: f64 = 0.02;

/// How far above a fair share `1/k` a heavy key's estimated share must be before [`SplitKeys`] splits
/// it: a key is split when `share > (1 + DEFAULT_SPLIT_SLACK) / k`.
///
/// Why 2%: a key left whole adds at most its excess over `1/k` to the imbalance, so the slack is the
/// imbalance splitting tolerates rather than give up a key's order (the grid target is 5%); and the
/// guaranteed count the share is taken from (`count - error`) underestimates, so sampling noise alone
/// rarely pushes a key of true share `<= 1/k` over it. Measured in BENCHMARKS.md "Split keys".
pub const DEFAULT_SPLIT_SLACK: f64 = 0.02;

/// Which heavy keys [`Sketch::build`] may split over several partitions. Default [`SplitKeys::Off`].
///
/// Rule (`auto`, and for the listed keys with `allow`): a heavy key whose estimated share of the window
/// (its guaranteed count over the window's records) exceeds `(1 + DEFAULT_SPLIT_SLACK) / k` becomes
/// `ceil(share * k)` parts, the fewest that bring each part to at most the mean load `1/k`, capped at
/// `k` and [`MAX_SPLIT_PARTS`] (above that cap the parts are equal and carry more than `1/k`). LPT
/// places all but one part as a full mean load and the last as the rest, so the other jobs go around
/// them; the parts are then re-sized to level the key's partitions (water-filling), and the document
/// weights follow the parts' loads. Keys at or below the threshold stay whole.
///
/// Serde: `"off"`, `"auto"` or `{"allow":["<base64 key>", ...]}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SplitKeys {
    /// Never split: strict key grouping for every key (the builds of before splitting, byte for byte).
    #[default]
    Off,
    /// Split any heavy key over the threshold.
    Auto,
    /// Split only these keys, and only when over the threshold.
    Allow(#[serde(with = "keys_b64")] BTreeSet<Vec<u8>>),
}

impl SplitKeys {
    /// Whether this is [`SplitKeys::Off`].
    #[must_use]
    pub fn is_off(&self) -> bool {
        matches!(self, SplitKeys::Off)
    }

    /// Whether `key` may be split (if over the threshold).
    #[must_use]
    pub fn allows(&self, key: &[u8]) -> bool {
        match self {
            SplitKeys::Off => false,
            SplitKeys::Auto => true,
            SplitKeys::Allow(keys) => keys.contains(key),
        }
    }
}

/// The split rule of [`SplitKeys`]: parts for a key of guaranteed weight `weight` in a window of
/// `window` records over `partitions` partitions; 1 = whole.
#[must_use]
pub fn split_parts(weight: u64, window: u64, partitions: u32) -> u32 {
    if window == 0 || partitions < 2 {
        return 1;
    }
    // share > (1 + slack) / k, i.e. weight * k > (1 + slack) * window.
    if weight as f64 * f64::from(partitions) <= (1.0 + DEFAULT_SPLIT_SLACK) * window as f64 {
        return 1;
    }
    let fewest = (u128::from(weight) * u128::from(partitions)).div_ceil(u128::from(window));
    let cap = u128::from(partitions)
        .min(MAX_SPLIT_PARTS as u128)
        .min(u128::from(weight));
    fewest.clamp(1, cap.max(1)) as u32
}

/// The loads of `parts` parts of a key of weight `weight` in a window of `window` records over
/// `partitions` partitions: all but the last a full mean load `window / k` and the last the rest, when
/// `parts` is the uncapped [`split_parts`]; else equal parts (within 1). Full parts reserve whole
/// partitions for the key, so LPT places the other jobs around them and the remainder part shares a
/// partition with them; [`SplitLayout::fill`] then levels the key's partitions.
fn part_loads(weight: u64, parts: u32, window: u64, partitions: u32) -> Vec<u64> {
    let p = u64::from(parts.max(1));
    let mean = window / u64::from(partitions.max(1));
    if p >= 2 && mean > 0 && weight.div_ceil(mean) == p {
        let mut loads = vec![mean; p as usize - 1];
        loads.push(weight - mean * (p - 1));
        return loads;
    }
    let (q, r) = (weight / p, weight % p);
    (0..p).map(|i| q + u64::from(i < r)).collect()
}

/// Document weights for parts of these loads: integers `>= 1` in proportion to the loads, divided by
/// their greatest common divisor, summing to at most [`MAX_SPLIT_WEIGHT_SUM`]. Each part's share
/// `w_i / sum(w)` is within `(1 + 1.5 p * l_i / L) / (S - p / 2)` of `l_i / L` (`p` parts, `S =
/// MAX_SPLIT_WEIGHT_SUM - 2p`): rounding moves a weight by at most 1, the floor of 1 and the
/// rounding move the sum by at most `1.5 p`.
#[must_use]
pub fn split_weights(loads: &[u64]) -> Vec<u32> {
    let total: u128 = loads.iter().map(|&l| u128::from(l)).sum();
    if total == 0 {
        return vec![1; loads.len()];
    }
    let scale = u128::from(
        MAX_SPLIT_WEIGHT_SUM
            .saturating_sub(2 * loads.len() as u64)
            .max(1),
    );
    let raw: Vec<u64> = loads
        .iter()
        .map(|&l| ((u128::from(l) * scale + total / 2) / total).max(1) as u64)
        .collect();
    let divisor = raw.iter().copied().fold(0, gcd).max(1);
    raw.iter().map(|&w| (w / divisor) as u32).collect()
}

/// `total` split over bins already holding `others`, so that the fullest bins end as low as possible:
/// `part_i = max(0, level - others_i)` with the level that makes the parts sum to `total`, in integers
/// (the remainder one record each to the lowest bins), every part at least 1 (taken from the largest)
/// when `total >= others.len()`.
fn water_fill(total: u64, others: &[u64]) -> Vec<u64> {
    let n = others.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (others[i], i));
    // The level reaches the `m` lowest bins: (total + their sum) / m <= the next one's load.
    let (mut m, mut sum) = (0usize, 0u128);
    for (at, &i) in order.iter().enumerate() {
        let with = sum + u128::from(others[i]);
        if at > 0 && (u128::from(total) + sum) <= u128::from(others[i]) * at as u128 {
            break;
        }
        m = at + 1;
        sum = with;
    }
    let level = (u128::from(total) + sum) / m.max(1) as u128;
    let mut parts = vec![0u64; n];
    let mut given = 0u64;
    for &i in &order[..m] {
        let part = level.saturating_sub(u128::from(others[i])) as u64;
        parts[i] = part;
        given += part;
    }
    for &i in order[..m]
        .iter()
        .cycle()
        .take(total.saturating_sub(given) as usize)
    {
        parts[i] += 1;
    }
    // At least 1 record per part (the document's weights are >= 1 anyway), from the largest part.
    for i in 0..n {
        if parts[i] == 0 {
            let (largest, _) = parts
                .iter()
                .enumerate()
                .max_by_key(|&(j, &x)| (x, std::cmp::Reverse(j)))
                .unwrap_or((i, &0));
            if parts[largest] > 1 {
                parts[largest] -= 1;
                parts[i] = 1;
            }
        }
    }
    parts
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// `weight` records of a split key spread over its `parts` in proportion to their weights: `(partition,
/// records)` per part, integer shares rounded down, the remainder (fewer records than parts) one each
/// to the first parts, so every part is within one record of its exact share (what a weighted round
/// robin gives over whole periods of `sum(weights)` records).
pub fn spread(weight: u64, parts: &[SplitPart]) -> impl Iterator<Item = (u32, u64)> + '_ {
    let sum: u128 = parts
        .iter()
        .map(|p| u128::from(p.weight))
        .sum::<u128>()
        .max(1);
    let shares: Vec<u64> = parts
        .iter()
        .map(|p| (u128::from(weight) * u128::from(p.weight) / sum) as u64)
        .collect();
    let rest = weight.saturating_sub(shares.iter().sum()) as usize;
    parts
        .iter()
        .zip(shares)
        .enumerate()
        .map(move |(i, (p, s))| (p.partition, s + u64::from(i < rest)))
}

/// Serde of the allow-list: base64 strings (keys are arbitrary bytes).
mod keys_b64 {
    use std::collections::BTreeSet;

    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    pub(super) fn serialize<S: Serializer>(
        keys: &BTreeSet<Vec<u8>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(keys.iter().map(|k| STANDARD.encode(k)))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeSet<Vec<u8>>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|k| STANDARD.decode(k).map_err(D::Error::custom))
            .collect()
    }
}

/// The paper's theta (DEBS 2015 evaluation, also the authors' default).
pub const PAPER_THETA: f64 = 0.1;

/// The paper's mu.
pub const PAPER_MU: f64 = 2.0;

/// The project's default heavy-hitter threshold for `partitions` partitions:
/// `min(DEFAULT_THETA_PER_PARTITION / k, DEFAULT_THETA_MAX)` (`k = 0` counts as 1).
#[must_use]
pub fn default_theta(partitions: u32) -> f64 {
    (DEFAULT_THETA_PER_PARTITION / f64::from(partitions.max(1))).min(DEFAULT_THETA_MAX)
}

/// DKG learning parameters. Build one with [`DkgConfig::builder`], [`DkgConfig::default`] (the project's
/// defaults) or [`DkgConfig::paper`].
///
/// Serde: every field is optional on input (missing = default); unknown fields are rejected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DkgConfig {
    /// Heavy-hitter threshold as a share of the window, in `(0, 1]`. `None` = [`default_theta`]`(k)`.
    pub theta: Option<f64>,
    /// SpaceSaving error bound as a share of the window, in `(0, 1]`. `None` = `theta / 2`.
    pub epsilon: Option<f64>,
    /// Buckets per partition (`ceil(mu * k)` buckets), finite and `> 0`. `None` = [`default_mu`]`(k)`.
    pub mu: Option<f64>,
    /// The hash mapping keys to buckets. Default `BucketHash::default()` (murmur2, `DEFAULT_BUCKET_SEED`).
    pub bucket_hash: BucketHash,
    /// Which heavy keys may be split over several partitions ([`SplitKeys`]).
    #[serde(skip_serializing_if = "SplitKeys::is_off")]
    pub split: SplitKeys,
}

impl Default for DkgConfig {
    /// theta = [`default_theta`]`(k)`, epsilon = theta / 2, mu = [`default_mu`]`(k)`, default bucket hash.
    ///
    /// Both rules depend on the partition count `k`. theta is a quarter of a fair share `1/k`, capped at
    /// 0.1 ([`DEFAULT_THETA_PER_PARTITION`]). mu is [`DEFAULT_MU`] = 64 buckets per partition up to
    /// about 1,600 partitions; above, it falls with `k` so that the assignment's table and
    /// `predicted_load` fill at most [`DEFAULT_FIXED_DOCUMENT_SHARE`] of Kafka's default message limits
    /// ([`DEFAULT_LIMITS_DOCUMENT_BYTES`]), down to [`DEFAULT_MU_FLOOR`] (10 at 10,000 partitions: a
    /// 100,000-entry table, about 490 kB of JSON). An explicit mu
    /// ([`DkgConfigBuilder::mu`]) always wins; [`DkgConfig::validate_for`] rejects one whose document
    /// could not be published at all, and [`DkgConfig::fits_default_limits`] tells whether it fits a
    /// control topic with the broker's default `max.message.bytes`. Splitting is off.
    fn default() -> Self {
        Self {
            theta: None,
            epsilon: None,
            mu: None,
            bucket_hash: BucketHash::default(),
            split: SplitKeys::Off,
        }
    }
}

/// Builder for [`DkgConfig`]; unset fields keep the defaults of [`DkgConfig::default`].
#[derive(Clone, Debug, Default)]
pub struct DkgConfigBuilder {
    config: DkgConfig,
}

impl DkgConfigBuilder {
    /// Heavy-hitter threshold, in `(0, 1]` (default: [`default_theta`] of the partition count).
    #[must_use]
    pub fn theta(mut self, theta: f64) -> Self {
        self.config.theta = Some(theta);
        self
    }

    /// SpaceSaving error bound, in `(0, 1]` (default: theta / 2).
    #[must_use]
    pub fn epsilon(mut self, epsilon: f64) -> Self {
        self.config.epsilon = Some(epsilon);
        self
    }

    /// Buckets per partition, finite and `> 0` (default: [`default_mu`] of the partition count).
    #[must_use]
    pub fn mu(mut self, mu: f64) -> Self {
        self.config.mu = Some(mu);
        self
    }

    /// The bucket hash (default `BucketHash::default()`).
    #[must_use]
    pub fn bucket_hash(mut self, bucket_hash: BucketHash) -> Self {
        self.config.bucket_hash = bucket_hash;
        self
    }

    /// Which heavy keys may be split (see [`SplitKeys`]).
    #[must_use]
    pub fn split(mut self, split: SplitKeys) -> Self {
        self.config.split = split;
        self
    }

    /// Validate and return the configuration.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first field out of range.
    pub fn build(self) -> Result<DkgConfig> {
        self.config.validate()?;
        Ok(self.config)
    }
}

fn check_share(field: &'static str, x: f64) -> Result<()> {
    if x > 0.0 && x <= 1.0 {
        Ok(())
    } else {
        Err(Error::InvalidConfig {
            field,
            reason: format!("must be in (0, 1], got {x}"),
        })
    }
}

impl DkgConfig {
    /// A builder starting from the defaults.
    #[must_use]
    pub fn builder() -> DkgConfigBuilder {
        DkgConfigBuilder::default()
    }

    /// The paper's parameters: theta = 0.1, epsilon = theta / 2, mu = 2, default bucket hash.
    #[must_use]
    pub fn paper() -> Self {
        Self {
            theta: Some(PAPER_THETA),
            epsilon: None,
            mu: Some(PAPER_MU),
            bucket_hash: BucketHash::default(),
            split: SplitKeys::Off,
        }
    }

    /// Check the ranges that do not depend on the partition count.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first field out of range.
    pub fn validate(&self) -> Result<()> {
        if let Some(theta) = self.theta {
            check_share("theta", theta)?;
        }
        if let Some(epsilon) = self.epsilon {
            check_share("epsilon", epsilon)?;
        }
        if let Some(mu) = self.mu
            && !(mu.is_finite() && mu > 0.0)
        {
            return Err(Error::InvalidConfig {
                field: "mu",
                reason: format!("must be finite and > 0, got {mu}"),
            });
        }
        Ok(())
    }

    /// Check everything for a topic of `partitions` partitions: ranges, partition count, bucket count and
    /// summary size limits.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the offending field.
    pub fn validate_for(&self, partitions: u32) -> Result<()> {
        self.validate()?;
        if partitions == 0 || partitions > MAX_PARTITIONS {
            return Err(Error::InvalidConfig {
                field: "partitions",
                reason: format!("must be in 1..={MAX_PARTITIONS}, got {partitions}"),
            });
        }
        let mu = self.mu_for(partitions);
        let buckets = mu * f64::from(partitions);
        if buckets.ceil() > f64::from(MAX_BUCKETS) {
            return Err(Error::InvalidConfig {
                field: "mu",
                reason: format!(
                    "mu {mu} x {partitions} partitions needs {} buckets, more than the maximum {MAX_BUCKETS}",
                    buckets.ceil()
                ),
            });
        }
        let fixed = self.fixed_document_bytes_for(partitions);
        if fixed > MAX_ASSIGNMENT_BYTES as u64 {
            let room = MAX_ASSIGNMENT_BYTES as f64 - other_fixed_bytes(partitions) as f64;
            let largest = (room / (f64::from(partitions) * table_entry_bytes(partitions))).floor();
            return Err(Error::InvalidConfig {
                field: "mu",
                reason: format!(
                    "mu {mu} x {partitions} partitions makes assignment documents of at least {fixed} \
                     bytes, over the {MAX_ASSIGNMENT_BYTES}-byte limit every reader enforces: they could \
                     never be published; use mu <= {largest}"
                ),
            });
        }
        let epsilon = self.epsilon_for(partitions);
        if (1.0 / epsilon).ceil() > MAX_CAPACITY as f64 {
            return Err(Error::InvalidConfig {
                field: "epsilon",
                reason: format!("{epsilon} needs more than {MAX_CAPACITY} counters"),
            });
        }
        Ok(())
    }

    /// The heavy-hitter threshold for `partitions` partitions.
    #[must_use]
    pub fn theta_for(&self, partitions: u32) -> f64 {
        self.theta.unwrap_or_else(|| default_theta(partitions))
    }

    /// The SpaceSaving error bound for `partitions` partitions (theta / 2 unless set).
    #[must_use]
    pub fn epsilon_for(&self, partitions: u32) -> f64 {
        self.epsilon
            .unwrap_or_else(|| self.theta_for(partitions) / 2.0)
    }

    /// Buckets per partition for `partitions` partitions: the explicit mu, else [`default_mu`].
    #[must_use]
    pub fn mu_for(&self, partitions: u32) -> f64 {
        self.mu.unwrap_or_else(|| default_mu(partitions))
    }

    /// The bucket count `ceil(mu * k)`, at least 1 (saturating at `u32::MAX` for absurd values).
    #[must_use]
    pub fn buckets_for(&self, partitions: u32) -> u32 {
        // `as` saturates (and maps NaN to 0).
        ((self.mu_for(partitions) * f64::from(partitions)).ceil() as u32).max(1)
    }

    /// Estimated JSON bytes of the members of an assignment document this configuration fixes for
    /// `partitions` partitions: the `table` (mean digits per entry), `predicted_load` (its longest form,
    /// 24 characters per share) and the header. Every document built with it is at most about this
    /// long plus its heavy-key list (about 60 bytes per 8-byte key); shorter when the shares print
    /// short (`0.0001`).
    #[must_use]
    pub fn fixed_document_bytes_for(&self, partitions: u32) -> u64 {
        let table = f64::from(self.buckets_for(partitions)) * table_entry_bytes(partitions);
        table.ceil() as u64 + other_fixed_bytes(partitions)
    }

    /// Whether documents for `partitions` partitions leave at least a quarter of
    /// [`DEFAULT_LIMITS_DOCUMENT_BYTES`] to the heavy keys, so that they fit a control topic with Kafka's
    /// default `max.message.bytes` (true for the default mu up to about 11,000 partitions). A publisher
    /// should warn at startup when this is false: only a control topic created with a larger
    /// `max.message.bytes` (as this project's client does) accepts such documents.
    #[must_use]
    pub fn fits_default_limits(&self, partitions: u32) -> bool {
        self.fixed_document_bytes_for(partitions) as f64
            <= DEFAULT_LIMITS_DOCUMENT_BYTES as f64 * DEFAULT_FIXED_DOCUMENT_SHARE
    }
}

/// The learning state of DKG for one topic: a SpaceSaving summary plus bucket counters.
///
/// Serializes as `{"partitions":k,"theta":..,"epsilon":..,"mu":..,"bucket_hash":{..},"summary":{..},
/// "bucket_weights":[..]}` (the summary as described in [`SpaceSaving`]) so samplers can ship sketches and
/// merge them; deserialization validates the parameters and the bucket count. The split setting is
/// the building instance's policy, not learned state: it is not serialized (a deserialized sketch has
/// [`SplitKeys::Off`]) and [`Sketch::merge`] keeps `self`'s.
#[derive(Clone, Serialize, Deserialize)]
#[serde(try_from = "SketchWire")]
pub struct Sketch {
    partitions: u32,
    theta: f64,
    epsilon: f64,
    mu: f64,
    bucket_hash: BucketHash,
    summary: SpaceSaving,
    bucket_weights: Vec<u64>,
    #[serde(skip)]
    split: SplitKeys,
}

impl fmt::Debug for Sketch {
    /// Compact: the bucket counters are summarised, not listed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sketch")
            .field("partitions", &self.partitions)
            .field("theta", &self.theta)
            .field("epsilon", &self.epsilon)
            .field("mu", &self.mu)
            .field("bucket_hash", &self.bucket_hash)
            .field("split", &self.split)
            .field("buckets", &self.bucket_weights.len())
            .field("total", &self.total())
            .field("summary", &self.summary)
            .finish()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SketchWire {
    partitions: u32,
    theta: f64,
    epsilon: f64,
    mu: f64,
    bucket_hash: BucketHash,
    summary: SpaceSaving,
    bucket_weights: Vec<u64>,
}

impl TryFrom<SketchWire> for Sketch {
    type Error = Error;

    fn try_from(w: SketchWire) -> Result<Self> {
        let config = DkgConfig {
            theta: Some(w.theta),
            epsilon: Some(w.epsilon),
            mu: Some(w.mu),
            bucket_hash: w.bucket_hash,
            split: SplitKeys::Off,
        };
        config.validate_for(w.partitions)?;
        let expected = config.buckets_for(w.partitions);
        if w.bucket_weights.len() != expected as usize {
            return Err(Error::InvalidConfig {
                field: "bucket_weights",
                reason: format!(
                    "has {} entries, expected ceil(mu * partitions) = {expected}",
                    w.bucket_weights.len()
                ),
            });
        }
        Ok(Self {
            partitions: w.partitions,
            theta: w.theta,
            epsilon: w.epsilon,
            mu: w.mu,
            bucket_hash: w.bucket_hash,
            summary: w.summary,
            bucket_weights: w.bucket_weights,
            split: SplitKeys::Off,
        })
    }
}

/// The result of [`Sketch::build`].
#[derive(Clone, Debug)]
pub struct Build {
    /// The new assignment (predicted_load = per-partition share of the window's job weight).
    pub assignment: Assignment,
    /// Share of the window's load that changes partition relative to the previous assignment (0 without
    /// a previous assignment; 1, a full reshuffle, when the previous one has another partition count,
    /// bucket count or bucket hash).
    pub moved_share: f64,
    /// Number of heavy keys.
    pub heavy_hitters: usize,
    /// Number of heavy keys split over several partitions (0 unless [`SplitKeys`] allows splitting).
    pub split_keys: usize,
    /// [`imbalance`] of the predicted load.
    pub predicted_imbalance: f64,
}

/// Load imbalance `lambda = max / mean - 1` of a load vector; 0 for an empty vector or a total that is
/// not positive and finite.
#[must_use]
pub fn imbalance(loads: &[f64]) -> f64 {
    let sum: f64 = loads.iter().sum();
    if loads.is_empty() || !(sum > 0.0 && sum.is_finite()) {
        return 0.0;
    }
    let max = loads.iter().copied().fold(f64::MIN, f64::max);
    max / (sum / loads.len() as f64) - 1.0
}

/// Shares of `loads`; uniform when the total is 0 (no evidence: assume an even spread).
fn shares(loads: &[u64]) -> Vec<f64> {
    let total: f64 = loads.iter().map(|&l| l as f64).sum();
    if total > 0.0 {
        loads.iter().map(|&l| l as f64 / total).collect()
    } else {
        vec![1.0 / loads.len().max(1) as f64; loads.len()]
    }
}

/// The jobs of a window: heavy keys (by key bytes) then buckets with the heavy mass removed.
struct Jobs<'a> {
    heavy: Vec<Counter<'a>>,
    buckets: Vec<u64>,
}

/// How the heavy keys become jobs: heavy key `i`'s first (or only) part is job `i`, the buckets
/// follow (jobs `h..h + buckets`, so the table is that slice of the placement), then the other parts of
/// the split keys (key order, then part order). Without split keys the jobs are exactly those of a
/// build without splitting.
struct SplitLayout {
    /// Parts per heavy key (1 = whole).
    parts: Vec<u32>,
    /// Job index of heavy key `i`'s part 1 (when it has one).
    first_extra: Vec<usize>,
    /// `(heavy key, part >= 1)` of each job after the buckets.
    extra: Vec<(usize, usize)>,
    /// Loads of a split key's parts (empty for a whole key).
    loads: Vec<Vec<u64>>,
    /// A group per job (the heavy key's index for the parts of a split key), when something is split.
    groups: Option<Vec<Option<u32>>>,
}

impl SplitLayout {
    fn new(jobs: &Jobs<'_>, split: &SplitKeys, window: u64, partitions: u32) -> Self {
        let (h, nb) = (jobs.heavy.len(), jobs.buckets.len());
        let parts: Vec<u32> = jobs
            .heavy
            .iter()
            .map(|c| {
                if split.allows(c.key) {
                    split_parts(c.guaranteed(), window, partitions)
                } else {
                    1
                }
            })
            .collect();
        let mut extra = Vec::new();
        let mut first_extra = vec![0; h];
        for (i, &p) in parts.iter().enumerate() {
            first_extra[i] = h + nb + extra.len();
            extra.extend((1..p as usize).map(|j| (i, j)));
        }
        let loads = jobs
            .heavy
            .iter()
            .zip(&parts)
            .map(|(c, &p)| {
                if p > 1 {
                    part_loads(c.guaranteed(), p, window, partitions)
                } else {
                    Vec::new()
                }
            })
            .collect();
        let groups = (!extra.is_empty()).then(|| {
            let mut groups = vec![None; h + nb + extra.len()];
            for (i, &p) in parts.iter().enumerate() {
                if p > 1 {
                    groups[i] = Some(i as u32);
                }
            }
            for (n, &(i, _)) in extra.iter().enumerate() {
                groups[h + nb + n] = Some(i as u32);
            }
            groups
        });
        Self {
            parts,
            first_extra,
            extra,
            loads,
            groups,
        }
    }

    /// Job weights in job order.
    fn weights(&self, jobs: &Jobs<'_>) -> Vec<u64> {
        jobs.heavy
            .iter()
            .enumerate()
            .map(|(i, c)| {
                self.loads[i]
                    .first()
                    .copied()
                    .unwrap_or_else(|| c.guaranteed())
            })
            .chain(jobs.buckets.iter().copied())
            .chain(self.extra.iter().map(|&(i, j)| self.loads[i][j]))
            .collect()
    }

    /// Job index of part `j` of heavy key `i`.
    fn job(&self, i: usize, j: usize) -> usize {
        if j == 0 {
            i
        } else {
            self.first_extra[i] + j - 1
        }
    }

    /// Re-size the parts of each split key, where LPT put them, so that its partitions end level
    /// (water-filling): a part on a partition that other jobs filled shrinks, one on an emptier
    /// partition grows, so jobs LPT put beside the remainder part are shared by all the key's
    /// partitions instead of overshooting on one. Each part keeps at least 1 record;
    /// two rounds let keys sharing partitions settle. Updates `loads` and the parts' job `weights`.
    fn fill(&mut self, placement: &[u32], loads: &mut [u64], weights: &mut [u64]) {
        for _ in 0..2 {
            for i in 0..self.parts.len() {
                let p = self.parts[i] as usize;
                if p < 2 {
                    continue;
                }
                let jobs: Vec<usize> = (0..p).map(|j| self.job(i, j)).collect();
                let others: Vec<u64> = jobs
                    .iter()
                    .map(|&job| loads[placement[job] as usize].saturating_sub(weights[job]))
                    .collect();
                let total: u64 = self.loads[i].iter().sum();
                let filled = water_fill(total, &others);
                for ((&job, &new), old) in jobs.iter().zip(&filled).zip(&mut self.loads[i]) {
                    let l = &mut loads[placement[job] as usize];
                    *l = l.saturating_sub(weights[job]).saturating_add(new);
                    weights[job] = new;
                    *old = new;
                }
            }
        }
    }

    /// The document parts of heavy key `i` (empty for a whole key), part 0 first.
    fn parts_of(&self, i: usize, placement: &[u32]) -> Vec<SplitPart> {
        if self.parts[i] <= 1 {
            return Vec::new();
        }
        let weights = split_weights(&self.loads[i]);
        (0..self.parts[i] as usize)
            .zip(weights)
            .map(|(j, weight)| SplitPart {
                partition: placement[if j == 0 {
                    i
                } else {
                    self.first_extra[i] + j - 1
                }],
                weight,
            })
            .collect()
    }
}

impl Sketch {
    /// An empty sketch for a topic of `partitions` partitions.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] if the configuration is out of range for this partition count (see
    /// [`DkgConfig::validate_for`]).
    pub fn new(config: &DkgConfig, partitions: u32) -> Result<Self> {
        config.validate_for(partitions)?;
        let epsilon = config.epsilon_for(partitions);
        Ok(Self {
            partitions,
            theta: config.theta_for(partitions),
            epsilon,
            mu: config.mu_for(partitions),
            bucket_hash: config.bucket_hash,
            summary: SpaceSaving::with_epsilon(epsilon)?,
            bucket_weights: vec![0; config.buckets_for(partitions) as usize],
            split: config.split.clone(),
        })
    }

    /// Count one record with this key.
    #[inline]
    pub fn observe(&mut self, key: &[u8]) {
        self.observe_weighted(key, 1);
    }

    /// Count `weight` records with this key.
    #[inline]
    pub fn observe_weighted(&mut self, key: &[u8], weight: u64) {
        if weight == 0 {
            return;
        }
        self.summary.insert_weighted(key, weight);
        let b = self.bucket_of(key);
        if let Some(w) = self.bucket_weights.get_mut(b as usize) {
            *w = w.saturating_add(weight);
        }
    }

    /// Records (total weight) observed, `N`.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.summary.total()
    }

    /// The partition count this sketch learns for.
    #[must_use]
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// The heavy-hitter threshold in use.
    #[must_use]
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// The SpaceSaving error bound in use.
    #[must_use]
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// Buckets per partition.
    #[must_use]
    pub fn mu(&self) -> f64 {
        self.mu
    }

    /// Number of buckets.
    #[must_use]
    pub fn buckets(&self) -> u32 {
        self.bucket_weights.len() as u32
    }

    /// The bucket hash.
    #[must_use]
    pub fn bucket_hash(&self) -> BucketHash {
        self.bucket_hash
    }

    /// Which heavy keys [`Sketch::build`] may split.
    #[must_use]
    pub fn split(&self) -> &SplitKeys {
        &self.split
    }

    /// The SpaceSaving summary.
    #[must_use]
    pub fn summary(&self) -> &SpaceSaving {
        &self.summary
    }

    /// Records per bucket (heavy keys included).
    #[must_use]
    pub fn bucket_weights(&self) -> &[u64] {
        &self.bucket_weights
    }

    /// Approximate heap memory of the sketch, in bytes: the summary's ([`SpaceSaving::heap_bytes`]) and
    /// the bucket counters (8 bytes each). Bounded by the configuration, whatever the number of keys.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.summary.heap_bytes() + self.bucket_weights.capacity() * size_of::<u64>()
    }

    /// Merge another sampler's sketch: summaries merge as in [`SpaceSaving::merge`] (error bound
    /// `(N1 + N2) / capacity`), bucket counters add up. `theta`, `epsilon` and `mu` stay `self`'s.
    ///
    /// # Errors
    /// [`Error::IncompatibleMerge`] if the partition count, bucket count or bucket hash differ, or the
    /// summaries cannot merge; `self` is unchanged then.
    pub fn merge(&mut self, other: &Sketch) -> Result<()> {
        if self.partitions != other.partitions
            || self.bucket_weights.len() != other.bucket_weights.len()
            || self.bucket_hash != other.bucket_hash
        {
            return Err(Error::IncompatibleMerge {
                reason: format!(
                    "sketch shapes differ: {} vs {} partitions, {} vs {} buckets, {:?} vs {:?}",
                    self.partitions,
                    other.partitions,
                    self.bucket_weights.len(),
                    other.bucket_weights.len(),
                    self.bucket_hash,
                    other.bucket_hash
                ),
            });
        }
        self.summary.merge(&other.summary)?;
        for (w, o) in self.bucket_weights.iter_mut().zip(&other.bucket_weights) {
            *w = w.saturating_add(*o);
        }
        Ok(())
    }

    /// Multiply all counts by `factor` (clamped to `[0, 1]`, NaN = 1), for a drifting window; see
    /// [`SpaceSaving::decay`]. Bucket counters are rounded to nearest.
    pub fn decay(&mut self, factor: f64) {
        let f = if factor.is_nan() {
            1.0
        } else {
            factor.clamp(0.0, 1.0)
        };
        self.summary.decay(f);
        for w in &mut self.bucket_weights {
            *w = (*w as f64 * f).round() as u64;
        }
    }

    /// Forget everything learned (start a new window).
    pub fn clear(&mut self) {
        self.summary.clear();
        self.bucket_weights.fill(0);
    }

    /// Build an assignment from this window.
    ///
    /// `previous = Some(..)` with the same partition count, bucket count and bucket hash makes the build
    /// migration-aware ([`lpt_sticky`](crate::lpt::lpt_sticky): a heavy key's previous partition is `previous.partition_for(key)`, a
    /// bucket's is `previous.table()[b]`); otherwise it is a plain LPT build. `moved_share` is the share
    /// of the window's job weight that changes partition: moved heavy keys, moved buckets (without the
    /// weight of keys that were heavy in `previous`), and keys heavy in `previous` but not any more whose
    /// new bucket sits elsewhere (weighed by their guaranteed count if the summary still has them).
    ///
    /// With splitting allowed ([`SplitKeys`]), the keys over the threshold are placed as parts
    /// ([`crate::lpt::lpt_grouped`] / [`crate::lpt::lpt_sticky_grouped`]):
    /// part `j` of a key split in `previous` prefers that key's part `j` partition there, and a key
    /// whole before prefers its partition for its first part; a part counts as moved (its load) when
    /// it ends elsewhere. Without split keys the build is exactly the build without splitting.
    ///
    /// # Errors
    /// Whatever [`Assignment::new`] rejects (for instance an invalid topic name).
    pub fn build(
        &self,
        topic: &str,
        epoch: u64,
        created_at_ms: u64,
        previous: Option<&Assignment>,
    ) -> Result<Build> {
        self.build_with_slack(
            topic,
            epoch,
            created_at_ms,
            previous,
            DEFAULT_MIGRATION_SLACK,
        )
    }

    /// [`Sketch::build`] with another migration slack than [`DEFAULT_MIGRATION_SLACK`] (a share of the
    /// mean partition load; clamped to `>= 0`, NaN = 0; infinity keeps every job where it was and only
    /// places new ones): a migration-aware rebuild may then be that much worse in max load than a
    /// fresh LPT to keep jobs where they are. A larger slack moves less;
    /// the sampler tries a few when it replaces an assignment and publishes the one that moves least
    /// while still reaching the improvement (`dkg-sampler`'s `decide.rs`). Without a usable `previous`
    /// the slack has no effect.
    ///
    /// # Errors
    /// As [`Sketch::build`].
    pub fn build_with_slack(
        &self,
        topic: &str,
        epoch: u64,
        created_at_ms: u64,
        previous: Option<&Assignment>,
        migration_slack: f64,
    ) -> Result<Build> {
        let migration_slack = if migration_slack > 0.0 {
            migration_slack
        } else {
            0.0
        };
        let jobs = self.jobs();
        let k = self.partitions;
        let h = jobs.heavy.len();
        let nb = jobs.buckets.len();
        let mut layout = SplitLayout::new(&jobs, &self.split, self.total(), k);
        let weights = layout.weights(&jobs);
        let sticky_base = previous.filter(|p| self.same_shape(p));
        let groups = layout.groups.as_deref();

        let previous_placement: Option<Vec<Option<u32>>> = sticky_base.map(|prev| {
            // Part j of a key prefers the partition of its part j before; a key's first part (a whole
            // key) its partition before (its bucket's if it was not heavy). `split_of` takes no pick.
            let before = |key: &[u8], j: usize| match prev.split_of(key) {
                Some(parts) => parts.get(j).map(|p| p.partition),
                None if j == 0 => Some(prev.partition_for(key)),
                None => None,
            };
            jobs.heavy
                .iter()
                .map(|c| before(c.key, 0))
                .chain(prev.table().iter().map(|&p| Some(p)))
                .chain(
                    layout
                        .extra
                        .iter()
                        .map(|&(i, j)| before(jobs.heavy[i].key, j)),
                )
                .collect()
        });
        let mut schedule: Schedule = match &previous_placement {
            Some(placements) => {
                // Slack relative to the mean job load per partition (see DEFAULT_MIGRATION_SLACK).
                let total = weights.iter().sum::<u64>();
                let mean = total / u64::from(k.max(1));
                // A slack of the total already keeps every job (infinity included).
                let slack = (mean as f64 * migration_slack).min(total as f64) as u64;
                lpt_sticky_grouped(&weights, placements, groups, k, slack)?.schedule
            }
            None => lpt_grouped(&weights, groups, k)?,
        };
        // Zero-weight buckets: no evidence, no load. Leave them where they were, or spread them round-robin
        // over the partitions at or below the mean load: keys first seen after the window then avoid the
        // partition of a dominant key, which LPT filled up to the bound already.
        let total_load: u64 = schedule.loads.iter().sum();
        let light: Vec<u32> = (0..k)
            .filter(|&p| {
                let load = u128::from(schedule.loads.get(p as usize).copied().unwrap_or(0));
                load * u128::from(k) <= u128::from(total_load)
            })
            .collect();
        let mut next_light = 0usize;
        for (b, &w) in jobs.buckets.iter().enumerate() {
            if w == 0 {
                schedule.placement[h + b] = match sticky_base {
                    Some(prev) => prev.table()[b],
                    None if light.is_empty() => b as u32 % k,
                    None => {
                        let p = light[next_light % light.len()];
                        next_light += 1;
                        p
                    }
                };
            }
        }

        let mut weights = weights;
        layout.fill(&schedule.placement, &mut schedule.loads, &mut weights);
        let table = schedule.placement[h..h + nb].to_vec();
        let moved_share = match (sticky_base, &previous_placement) {
            (Some(prev), Some(placements)) => {
                let total = schedule.total();
                if total == 0 {
                    0.0
                } else {
                    self.moved_weight(
                        &jobs,
                        &weights,
                        &schedule.placement,
                        placements,
                        &table,
                        prev,
                    ) as f64
                        / total as f64
                }
            }
            _ if previous.is_some() => 1.0,
            _ => 0.0,
        };

        let heavy: Vec<HeavyKey> = jobs
            .heavy
            .iter()
            .enumerate()
            .map(|(i, c)| HeavyKey {
                key: c.key.to_vec(),
                partition: schedule.placement[i],
                weight: c.guaranteed(),
                split: layout.parts_of(i, &schedule.placement),
            })
            .collect();
        let split_keys = heavy.iter().filter(|hk| hk.is_split()).count();
        let predicted_load = shares(&schedule.loads);
        let predicted_imbalance = imbalance(&predicted_load);
        let assignment = Assignment::new(AssignmentParts {
            topic: topic.to_owned(),
            partitions: k,
            epoch,
            bucket_hash: self.bucket_hash,
            table,
            heavy,
            params: Params {
                theta: self.theta,
                epsilon: self.epsilon,
                mu: self.mu,
                window_records: self.total(),
            },
            created_at_ms,
            predicted_load,
        })?;
        Ok(Build {
            assignment,
            moved_share,
            heavy_hitters: h,
            split_keys,
            predicted_imbalance,
        })
    }

    /// Predicted per-partition load shares of `assignment` on this window; `None` if its bucket count or
    /// bucket hash differ from this sketch's (the bucket counters then say nothing about its table).
    ///
    /// Every monitored key of the summary is placed by `assignment.partition_for` with its guaranteed count
    /// (heavy keys of this window and of the assignment alike), a split key's count spread over its parts
    /// by their weights; the rest of each bucket's mass goes to `assignment.table()[b]`. The vector has one entry per partition of `assignment`.
    #[must_use]
    pub fn predict(&self, assignment: &Assignment) -> Option<Vec<f64>> {
        if assignment.buckets() as usize != self.bucket_weights.len()
            || assignment.bucket_hash() != self.bucket_hash
        {
            return None;
        }
        let mut loads = vec![0u64; assignment.partitions() as usize];
        let mut rest = self.bucket_weights.clone();
        for c in self.summary.iter() {
            let g = c.guaranteed();
            let b = self.bucket_of(c.key) as usize;
            rest[b] = rest[b].saturating_sub(g);
            match assignment.split_of(c.key) {
                Some(parts) => {
                    for (p, w) in spread(g, parts) {
                        loads[p as usize] = loads[p as usize].saturating_add(w);
                    }
                }
                None => {
                    let p = assignment.partition_for(c.key) as usize;
                    loads[p] = loads[p].saturating_add(g);
                }
            }
        }
        for (b, &w) in rest.iter().enumerate() {
            let p = assignment.table()[b] as usize;
            loads[p] = loads[p].saturating_add(w);
        }
        Some(shares(&loads))
    }

    /// Predicted per-partition load shares under Kafka's default placement
    /// (`toPositive(murmur2(key)) % k`).
    ///
    /// Approximation: every monitored key of the summary is placed exactly with its guaranteed count; the
    /// remaining mass (the bucket counters minus those counts: keys the summary does not resolve) is
    /// spread evenly over the partitions, which is its expected placement under a uniform hash. The
    /// prediction therefore omits the hash's random imbalance on the sparse keys.
    #[must_use]
    pub fn predict_hash(&self) -> Vec<f64> {
        let k = self.partitions.max(1);
        let mut loads = vec![0f64; k as usize];
        let mut rest = self.bucket_weights.clone();
        for c in self.summary.iter() {
            let g = c.guaranteed();
            let b = self.bucket_of(c.key) as usize;
            rest[b] = rest[b].saturating_sub(g);
            loads[kafka_partition(c.key, k) as usize] += g as f64;
        }
        let spread = rest.iter().map(|&w| w as f64).sum::<f64>() / f64::from(k);
        for l in &mut loads {
            *l += spread;
        }
        let total: f64 = loads.iter().sum();
        if total > 0.0 {
            loads.iter().map(|l| l / total).collect()
        } else {
            vec![1.0 / f64::from(k); k as usize]
        }
    }

    // ---- internals -------------------------------------------------------------------------------

    #[inline]
    fn bucket_of(&self, key: &[u8]) -> u32 {
        self.bucket_hash
            .bucket(key, self.bucket_weights.len() as u32)
    }

    fn same_shape(&self, a: &Assignment) -> bool {
        a.partitions() == self.partitions
            && a.buckets() as usize == self.bucket_weights.len()
            && a.bucket_hash() == self.bucket_hash
    }

    /// Heavy keys by guaranteed count `>= theta * N` (sorted by key bytes) and buckets minus heavy mass.
    ///
    /// Keys longer than [`MAX_KEY_BYTES`] cannot be pinned in an assignment: they stay in their bucket. At
    /// most [`MAX_HEAVY_KEYS`] keys (the heaviest) are pinned, and at most [`MAX_HEAVY_KEYS_PER_BUCKET`] of one
    /// bucket.
    fn jobs(&self) -> Jobs<'_> {
        let threshold = ((self.theta * self.total() as f64).ceil() as u64).max(1);
        let mut heavy = self.summary.heavy_hitters(threshold);
        heavy.retain(|c| c.key.len() <= MAX_KEY_BYTES);
        heavy.truncate(MAX_HEAVY_KEYS);
        // The heaviest MAX_HEAVY_KEYS_PER_BUCKET of a bucket are pinned, the rest stay in their bucket
        // (their load is counted there): a document never holds more, so every reader accepts it.
        // Only keys chosen to collide get here; `heavy` is sorted heaviest first.
        let mut per_bucket = vec![0u8; self.bucket_weights.len()];
        heavy.retain(|c| {
            let n = &mut per_bucket[self.bucket_of(c.key) as usize];
            *n = n.saturating_add(1);
            usize::from(*n) <= MAX_HEAVY_KEYS_PER_BUCKET
        });
        heavy.sort_unstable_by(|x, y| x.key.cmp(y.key));
        let mut buckets = self.bucket_weights.clone();
        for c in &heavy {
            let w = &mut buckets[self.bucket_of(c.key) as usize];
            *w = w.saturating_sub(c.guaranteed());
        }
        Jobs { heavy, buckets }
    }

    /// Job weight that changes partition between `prev` (same shape) and the new placement: heavy keys
    /// and parts whose partition differs from the one they preferred (`previous`), ...
    fn moved_weight(
        &self,
        jobs: &Jobs<'_>,
        weights: &[u64],
        placement: &[u32],
        previous: &[Option<u32>],
        table: &[u32],
        prev: &Assignment,
    ) -> u64 {
        let (h, nb) = (jobs.heavy.len(), jobs.buckets.len());
        let mut moved = 0u64;
        for j in (0..h).chain(h + nb..placement.len()) {
            if previous[j].is_some_and(|q| q != placement[j]) {
                moved = moved.saturating_add(weights[j]);
            }
        }
        // Keys heavy before but not now: they leave their pinned partition for their bucket's.
        let mut ex_heavy_in_bucket = vec![0u64; table.len()];
        for hk in prev.heavy() {
            if jobs.heavy.binary_search_by(|c| c.key.cmp(&hk.key)).is_ok() {
                continue;
            }
            let est = self.summary.get(&hk.key).map_or(0, |c| c.guaranteed());
            let b = self.bucket_of(&hk.key) as usize;
            ex_heavy_in_bucket[b] = ex_heavy_in_bucket[b].saturating_add(est);
            if table[b] != hk.partition {
                moved = moved.saturating_add(est);
            }
        }
        for (b, (&p, &q)) in table.iter().zip(prev.table()).enumerate() {
            if p != q {
                moved = moved.saturating_add(jobs.buckets[b].saturating_sub(ex_heavy_in_bucket[b]));
            }
        }
        moved
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sketch(k: u32, theta: f64, mu: f64) -> Sketch {
        let config = DkgConfig::builder().theta(theta).mu(mu).build().unwrap();
        Sketch::new(&config, k).unwrap()
    }

    #[test]
    fn defaults() {
        assert_eq!(default_theta(0), 0.1);
        assert_eq!(default_theta(1), 0.1);
        assert_eq!(default_theta(2), 0.1);
        assert_eq!(default_theta(3), 0.25 / 3.0);
        assert_eq!(default_theta(100), 0.0025);
        let c = DkgConfig::default();
        assert_eq!(c.theta_for(100), 0.0025);
        assert_eq!(c.epsilon_for(100), 0.00125);
        assert_eq!(c.buckets_for(100), 6400);
        let p = DkgConfig::paper();
        assert_eq!(
            (p.theta_for(10), p.epsilon_for(10), p.buckets_for(10)),
            (0.1, 0.05, 20)
        );
        assert_eq!(
            DkgConfig::builder().mu(2.5).build().unwrap().buckets_for(3),
            8
        );
        assert_eq!(
            DkgConfig::builder()
                .epsilon(0.2)
                .build()
                .unwrap()
                .epsilon_for(10),
            0.2
        );
        let s = Sketch::new(&DkgConfig::default(), 10).unwrap();
        assert_eq!(s.summary().capacity(), 80); // theta 1/40, eps 1/80
        assert_eq!(s.buckets(), 640);
    }

    #[test]
    fn default_mu_falls_with_the_partition_count_down_to_the_floor() {
        assert_eq!(table_entry_bytes(1), 2.0);
        assert_eq!(table_entry_bytes(10), 2.0);
        assert_eq!(table_entry_bytes(11), (10.0 + 2.0) / 11.0 + 1.0);
        assert_eq!(
            table_entry_bytes(1000),
            (10.0 + 180.0 + 2700.0) / 1000.0 + 1.0
        );
        for k in [1, 12, 100, 1000, 1600] {
            assert_eq!(default_mu(k), DEFAULT_MU, "k = {k}");
        }
        assert_eq!(default_mu(0), DEFAULT_MU);
        assert_eq!(default_mu(10_000), 10.0);
        assert_eq!(default_mu(50_000), DEFAULT_MU_FLOOR);
        let mut last = DEFAULT_MU;
        for k in (1..=30_000).step_by(97) {
            let mu = default_mu(k);
            assert!(
                mu <= last && mu >= DEFAULT_MU_FLOOR,
                "k = {k}: {mu} after {last}"
            );
            assert_eq!(mu, mu.floor(), "an integer");
            last = mu;
        }
        // The default fits while the floor is not reached, explicit mu wins, the paper stays at 2.
        let c = DkgConfig::default();
        assert_eq!(c.buckets_for(10_000), 100_000);
        assert!(c.fits_default_limits(10_000));
        assert!(!c.fits_default_limits(20_000));
        let explicit = DkgConfig::builder().mu(64.0).build().unwrap();
        assert_eq!(explicit.buckets_for(10_000), 640_000);
        assert!(!explicit.fits_default_limits(10_000));
        assert!(explicit.fits_default_limits(1000));
        assert_eq!(DkgConfig::paper().buckets_for(10_000), 20_000);
        assert_eq!(Sketch::new(&c, 10_000).unwrap().mu(), 10.0);
    }

    #[test]
    fn an_explicit_mu_whose_documents_exceed_the_reader_limit_is_rejected() {
        // 64 x 10,000: about 3.2 MB of table, publishable to a 9 MiB control topic.
        let mu64 = DkgConfig::builder().mu(64.0).build().unwrap();
        let fixed = mu64.fixed_document_bytes_for(10_000);
        assert!((3_000_000..3_500_000).contains(&fixed), "{fixed}");
        assert!(mu64.validate_for(10_000).is_ok());
        // 64 x 25,000: 1.6 M entries of 5.6 bytes on average, over 8 MiB.
        match mu64.validate_for(25_000) {
            Err(Error::InvalidConfig {
                field: "mu",
                reason,
            }) => {
                assert!(reason.contains("never be published"), "{reason}");
                assert!(reason.contains("use mu <= 55"), "{reason}");
            }
            other => panic!("expected a mu error, got {other:?}"),
        }
        assert!(Sketch::new(&mu64, 25_000).is_err());
        assert!(DkgConfig::default().validate_for(25_000).is_ok());
    }

    #[test]
    fn config_validation() {
        for (b, field) in [
            (DkgConfig::builder().theta(0.0), "theta"),
            (DkgConfig::builder().theta(1.5), "theta"),
            (DkgConfig::builder().theta(f64::NAN), "theta"),
            (DkgConfig::builder().epsilon(-0.1), "epsilon"),
            (DkgConfig::builder().mu(0.0), "mu"),
            (DkgConfig::builder().mu(f64::INFINITY), "mu"),
        ] {
            assert!(matches!(b.build(), Err(Error::InvalidConfig { field: f, .. }) if f == field));
        }
        let c = DkgConfig::default();
        assert!(matches!(
            Sketch::new(&c, 0),
            Err(Error::InvalidConfig {
                field: "partitions",
                ..
            })
        ));
        let huge_mu = DkgConfig::builder().mu(1e6).build().unwrap();
        assert!(matches!(
            Sketch::new(&huge_mu, 100),
            Err(Error::InvalidConfig { field: "mu", .. })
        ));
        let tiny_eps = DkgConfig::builder().epsilon(1e-12).build().unwrap();
        assert!(matches!(
            Sketch::new(&tiny_eps, 10),
            Err(Error::InvalidConfig {
                field: "epsilon",
                ..
            })
        ));
    }

    #[test]
    fn heavy_hitters_are_pinned_and_removed_from_buckets() {
        let mut s = sketch(4, 0.1, 2.0);
        s.observe_weighted(b"hot", 500);
        s.observe_weighted(b"warm", 200);
        for i in 0..300u32 {
            s.observe(format!("k{i}").as_bytes());
        }
        assert_eq!(s.total(), 1000);
        let build = s.build("t", 1, 42, None).unwrap();
        let a = &build.assignment;
        assert_eq!(build.heavy_hitters, 2);
        let heavy: Vec<_> = a
            .heavy()
            .iter()
            .map(|h| (h.key.clone(), h.weight))
            .collect();
        // Sorted by key bytes; exact counts (the summary is large enough).
        assert_eq!(heavy, vec![(b"hot".to_vec(), 500), (b"warm".to_vec(), 200)]);
        assert_ne!(a.partition_for(b"hot"), a.partition_for(b"warm"));
        // The job weights sum to the window.
        let sum: f64 = a.predicted_load().iter().sum();
        assert!((sum - 1.0).abs() < 1e-12);
        // "hot" alone is half the stream: lambda = 0.5 / 0.25 - 1 = 1 exactly (the key-grouping bound).
        assert!((build.predicted_imbalance - 1.0).abs() < 1e-12);
        assert_eq!(a.params().window_records, 1000);
        assert_eq!(a.created_at_ms(), 42);
        assert_eq!(build.moved_share, 0.0);
    }

    #[test]
    fn empty_window_spreads_buckets() {
        let s = sketch(3, 0.1, 4.0);
        let build = s.build("t", 0, 0, None).unwrap();
        let table = build.assignment.table();
        assert_eq!(table.len(), 12);
        assert!(table.iter().enumerate().all(|(b, &p)| p == b as u32 % 3));
        assert_eq!(build.assignment.predicted_load(), &[1.0 / 3.0; 3]);
        assert_eq!(build.predicted_imbalance, 0.0);
    }

    #[test]
    fn rebuild_on_same_window_moves_nothing() {
        let mut s = sketch(5, 0.05, 8.0);
        for i in 0..5000u32 {
            let key = format!("key-{}", (i * 7919) % (1 + i % 97));
            s.observe(key.as_bytes());
        }
        let first = s.build("t", 1, 0, None).unwrap();
        let second = s.build("t", 2, 0, Some(&first.assignment)).unwrap();
        assert_eq!(second.moved_share, 0.0);
        assert_eq!(second.assignment.table(), first.assignment.table());
        assert_eq!(second.assignment.heavy(), first.assignment.heavy());
        // Another partition count: a full reshuffle by definition.
        let other = sketch(6, 0.05, 8.0).build("t", 1, 0, None).unwrap();
        assert_eq!(
            s.build("t", 3, 0, Some(&other.assignment))
                .unwrap()
                .moved_share,
            1.0
        );
    }

    #[test]
    fn more_migration_slack_moves_less_and_infinite_slack_keeps_every_job() {
        // First window: skewed one way; second window: another, so the default rebuild must move.
        let mut first = sketch(4, 0.05, 8.0);
        let mut second = first.clone();
        for i in 0..4000u32 {
            first.observe(format!("k{}", i % 400).as_bytes());
            second.observe(format!("k{}", (i * i) % 397).as_bytes());
        }
        let before = first.build("t", 1, 0, None).unwrap().assignment;
        let moved = |slack: f64| {
            second
                .build_with_slack("t", 2, 0, Some(&before), slack)
                .unwrap()
        };
        let default = second.build("t", 2, 0, Some(&before)).unwrap();
        assert_eq!(
            moved(DEFAULT_MIGRATION_SLACK).assignment.table(),
            default.assignment.table()
        );
        assert!(default.moved_share > 0.0, "{}", default.moved_share);
        let kept = moved(f64::INFINITY);
        assert_eq!(kept.moved_share, 0.0);
        assert_eq!(kept.assignment.table(), before.table());
        // Negative and NaN slacks count as 0.
        for odd in [-1.0, f64::NAN] {
            assert_eq!(moved(odd).assignment.table(), moved(0.0).assignment.table());
        }
    }

    #[test]
    fn ex_heavy_keys_count_as_moved_when_their_bucket_is_elsewhere() {
        let mut s = sketch(2, 0.3, 1.0);
        s.observe_weighted(b"a", 60);
        s.observe_weighted(b"b", 40);
        let first = s.build("t", 1, 0, None).unwrap();
        assert_eq!(first.heavy_hitters, 2);
        // New window: "a" fell below theta. Its weight now follows its bucket.
        let mut s2 = s.clone();
        s2.clear();
        s2.observe_weighted(b"a", 10);
        s2.observe_weighted(b"b", 45);
        s2.observe_weighted(b"c", 45);
        let second = s2.build("t", 2, 0, Some(&first.assignment)).unwrap();
        let a_before = first.assignment.partition_for(b"a");
        let a_after = second.assignment.partition_for(b"a");
        assert!(second.assignment.heavy_partition(b"a").is_none());
        let jobs_total = 100.0;
        let mut expected = 0.0;
        if a_after != a_before {
            expected += 10.0;
        }
        for key in [&b"b"[..], b"c"] {
            if second.assignment.partition_for(key) != first.assignment.partition_for(key) {
                expected += 45.0;
            }
        }
        assert!(
            (second.moved_share - expected / jobs_total).abs() < 1e-12,
            "{} vs {}",
            second.moved_share,
            expected / jobs_total
        );
    }

    #[test]
    fn predict_matches_build_and_hash_prediction_is_exact_for_monitored_keys() {
        let mut s = sketch(3, 0.2, 2.0);
        for (k, w) in [(&b"x"[..], 50u64), (b"y", 30), (b"z", 20)] {
            s.observe_weighted(k, w);
        }
        let build = s.build("t", 1, 0, None).unwrap();
        let predicted = s.predict(&build.assignment).unwrap();
        for (a, b) in predicted.iter().zip(build.assignment.predicted_load()) {
            assert!((a - b).abs() < 1e-12);
        }
        let mut hash = [0.0; 3];
        for (k, w) in [(&b"x"[..], 0.5), (b"y", 0.3), (b"z", 0.2)] {
            hash[kafka_partition(k, 3) as usize] += w;
        }
        let got = s.predict_hash();
        for (a, b) in got.iter().zip(hash) {
            assert!((a - b).abs() < 1e-12, "{got:?} vs {hash:?}");
        }
        let other_shape = sketch(3, 0.2, 3.0).build("t", 1, 0, None).unwrap();
        assert!(s.predict(&other_shape.assignment).is_none());
    }

    #[test]
    fn merge_checks_shape_and_adds() {
        let mut a = sketch(4, 0.1, 2.0);
        let mut b = sketch(4, 0.1, 2.0);
        a.observe_weighted(b"k", 3);
        b.observe_weighted(b"k", 4);
        b.observe(b"j");
        a.merge(&b).unwrap();
        assert_eq!(a.total(), 8);
        assert_eq!(a.summary().get(b"k").unwrap().count, 7);
        assert_eq!(a.bucket_weights().iter().sum::<u64>(), 8);
        for other in [sketch(5, 0.1, 2.0), sketch(4, 0.1, 3.0)] {
            assert!(matches!(
                a.merge(&other),
                Err(Error::IncompatibleMerge { .. })
            ));
        }
        let hashed = DkgConfig::builder()
            .theta(0.1)
            .mu(2.0)
            .bucket_hash(BucketHash::Murmur2 { seed: 1 })
            .build()
            .unwrap();
        assert!(a.merge(&Sketch::new(&hashed, 4).unwrap()).is_err());
        assert_eq!(a.total(), 8, "failed merge leaves self unchanged");
    }

    #[test]
    fn decay_and_clear() {
        let mut s = sketch(2, 0.1, 2.0);
        s.observe_weighted(b"k", 10);
        s.decay(0.5);
        assert_eq!(s.total(), 5);
        assert_eq!(s.bucket_weights().iter().sum::<u64>(), 5);
        s.clear();
        assert_eq!(s.total(), 0);
        assert!(s.bucket_weights().iter().all(|&w| w == 0));
    }

    #[test]
    fn imbalance_metric() {
        assert_eq!(imbalance(&[]), 0.0);
        assert_eq!(imbalance(&[0.0, 0.0]), 0.0);
        assert_eq!(imbalance(&[1.0, 1.0]), 0.0);
        assert!((imbalance(&[3.0, 1.0]) - 0.5).abs() < 1e-12);
        assert!((imbalance(&[1.0, 0.0, 0.0, 0.0]) - 3.0).abs() < 1e-12);
    }

    #[test]
    fn invalid_topic_is_an_error() {
        let s = sketch(2, 0.1, 2.0);
        assert!(matches!(
            s.build("bad topic!", 1, 0, None),
            Err(Error::InvalidTopic { .. })
        ));
    }

    #[test]
    fn sketch_serde_round_trip_and_validation() {
        let mut s = sketch(3, 0.1, 2.0);
        for k in [&b"a"[..], b"b", b"a", b"\xff\x00"] {
            s.observe(k);
        }
        let json = serde_json::to_string(&s).unwrap();
        let back: Sketch = serde_json::from_str(&json).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), json);
        assert_eq!(back.total(), 4);
        let bad = json.replace("\"partitions\":3", "\"partitions\":4");
        let err = serde_json::from_str::<Sketch>(&bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains("bucket_weights"), "{err}");
        let bad = json.replace("\"theta\":0.1", "\"theta\":2.0");
        assert!(
            serde_json::from_str::<Sketch>(&bad)
                .unwrap_err()
                .to_string()
                .contains("theta")
        );
    }
}
