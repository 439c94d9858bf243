//! Heavy keys that share a bucket: at most `MAX_HEAVY_KEYS_PER_BUCKET` of them per bucket, in
//! documents and in what the learner builds, so keys chosen to collide in the bucket hash cannot
//! make a build quadratic or a lookup linear (every shared bucket is one bounded run).

use dkg_kafka_core::assignment::MAX_HEAVY_KEYS_PER_BUCKET;
use dkg_kafka_core::{
    Assignment, AssignmentParts, BucketHash, DkgConfig, Error, HeavyKey, Params, Route, Sketch,
};

const BUCKETS: u32 = 3;
const PARTITIONS: u32 = 24;

/// `n` distinct keys that all fall in bucket 0 of [`BUCKETS`] under the default bucket hash.
fn keys_of_bucket_zero(n: usize) -> Vec<Vec<u8>> {
    let hash = BucketHash::default();
    (0_u32..)
        .map(|i| format!("user-{i}").into_bytes())
        .filter(|k| hash.bucket(k, BUCKETS) == 0)
        .take(n)
        .collect()
}

/// Bucket 0 on partition 0, the others on 1 and 2; heavy key `i` on partition `3 + i % 21`.
fn parts_with_heavy(keys: &[Vec<u8>]) -> AssignmentParts {
    AssignmentParts {
        topic: "orders".to_owned(),
        partitions: PARTITIONS,
        epoch: 1,
        bucket_hash: BucketHash::default(),
        table: vec![0, 1, 2],
        heavy: keys
            .iter()
            .enumerate()
            .map(|(i, k)| HeavyKey {
                key: k.clone(),
                partition: 3 + i as u32 % (PARTITIONS - 3),
                weight: 100 - i as u64,
                split: Vec::new(),
            })
            .collect(),
        params: Params {
            theta: 0.01,
            epsilon: 0.005,
            mu: 1.0,
            window_records: 10_000,
        },
        created_at_ms: 0,
        predicted_load: vec![1.0 / f64::from(PARTITIONS); PARTITIONS as usize],
    }
}

#[test]
fn a_full_bucket_routes_each_heavy_key_and_every_other_key_by_the_table() {
    let keys = keys_of_bucket_zero(MAX_HEAVY_KEYS_PER_BUCKET + 200);
    let (heavy, light) = keys.split_at(MAX_HEAVY_KEYS_PER_BUCKET);
    let parts = parts_with_heavy(heavy);
    let a = Assignment::new(parts.clone()).expect("a bucket may hold the maximum");
    for hk in &parts.heavy {
        assert_eq!(
            a.route(&hk.key),
            (hk.partition, Route::Heavy),
            "{:?}",
            hk.key
        );
    }
    // Keys of the same bucket that are not heavy, near misses of heavy keys among them.
    for k in light {
        assert_eq!(a.route(k), (0, Route::Bucket), "{k:?}");
    }
    for hk in &parts.heavy {
        let mut near = hk.key.clone();
        near.push(b'x');
        let bucket = a.bucket(&near) as usize;
        assert_eq!(a.route(&near), (a.table()[bucket], Route::Bucket));
    }
    // The document round-trips through JSON with the same routes.
    let b = Assignment::from_json(&a.to_json()).expect("decodes");
    for hk in &parts.heavy {
        assert_eq!(b.route(&hk.key), (hk.partition, Route::Heavy));
    }
}

#[test]
fn a_document_with_one_heavy_key_too_many_in_a_bucket_is_rejected() {
    let keys = keys_of_bucket_zero(MAX_HEAVY_KEYS_PER_BUCKET + 1);
    let err = Assignment::new(parts_with_heavy(&keys)).expect_err("over the bound");
    match &err {
        Error::InvalidAssignment { reason } => {
            assert!(reason.contains("bucket 0"), "{reason}");
            assert!(
                reason.contains(&format!("{}", MAX_HEAVY_KEYS_PER_BUCKET + 1)),
                "{reason}"
            );
        }
        other => panic!("expected InvalidAssignment, got {other:?}"),
    }
}

#[test]
fn a_duplicate_heavy_key_in_a_shared_bucket_is_rejected() {
    let mut keys = keys_of_bucket_zero(3);
    keys.push(keys[1].clone());
    let err = Assignment::new(parts_with_heavy(&keys)).expect_err("duplicate");
    assert!(matches!(err, Error::DuplicateHeavyKey { .. }), "{err:?}");
}

/// A stream whose heaviest keys all fall in one bucket: the learner pins the heaviest
/// `MAX_HEAVY_KEYS_PER_BUCKET` of them and leaves the rest to the bucket, so what it publishes is a
/// document every reader accepts.
#[test]
fn the_learner_never_pins_more_heavy_keys_in_one_bucket_than_a_document_may_hold() {
    let partitions = 3;
    let config = DkgConfig::builder()
        .theta(0.005)
        .mu(1.0)
        .build()
        .expect("valid config");
    let mut sketch = Sketch::new(&config, partitions).expect("sketch");
    let hot = keys_of_bucket_zero(MAX_HEAVY_KEYS_PER_BUCKET + 8);
    for (i, k) in hot.iter().enumerate() {
        // Distinct weights, heaviest first: 400, 399, ...
        for _ in 0..(400 - i) {
            sketch.observe(k);
        }
    }
    for i in 0..20_000_u32 {
        sketch.observe(format!("cold-{i}").as_bytes());
    }
    let build = sketch
        .build("orders", 1, 0, None)
        .expect("the learner's document is valid");
    let a = &build.assignment;
    assert_eq!(a.buckets(), BUCKETS);
    let pinned: Vec<&[u8]> = a
        .heavy()
        .iter()
        .filter(|h| a.bucket(&h.key) == 0)
        .map(|h| h.key.as_slice())
        .collect();
    assert_eq!(pinned.len(), MAX_HEAVY_KEYS_PER_BUCKET);
    // The heaviest are the ones pinned; the others route by their bucket.
    for (i, k) in hot.iter().enumerate() {
        let heavy = pinned.contains(&k.as_slice());
        assert_eq!(heavy, i < MAX_HEAVY_KEYS_PER_BUCKET, "key #{i}");
        if !heavy {
            assert_eq!(a.route(k), (a.table()[0], Route::Bucket));
        }
    }
    Assignment::from_json(&a.to_json()).expect("readers accept it");
}
