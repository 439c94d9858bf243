//! Fixtures for assignment tests.

use dkg_partitioner::{AssignmentParts, BucketHash, HeavyKey, Params};

pub fn params() -> Params {
    Params {
        theta: 0.01,
        epsilon: 0.005,
        mu: 4.0,
        window_records: 100_000,
    }
}

pub fn heavy(key: &[u8], partition: u32, weight: u64) -> HeavyKey {
    HeavyKey {
        key: key.to_vec(),
        partition,
        weight,
    }
}

/// A valid assignment: `partitions` partitions, the given table and heavy keys, uniform predicted load.
pub fn parts(partitions: u32, table: Vec<u32>, heavy: Vec<HeavyKey>) -> AssignmentParts {
    AssignmentParts {
        topic: "orders".to_owned(),
        partitions,
        epoch: 7,
        bucket_hash: BucketHash::default(),
        table,
        heavy,
        params: params(),
        created_at_ms: 1_700_000_000_000,
        predicted_load: vec![1.0 / f64::from(partitions.max(1)); partitions as usize],
    }
}

/// A small assignment with binary, empty and text heavy keys.
pub fn sample() -> AssignmentParts {
    parts(
        3,
        vec![0, 1, 2, 0, 1, 2, 2, 1],
        vec![
            heavy(b"hot", 1, 1200),
            heavy(b"", 2, 900),
            heavy(&[0x00, 0xff, 0x80, 0x7f, b'"', b'\\'], 0, 500),
        ],
    )
}
