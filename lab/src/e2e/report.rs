//! The benchmark's results (the JSON document) and the table printed from them.

use std::fmt::Write as _;

use serde::Serialize;

/// One processed record's end-to-end latency and the partition it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub partition: i32,
    pub latency_ms: u32,
}

/// End-to-end latencies of one step, in milliseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Latency {
    /// Records processed within the step.
    pub count: usize,
    pub p50: u32,
    pub p99: u32,
    pub max: u32,
    /// The highest p99 of one partition, over the partitions with at least
    /// [`MIN_PARTITION_SAMPLES`] records in the step: what the keys of the slowest member see. A
    /// group's p99 over all records is mostly the other partitions' when one partition is hot (a
    /// fifth of hash's records at Zipf 1.0 over 12 partitions), so this is where an imbalance shows.
    pub worst_partition_p99: u32,
    /// That partition (-1 when no partition has enough records).
    pub worst_partition: i32,
}

/// Fewest records of a partition in a step for its p99 to count in
/// [`Latency::worst_partition_p99`] (below it the p99 is one of a handful of records).
pub const MIN_PARTITION_SAMPLES: usize = 200;

impl Latency {
    /// The summary of `samples`, over all of them and per partition (nearest-rank percentiles; all
    /// zero when empty).
    pub fn of_samples(samples: &[Sample]) -> Self {
        let mut by_partition: std::collections::BTreeMap<i32, Vec<u32>> =
            std::collections::BTreeMap::new();
        for s in samples {
            by_partition
                .entry(s.partition)
                .or_default()
                .push(s.latency_ms);
        }
        let mut all = Self::of(samples.iter().map(|s| s.latency_ms).collect());
        for (p, v) in by_partition {
            if v.len() >= MIN_PARTITION_SAMPLES {
                let p99 = Self::of(v).p99;
                if all.worst_partition < 0 || p99 > all.worst_partition_p99 {
                    all.worst_partition_p99 = p99;
                    all.worst_partition = p;
                }
            }
        }
        all
    }

    /// The summary of `samples` (nearest-rank percentiles; all zero when empty; no per-partition
    /// figures).
    pub fn of(mut samples: Vec<u32>) -> Self {
        samples.sort_unstable();
        let rank = |q: f64| {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss
            )]
            let i = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1;
            samples[i]
        };
        if samples.is_empty() {
            return Self::default();
        }
        Self {
            count: samples.len(),
            p50: rank(0.50),
            p99: rank(0.99),
            max: samples[samples.len() - 1],
            worst_partition_p99: 0,
            worst_partition: -1,
        }
    }
}

/// The phase of the (b) rounds.
pub const AT_70PCT_HASH: &str = "at_70pct_hash";

/// Median, min and max of per-round values.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub rounds: usize,
}

impl Spread {
    /// Of `values` (all zero when empty); the median of an even count is the mean of the middle two.
    pub fn of(values: &[f64]) -> Self {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n == 0 {
            return Self::default();
        }
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Self {
            median,
            min: v[0],
            max: v[n - 1],
            rounds: n,
        }
    }
}

/// One step: a rate offered for a while.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// `capacity` (bisection), `at_70pct_hash` (b) or `at_70pct_dkg` (c).
    pub phase: &'static str,
    pub offered_rps: f64,
    /// Records sent over the time spent sending them.
    pub achieved_rps: f64,
    /// Time from the last send until every record of the step was acknowledged.
    pub ack_tail_ms: u64,
    /// Least-squares slope of the group's total lag over the step's last two thirds.
    pub lag_slope_rps: f64,
    /// The largest slope of one partition's lag over the same samples (what `sustained` judges:
    /// each member against the threshold).
    pub max_partition_lag_slope_rps: f64,
    pub sustained: bool,
    /// Records sent but not processed at the step's end.
    pub lag_end: u64,
    pub latency_ms: Latency,
}

/// One group's results.
#[derive(Debug, Clone, Serialize)]
pub struct SideResult {
    pub topic: String,
    /// Highest sustained rate the bisection found.
    pub capacity_rps: f64,
    /// Lowest rate the bisection found unsustained (or its starting bracket, 1.05 x the group's total):
    /// the capacity lies between `capacity_rps` and this.
    pub unsustained_rps: f64,
    /// Records acknowledged per partition over the whole run.
    pub per_partition: Vec<u64>,
    /// `max/mean - 1` of `per_partition`.
    pub imbalance: f64,
    /// Largest partition's share of the records.
    pub max_share: f64,
    /// DKG only: the assignment's epoch and the learner's predicted imbalance.
    pub assignment_epoch: Option<u64>,
    pub predicted_imbalance: Option<f64>,
    pub receive_errors: u64,
    pub steps: Vec<Step>,
}

impl SideResult {
    /// The steps of `phase`, in order.
    pub fn phases<'a>(&'a self, phase: &str) -> impl Iterator<Item = &'a Step> + use<'a> {
        let phase = phase.to_owned();
        self.steps.iter().filter(move |s| s.phase == phase)
    }

    fn phase(&self, phase: &str) -> Option<&Step> {
        self.phases(phase).next()
    }

    /// Median over the rounds of `phase` of one latency figure.
    fn median_of(&self, phase: &str, f: fn(&Latency) -> u32) -> f64 {
        let v: Vec<f64> = self
            .phases(phase)
            .map(|s| f64::from(f(&s.latency_ms)))
            .collect();
        Spread::of(&v).median
    }

    /// The median over the rounds of `phase` of their worst partition's p99, in ms.
    fn median_worst_partition_p99(&self, phase: &str) -> String {
        if self.phase(phase).is_none() {
            return "-".to_owned();
        }
        format!("{:.0}", self.median_of(phase, |l| l.worst_partition_p99))
    }

    /// Median over the rounds of `phase` of p50, p99 and max.
    fn median_latency(&self, phase: &str) -> String {
        if self.phase(phase).is_none() {
            return "-".to_owned();
        }
        format!(
            "{:.0} / {:.0} / {:.0}",
            self.median_of(phase, |l| l.p50),
            self.median_of(phase, |l| l.p99),
            self.median_of(phase, |l| l.max)
        )
    }
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    pub zipf: f64,
    pub partitions: u32,
    pub keys: u32,
    pub member_capacity_rps: f64,
    /// The arrival process (`paced` or `poisson`).
    pub arrivals: super::Arrivals,
    pub step_secs: u64,
    pub lag_slope_max_rps: f64,
    pub overload_secs: u64,
    /// `/proc/loadavg` at the end.
    pub load_average: String,
    /// DKG capacity / hash capacity.
    pub ratio: f64,
    /// Measured share of the hottest key.
    pub top_key_share: f64,
    /// `max(1, k * p1) - 1`.
    pub key_grouping_bound: f64,
    /// `(1 + hash imbalance) / (1 + key-grouping bound)`.
    pub predicted_limit: f64,
    pub ratio_over_limit: f64,
    pub at_70pct_hash_rps: f64,
    /// DKG's p99 over hash's in the (b) rounds.
    pub at_70pct_hash_p99_ratio: Spread,
    /// The same for the worst partition's p99 ([`Latency::worst_partition_p99`]).
    pub at_70pct_hash_worst_partition_p99_ratio: Spread,
    pub at_70pct_dkg_rps: f64,
    pub hash: SideResult,
    pub dkg: SideResult,
}

fn latency_cell(s: Option<&Step>) -> String {
    s.map_or_else(
        || "-".to_owned(),
        |s| {
            format!(
                "{} / {} / {}",
                s.latency_ms.p50, s.latency_ms.p99, s.latency_ms.max
            )
        },
    )
}

/// The table of one run.
pub fn table(r: &BenchResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "e2e: Zipf {} over {} keys, {} partitions, member capacity {:.0} records/s, {:?} arrivals (load {})",
        r.zipf, r.keys, r.partitions, r.member_capacity_rps, r.arrivals, r.load_average
    );
    let _ = writeln!(out, "{:<44} {:>16} {:>16}", "", "hash", "DKG");
    let row = |out: &mut String, label: &str, h: String, d: String| {
        let _ = writeln!(out, "{label:<44} {h:>16} {d:>16}");
    };
    row(
        &mut out,
        "capacity (records/s)",
        format!("{:.0}", r.hash.capacity_rps),
        format!("{:.0}", r.dkg.capacity_rps),
    );
    row(
        &mut out,
        "imbalance max/mean - 1 (measured)",
        format!("{:.3}", r.hash.imbalance),
        format!("{:.3}", r.dkg.imbalance),
    );
    row(
        &mut out,
        "max partition share",
        format!("{:.3}", r.hash.max_share),
        format!("{:.3}", r.dkg.max_share),
    );
    let b = format!(
        "latency p50/p99/max ms at {:.0} rec/s (b, median of {})",
        r.at_70pct_hash_rps, r.at_70pct_hash_p99_ratio.rounds
    );
    row(
        &mut out,
        &b,
        r.hash.median_latency(AT_70PCT_HASH),
        r.dkg.median_latency(AT_70PCT_HASH),
    );
    let c = format!(
        "latency p50/p99/max ms at {:.0} rec/s (c)",
        r.at_70pct_dkg_rps
    );
    row(
        &mut out,
        &c,
        latency_cell(r.hash.phase("at_70pct_dkg")),
        latency_cell(r.dkg.phase("at_70pct_dkg")),
    );
    let lag = |s: &SideResult| {
        s.phase("at_70pct_dkg")
            .map_or_else(|| "-".to_owned(), |s| s.lag_end.to_string())
    };
    row(
        &mut out,
        "backlog at the end of (c) (records)",
        lag(&r.hash),
        lag(&r.dkg),
    );
    let q = &r.at_70pct_hash_p99_ratio;
    let _ = writeln!(
        out,
        "p99 latency DKG/hash at (b): median {:.2} (min {:.2}, max {:.2}) over {} rounds",
        q.median, q.min, q.max, q.rounds
    );
    let w = &r.at_70pct_hash_worst_partition_p99_ratio;
    let _ = writeln!(
        out,
        "p99 of the worst partition DKG/hash at (b): median {:.2} (min {:.2}, max {:.2}); hash {}, DKG {} ms",
        w.median,
        w.min,
        w.max,
        r.hash.median_worst_partition_p99(AT_70PCT_HASH),
        r.dkg.median_worst_partition_p99(AT_70PCT_HASH),
    );
    let _ = writeln!(
        out,
        "capacity ratio DKG/hash {:.2}; predicted limit (1 + {:.3}) / (1 + {:.3}) = {:.2}; ratio / limit {:.2}",
        r.ratio, r.hash.imbalance, r.key_grouping_bound, r.predicted_limit, r.ratio_over_limit
    );
    out
}

#[cfg(test)]
mod tests {
    use super::Latency;

    #[test]
    fn latency_percentiles_are_nearest_rank() {
        let l = Latency::of((1..=100).rev().collect());
        assert_eq!((l.count, l.p50, l.p99, l.max), (100, 50, 99, 100));
        let one = Latency::of(vec![7]);
        assert_eq!((one.p50, one.p99, one.max), (7, 7, 7));
        assert_eq!(Latency::of(Vec::new()).count, 0);
    }

    #[test]
    fn the_worst_partition_is_the_highest_p99_among_partitions_with_enough_records() {
        use super::{MIN_PARTITION_SAMPLES, Sample};
        let n = u32::try_from(MIN_PARTITION_SAMPLES).expect("a small constant");
        let mut samples = Vec::new();
        // Partition 0: 1..=n ms; partition 1: 10x slower; partition 2: slower still, too few records.
        for i in 1..=n {
            samples.push(Sample {
                partition: 0,
                latency_ms: i,
            });
            samples.push(Sample {
                partition: 1,
                latency_ms: 10 * i,
            });
        }
        samples.push(Sample {
            partition: 2,
            latency_ms: 1_000_000,
        });
        let l = Latency::of_samples(&samples);
        assert_eq!(l.count, 2 * MIN_PARTITION_SAMPLES + 1);
        assert_eq!(l.max, 1_000_000);
        assert_eq!(
            (l.worst_partition, l.worst_partition_p99),
            (1, 10 * (n * 99 / 100))
        );
        let none = Latency::of_samples(&samples[..10]);
        assert_eq!((none.worst_partition, none.worst_partition_p99), (-1, 0));
        assert_eq!(Latency::of_samples(&[]).count, 0);
    }

    #[test]
    fn spread_takes_the_middle_and_the_ends() {
        let odd = super::Spread::of(&[3.0, 1.0, 2.0]);
        assert_eq!(
            (odd.median, odd.min, odd.max, odd.rounds),
            (2.0, 1.0, 3.0, 3)
        );
        let even = super::Spread::of(&[4.0, 1.0, 2.0, 3.0]);
        assert_eq!((even.median, even.min, even.max), (2.5, 1.0, 4.0));
        assert_eq!(super::Spread::of(&[]).rounds, 0);
    }
}
