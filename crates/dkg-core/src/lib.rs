//! The pure core of Distribution-aware Key Grouping (DKG): no I/O, no clock, no Kafka client.
//!
//! DKG (Rivetti, Querzoni, Anceaume, Busnel, Sericola, "Efficient Key Grouping for Near-Optimal
//! Load Balancing in Stream Processing Systems", ACM DEBS 2015) learns the key distribution, pins
//! the heavy keys and hashes the others into many small buckets, and places heavy keys and buckets
//! on partitions with LPT.
//!
//! - [`hash`]: Kafka-compatible murmur2 and the bucket hash;
//! - [`space_saving`]: heavy hitters (Metwally et al. 2005; mergeable, Agarwal et al. 2012);
//! - [`lpt`](mod@lpt): Graham's LPT, plain and migration-aware;
//! - [`dkg`]: the learner, a [`Sketch`] that builds an [`Assignment`];
//! - [`assignment`]: the versioned JSON document and its O(1), allocation-free, never-panicking
//!   lookup;
//! - [`error`]: the one error type of the pure crates and of the `dkg-kafka` facade (the
//!   feature `kafka-errors` adds the Kafka client's variants for the facade; nothing here uses
//!   them).
//!
//! The layers above it (`dkg-kafka-protocol`, the handoff protocol's pure state machines; the Kafka glue
//! in `dkg-kafka`) and the wall between them are described in `docs/architecture.md`. Most
//! users depend on `dkg-kafka`, which re-exports this crate under the same paths.
//!
//! ```
//! use dkg_kafka_core::{DkgConfig, Sketch};
//!
//! # fn main() -> dkg_kafka_core::Result<()> {
//! let mut sketch = Sketch::new(&DkgConfig::default(), 4)?;
//! for i in 0..1_000u32 {
//!     sketch.observe(if i % 2 == 0 { b"hot".as_slice() } else { b"cold" });
//! }
//! let assignment = sketch.build("orders", 1, 0, None)?.assignment;
//! assert!(assignment.partition_for(b"hot") < 4);
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

pub mod assignment;
pub mod dkg;
pub mod error;
#[cfg(any(test, feature = "test-fixtures"))]
pub mod fixtures;
pub mod hash;
pub mod lpt;
pub mod space_saving;

pub use assignment::{
    Assignment, AssignmentParts, DEFAULT_LIMITS_DOCUMENT_BYTES, FORMAT_NAME, FORMAT_VERSION,
    HeavyKey, MAX_ASSIGNMENT_BYTES, MAX_EPOCH, MAX_SPLIT_PARTS, MAX_SPLIT_WEIGHT_SUM,
    MAX_SPLIT_WEIGHT_TOTAL, Params, Route, SplitPart,
};
pub use dkg::{
    Build, DEFAULT_MU, DEFAULT_MU_FLOOR, DEFAULT_SPLIT_SLACK, DkgConfig, DkgConfigBuilder, Sketch,
    SplitKeys, default_mu, default_theta, imbalance, split_parts, split_weights, spread,
};
pub use error::{Error, Result};
pub use hash::{
    BucketHash, DEFAULT_BUCKET_SEED, KAFKA_MURMUR2_SEED, kafka_partition, murmur2, murmur2_seeded,
    to_positive,
};
pub use lpt::{
    Groups, Schedule, StickySchedule, lpt, lpt_grouped, lpt_sticky, lpt_sticky_grouped,
    lpt_sticky_with_slack,
};
pub use space_saving::{Counter, SpaceSaving};
