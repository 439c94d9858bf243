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
//!   ([`kafka_partition`](crate::kafka_partition)), the Java producer's placement, bit for bit.
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
//! - **Epoch header.** An ordering producer ([`EpochHeader::Auto`] resolves to
//!   [`EpochHeader::Moved`]) stamps `dkg-epoch: <epoch>` ([`EPOCH_HEADER`]) on records of keys
//!   whose partition changed in an epoch switch, only inside the switch's **stamp window**: until
//!   every consumer group following the topic has settled the switch (their progress on the
//!   handoff topic says so), at most [`ProducerConfig::stamp_window`] (`docs/spec.md` 9.2.2).
//!   Those are the records the consumer-side rebalancer may have to hold back; after the window
//!   records carry no header. Other producers stamp nothing by
//!   default (a consumer cannot use their epochs, and headers cost librdkafka per-record
//!   allocations). [`EpochHeader::All`] stamps every record an assignment placed,
//!   [`EpochHeader::Off`] none.
//!
//! # Which type to use
//!
//! - [`DkgProducer`]: drop-in for `FutureProducer` (same `send`/`send_result`, its own
//!   [`DeliveryFuture`] of the same output, [`Producer`] trait). See `examples/one_line_change.rs`.
//! - [`DkgRouter`]: for `BaseProducer`/`ThreadedProducer`: `router.route(topic, key).apply(record)`
//!   sets the partition and the header; or [`DkgRouter::partitioner`] /
//!   [`DkgRouter::producer_context`] as librdkafka's custom partitioner (no header; librdkafka's
//!   hook, which `FutureProducer` does not honour).
//! - [`control`]: [`ensure_control_topic`], [`publish_assignment`], [`retract_assignment`],
//!   [`ControlTopicReader`] for publishers and tools; [`topic`] creates, checks and reads every
//!   topic (data topics of tools and tests too).
//! - Settings: each builder wraps a plain config struct whose fields document their defaults
//!   ([`RouterConfig`], [`ProducerConfig`], [`ConsumerConfig`]).
//! - [`DkgConsumer`]: a group member that keeps every key's records in order, and
//!   each key with one member at a time, across epoch switches; its producers opt in with
//!   [`DkgProducerBuilder::ordering`]. They coordinate on the compacted handoff
//!   topic ([`handoff`]).
//!
//! The pure parts (header and handoff codecs, the assignment book, the consumer's state machine,
//! the barrier schedule) are in the `dkg-protocol` crate; the modules here move bytes between
//! rdkafka and them. The layering and where each rule lives: `docs/architecture.md`.
//!
//! [`Producer`]: rdkafka::producer::Producer

use std::time::Duration;

/// Default limit of a builder's `build` (the router's, the producer's and the consumer's):
/// reading the control and handoff topics to their ends, ensuring them, the first metadata.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

mod consumer;
pub mod control;
mod delivery;
pub mod handoff;
pub mod metrics;
mod ordering;
mod producer;
mod redact;
mod router;
pub mod topic;

pub use consumer::{
    ConsumerConfig, ConsumerHooks, DEFAULT_MAX_HELD_RECORDS, DkgConsumer, DkgConsumerBuilder,
    DkgContext, DkgMessage, DkgRecord, EpochChange, NoHooks, SplitChange,
    uses_consumer_group_protocol,
};
pub use control::{
    AssignmentBook, ControlRecord, ControlTopicReader, ControlUpdate, DEFAULT_CONTROL_TOPIC,
    RejectReason, connection_config, ensure_control_topic, publish_assignment, publish_generation,
    publish_retraction, publish_value, publisher_config, retract_assignment,
};
pub use delivery::{DeliveryContext, DeliveryFuture};
pub use handoff::{
    BARRIER_HEADER, DEFAULT_HANDOFF_TOPIC, HandoffKey, HandoffWriter, Lease, PRODUCER_HEADER,
    ProducerId, Progress, ensure_handoff_topic,
};
pub use producer::{
    DEFAULT_STAMP_WINDOW, DkgProducer, DkgProducerBuilder, EpochHeader, OrderingMode,
    ProducerConfig, producer_config,
};
pub use redact::{
    MIN_SCRUBBED_LEN, REDACTED, RedactedConfig, is_secret_key, scrub, secret_values, shown_value,
};
pub use router::{
    DkgPartitioner, DkgProducerContext, DkgRouter, DkgRouterBuilder, EPOCH_HEADER,
    PartitionCountSource, RouteKind, RouterConfig, Routing, epoch_of, stamp_epoch,
};
