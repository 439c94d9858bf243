//! Kafka glue (feature `kafka`): the control topic, the DKG producer wrapper and its metrics, and
//! the consumer-side rebalancer.
//!
//! # Design
//!
//! DKG (Rivetti, Querzoni, Anceaume, Busnel, Sericola: "Efficient Key Grouping for Near-Optimal
//! Load Balancing in Stream Processing Systems", DEBS 2015) splits placement into a learner and a
//! cheap per-record lookup. In Kafka the learner is `dkg-sampler`, the lookup runs inside every
//! producer, and the two meet on a compacted **control topic** ([`control`]): key = data topic,
//! value = the [`Assignment`](crate::Assignment) JSON, tombstone = retract.
//!
//! ```text
//!  dkg-sampler ──publish_assignment──▶ _dkg.assignments (1 partition, compacted)
//!                                            │ read to the end at build, then live
//!                                            ▼  (consumer, fetch.wait.max.ms=100)
//!                          ┌──── control task: validate (AssignmentBook) ─▶ ArcSwapOption<Assignment>
//!  DkgProducer / DkgRouter ┤                                                   per topic
//!                          └──── metadata task: partition counts every 5 s ─▶ ArcSwap<PartitionView>
//!                                            │
//!  send(record) ── route(topic, key): lock-free loads + O(1) lookup ──▶ record.partition, dkg-epoch
//!                                            ▼
//!            ThreadedProducer on DeliveryContext (idempotent, acks=all; every delivery report
//!            seen, counted per epoch for an ordering producer's markers)
//! ```
//!
//! # Guarantees
//!
//! - **Same placement as Kafka until told otherwise.** Before a topic's first assignment, after a
//!   tombstone, and whenever the assignment's partition count differs from the topic's current one,
//!   keyed records go to `toPositive(murmur2(key)) % partitions`
//!   ([`kafka_partition`](dkg_core::kafka_partition)), the Java producer's placement, bit for bit.
//!   Wrapping an existing Java-compatible producer therefore moves nothing until an assignment
//!   exists. (librdkafka's own default, `consistent_random`, is CRC32-based; the wrapper does not
//!   reproduce it.)
//! - **Only existing partitions.** A partition chosen by an assignment is used only if the
//!   assignment was built for the topic's current partition count, as last read from the broker by
//!   the producer's own client (so librdkafka knows the partition too). Counts are refreshed every
//!   5 s; until a topic's count is known, records go to librdkafka's partitioner
//!   (`murmur2_random`, same function).
//! - **Bad control records change nothing** (see [`control`]): rejected, logged, counted in
//!   `dkg_producer_assignments_rejected_total{topic,reason}`; the last good assignment stays.
//! - **Fast adoption.** A publication is in effect in running producers typically within 100-200 ms
//!   (one fetch wait plus the swap); the integration tests hold it under 1 s at p99.
//! - **Hot path**: never blocks, never panics, allocates only on a topic's first record. Delivery
//!   is rdkafka's: with the defaults (idempotence, `acks=all`) nothing is lost or duplicated by
//!   retries.
//! - **Epoch header.** An ordering producer ([`EpochHeader::Auto`](crate::EpochHeader::Auto) resolves to
//!   [`EpochHeader::Moved`](crate::EpochHeader::Moved)) stamps `dkg-epoch: <epoch>` ([`EPOCH_HEADER`]) on records of keys
//!   whose partition changed in an epoch switch, only inside the switch's **stamp window**: until
//!   every consumer group following the topic has settled the switch (their progress on the
//!   handoff topic says so), at most [`ProducerConfig::stamp_window`](crate::ProducerConfig::stamp_window) (`docs/spec.md` 9.2.2).
//!   Those are the records the consumer-side rebalancer may have to hold back; after the window
//!   records carry no header. Other producers stamp nothing by
//!   default (a consumer cannot use their epochs, and headers cost librdkafka per-record
//!   allocations). [`EpochHeader::All`](crate::EpochHeader::All) stamps every record an assignment placed,
//!   [`EpochHeader::Off`](crate::EpochHeader::Off) none.
//!
//! # What is here
//!
//! The producer, router and consumer types are at the crate root (its "Which type to use"). This
//! module holds the rest: [`control`] ([`control::ensure_control_topic`],
//! [`control::publish_assignment`], [`control::retract_assignment`],
//! [`control::ControlTopicReader`] for publishers and tools), [`topic`] (creates, checks and reads
//! every topic, data topics of tools and tests too), [`handoff`] (the ordering protocol's topic),
//! [`metrics`], [`redact`] (settings shown without their secrets) and the rdkafka adapters
//! ([`DkgProducerContext`], [`DeliveryContext`]).
//!
//! The pure parts (header and handoff codecs, the assignment book, the consumer's state machine,
//! the lease schedule and marker ends) are in the `dkg-protocol` crate; the modules here move bytes between
//! rdkafka and them. The layering and where each rule lives: `docs/architecture.md`.
//!
//! [`Producer`]: rdkafka::producer::Producer

use std::time::Duration;

/// Default limit of a builder's `build` (the router's, the producer's and the consumer's):
/// reading the control and handoff topics to their ends, ensuring them, the first metadata.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) mod consumer;
pub mod control;
pub(crate) mod delivery;
pub mod handoff;
pub mod metrics;
mod ordering;
pub(crate) mod producer;
pub mod redact;
pub(crate) mod router;
pub mod topic;

// What the crate root does not list. The producer, router and consumer types a user names are at
// the root (`dkg_partitioner::DkgProducer`, ...), each under that one path; the control and
// handoff topics' items under `control::`, `handoff::`, `topic::`.
pub use consumer::{DEFAULT_MAX_HELD_RECORDS, DkgContext, NoHooks, uses_consumer_group_protocol};
pub use delivery::DeliveryContext;
pub use producer::{DEFAULT_STAMP_WINDOW, producer_config};
pub use router::{DkgProducerContext, EPOCH_HEADER, PartitionCountSource, epoch_of, stamp_epoch};
