//! A deterministic simulation of `dkg-sampler run` on a stationary stream: the window as in
//! [`super::window`] (no decay before the first epoch, `--decay` after), the decision of
//! [`super::decide`] and the replacement of [`super::calc::least_moving`], interval by interval, with
//! every published assignment judged on the stream's exact key probabilities. It checks the targets of
//! issue 15, item 5 (no epoch after the first moves more than 15% of the load; the first epoch's
//! prediction within 2 points of what it does) on the two cases: the new user's (Zipf 1.0 over
//! 10^5 keys, 12 partitions, 2,000 records/s, `--interval-secs 5`) and the live split target (one key at
//! 30% over 12 partitions, `--split-keys auto`). DKG: Rivetti et al., DEBS 2015.

use dkg_kafka_core::assignment::Assignment;
use dkg_kafka_core::dkg::{DkgConfig, Sketch, SplitKeys, imbalance};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::calc::{Rebuild, candidate, least_moving};
use super::decide::{self, Current, Decision, Policy, PublishReason, Situation};
use crate::workload::{AliasTable, ZipfKeys, zipf_probabilities};

/// A stationary stream: keys and their exact probabilities.
struct Stream {
    keys: Vec<Vec<u8>>,
    probabilities: Vec<f64>,
}

impl Stream {
    /// Zipf `alpha` over `n` keys named like `dkg-lab loadgen`'s (the id in decimal).
    fn zipf(n: u32, alpha: f64, seed: u64) -> Self {
        let ranks = ZipfKeys::new(n, alpha, seed).expect("zipf");
        Self {
            keys: ranks
                .ids()
                .iter()
                .map(|id| id.to_string().into_bytes())
                .collect(),
            probabilities: zipf_probabilities(n, alpha),
        }
    }

    /// One key `hot` with `share` of the records, the rest uniform over `cold` keys.
    fn hot(share: f64, cold: u32) -> Self {
        let mut keys = vec![b"hot".to_vec()];
        let mut probabilities = vec![share];
        for i in 0..cold {
            keys.push(format!("cold-{i}").into_bytes());
            probabilities.push((1.0 - share) / f64::from(cold));
        }
        Self {
            keys,
            probabilities,
        }
    }

    /// The exact imbalance of `a` on this stream (a split key spread by its weights).
    fn true_imbalance(&self, a: &Assignment) -> f64 {
        let mut loads = vec![0.0; a.partitions() as usize];
        for (key, &p) in self.keys.iter().zip(&self.probabilities) {
            match a.split_of(key) {
                Some(parts) => {
                    let sum: f64 = parts.iter().map(|x| f64::from(x.weight)).sum();
                    for x in parts {
                        loads[x.partition as usize] += p * f64::from(x.weight) / sum;
                    }
                }
                None => loads[a.partition_for(key) as usize] += p,
            }
        }
        imbalance(&loads)
    }
}

/// One publish of the simulation.
#[derive(Debug)]
struct Epoch {
    interval: u32,
    moved_share: f64,
    /// What the default rebuild alone would have moved.
    default_moved: f64,
    predicted: f64,
    actual: f64,
    split_keys: usize,
}

/// Run `intervals` intervals of `per_interval` records of `interval_secs` each under `policy`; the
/// publishes.
fn run(
    stream: &Stream,
    config: &DkgConfig,
    policy: &Policy,
    per_interval: u32,
    interval_secs: f64,
    intervals: u32,
) -> Vec<Epoch> {
    const K: u32 = 12;
    const DECAY: f64 = 0.5;
    let seed = 1;
    let table = AliasTable::new(&stream.probabilities).expect("alias table");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut window = Sketch::new(config, K).expect("sketch");
    let mut samples = 0.0;
    let mut current: Option<Assignment> = None;
    let mut epochs = Vec::new();
    for interval in 1..=intervals {
        for _ in 0..per_interval {
            window.observe(&stream.keys[table.sample(&mut rng) as usize]);
        }
        samples += f64::from(per_interval);
        let epoch = epochs.len() as u64 + 1;
        let build = window
            .build("t", epoch, 0, current.as_ref())
            .expect("build");
        let fresh = candidate(&window, &build);
        let state = match &current {
            None => Current::None,
            Some(a) => Current::Predicted {
                imbalance: imbalance(&window.predict(a).expect("same shape")),
            },
        };
        let decision = decide::decide(
            policy,
            &Situation {
                partitions: K,
                window_samples: samples,
                current: state,
                fresh_imbalance: fresh.imbalance,
                force: false,
                learned_secs: f64::from(interval) * interval_secs,
                catching_up: None,
            },
        );
        if let Decision::Publish(reason) = decision {
            let default_moved = fresh.moved_share;
            let (build, c) = match (reason, &current) {
                (PublishReason::Imbalanced { current: now, .. }, Some(previous)) => {
                    let r = Rebuild {
                        topic: "t",
                        epoch,
                        now: 0,
                        previous,
                    };
                    least_moving(policy, &window, r, (build, fresh), now).expect("rebuild")
                }
                _ => (build, fresh),
            };
            epochs.push(Epoch {
                interval,
                moved_share: c.moved_share,
                default_moved,
                predicted: c.imbalance,
                actual: stream.true_imbalance(&build.assignment),
                split_keys: build.split_keys,
            });
            current = Some(build.assignment);
        }
        // As the sampler: no decay while nothing is published.
        if current.is_some() {
            window.decay(DECAY);
            samples *= DECAY;
        }
    }
    epochs
}

/// The targets: the first epoch predicts within 2 points of what it does, no later one moves more
/// than 15% of the load.
fn check(name: &str, epochs: &[Epoch]) {
    let first = epochs.first().unwrap_or_else(|| panic!("{name}: no epoch"));
    assert!(
        (first.predicted - first.actual).abs() <= 0.02,
        "{name}: the first epoch predicted {:.3}, does {:.3}: {epochs:?}",
        first.predicted,
        first.actual
    );
    for e in &epochs[1..] {
        assert!(
            e.moved_share <= 0.15,
            "{name}: epoch at interval {} moved {:.3}: {epochs:?}",
            e.interval,
            e.moved_share
        );
    }
}

/// The live split target: one key at 30% (5,000 cold keys), `--split-keys auto`.
fn split_target() -> (Stream, DkgConfig) {
    let split = DkgConfig::builder()
        .split(SplitKeys::Auto)
        .build()
        .expect("config");
    (Stream::hot(0.3, 5_000), split)
}

#[test]
fn the_new_users_first_epoch_waits_until_its_prediction_holds() {
    // Zipf 1.0 over 10^5 keys, 10^4 records per 5 s interval: 190,260 sampled records are needed, so
    // the first epoch comes in interval 20. Before the confidence rule it came in interval 1,
    // predicting 0.2% for a true 3 to 8%.
    let zipf = Stream::zipf(100_000, 1.0, 1);
    let epochs = run(
        &zipf,
        &DkgConfig::default(),
        &Policy::default(),
        10_000,
        5.0,
        24,
    );
    assert_eq!(epochs[0].interval, 20, "{epochs:?}");
    check("zipf", &epochs);
}

#[test]
fn the_split_targets_first_epoch_waits_until_its_prediction_holds() {
    // One key at 30% over 12 partitions, split; 20,000 records/s with a 2 s interval.
    let (hot, split) = split_target();
    let epochs = run(&hot, &split, &Policy::default(), 40_000, 2.0, 8);
    assert_eq!(epochs[0].interval, 5, "{epochs:?}");
    assert_eq!(epochs[0].split_keys, 1, "{epochs:?}");
    check("hot key", &epochs);
}

#[test]
fn replacements_move_the_least_load_that_reaches_the_improvement() {
    // The first epoch as before the confidence rule (on 10^4 records), so that it is bad enough to be
    // replaced: every replacement moves at most 15% of the load, and so does the default rebuild alone
    // (before `lpt_sticky`'s repair it fell back to the relabelled fresh LPT and moved about 60%; on the
    // Zipf stream without a split key, 68%).
    let early = Policy {
        first_noise: 1.0,
        ..Policy::default()
    };
    let (hot, split) = split_target();
    let zipf = Stream::zipf(100_000, 1.0, 4);
    for (name, epochs) in [
        ("hot key", run(&hot, &split, &early, 10_000, 5.0, 12)),
        (
            "zipf",
            run(&zipf, &DkgConfig::default(), &early, 10_000, 5.0, 14),
        ),
    ] {
        assert!(epochs.len() >= 2, "{name}: no replacement: {epochs:?}");
        for e in &epochs[1..] {
            assert!(e.moved_share <= 0.15, "{name}: {epochs:?}");
            assert!(e.default_moved <= 0.15, "{name}: {epochs:?}");
        }
    }
}
