//! SpaceSaving keeps its guarantees (Metwally et al. 2005; merge per Agarwal et al. 2012) on arbitrary
//! streams: every estimate brackets the exact count, unmonitored keys stay under the minimum, errors stay
//! under N / capacity, merges keep the bounds, and snapshots round-trip.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use dkg_kafka_core::SpaceSaving;
use proptest::prelude::*;

type Truth = HashMap<Vec<u8>, u64>;

/// Small key alphabet so streams have repeats, collisions in buckets and evictions.
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => (0u8..6).prop_map(|b| vec![b]),
        2 => (0u8..40).prop_map(|b| vec![b, b]),
        1 => prop::collection::vec(any::<u8>(), 0..5),
    ]
}

fn check_bounds(s: &SpaceSaving, truth: &Truth) {
    let n: u64 = truth.values().sum();
    assert_eq!(s.total(), n);
    assert!(s.len() <= s.capacity());
    for (k, &t) in truth {
        match s.get(k) {
            Some(c) => {
                assert!(c.count - c.error <= t, "lower bound: {c:?}, true {t}");
                assert!(t <= c.count, "upper bound: {c:?}, true {t}");
            }
            None => assert!(
                t <= s.min_count(),
                "unmonitored key {k:?}: true {t} > min {}",
                s.min_count()
            ),
        }
    }
    for c in s.iter() {
        // error <= min_count <= N / capacity
        assert!(c.error <= s.min_count());
        assert!(u128::from(c.error) * s.capacity() as u128 <= u128::from(n));
        assert!(truth.contains_key(c.key), "monitors a key never inserted");
    }
    // Every key with true count > N / capacity is monitored.
    for (k, &t) in truth {
        if u128::from(t) * s.capacity() as u128 > u128::from(n) {
            assert!(
                s.get(k).is_some(),
                "frequent key {k:?} ({t} of {n}) not monitored"
            );
        }
    }
    // top() is sorted by count desc, key asc, and covers everything.
    let top = s.top(usize::MAX);
    assert_eq!(top.len(), s.len());
    for w in top.windows(2) {
        assert!(w[0].count > w[1].count || (w[0].count == w[1].count && w[0].key < w[1].key));
    }
}

fn feed(s: &mut SpaceSaving, truth: &mut Truth, stream: &[(Vec<u8>, u64)]) {
    for (k, w) in stream {
        if *w == 1 {
            s.insert(k);
        } else {
            s.insert_weighted(k, *w);
        }
        if *w > 0 {
            *truth.entry(k.clone()).or_default() += w;
        }
    }
}

proptest! {
    #[test]
    fn unit_inserts_bracket_exact_counts(
        capacity in 1usize..12,
        stream in prop::collection::vec(key(), 0..400),
    ) {
        let mut s = SpaceSaving::new(capacity);
        let mut truth = Truth::new();
        let stream: Vec<_> = stream.into_iter().map(|k| (k, 1)).collect();
        feed(&mut s, &mut truth, &stream);
        check_bounds(&s, &truth);
    }

    #[test]
    fn weighted_inserts_bracket_exact_counts(
        capacity in 1usize..12,
        stream in prop::collection::vec((key(), prop_oneof![0u64..4, 1u64..1000]), 0..300),
    ) {
        let mut s = SpaceSaving::new(capacity);
        let mut truth = Truth::new();
        feed(&mut s, &mut truth, &stream);
        check_bounds(&s, &truth);
    }

    #[test]
    fn heavy_hitters_are_exactly_the_guaranteed_ones(
        capacity in 1usize..10,
        stream in prop::collection::vec((key(), 1u64..50), 0..200),
        threshold in 0u64..200,
    ) {
        let mut s = SpaceSaving::new(capacity);
        let mut truth = Truth::new();
        feed(&mut s, &mut truth, &stream);
        let hh = s.heavy_hitters(threshold);
        let expected = s.iter().filter(|c| c.count - c.error >= threshold).count();
        prop_assert_eq!(hh.len(), expected);
        for c in &hh {
            prop_assert!(truth[c.key] >= threshold, "guaranteed count is a lower bound");
        }
        for w in hh.windows(2) {
            let (a, b) = (w[0].count - w[0].error, w[1].count - w[1].error);
            prop_assert!(a > b || (a == b && w[0].key < w[1].key));
        }
    }

    #[test]
    fn merge_keeps_bounds_within_combined_error(
        capacity in 1usize..10,
        extra_capacity in 0usize..4,
        s1 in prop::collection::vec((key(), 1u64..20), 0..200),
        s2 in prop::collection::vec((key(), 1u64..20), 0..200),
    ) {
        let mut a = SpaceSaving::new(capacity);
        let mut b = SpaceSaving::new(capacity + extra_capacity);
        let (mut t1, mut t2) = (Truth::new(), Truth::new());
        feed(&mut a, &mut t1, &s1);
        feed(&mut b, &mut t2, &s2);
        let (n1, n2) = (a.total(), b.total());
        a.merge(&b).unwrap();
        let mut truth = t1;
        for (k, v) in t2 {
            *truth.entry(k).or_default() += v;
        }
        prop_assert!(a.len() <= capacity);
        // Bounding and error <= (N1 + N2) / capacity.
        check_bounds(&a, &truth);
        for c in a.iter() {
            prop_assert!(u128::from(c.count - truth[c.key]) * capacity as u128 <= u128::from(n1 + n2));
        }
    }

    #[test]
    fn decay_keeps_bounds_against_decayed_truth(
        capacity in 1usize..10,
        stream in prop::collection::vec((key(), 1u64..50), 0..200),
        factor in 0.01f64..1.0,
    ) {
        let mut s = SpaceSaving::new(capacity);
        let mut truth = Truth::new();
        feed(&mut s, &mut truth, &stream);
        s.decay(factor);
        for (k, &t) in &truth {
            let t = t as f64 * factor;
            match s.get(k) {
                Some(c) => prop_assert!((c.count - c.error) as f64 <= t + 1e-9 && t <= c.count as f64 + 1e-9),
                None => prop_assert!(t <= s.min_count() as f64 + 1e-9),
            }
        }
    }

    #[test]
    fn snapshot_round_trips(
        capacity in 1usize..10,
        stream in prop::collection::vec((key(), 1u64..50), 0..200),
    ) {
        let mut s = SpaceSaving::new(capacity);
        let mut truth = Truth::new();
        feed(&mut s, &mut truth, &stream);
        let json = serde_json::to_vec(&s).unwrap();
        let mut back: SpaceSaving = serde_json::from_slice(&json).unwrap();
        prop_assert_eq!(back.capacity(), s.capacity());
        prop_assert_eq!(back.total(), s.total());
        prop_assert_eq!(back.top(usize::MAX), s.top(usize::MAX));
        prop_assert_eq!(serde_json::to_vec(&back).unwrap(), json);
        // The rebuilt structure keeps working and keeps its guarantees.
        feed(&mut back, &mut truth, &stream);
        check_bounds(&back, &truth);
    }
}

#[test]
fn a_million_distinct_keys_keep_the_summary_at_capacity() {
    // 10^6 here to stay fast in debug builds; `cargo bench --bench space_saving` prints the 10^7 run.
    let mut s = SpaceSaving::new(500);
    let mut bytes_when_full = 0;
    for i in 0u64..1_000_000 {
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&i.to_le_bytes());
        s.insert(&key);
        if s.len() == s.capacity() && bytes_when_full == 0 {
            bytes_when_full = s.heap_bytes();
        }
    }
    assert_eq!(s.len(), 500);
    assert!(s.bucket_arena_len() <= 501);
    assert_eq!(
        s.heap_bytes(),
        bytes_when_full,
        "memory grew after the summary filled up"
    );
    assert!(
        s.heap_bytes() < 100 * 1024,
        "{} bytes for 500 counters",
        s.heap_bytes()
    );
}
