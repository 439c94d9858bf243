//! The pure arithmetic of the sidecar's interval ([`super::interval`]): which partitions a member
//! reports on, their rates, which partitions nobody covers, the next epoch, how the current assignment
//! fares on the window, and the window gauges (decayed shares, top keys, the key-grouping bound of the
//! DKG paper, Rivetti et al., DEBS 2015). No I/O, no clock: unit-tested below.

use std::collections::{BTreeMap, BTreeSet};

use dkg_kafka_core::assignment::{Assignment, MAX_EPOCH};
use dkg_kafka_core::dkg::{Build, DEFAULT_MIGRATION_SLACK, Sketch, imbalance};

use super::metrics::key_label;

use super::decide::{self, Candidate, Current, Policy};

/// The partitions a member reports on: its own, or every partition for a standalone instance that has
/// not been assigned any (yet).
pub(super) fn owned_partitions(
    standalone: bool,
    assigned: &BTreeSet<u32>,
    partitions: u32,
) -> Vec<u32> {
    if standalone && assigned.is_empty() {
        (0..partitions).collect()
    } else {
        assigned.iter().copied().collect()
    }
}

/// Records per second per partition: every owned partition (0 when idle) and every partition that
/// delivered records in the interval (`counts[p]` over `elapsed` seconds).
pub(super) fn partition_rates(owned: &[u32], counts: &[u64], elapsed: f64) -> BTreeMap<u32, f64> {
    let mut rates: BTreeMap<u32, f64> = owned.iter().map(|&p| (p, 0.0)).collect();
    for (p, &c) in counts.iter().enumerate() {
        if c > 0 || rates.contains_key(&(p as u32)) {
            rates.insert(p as u32, c as f64 / elapsed);
        }
    }
    rates
}

/// Partitions in `0..partitions` that neither this member nor a fresh peer consumes.
pub(super) fn uncovered<'p>(
    partitions: u32,
    own: &BTreeSet<u32>,
    peers: impl Iterator<Item = &'p [u32]>,
) -> Vec<u32> {
    let mut covered = own.clone();
    for owned in peers {
        covered.extend(owned.iter().copied());
    }
    (0..partitions).filter(|p| !covered.contains(p)).collect()
}

/// The next epoch: above everything on the control topic, everything this instance published and the
/// current assignment. `None` when that would exceed [`MAX_EPOCH`] (2^53 - 1, `docs/spec.md` 6.2):
/// the epochs are exhausted, never wrapped.
pub(super) fn next_epoch(control_max: u64, last_published: u64, current: u64) -> Option<u64> {
    control_max
        .max(last_published)
        .max(current)
        .checked_add(1)
        .filter(|&e| e <= MAX_EPOCH)
}

/// What the window says about the current assignment.
pub(super) fn current_state(
    current: Option<&Assignment>,
    partitions: u32,
    window: &Sketch,
) -> Current {
    match current {
        None => Current::None,
        Some(a) if a.partitions() != partitions => Current::OtherPartitionCount {
            partitions: a.partitions(),
        },
        Some(a) => match window.predict(a) {
            Some(loads) => Current::Predicted {
                imbalance: imbalance(&loads),
            },
            None => Current::Unpredictable,
        },
    }
}

/// What a rebuild is for: the document's topic, epoch and creation time, and the assignment it
/// replaces (the migration-aware base).
#[derive(Clone, Copy)]
pub(super) struct Rebuild<'a> {
    pub topic: &'a str,
    pub epoch: u64,
    pub now: u64,
    pub previous: &'a Assignment,
}

/// Predicted imbalance of `build` on `window`, and the load it moves.
pub(super) fn candidate(window: &Sketch, build: &Build) -> Candidate {
    Candidate {
        imbalance: window
            .predict(&build.assignment)
            .map_or(build.predicted_imbalance, |l| imbalance(&l)),
        moved_share: build.moved_share,
    }
}

/// The replacement of an assignment predicted at `current` on `window`: the default rebuild
/// (`default`, with its candidate numbers) or one with more migration slack
/// ([`decide::slack_ladder`]), whichever moves the least load while still reaching the improvement
/// ([`decide::choose`]; the default rebuild when none does).
///
/// # Errors
/// Whatever [`Sketch::build_with_slack`] rejects.
pub(super) fn least_moving(
    policy: &Policy,
    window: &Sketch,
    r: Rebuild<'_>,
    default: (Build, Candidate),
    current: f64,
) -> dkg_kafka::Result<(Build, Candidate)> {
    let ladder = decide::slack_ladder(
        policy,
        current,
        default.1.imbalance,
        DEFAULT_MIGRATION_SLACK,
    );
    let mut options = vec![default];
    for slack in ladder {
        let build = window.build_with_slack(r.topic, r.epoch, r.now, Some(r.previous), slack)?;
        let c = candidate(window, &build);
        options.push((build, c));
    }
    let candidates: Vec<Candidate> = options.iter().map(|(_, c)| *c).collect();
    let pick = decide::choose(policy, current, &candidates).unwrap_or(0);
    Ok(options.swap_remove(pick))
}

/// Decay the per-partition record counts like the sketch, add this interval's, drop partitions `>= k`;
/// each partition's share of the total.
pub(super) fn decay_window_shares(
    window: &mut BTreeMap<u32, f64>,
    rates: &[(u32, f64)],
    elapsed: f64,
    decay: f64,
    k: u32,
) -> Vec<(u32, f64)> {
    for v in window.values_mut() {
        *v *= decay;
    }
    for (p, r) in rates {
        *window.entry(*p).or_insert(0.0) += r * elapsed;
    }
    window.retain(|p, _| *p < k);
    let total: f64 = window.values().sum();
    window
        .iter()
        .map(|(&p, &c)| (p, if total > 0.0 { c / total } else { 0.0 }))
        .collect()
}

/// The `n` heaviest keys of the window with their share of it.
pub(super) fn top_key_shares(window: &Sketch, n: usize) -> Vec<(Vec<u8>, f64)> {
    let total = window.total();
    window
        .summary()
        .top(n)
        .iter()
        .map(|c| {
            let share = if total > 0 {
                c.count as f64 / total as f64
            } else {
                0.0
            };
            (c.key.to_vec(), share)
        })
        .collect()
}

/// Key-grouping lower bound `max(1, k * p1) - 1` with the most frequent key's GUARANTEED count
/// (count - error), so it stays a lower bound.
pub(super) fn key_grouping_bound(window: &Sketch, k: u32) -> f64 {
    let total = window.total();
    let p1 = window.summary().top(1).first().map_or(0.0, |c| {
        if total > 0 {
            c.count.saturating_sub(c.error) as f64 / total as f64
        } else {
            0.0
        }
    });
    (f64::from(k) * p1).max(1.0) - 1.0
}

/// The split keys of `a` for a log line: `none`, or each key (as a metrics label: printable, bounded)
/// with its part count, e.g. `hot/4,user-7/2`.
pub(super) fn split_keys_shown(a: &Assignment) -> String {
    let shown: Vec<String> = a
        .heavy()
        .iter()
        .filter(|hk| hk.is_split())
        .map(|hk| format!("{}/{}", key_label(&hk.key), hk.split.len()))
        .collect();
    if shown.is_empty() {
        "none".to_owned()
    } else {
        shown.join(",")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use dkg_kafka_core::dkg::DkgConfig;

    use super::*;

    fn sketch(partitions: u32, keys: &[(&[u8], u64)]) -> Sketch {
        let mut s = Sketch::new(&DkgConfig::paper(), partitions).unwrap();
        for (key, weight) in keys {
            s.observe_weighted(key, *weight);
        }
        s
    }

    #[test]
    fn a_standalone_instance_without_partitions_reports_on_all() {
        let none = BTreeSet::new();
        assert_eq!(owned_partitions(true, &none, 3), vec![0, 1, 2]);
        assert!(owned_partitions(false, &none, 3).is_empty());
        let some: BTreeSet<u32> = [2, 0].into();
        assert_eq!(owned_partitions(true, &some, 3), vec![0, 2]);
        assert_eq!(owned_partitions(false, &some, 3), vec![0, 2]);
    }

    #[test]
    fn rates_cover_owned_idle_partitions_and_any_that_delivered() {
        // Owns 0 and 2; partition 1 delivered leftovers from before a rebalance; 3 is idle and not owned.
        let rates = partition_rates(&[0, 2], &[10, 4, 0, 0], 2.0);
        assert_eq!(rates, BTreeMap::from([(0, 5.0), (1, 2.0), (2, 0.0)]));
        // Counts shorter than the owned list (a reset in flight): owned partitions stay at 0.
        assert_eq!(partition_rates(&[5], &[], 1.0), BTreeMap::from([(5, 0.0)]));
    }

    #[test]
    fn uncovered_lists_partitions_nobody_consumes() {
        let own: BTreeSet<u32> = [0].into();
        let peers: [&[u32]; 2] = [&[1, 2], &[2]];
        assert_eq!(uncovered(5, &own, peers.into_iter()), vec![3, 4]);
        assert!(uncovered(3, &own, peers.into_iter()).is_empty());
        assert_eq!(
            uncovered(2, &BTreeSet::new(), std::iter::empty()),
            vec![0, 1]
        );
    }

    #[test]
    fn the_next_epoch_exceeds_every_known_one() {
        assert_eq!(next_epoch(0, 0, 0), Some(1));
        assert_eq!(next_epoch(7, 3, 5), Some(8));
        assert_eq!(next_epoch(2, 9, 5), Some(10));
        assert_eq!(next_epoch(2, 3, 11), Some(12));
        // Bounded, never wrapped: 2^53 - 2 is the last epoch with a successor.
        assert_eq!(next_epoch(MAX_EPOCH - 1, 0, 0), Some(MAX_EPOCH));
        assert_eq!(next_epoch(MAX_EPOCH, 0, 0), None);
        assert_eq!(next_epoch(0, 0, u64::MAX), None);
    }

    #[test]
    fn the_current_assignment_is_judged_on_the_window() {
        let window = sketch(4, &[(b"hot", 1000), (b"a", 10), (b"b", 10)]);
        assert_eq!(current_state(None, 4, &window), Current::None);
        let built = window.build("t", 1, 0, None).unwrap().assignment;
        match current_state(Some(&built), 4, &window) {
            Current::Predicted { imbalance: i } => {
                let expected = imbalance(&window.predict(&built).unwrap());
                assert!((i - expected).abs() < 1e-12, "{i} vs {expected}");
            }
            other => panic!("expected a prediction, got {other:?}"),
        }
        assert_eq!(
            current_state(Some(&built), 6, &window),
            Current::OtherPartitionCount { partitions: 4 }
        );
        // Same partition count, another bucket layout: not predictable on this window.
        let finer = Sketch::new(&DkgConfig::builder().mu(16.0).build().unwrap(), 4).unwrap();
        let mut finer = finer;
        finer.observe_weighted(b"hot", 1000);
        let other = finer.build("t", 1, 0, None).unwrap().assignment;
        assert_eq!(
            current_state(Some(&other), 4, &window),
            Current::Unpredictable
        );
    }

    #[test]
    fn window_shares_decay_and_forget_removed_partitions() {
        let mut w = BTreeMap::new();
        let shares = decay_window_shares(&mut w, &[(0, 30.0), (1, 10.0)], 1.0, 0.5, 2);
        assert_eq!(shares, vec![(0, 0.75), (1, 0.25)]);
        // Next interval: old counts halve (15, 5), new ones add (0 + 5, 5 + 15) -> 20 and 20.
        let shares = decay_window_shares(&mut w, &[(0, 5.0), (1, 15.0)], 1.0, 0.5, 2);
        assert_eq!(shares, vec![(0, 0.5), (1, 0.5)]);
        // The topic shrank to one partition: partition 1 is dropped, 0 holds everything.
        let shares = decay_window_shares(&mut w, &[(1, 99.0)], 1.0, 0.5, 1);
        assert_eq!(shares, vec![(0, 1.0)]);
        // Nothing left at all: shares are 0, never NaN.
        let mut empty = BTreeMap::from([(0, 0.0)]);
        assert_eq!(
            decay_window_shares(&mut empty, &[], 1.0, 0.5, 1),
            vec![(0, 0.0)]
        );
    }

    #[test]
    fn top_keys_and_bound_use_the_window_shares() {
        let window = sketch(4, &[(b"hot", 600), (b"warm", 300), (b"cold", 100)]);
        let top = top_key_shares(&window, 2);
        assert_eq!(top.len(), 2);
        assert_eq!(top[0].0, b"hot".to_vec());
        assert!((top[0].1 - 0.6).abs() < 1e-12);
        assert_eq!(top[1].0, b"warm".to_vec());
        // k * p1 = 4 * 0.6 = 2.4: the best key grouping is at least 140 % imbalanced.
        assert!((key_grouping_bound(&window, 4) - 1.4).abs() < 1e-12);
        // No key above 1/k: the bound is 0.
        assert_eq!(key_grouping_bound(&window, 1), 0.0);
        let empty = sketch(4, &[]);
        assert!(top_key_shares(&empty, 3).is_empty());
        assert_eq!(key_grouping_bound(&empty, 4), 0.0);
    }

    #[test]
    fn split_keys_are_shown_with_their_part_counts() {
        use dkg_kafka_core::dkg::SplitKeys;
        let config = DkgConfig::builder()
            .mu(2.0)
            .split(SplitKeys::Auto)
            .build()
            .unwrap();
        let mut s = Sketch::new(&config, 4).unwrap();
        s.observe_weighted(b"\xffhot", 600);
        for i in 0..400u32 {
            s.observe(format!("k{i}").as_bytes());
        }
        let a = s.build("t", 1, 0, None).unwrap().assignment;
        // 60% of 4 partitions: 2.4 fair shares -> 3 parts.
        assert_eq!(split_keys_shown(&a), "\\xffhot/3");
        let whole = Sketch::new(&DkgConfig::paper(), 4)
            .unwrap()
            .build("t", 1, 0, None)
            .unwrap();
        assert_eq!(split_keys_shown(&whole.assignment), "none");
    }
}
