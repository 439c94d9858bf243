//! Distribution-aware Key Grouping (DKG) for Apache Kafka: skew-aware partitioning that keeps every key
//! on one partition.
//!
//! Kafka's default partitioner hashes keys, so with skewed keys the partitions that receive the hot keys
//! carry far more records than the others. DKG (Rivetti, Querzoni, Anceaume, Busnel, Sericola, "Efficient
//! Key Grouping for Near-Optimal Load Balancing in Stream Processing Systems", ACM DEBS 2015) learns the
//! key distribution, pins the heavy keys and hashes the others into many small buckets, and places heavy
//! keys and buckets on partitions with LPT. Every record of a key still goes to one partition.
//!
//! # Design
//!
//! Three layers, each a crate, with a wall between them that the compiler checks (the whole map,
//! with the data flow of a record, an assignment and a barrier and where each rule lives, is
//! `docs/architecture.md`):
//!
//! - **`dkg-core`**, the pure core, no I/O, no clock, no rdkafka, re-exported here under its old
//!   paths: [`hash`] (Kafka-compatible murmur2 and the bucket hash), [`space_saving`] (heavy
//!   hitters, Metwally et al. 2005; mergeable, Agarwal et al. 2012), [`lpt`](mod@lpt) (Graham's LPT,
//!   plain and migration-aware), [`dkg`] (the learner: a [`Sketch`] that builds an [`Assignment`])
//!   and [`assignment`] (the versioned JSON document and its O(1), allocation-free,
//!   never-panicking lookup). This crate builds as exactly that with `default-features = false`.
//! - **`dkg-protocol`**, the handoff protocol without I/O: the `dkg-*` header and handoff record
//!   codecs, the control topic's `AssignmentBook`, the consumer's ordering state machine and the
//!   producer's barrier schedule. It cannot name rdkafka or tokio (not its dependencies) and
//!   clippy refuses clock reads in it.
//! - **Kafka glue** (feature `kafka`, on by default) in [`kafka`]: one topic layer for the
//!   compacted control and handoff topics, the [`DkgProducer`] wrapper over rdkafka's
//!   `FutureProducer` (plus a router and an rdkafka `Partitioner` for `BaseProducer` users), and
//!   the [`DkgConsumer`] rebalancer that keeps each key's records in order when an assignment
//!   changes. Metrics go to a caller-supplied `prometheus::Registry`.
//!
//! # Data flow
//!
//! ```text
//!             records (keys)                                     records (keys)
//!  producer ─────────────────▶ data topic (k partitions) ──────▶ DkgConsumer (application)
//!  DkgProducer                        │                                ▲
//!     ▲  current assignment           │ consume, learn (Sketch)        │ assignment history,
//!     │  (lock-free swap)             ▼                                │ barriers, leases
//!     └──────────── control topic ◀── dkg-sampler run ──▶ /metrics     │
//!                   _dkg.assignments   (publishes epochs)         _dkg.handoff
//! ```
//!
//! Before the first assignment, after a retraction, or while an assignment does not match the topic's
//! partition count, producers place keyed records exactly as Kafka's Java producer does
//! ([`kafka_partition`]), so wrapping a producer moves nothing until an assignment exists.
//!
//! # Example: learn, build, look up
//!
//! ```
//! use dkg_partitioner::{DkgConfig, Sketch, kafka_partition};
//!
//! # fn main() -> dkg_partitioner::Result<()> {
//! let partitions = 4;
//! let mut sketch = Sketch::new(&DkgConfig::default(), partitions)?;
//! // One hot key carries half of the stream; 1000 cold keys share the rest.
//! for i in 0..10_000u32 {
//!     if i % 2 == 0 {
//!         sketch.observe(b"hot-customer");
//!     } else {
//!         sketch.observe(format!("customer-{}", i % 1000).as_bytes());
//!     }
//! }
//! let build = sketch.build("orders", 1, 0, None)?;
//! let assignment = build.assignment;
//! let hot = assignment.partition_for(b"hot-customer");
//! assert!(hot < partitions);
//! // The hot key is a heavy hitter with a partition of its own.
//! assert!(assignment.heavy().iter().any(|h| h.key == b"hot-customer" && h.partition == hot));
//! // Cold keys go through the bucket table; every lookup is in range.
//! assert!(assignment.partition_for(b"customer-7") < partitions);
//! // The document is what the sampler publishes on the control topic.
//! let json = assignment.to_json();
//! assert_eq!(dkg_partitioner::Assignment::from_json(&json)?.epoch(), 1);
//! // Kafka's own placement, for comparison (bit-exact with the Java producer).
//! assert!(kafka_partition(b"hot-customer", partitions) < partitions);
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

#[cfg(feature = "kafka")]
pub mod kafka;

// The pure core, under the paths it always had (`dkg_partitioner::assignment::...`, ...).
pub use dkg_core::{assignment, dkg, error, hash, lpt, space_saving};

pub use dkg_core::{
    Assignment, AssignmentParts, BucketHash, Build, Counter, DEFAULT_BUCKET_SEED,
    DEFAULT_LIMITS_DOCUMENT_BYTES, DEFAULT_MU, DEFAULT_MU_FLOOR, DkgConfig, DkgConfigBuilder,
    Error, FORMAT_NAME, FORMAT_VERSION, HeavyKey, KAFKA_MURMUR2_SEED, MAX_ASSIGNMENT_BYTES,
    MAX_EPOCH, Params, Result, Route, Schedule, Sketch, SpaceSaving, StickySchedule, default_mu,
    default_theta, imbalance, kafka_partition, lpt_sticky, lpt_sticky_with_slack, murmur2,
    murmur2_seeded, to_positive,
};
#[cfg(feature = "kafka")]
pub use kafka::{
    ConsumerHooks, ControlTopicReader, DEFAULT_CONTROL_TOPIC, DEFAULT_HANDOFF_TOPIC, DkgConsumer,
    DkgConsumerBuilder, DkgMessage, DkgPartitioner, DkgProducer, DkgProducerBuilder, DkgRouter,
    EPOCH_HEADER, EpochChange, EpochHeader, RejectReason, RouteKind, Routing,
};

/// The README's Rust example (its five-minute path), compiled with the doc tests so that it keeps matching
/// the API; the README's other code blocks are not Rust and are left alone.
#[cfg(all(doctest, feature = "kafka"))]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExample;
