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
//! Also beyond the paper: splitting a heavy key too large for one partition ([`SplitKeys`],
//! module `split`).
//!
//! The modules: this one holds the [`Sketch`] (learning, merging, building, predicting); `config` the
//! learning parameters and their defaults; `split` the split-key policy and the sizing of the parts.

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

mod config;
mod split;

pub use config::{
    DEFAULT_FIXED_DOCUMENT_SHARE, DEFAULT_MIGRATION_SLACK, DEFAULT_MU, DEFAULT_MU_FLOOR,
    DEFAULT_THETA_MAX, DEFAULT_THETA_PER_PARTITION, DkgConfig, DkgConfigBuilder, PAPER_MU,
    PAPER_THETA, default_mu, default_theta,
};
use split::SplitLayout;
pub use split::{DEFAULT_SPLIT_SLACK, SplitKeys, split_parts, split_weights, spread};

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
