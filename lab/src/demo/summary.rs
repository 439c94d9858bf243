//! The summary printed at the end of the demo, measured on the topics themselves (partition end offsets)
//! and on the samplers' windows.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::Context;
use rdkafka::consumer::{BaseConsumer, Consumer};

use super::scrape::{View, scrape};
use super::screen::{Screen, pct};
use super::{Args, Side};

/// Partition end offsets of a topic (records produced so far, as the topics start empty).
fn end_offsets(consumer: &BaseConsumer, topic: &str, partitions: u32) -> anyhow::Result<Vec<i64>> {
    (0..partitions)
        .map(|p| {
            let p = i32::try_from(p).context("partition index")?;
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .map(|(_, high)| high)
                .with_context(|| format!("reading the end offset of {topic}/{p}"))
        })
        .collect()
}

fn imbalance(counts: &[i64]) -> Option<f64> {
    let total: i64 = counts.iter().sum();
    let max = counts.iter().copied().max()?;
    (total > 0).then(|| max as f64 / (total as f64 / counts.len() as f64) - 1.0)
}

/// The measurements the summary prints.
#[derive(Debug)]
pub(super) struct Summary {
    elapsed: Duration,
    hash_counts: Vec<i64>,
    dkg_counts: Vec<i64>,
    /// End offsets when the DKG producer's first assignment was in force (None: never).
    hash_at_epoch: Option<Vec<i64>>,
    dkg_at_epoch: Option<Vec<i64>>,
    first_epoch_after: Option<Duration>,
    last_hash: View,
    last_dkg: View,
    /// Means over the snapshots taken after the first epoch (steady state).
    steady_hash: Option<f64>,
    steady_dkg: Option<f64>,
    steady_bound: Option<f64>,
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

impl Summary {
    /// The summary table: records, imbalances (all, after epoch 1, in the windows), the bound.
    pub(super) fn render(&self, args: &Args, hash: &Side, dkg: &Side) -> String {
        let mut s = String::new();
        let row =
            |s: &mut String, label: &str, h: &dyn std::fmt::Display, d: &dyn std::fmt::Display| {
                let _ = writeln!(s, "  {label:<48} {h:>12} {d:>12}");
            };
        let sum = |c: &[i64]| c.iter().sum::<i64>();
        let diff = |a: &[i64], b: &Option<Vec<i64>>| -> Option<Vec<i64>> {
            b.as_ref()
                .map(|b| a.iter().zip(b).map(|(x, y)| x - y).collect())
        };
        let hash_after = diff(&self.hash_counts, &self.hash_at_epoch);
        let dkg_after = diff(&self.dkg_counts, &self.dkg_at_epoch);
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "Summary: {} partitions, Zipf({}) over {} keys, {:.0} s, same workload in both topics",
            args.partitions,
            args.alpha,
            args.keys,
            self.elapsed.as_secs_f64()
        );
        let _ = writeln!(s, "  topics: {} (hash), {} (DKG)", hash.topic, dkg.topic);
        let _ = writeln!(
            s,
            "  imbalance = max / mean - 1 of the records per partition\n"
        );
        row(&mut s, "", &"hash", &"DKG");
        let (h, d) = (sum(&self.hash_counts), sum(&self.dkg_counts));
        row(&mut s, "records produced", &h, &d);
        let (h, d) = (imbalance(&self.hash_counts), imbalance(&self.dkg_counts));
        row(&mut s, "imbalance, all records", &pct(h), &pct(d));
        match (&hash_after, &dkg_after, self.first_epoch_after) {
            (Some(h), Some(d), Some(t)) => {
                let label = format!(
                    "imbalance, records after epoch 1 (t = {:.0} s)",
                    t.as_secs_f64()
                );
                row(&mut s, &label, &pct(imbalance(h)), &pct(imbalance(d)));
            }
            _ => {
                let _ = writeln!(
                    s,
                    "  no assignment was published during the run (try a longer --duration-secs)"
                );
            }
        }
        let (h, d) = (pct(self.steady_hash), pct(self.steady_dkg));
        row(
            &mut s,
            "imbalance in the samplers' windows, steady state",
            &h,
            &d,
        );
        let (h, d) = (pct(self.last_hash.observed), pct(self.last_dkg.observed));
        row(
            &mut s,
            "imbalance in the samplers' windows, at the end",
            &h,
            &d,
        );
        let _ = writeln!(
            s,
            "  {:<48} {:>12}",
            "key-grouping lower bound max(1, k*p1) - 1",
            pct(self.steady_bound.or(self.last_dkg.bound))
        );
        let published = format!(
            "{} / {}",
            self.last_dkg.publishes,
            self.last_dkg
                .heavy_hitters
                .map_or("n/a".into(), |h| format!("{h:.0}"))
        );
        row(&mut s, "epochs published / heavy hitters", &"-", &published);
        if let Some(top) = self.last_dkg.top_keys.first() {
            let _ = writeln!(
                s,
                "  hottest key: {:?} with {} of the records",
                top.1,
                pct(Some(top.2))
            );
        }
        s
    }
}

/// What the live loop gathers for the summary while the workload runs.
#[derive(Debug)]
pub(super) struct Tracker {
    started: Instant,
    last_hash: View,
    last_dkg: View,
    /// End offsets when the DKG producer's first assignment was in force, and when that was.
    at_epoch: Option<(Duration, Vec<i64>, Vec<i64>)>,
    /// Observed imbalance (hash, DKG) and the bound, in the steady state.
    steady: (Vec<f64>, Vec<f64>, Vec<f64>),
}

impl Tracker {
    pub(super) fn new(started: Instant) -> Self {
        Self {
            started,
            last_hash: View::default(),
            last_dkg: View::default(),
            at_epoch: None,
            steady: (Vec::new(), Vec::new(), Vec::new()),
        }
    }

    pub(super) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Scrape both samplers; note when the first epoch took effect and the steady-state values.
    pub(super) fn observe(
        &mut self,
        args: &Args,
        hash: &Side,
        dkg: &Side,
        consumer: &BaseConsumer,
    ) -> anyhow::Result<()> {
        if let Some(v) = scrape(hash) {
            self.last_hash = v;
        }
        if let Some(v) = scrape(dkg) {
            self.last_dkg = v;
        }
        if self.last_dkg.epoch >= 1 && self.at_epoch.is_none() {
            // The producer adopts a publish within a second; the records after this instant are
            // the ones routed by DKG.
            std::thread::sleep(Duration::from_secs(1));
            self.at_epoch = Some((
                self.elapsed(),
                end_offsets(consumer, &hash.topic, args.partitions)?,
                end_offsets(consumer, &dkg.topic, args.partitions)?,
            ));
        }
        // Steady state: two intervals after the first epoch, the window holds only DKG-routed records.
        if let Some((t, _, _)) = &self.at_epoch
            && self.elapsed() > *t + Duration::from_secs(2 * args.interval_secs)
        {
            self.steady.0.extend(self.last_hash.observed);
            self.steady.1.extend(self.last_dkg.observed);
            self.steady.2.extend(self.last_dkg.bound);
        }
        Ok(())
    }

    /// The screen for the latest views.
    pub(super) fn frame(&self, screen: &Screen<'_>, hash: &Side, dkg: &Side, note: &str) -> String {
        screen.render(
            self.elapsed(),
            (hash, &self.last_hash),
            (dkg, &self.last_dkg),
            note,
        )
    }

    /// The workload ended: the summary, from the topics' end offsets.
    pub(super) fn finish(
        self,
        args: &Args,
        hash: &Side,
        dkg: &Side,
        consumer: &BaseConsumer,
    ) -> anyhow::Result<Summary> {
        let elapsed = self.elapsed();
        // Let in-flight records land before the end offsets are read.
        std::thread::sleep(Duration::from_secs(1));
        let (first_epoch_after, hash_at_epoch, dkg_at_epoch) = match self.at_epoch {
            Some((t, h, d)) => (Some(t), Some(h), Some(d)),
            None => (None, None, None),
        };
        Ok(Summary {
            elapsed,
            hash_counts: end_offsets(consumer, &hash.topic, args.partitions)?,
            dkg_counts: end_offsets(consumer, &dkg.topic, args.partitions)?,
            hash_at_epoch,
            dkg_at_epoch,
            first_epoch_after,
            last_hash: self.last_hash,
            last_dkg: self.last_dkg,
            steady_hash: mean(&self.steady.0),
            steady_dkg: mean(&self.steady.1),
            steady_bound: mean(&self.steady.2),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imbalance_is_max_over_mean_minus_one() {
        let cases: [(&[i64], Option<f64>); 4] = [
            (&[10, 10, 10, 10], Some(0.0)),
            (&[40, 0, 0, 0], Some(3.0)),
            (&[20, 10, 10, 0], Some(1.0)),
            (&[0, 0], None),
        ];
        for (counts, want) in cases {
            assert_eq!(imbalance(counts), want, "{counts:?}");
        }
    }
}
