//! LPT and migration-aware LPT keep Graham's bounds (Graham 1969) and their documented contracts on
//! arbitrary job sets.
#![allow(clippy::unwrap_used)]

use dkg_kafka_core::{Schedule, lpt, lpt_sticky};
use proptest::prelude::*;

fn check_schedule(weights: &[u64], k: u32, s: &Schedule) {
    assert_eq!(s.placement.len(), weights.len());
    assert_eq!(s.loads.len(), k as usize);
    let mut loads = vec![0u64; k as usize];
    for (j, &p) in s.placement.iter().enumerate() {
        assert!(p < k, "job {j} on partition {p} of {k}");
        loads[p as usize] += weights[j];
    }
    assert_eq!(loads, s.loads, "loads disagree with placements");
}

/// Exhaustive optimum makespan for tiny instances.
fn optimum(weights: &[u64], k: u32) -> u64 {
    fn go(w: &[u64], loads: &mut Vec<u64>, best: &mut u64) {
        let Some((&first, rest)) = w.split_first() else {
            *best = (*best).min(loads.iter().copied().max().unwrap_or(0));
            return;
        };
        for p in 0..loads.len() {
            // Symmetry: only the first empty partition is worth trying.
            if loads[p] == 0 && loads[..p].contains(&0) {
                continue;
            }
            loads[p] += first;
            if loads[p] < *best {
                go(rest, loads, best);
            }
            loads[p] -= first;
        }
    }
    let mut best = u64::MAX;
    go(weights, &mut vec![0; k as usize], &mut best);
    best
}

fn weights() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(prop_oneof![Just(0u64), 1u64..10, 1u64..1_000_000], 0..200)
}

proptest! {
    #[test]
    fn lpt_obeys_the_list_scheduling_bound(w in weights(), k in 1u32..40) {
        let s = lpt(&w, k).unwrap();
        check_schedule(&w, k, &s);
        let total: u64 = w.iter().sum();
        let largest = w.iter().copied().max().unwrap_or(0);
        prop_assert_eq!(s.total(), total);
        // max <= total / k + largest job (any list schedule).
        prop_assert!(u128::from(s.max_load()) * u128::from(k) <= u128::from(total) + u128::from(largest) * u128::from(k));
        // Deterministic.
        prop_assert_eq!(lpt(&w, k).unwrap(), s);
    }

    #[test]
    fn lpt_is_within_four_thirds_of_optimal(w in prop::collection::vec(1u64..50, 0..9), k in 1u32..4) {
        let s = lpt(&w, k).unwrap();
        let opt = optimum(&w, k);
        // max <= (4/3 - 1/(3k)) * opt  <=>  3k * max <= (4k - 1) * opt
        prop_assert!(
            3 * u64::from(k) * s.max_load() <= (4 * u64::from(k) - 1) * opt,
            "lpt {} opt {} k {}", s.max_load(), opt, k
        );
    }

    #[test]
    fn sticky_is_never_worse_than_lpt(
        w in weights(),
        k in 1u32..20,
        prev_seed in prop::collection::vec(prop::option::weighted(0.8, 0u32..25), 200),
    ) {
        let prev: Vec<Option<u32>> = prev_seed[..w.len()].to_vec();
        let fresh = lpt(&w, k).unwrap();
        let s = lpt_sticky(&w, &prev, k).unwrap();
        check_schedule(&w, k, &s.schedule);
        prop_assert!(s.schedule.max_load() <= fresh.max_load());
        // moved_* account exactly for jobs with a valid previous partition that changed.
        let (mut mw, mut mj) = (0u64, 0usize);
        for (j, &p) in s.schedule.placement.iter().enumerate() {
            if let Some(q) = prev[j] && q < k && q != p {
                mw += w[j];
                mj += 1;
            }
        }
        prop_assert_eq!((s.moved_weight, s.moved_jobs), (mw, mj));
        prop_assert_eq!(lpt_sticky(&w, &prev, k).unwrap().schedule, s.schedule);
    }

    #[test]
    fn sticky_keeps_a_placement_that_is_already_as_good_as_lpt(w in weights(), k in 1u32..20, rotate in 0u32..20) {
        // LPT's own placement, with partitions relabelled: as good as LPT, so nothing may move.
        let fresh = lpt(&w, k).unwrap();
        let prev: Vec<Option<u32>> = fresh.placement.iter().map(|&p| Some((p + rotate) % k)).collect();
        let s = lpt_sticky(&w, &prev, k).unwrap();
        prop_assert_eq!(s.moved_jobs, 0);
        prop_assert_eq!(s.moved_weight, 0);
        let kept: Vec<u32> = prev.iter().map(|p| p.unwrap()).collect();
        prop_assert_eq!(s.schedule.placement, kept);
    }

    #[test]
    fn sticky_moves_no_more_than_fresh_lpt(
        w in prop::collection::vec(1u64..1000, 50..200),
        k in 2u32..20,
        bump in 0usize..50,
    ) {
        // Reweigh one job after an LPT placement, then rebuild from that placement.
        let first = lpt(&w, k).unwrap();
        let mut w2 = w.clone();
        w2[bump] += w2[bump] / 2 + 1;
        let prev: Vec<Option<u32>> = first.placement.iter().map(|&p| Some(p)).collect();
        let fresh = lpt(&w2, k).unwrap();
        let s = lpt_sticky(&w2, &prev, k).unwrap();
        prop_assert!(s.schedule.max_load() <= fresh.max_load());
        // Moved weight counted here from the placements, not taken from the function's own report.
        let moved = |placement: &[u32]| -> u64 {
            placement
                .iter()
                .zip(&first.placement)
                .enumerate()
                .filter(|(_, (a, b))| a != b)
                .map(|(j, _)| w2[j])
                .sum()
        };
        let fresh_moved = moved(&fresh.placement);
        let sticky_moved = moved(&s.schedule.placement);
        prop_assert_eq!(s.moved_weight, sticky_moved, "reported moved weight");
        prop_assert!(sticky_moved <= fresh_moved, "sticky moved {} > fresh {}", sticky_moved, fresh_moved);
    }
}

#[test]
fn large_instance_is_fast_enough_to_be_practical() {
    // Not a timing test (see benches/build.rs); checks the k = 100, 10^4 jobs case completes and is sane.
    let w: Vec<u64> = (0..10_000u64)
        .map(|i| (i * 2_654_435_761) % 10_007 + 1)
        .collect();
    let s = lpt(&w, 100).unwrap();
    check_schedule(&w, 100, &s);
    let total: u64 = w.iter().sum();
    assert!(s.max_load() <= total / 100 + 10_007);
    let prev: Vec<Option<u32>> = s.placement.iter().map(|&p| Some(p)).collect();
    let sticky = lpt_sticky(&w, &prev, 100).unwrap();
    assert_eq!(sticky.moved_jobs, 0);
}

#[test]
fn sticky_rebalances_everything_piled_on_one_partition() {
    // 10^4 equal jobs all on partition 0: the removal loop pops from the end, so this stays linear.
    let w = vec![1u64; 10_000];
    let prev = vec![Some(0u32); w.len()];
    let s = lpt_sticky(&w, &prev, 100).unwrap();
    check_schedule(&w, 100, &s.schedule);
    assert_eq!(s.schedule.loads, vec![100; 100]);
    // Exactly the excess moved. Removal takes the lowest index among equal weights first, so the last 100
    // jobs are the ones that stay.
    assert_eq!((s.moved_jobs, s.moved_weight), (9_900, 9_900));
    assert!(s.schedule.placement[9_900..].iter().all(|&p| p == 0));
}
