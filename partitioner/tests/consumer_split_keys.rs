//! A key goes whole -> split -> whole (`docs/spec.md` 4.6) under an ordering producer, read by a
//! group of two `DkgConsumer`s running the split-key pattern of `examples/split_aggregates`
//! (partial counts per partition, merged downstream into a compacted topic): every record exactly
//! once, split records marked with their part count and whole ones not, per-key order for every
//! whole key, the transitions ordered as the rule says (every whole record of `hot` before its
//! split ones, every split one before its whole ones of the next epoch), the hooks told once per
//! transition, and the merged totals equal to the exact per-key counts.
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;
#[path = "../examples/split_aggregates/pattern.rs"]
mod pattern;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use common::scenario::{counter_sum, hold_histogram};
use pattern::{HOT, PARTS, WHOLE};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn split_key_whole_split_whole_through_a_consumer_group() {
    // 1500 records per epoch, a third of them `hot`; the application takes 3 ms over each `hot`
    // record of epochs 1 and 2 (1.5 s of backlog per epoch: with 1 ms the group sometimes caught up
    // before the next epoch arrived, and nothing was held), so its old partitions lag when the next
    // epoch's records arrive.
    let out = pattern::run(&common::bootstrap(), 1_500, Duration::from_millis(3)).await;

    // Exactly once.
    let sent: HashSet<(Vec<u8>, u64)> = out
        .sent
        .iter()
        .map(|(k, _, s, _)| (k.clone(), *s))
        .collect();
    assert_eq!(sent.len(), out.sent.len());
    let mut seen: HashMap<(Vec<u8>, u64), usize> = HashMap::new();
    for s in &out.seen {
        *seen.entry((s.key.clone(), s.seq)).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), sent.len(), "every record handed out");
    assert!(seen.values().all(|&n| n == 1), "none twice");

    // Placement as the documents say: hot whole on 0, spread over 1, 2, 3, whole on 5.
    for (key, phase, _, partition) in &out.sent {
        if key == HOT {
            let ok = match phase {
                1 => *partition == WHOLE[0] as i32,
                2 => PARTS.contains(&(*partition as u32)),
                _ => *partition == WHOLE[1] as i32,
            };
            assert!(ok, "hot of epoch {phase} on partition {partition}");
        }
    }
    let spread: HashSet<i32> = out
        .sent
        .iter()
        .filter(|(k, p, _, _)| k == HOT && *p == 2)
        .map(|(_, _, _, partition)| *partition)
        .collect();
    assert_eq!(
        spread.len(),
        PARTS.len(),
        "the split spreads over every part"
    );

    // Split records marked with their part count, whole ones not.
    for s in &out.seen {
        let want = (s.key == HOT && s.phase == 2).then_some(PARTS.len() as u32);
        assert_eq!(s.split, want, "{s:?}");
    }
    let split_records = out.seen.iter().filter(|s| s.split.is_some()).count();
    assert_eq!(
        counter_sum(&[&out.registry], "dkg_consumer_split_records_total"),
        split_records as f64,
        "summed over the members"
    );

    // Order: epochs never go back for a key (its whole records before its split ones, those
    // before its whole ones of the next epoch); whole records in send order; split records
    // (hot in epoch 2) in any order among themselves.
    let mut last: HashMap<&[u8], (u64, u64)> = HashMap::new();
    for s in &out.seen {
        let (phase, seq) = last.entry(s.key.as_slice()).or_insert((0, 0));
        assert!(s.phase >= *phase, "{s:?} after a record of epoch {phase}");
        if s.split.is_none() {
            assert!(s.seq > *seq, "{s:?} after #{seq} of its key");
        }
        *phase = s.phase;
        *seq = (*seq).max(s.seq);
    }

    // The transitions waited: hot's records of a new epoch arrived while its old partitions
    // still had records of the epoch before (the application is slow on them), and were held.
    let (held, _) = hold_histogram(&[&out.registry], 2.0);
    assert!(held > 0, "nothing was held at the transitions");

    // Hooks: each member learnt hot split at epoch 2 over the three parts, whole again at 3 on
    // partition 5, once each.
    for m in &out.members {
        let changes = m.changes.lock().unwrap().clone();
        let got: Vec<(u64, Vec<u32>, Option<u32>)> = changes
            .iter()
            .map(|c| (c.epoch, c.parts.to_vec(), c.partition))
            .collect();
        assert_eq!(
            got,
            vec![(2, PARTS.to_vec(), None), (3, vec![], Some(WHOLE[1]))],
            "{changes:?}"
        );
    }

    // The merged totals are the exact counts.
    assert_eq!(out.totals, out.produced);
}
