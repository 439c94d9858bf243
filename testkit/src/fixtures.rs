//! Valid assignments (and their parts) for the integration tests: exact documents for the JSON tests
//! ([`parts`], [`sample`]) and, built on the unit tests' fixture, assignments to publish.

use std::time::{SystemTime, UNIX_EPOCH};

use std::collections::BTreeMap;

use dkg_kafka::Assignment;
use dkg_kafka_core::assignment::MAX_HEAVY_KEYS_PER_BUCKET;
use dkg_kafka_core::{AssignmentParts, BucketHash, HeavyKey, Params};

/// The sketch parameters of the fixtures.
pub fn params() -> Params {
    Params {
        theta: 0.01,
        epsilon: 0.005,
        mu: 4.0,
        window_records: 100_000,
    }
}

/// A heavy key placed on `partition`.
pub fn heavy(key: &[u8], partition: u32, weight: u64) -> HeavyKey {
    HeavyKey {
        key: key.to_vec(),
        partition,
        weight,
        split: Vec::new(),
    }
}

/// A valid assignment of topic `orders` at epoch 7: `partitions` partitions, the given table and heavy
/// keys, uniform predicted load.
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

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// A valid assignment for `topic`, created now (the producer's age metric is measured from it): the
/// unit tests' fixture ([`dkg_kafka_core::fixtures::assignment`]) with bucket table `table` and heavy keys
/// `(key, partition)` of weight 1000.
pub fn assignment(
    topic: &str,
    partitions: u32,
    epoch: u64,
    table: Vec<u32>,
    heavy_keys: &[(&[u8], u32)],
) -> Assignment {
    let weighted: Vec<(&[u8], u32, u64)> = heavy_keys.iter().map(|&(k, p)| (k, p, 1000)).collect();
    let parts = dkg_kafka_core::fixtures::assignment(topic, partitions, epoch, table, &weighted);
    Assignment::new(AssignmentParts {
        created_at_ms: now_ms(),
        ..parts.into_parts()
    })
    .expect("test assignment is valid")
}

/// An assignment whose bucket table is rotated by `epoch`, so consecutive epochs place most keys
/// differently: bucket b -> (b + epoch) % partitions, 4 buckets per partition.
pub fn rotating_assignment(topic: &str, partitions: u32, epoch: u64) -> Assignment {
    let buckets = partitions * 4;
    let shift = (epoch % u64::from(partitions)) as u32;
    let table = (0..buckets).map(|b| (b + shift) % partitions).collect();
    assignment(topic, partitions, epoch, table, &[])
}

/// An assignment sending every non-heavy key to `partition`.
pub fn constant_assignment(
    topic: &str,
    partitions: u32,
    epoch: u64,
    partition: u32,
    heavy: &[(&[u8], u32)],
) -> Assignment {
    assignment(topic, partitions, epoch, vec![partition; 8], heavy)
}

/// Generated heavy keys (key -> anything) less those past [`MAX_HEAVY_KEYS_PER_BUCKET`] in their
/// bucket under `hash` over `buckets`: what a valid document may hold (spec 4.4 step 18).
pub fn within_bucket_bound<V>(
    heavy: BTreeMap<Vec<u8>, V>,
    hash: BucketHash,
    buckets: usize,
) -> BTreeMap<Vec<u8>, V> {
    let mut per_bucket = vec![0_usize; buckets];
    heavy
        .into_iter()
        .filter(|(key, _)| {
            let n = &mut per_bucket[hash.bucket(key, buckets as u32) as usize];
            *n += 1;
            *n <= MAX_HEAVY_KEYS_PER_BUCKET
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixtures_are_valid_assignments() {
        let a = Assignment::new(sample()).expect("sample is valid");
        assert_eq!((a.topic(), a.partitions(), a.epoch()), ("orders", 3, 7));
        let r = rotating_assignment("t", 4, 5);
        assert_eq!((r.partitions(), r.epoch(), r.buckets()), (4, 5, 16));
        let c = constant_assignment("t", 3, 2, 1, &[(b"hot", 2)]);
        assert_eq!(c.partition_for(b"hot"), 2);
        assert_eq!(c.partition_for(b"anything else"), 1);
    }
}
