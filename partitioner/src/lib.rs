//! Distribution-aware Key Grouping (DKG) for Apache Kafka: skew-aware partitioning that keeps every key
//! on one partition.
//!
//! Kafka's default partitioner hashes keys, so with skewed keys the partitions that receive the hot keys
//! carry far more records than the others. DKG (Rivetti, Querzoni, Anceaume, Busnel, Sericola, "Efficient
//! Key Grouping for Near-Optimal Load Balancing in Stream Processing Systems", ACM DEBS 2015) learns the
//! key distribution, pins the heavy keys and hashes the others into many small buckets, and places heavy
//! keys and buckets on partitions with LPT. Every record of a key still goes to one partition. The
//! learner runs in the `dkg-sampler` sidecar, which publishes each [`Assignment`] on a control topic;
//! the types here follow it.
//!
//! # Which type to use
//!
//! | you have | use | built by | settings |
//! |---|---|---|---|
//! | a `FutureProducer` | [`DkgProducer`]: the same `send`/`send_result` (its own [`DeliveryFuture`]) | [`DkgProducerBuilder`] | [`ProducerConfig`], [`EpochHeader`] |
//! | a `BaseProducer` / `ThreadedProducer` | [`DkgRouter`]: `router.route(topic, key).apply(record)` ([`Routing`], [`RouteKind`]), or [`DkgPartitioner`] as librdkafka's partitioner | [`DkgRouterBuilder`] | [`RouterConfig`] |
//! | a `StreamConsumer` that must keep each key's records in order across an epoch switch | [`DkgConsumer`]: `recv` ([`DkgMessage`]) or `recv_borrowed` ([`DkgRecord`]); its producers opt in with [`DkgProducerBuilder::ordering`] | [`DkgConsumerBuilder`] | [`ConsumerConfig`], [`ConsumerHooks`] ([`EpochChange`], [`SplitChange`]) |
//!
//! Every fallible call returns this crate's [`Result`] ([`Error`]). The assignment a producer routes
//! by is an [`Assignment`] ([`DkgRouter::assignment`]). Everything else (the control and handoff
//! topics, metrics, the rdkafka adapters) is in [`kafka`]; the DKG algorithm itself (the learner,
//! hashing, LPT) is the `dkg-kafka-core` crate, the protocol's pure rules the `dkg-kafka-protocol` crate
//! (`docs/architecture.md` maps the layers).
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use dkg_kafka::{DkgConsumer, DkgProducer};
//! use rdkafka::ClientConfig;
//! use rdkafka::producer::FutureRecord;
//!
//! # async fn run() -> dkg_kafka::Result<()> {
//! let mut config = ClientConfig::new();
//! config.set("bootstrap.servers", "127.0.0.1:9092");
//! // The one-line change: a FutureProducer becomes a DkgProducer. `ordering(true)` makes it take
//! // part in the protocol that lets a DkgConsumer keep each key's records in order.
//! let producer = DkgProducer::builder(config.clone())
//!     .topics(["orders"])
//!     .ordering(true)
//!     .build()
//!     .await?;
//! let record = FutureRecord::to("orders").key("customer-7").payload("paid");
//! producer
//!     .send(record, Duration::from_secs(5))
//!     .await
//!     .map_err(|(e, _)| e)?;
//! producer.close().await?;
//!
//! config.set("group.id", "billing");
//! let mut consumer = DkgConsumer::builder(config).topic("orders").build().await?;
//! let message = consumer.recv().await?;
//! assert_eq!(message.topic(), "orders");
//! # Ok(())
//! # }
//! ```
//!
//! Before the first assignment, after a retraction, or while an assignment does not match the
//! topic's partition count, producers place keyed records exactly as Kafka's Java producer does, so
//! wrapping a producer moves nothing until an assignment exists.
//!
//! # Design
//!
//! Three layers, each a crate, with a wall between them that the compiler checks:
//!
//! - **`dkg-kafka-core`**, the pure core (no I/O, no clock, no rdkafka): hashing, Space-Saving, LPT, the
//!   learner and the assignment document with its O(1) lookup. With `default-features = false`
//!   this crate is only its [`Assignment`], [`Error`] and [`Result`].
//! - **`dkg-kafka-protocol`**, the handoff protocol without I/O: the `dkg-*` header and handoff record
//!   codecs, the control topic's assignment book, the consumer's ordering state machine and the
//!   producer's lease schedule and marker ends (`docs/spec.md` section 9).
//! - **Kafka glue** (feature `kafka`, on by default): the types above and [`kafka`]. Metrics go to
//!   a caller-supplied `prometheus::Registry`.
#![forbid(unsafe_code)]

#[cfg(feature = "kafka")]
pub mod kafka;

// The core's modules under short names for the glue (`crate::hash::...`); not re-exported: their
// public paths are `dkg_kafka_core::...`.
#[cfg(feature = "kafka")]
use dkg_kafka_core::{assignment, error, hash};

pub use dkg_kafka_core::{Assignment, Error, Result};

#[cfg(feature = "kafka")]
pub use kafka::consumer::{
    ConsumerConfig, ConsumerHooks, DkgConsumer, DkgConsumerBuilder, DkgMessage, DkgRecord,
    EpochChange, SplitChange,
};
#[cfg(feature = "kafka")]
pub use kafka::delivery::DeliveryFuture;
#[cfg(feature = "kafka")]
pub use kafka::producer::{DkgProducer, DkgProducerBuilder, EpochHeader, ProducerConfig};
#[cfg(feature = "kafka")]
pub use kafka::router::{
    DkgPartitioner, DkgRouter, DkgRouterBuilder, RouteKind, RouterConfig, Routing,
};

/// The README's Rust example (its five-minute path), compiled with the doc tests so that it keeps matching
/// the API; the README's other code blocks are not Rust and are left alone.
#[cfg(all(doctest, feature = "kafka"))]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExample;
