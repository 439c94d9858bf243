//! Assignments for the unit tests of this crate and the crates above it (feature `test-fixtures`,
//! which only their dev-dependencies turn on): one place that spells out an [`Assignment`], so a
//! test says only what matters to it (topic, partitions, epoch, table, heavy keys).

use crate::assignment::{Assignment, AssignmentParts, HeavyKey, Params};
use crate::hash::BucketHash;

/// The learner parameters every fixture carries (their values matter to no test).
#[must_use]
pub fn params() -> Params {
    Params {
        theta: 0.1,
        epsilon: 0.05,
        mu: 1.0,
        window_records: 1,
    }
}

/// An assignment of `topic` with `partitions` partitions at `epoch`: bucket table `table` (default
/// bucket hash), heavy keys `(key, partition, weight)`, an even predicted load. Panics if that is
/// not a valid assignment (a broken fixture is a broken test).
#[must_use]
pub fn assignment(
    topic: &str,
    partitions: u32,
    epoch: u64,
    table: Vec<u32>,
    heavy: &[(&[u8], u32, u64)],
) -> Assignment {
    Assignment::new(AssignmentParts {
        topic: topic.to_owned(),
        partitions,
        epoch,
        bucket_hash: BucketHash::default(),
        table,
        heavy: heavy
            .iter()
            .map(|&(key, partition, weight)| HeavyKey {
                key: key.to_vec(),
                partition,
                weight,
                split: Vec::new(),
            })
            .collect(),
        params: params(),
        created_at_ms: 1,
        predicted_load: vec![1.0 / f64::from(partitions.max(1)); partitions as usize],
    })
    .expect("a valid fixture assignment")
}

/// [`assignment`] of topic `t` with one heavy key, `hot`, on partition `hot_on`.
#[must_use]
pub fn with_hot_key(partitions: u32, epoch: u64, table: Vec<u32>, hot_on: u32) -> Assignment {
    assignment("t", partitions, epoch, table, &[(b"hot", hot_on, 9)])
}
