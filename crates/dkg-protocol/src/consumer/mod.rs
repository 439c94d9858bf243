//! The consumer side of ordering-safe migration, without Kafka: the state machine ([`core`], with
//! [`hold`], [`history`], [`progress`], [`split`] and the fast path's [`lane`]) that implements the
//! consumer's rules C1-C19 of `docs/spec.md` section 9.3. The protocol, its guarantee and why it
//! holds are there (9.4); the producer side's pure parts are [`crate::lease`] and
//! [`crate::marker`]. The Kafka glue's `DkgConsumer` moves records between rdkafka and [`core`].
//! Times enter as arguments (`now`, a [`Monotonic`] reading, and `now_ms`, the wall clock): nothing
//! here reads a clock.
//!
//! # Where each rule lives
//!
//! | rule | what | code |
//! |---|---|---|
//! | C1 | a record's epoch: its last well-formed `dkg-epoch` | [`crate::headers::epoch_of`] (read by the glue) |
//! | C2 | leases: the `max_lease` clamp, who is awaited | [`core::Core::on_lease`], [`crate::handoff::Lease::awaited_for`] |
//! | C3 | markers: the latest per producer, rejects | [`core::Core::on_marker`] |
//! | C4, C5 | a marker reached, then passed (also partially) | [`progress::PartitionProgress`] (`on_marker`, `arrived`, `recheck`) |
//! | C6 | drained | [`progress::PartitionProgress::drained`] |
//! | C7 | commit with the metadata, then announce | [`core::Core::snapshot`], [`core::Core::committed`], [`progress::CommitMeta`] |
//! | C8, C9, C10 | held records, their release order, unstamped records | [`core::Core::on_record`], [`hold`], [`history`] (homes per epoch) |
//! | C11, C12 | skip rules after a change of owner | [`progress::PartitionProgress::skip`] |
//! | C13 | pause, resume, stall timeout | [`core::CoreConfig::stall_timeout`] and the core's flow control |
//! | C14-C18 | split keys | [`split`] |
//! | C19 | unknown epochs | [`core::CoreConfig::unknown_epoch_wait`] |
//!
//! The glue's defaults: `unknown_epoch_wait` 10 s, `max_lease` 120 s (4 x the producers' default
//! lease of 30 s), `stall_timeout` 5 s. A deterministic simulation in the tests (`core.rs`, module
//! `simulation`) checks order, exclusivity, no loss and no stall over thousands of random
//! interleavings of producers, members, commits and crashes; it is the evidence for 9.4. The
//! standard pattern for split keys, a partial aggregate per partition merged downstream, is
//! `partitioner/examples/split_aggregates/`.

/// A reading of the caller's monotonic clock: the time since an origin of its choosing (the glue
/// uses its process start). Hold times and stall timeouts are differences of two readings; nothing
/// in this crate reads a clock, the tests start from [`Duration::ZERO`](std::time::Duration::ZERO).
pub type Monotonic = std::time::Duration;

pub mod core;
pub mod history;
pub mod hold;
pub mod lane;
pub mod progress;
pub mod split;
