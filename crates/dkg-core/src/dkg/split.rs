//! Split keys (issue 15, beyond the paper).
//!
//!
//! Also beyond the paper (issue 15): no key grouping beats `max(1, k * p1) - 1`, so a heavy key whose
//! share exceeds what one partition should carry may be split ([`SplitKeys`], off by default): it
//! becomes the fewest parts that each stay under the mean load `1/k`, LPT places the parts like the
//! other jobs but on distinct partitions ([`crate::lpt::lpt_grouped`]), the parts are
//! re-sized to level their partitions, and the assignment lists the key's partitions with integer
//! weights (`docs/spec.md` 4.6). A split key gives

use super::*;

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

/// How the heavy keys become jobs: heavy key `i`'s first (or only) part is job `i`, the buckets
/// follow (jobs `h..h + buckets`, so the table is that slice of the placement), then the other parts of
/// the split keys (key order, then part order). Without split keys the jobs are exactly those of a
/// build without splitting.
pub(super) struct SplitLayout {
    /// Parts per heavy key (1 = whole).
    parts: Vec<u32>,
    /// Job index of heavy key `i`'s part 1 (when it has one).
    first_extra: Vec<usize>,
    /// `(heavy key, part >= 1)` of each job after the buckets.
    pub(super) extra: Vec<(usize, usize)>,
    /// Loads of a split key's parts (empty for a whole key).
    loads: Vec<Vec<u64>>,
    /// A group per job (the heavy key's index for the parts of a split key), when something is split.
    pub(super) groups: Option<Vec<Option<u32>>>,
}

impl SplitLayout {
    pub(super) fn new(jobs: &Jobs<'_>, split: &SplitKeys, window: u64, partitions: u32) -> Self {
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
    pub(super) fn weights(&self, jobs: &Jobs<'_>) -> Vec<u64> {
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
    pub(super) fn fill(&mut self, placement: &[u32], loads: &mut [u64], weights: &mut [u64]) {
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
    pub(super) fn parts_of(&self, i: usize, placement: &[u32]) -> Vec<SplitPart> {
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
