//! Distribution-aware Key Grouping (DKG) for Apache Kafka.
#![forbid(unsafe_code)]

pub mod assignment;
pub mod dkg;
pub mod error;
pub mod hash;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod lpt;
pub mod space_saving;

pub use assignment::{
    Assignment, AssignmentParts, FORMAT_NAME, FORMAT_VERSION, HeavyKey, MAX_ASSIGNMENT_BYTES, Params,
    Route,
};
pub use dkg::{Build, DEFAULT_MU, DkgConfig, DkgConfigBuilder, Sketch, default_theta, imbalance};
pub use error::{Error, Result};
pub use hash::{
    BucketHash, DEFAULT_BUCKET_SEED, KAFKA_MURMUR2_SEED, kafka_partition, murmur2, murmur2_seeded,
    to_positive,
};
#[cfg(feature = "kafka")]
pub use kafka::{
    ControlTopicReader, DEFAULT_CONTROL_TOPIC, DkgPartitioner, DkgProducer, DkgProducerBuilder,
    DkgRouter, EPOCH_HEADER, RejectReason, RouteKind, Routing,
};
pub use lpt::{Schedule, StickySchedule, lpt, lpt_sticky, lpt_sticky_with_slack};
pub use space_saving::{Counter, SpaceSaving};
