//! The benchmark's results (the JSON document) and the table printed from them.

use std::fmt::Write as _;

use serde::Serialize;

/// End-to-end latencies of one step, in milliseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Latency {
    /// Records processed within the step.
    pub count: usize,
    pub p50: u32,
    pub p99: u32,
    pub max: u32,
}

impl Latency {
    /// The summary of `samples` (nearest-rank percentiles; all zero when empty).
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
    /// Least-squares slope of the lag over the step's last two thirds.
    pub lag_slope_rps: f64,
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
    fn phase(&self, phase: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.phase == phase)
    }
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    pub zipf: f64,
    pub partitions: u32,
    pub keys: u32,
    pub member_capacity_rps: f64,
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
        "e2e: Zipf {} over {} keys, {} partitions, member capacity {:.0} records/s (load {})",
        r.zipf, r.keys, r.partitions, r.member_capacity_rps, r.load_average
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
        "latency p50/p99/max ms at {:.0} rec/s (b)",
        r.at_70pct_hash_rps
    );
    row(
        &mut out,
        &b,
        latency_cell(r.hash.phase("at_70pct_hash")),
        latency_cell(r.dkg.phase("at_70pct_hash")),
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
}
