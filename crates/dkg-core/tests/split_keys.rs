//! Split heavy keys (format version 2, `docs/spec.md` 4.6): the JSON form, and the lookup's
//! spread, which must be exactly the smooth weighted round robin sequence of the weights per
//! `Assignment` instance, shared by all threads, never out of range.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::Arc;

use dkg_kafka_core::{
    Assignment, AssignmentParts, BucketHash, Error, HeavyKey, MAX_SPLIT_PARTS,
    MAX_SPLIT_WEIGHT_SUM, Params, Route, SplitPart,
};
use proptest::prelude::*;

const PARTITIONS: u32 = 80;

/// The spec's rule (4.6), transcribed independently of the crate: counters `c[i]` from 0; per
/// record `c[i] += w[i]` for all `i`, pick the largest `c[i]` (lowest `i` on ties), subtract the
/// weight sum from it. Returns the first `n` picks as part indices.
fn spec_picks(weights: &[u32], n: usize) -> Vec<usize> {
    let total: i128 = weights.iter().map(|&w| i128::from(w)).sum();
    let mut c = vec![0_i128; weights.len()];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut best = 0;
        for i in 0..c.len() {
            c[i] += i128::from(weights[i]);
            if c[i] > c[best] {
                best = i;
            }
        }
        c[best] -= total;
        out.push(best);
    }
    out
}

/// An assignment of "orders" over [`PARTITIONS`] with the whole heavy key `whole` on 1, and one
/// split key `hot` with `parts` (each `(partition, weight)`).
fn with_split(parts: &[(u32, u32)]) -> Assignment {
    Assignment::new(AssignmentParts {
        topic: "orders".to_owned(),
        partitions: PARTITIONS,
        epoch: 3,
        bucket_hash: BucketHash::default(),
        table: (0..PARTITIONS * 2).map(|b| b % PARTITIONS).collect(),
        heavy: vec![
            HeavyKey::whole(b"whole".to_vec(), 1, 50),
            split_key(b"hot", parts),
        ],
        params: Params {
            theta: 0.01,
            epsilon: 0.005,
            mu: 2.0,
            window_records: 1000,
        },
        created_at_ms: 5,
        predicted_load: vec![1.0 / f64::from(PARTITIONS); PARTITIONS as usize],
    })
    .expect("a valid split document")
}

fn split_key(key: &[u8], parts: &[(u32, u32)]) -> HeavyKey {
    HeavyKey {
        key: key.to_vec(),
        partition: parts[0].0,
        weight: 900,
        split: parts
            .iter()
            .map(|&(partition, weight)| SplitPart { partition, weight })
            .collect(),
    }
}

/// 2..=MAX_SPLIT_PARTS distinct partitions with weights >= 1 summing to at most the limit.
fn parts_strategy() -> impl Strategy<Value = Vec<(u32, u32)>> {
    (2..=MAX_SPLIT_PARTS)
        .prop_flat_map(|n| {
            (
                Just(n),
                proptest::sample::subsequence((0..PARTITIONS).collect::<Vec<_>>(), n),
                proptest::collection::vec(1_u32..=64, n),
            )
        })
        .prop_flat_map(|(n, partitions, weights)| {
            // The subsequence is sorted: shuffle so part order is not partition order.
            (Just(partitions).prop_shuffle(), Just(weights), Just(n))
        })
        .prop_map(|(partitions, weights, _)| partitions.into_iter().zip(weights).collect())
        .prop_filter("weight sum within the limit", |parts: &Vec<(u32, u32)>| {
            parts.iter().map(|&(_, w)| u64::from(w)).sum::<u64>() <= MAX_SPLIT_WEIGHT_SUM
        })
}

#[test]
fn known_sequences() {
    // (weights, one period of picks as part indices)
    let cases: [(&[u32], &[usize]); 5] = [
        (&[3, 1], &[0, 0, 1, 0]),
        (&[1, 1], &[0, 1]),
        (&[1, 3], &[1, 0, 1, 1]),
        // nginx's example of its smooth weighted round robin: a a b a c a a.
        (&[5, 1, 1], &[0, 0, 1, 0, 2, 0, 0]),
        (&[2, 2, 1], &[0, 1, 2, 0, 1]),
    ];
    for (weights, period) in cases {
        assert_eq!(spec_picks(weights, period.len()), period, "{weights:?}");
        let parts: Vec<(u32, u32)> = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| (10 + 7 * i as u32, w))
            .collect();
        let a = with_split(&parts);
        for round in 0..3 {
            for &i in period {
                assert_eq!(
                    a.route(b"hot"),
                    (parts[i].0, Route::Split),
                    "{weights:?} round {round}"
                );
            }
        }
    }
}

#[test]
fn split_of_and_the_other_routes_do_not_advance_the_schedule() {
    let a = with_split(&[(4, 3), (9, 1)]);
    assert!(a.has_split_keys());
    assert_eq!(a.format_version(), 2);
    let want = [
        SplitPart {
            partition: 4,
            weight: 3,
        },
        SplitPart {
            partition: 9,
            weight: 1,
        },
    ];
    let mut picks = Vec::new();
    for _ in 0..8 {
        assert_eq!(a.split_of(b"hot"), Some(&want[..]));
        assert_eq!(a.split_of(b"whole"), None);
        assert_eq!(a.split_of(b"light"), None);
        assert_eq!(
            a.heavy_partition(b"hot"),
            None,
            "a split key has no single partition"
        );
        assert_eq!(a.heavy_partition(b"whole"), Some(1));
        assert_eq!(a.route(b"whole"), (1, Route::Heavy));
        assert_eq!(a.route(b"light").1, Route::Bucket);
        picks.push(a.partition_for(b"hot"));
    }
    assert_eq!(picks, [4, 4, 9, 4, 4, 4, 9, 4]);
    let whole = Assignment::new(AssignmentParts {
        heavy: vec![HeavyKey::whole(b"hot".to_vec(), 2, 9)],
        ..a.clone().into_parts()
    })
    .unwrap();
    assert!(!whole.has_split_keys());
    assert_eq!(whole.split_of(b"hot"), None);
    assert_eq!(whole.format_version(), 1);
}

#[test]
fn clone_continues_from_the_copied_counter_then_counts_alone() {
    let a = with_split(&[(4, 3), (9, 1)]);
    assert_eq!(a.partition_for(b"hot"), 4);
    assert_eq!(a.partition_for(b"hot"), 4);
    let b = a.clone();
    assert_eq!(
        b.partition_for(b"hot"),
        9,
        "the clone continues at record 2"
    );
    assert_eq!(
        a.partition_for(b"hot"),
        9,
        "the original did not see the clone's pick"
    );
    assert_eq!(b.partition_for(b"hot"), 4);
    assert_eq!(a, b, "equality compares the document");
    let decoded = Assignment::from_json(&a.to_json()).unwrap();
    assert_eq!(
        decoded.partition_for(b"hot"),
        4,
        "a decoded document starts at record 0"
    );
}

#[test]
fn many_threads_share_one_schedule() {
    const THREADS: usize = 8;
    const PERIODS: usize = 200;
    let parts = [(0, 5), (17, 3), (33, 1), (79, 7)];
    let period: usize = parts.iter().map(|&(_, w)| w as usize).sum();
    let a = Arc::new(with_split(&parts));
    let per_thread = PERIODS * period / THREADS;
    assert_eq!(per_thread * THREADS, PERIODS * period);
    let counts: Vec<HashMap<u32, usize>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let a = Arc::clone(&a);
                s.spawn(move || {
                    let mut counts = HashMap::new();
                    for _ in 0..per_thread {
                        let (p, route) = a.route(b"hot");
                        assert_eq!(route, Route::Split);
                        *counts.entry(p).or_insert(0) += 1;
                    }
                    counts
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut total: HashMap<u32, usize> = HashMap::new();
    for c in counts {
        for (p, n) in c {
            *total.entry(p).or_insert(0) += n;
        }
    }
    let want: HashMap<u32, usize> = parts
        .iter()
        .map(|&(p, w)| (p, PERIODS * w as usize))
        .collect();
    assert_eq!(total, want);
}

#[test]
fn json_round_trip_of_a_split_document_is_version_2() {
    let a = with_split(&[(4, 3), (9, 1)]);
    let text = String::from_utf8(a.to_json()).unwrap();
    assert!(
        text.starts_with(r#"{"format":"dkg.assignment","version":2,"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"{"key_b64":"aG90","split":[{"partition":4,"weight":3},{"partition":9,"weight":1}],"weight":900}"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"{"key_b64":"d2hvbGU=","partition":1,"weight":50}"#),
        "{text}"
    );
    let back = Assignment::from_json(text.as_bytes()).unwrap();
    assert_eq!(back, a);
    assert_eq!(back.to_json(), a.to_json());
}

/// A version 2 document with the split entry replaced by `entry`; `version` replaces 2.
fn edited(entry: &str, version: u64) -> Vec<u8> {
    let text = String::from_utf8(with_split(&[(4, 3), (9, 1)]).to_json()).unwrap();
    let split = r#"{"key_b64":"aG90","split":[{"partition":4,"weight":3},{"partition":9,"weight":1}],"weight":900}"#;
    text.replace(split, entry)
        .replace(r#""version":2"#, &format!(r#""version":{version}"#))
        .into_bytes()
}

#[test]
fn bad_split_entries_are_rejected_with_their_error() {
    let malformed = |e: &Error| matches!(e, Error::MalformedAssignment { .. });
    let invalid = |e: &Error| matches!(e, Error::InvalidAssignment { .. });
    let out_of_range = |e: &Error| matches!(e, Error::PartitionOutOfRange { partition: 80, .. });
    // (case, the heavy entry, the document version, the expected error)
    type Case<'a> = (&'a str, &'a str, u64, &'a dyn Fn(&Error) -> bool);
    let cases: [Case<'_>; 12] = [
        (
            "split in version 1",
            r#"{"key_b64":"aG90","split":[{"partition":4,"weight":3},{"partition":9,"weight":1}],"weight":900}"#,
            1,
            &malformed,
        ),
        (
            "both",
            r#"{"key_b64":"aG90","partition":4,"split":[{"partition":4,"weight":3},{"partition":9,"weight":1}],"weight":900}"#,
            2,
            &malformed,
        ),
        (
            "neither",
            r#"{"key_b64":"aG90","weight":900}"#,
            2,
            &malformed,
        ),
        (
            "partition null",
            r#"{"key_b64":"aG90","partition":null,"split":[{"partition":4,"weight":3},{"partition":9,"weight":1}],"weight":900}"#,
            2,
            &malformed,
        ),
        (
            "split null",
            r#"{"key_b64":"aG90","partition":4,"split":null,"weight":900}"#,
            2,
            &malformed,
        ),
        (
            "unknown member in a part",
            r#"{"key_b64":"aG90","split":[{"partition":4,"weight":3,"x":1},{"partition":9,"weight":1}],"weight":900}"#,
            2,
            &malformed,
        ),
        (
            "part weight over u32",
            r#"{"key_b64":"aG90","split":[{"partition":4,"weight":4294967296},{"partition":9,"weight":1}],"weight":900}"#,
            2,
            &malformed,
        ),
        (
            "one part",
            r#"{"key_b64":"aG90","split":[{"partition":4,"weight":3}],"weight":900}"#,
            2,
            &invalid,
        ),
        (
            "no parts",
            r#"{"key_b64":"aG90","split":[],"weight":900}"#,
            2,
            &invalid,
        ),
        (
            "duplicate partition",
            r#"{"key_b64":"aG90","split":[{"partition":4,"weight":3},{"partition":4,"weight":1}],"weight":900}"#,
            2,
            &invalid,
        ),
        (
            "weight 0",
            r#"{"key_b64":"aG90","split":[{"partition":4,"weight":0},{"partition":9,"weight":1}],"weight":900}"#,
            2,
            &invalid,
        ),
        (
            "part out of range",
            r#"{"key_b64":"aG90","split":[{"partition":4,"weight":3},{"partition":80,"weight":1}],"weight":900}"#,
            2,
            &out_of_range,
        ),
    ];
    for (name, entry, version, want) in cases {
        match Assignment::from_json(&edited(entry, version)) {
            Err(e) => assert!(want(&e), "{name}: unexpected error {e:?}"),
            Ok(_) => panic!("{name}: accepted"),
        }
    }
    // Over the weight-sum limit: `invalid` in a version 2 document (limits inside the document
    // are not `oversize` there, gap G2).
    let heavy = format!(
        r#"{{"key_b64":"aG90","split":[{{"partition":4,"weight":{}}},{{"partition":9,"weight":1}}],"weight":900}}"#,
        MAX_SPLIT_WEIGHT_SUM
    );
    assert!(matches!(
        Assignment::from_json(&edited(&heavy, 2)),
        Err(Error::InvalidAssignment { .. })
    ));
    // The same in memory is TooLarge, as every limit of `Assignment::new`.
    let parts = AssignmentParts {
        heavy: vec![split_key(b"hot", &[(4, 4096), (9, 1)])],
        ..with_split(&[(4, 3), (9, 1)]).into_parts()
    };
    assert!(matches!(
        Assignment::new(parts),
        Err(Error::TooLarge { .. })
    ));
    // 3 and later are unsupported, naming the newest version read.
    assert!(matches!(
        Assignment::from_json(&edited("{}", 3)),
        Err(Error::UnsupportedVersion {
            version: 3,
            supported: 2
        })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// One period has exactly `w[i]` picks of part `i`, the spread is the spec's sequence, the
    /// sequence repeats with the period, and every pick is a part's partition.
    #[test]
    fn the_spread_is_the_spec_sequence(parts in parts_strategy()) {
        let a = with_split(&parts);
        let weights: Vec<u32> = parts.iter().map(|&(_, w)| w).collect();
        let period: usize = weights.iter().map(|&w| w as usize).sum();
        let want = spec_picks(&weights, 2 * period);
        prop_assert_eq!(&want[..period], &want[period..], "periodic");
        let mut counts = vec![0_u32; parts.len()];
        for &i in &want[..period] {
            counts[i] += 1;
        }
        prop_assert_eq!(&counts, &weights);
        for (n, &i) in want.iter().enumerate() {
            let (p, route) = a.route(b"hot");
            prop_assert_eq!(route, Route::Split);
            prop_assert!(p < PARTITIONS);
            prop_assert_eq!(p, parts[i].0, "record {}", n);
        }
    }

    /// Split documents round-trip through JSON (version 2), whole-key ones stay version 1.
    #[test]
    fn split_documents_round_trip(parts in parts_strategy(), split in any::<bool>()) {
        let a = if split {
            with_split(&parts)
        } else {
            Assignment::new(AssignmentParts {
                heavy: vec![HeavyKey::whole(b"hot".to_vec(), parts[0].0, 9)],
                ..with_split(&parts).into_parts()
            })
            .unwrap()
        };
        let json = a.to_json();
        let back = Assignment::from_json(&json).unwrap();
        prop_assert_eq!(&back, &a);
        prop_assert_eq!(back.to_json(), json);
        prop_assert_eq!(back.format_version(), if split { 2 } else { 1 });
        prop_assert_eq!(back.split_of(b"hot").is_some(), split);
    }
}
