//! The DKG handoff protocol as a pure layer: no I/O, no async runtime, no clock.
//!
//! What producers, consumers and the sampler say to each other, and how each side decides, with
//! the Kafka client left out, so the protocol can be read, tested and simulated on its own (and
//! linked without rdkafka):
//!
//! - [`headers`]: the `dkg-epoch` and `dkg-producer` record headers and their one decimal codec;
//! - [`handoff`]: the handoff topic's keys and values (leases, markers, progress, history) and
//!   their codecs;
//! - [`book`]: the control topic's validation ([`AssignmentBook`](book::AssignmentBook),
//!   [`RejectReason`](book::RejectReason), [`ControlUpdate`](book::ControlUpdate));
//! - [`connection`]: which settings of a user's client configuration the side clients (control and
//!   handoff topics) inherit;
//! - [`consumer`]: the consumer's state machine for ordering-safe migration (core, hold, history,
//!   progress, lanes; rules C1-C19 of `docs/spec.md` 9.3), with its deterministic simulation in
//!   the tests;
//! - [`lease`]: the producer side's leases and which markers are due;
//! - [`marker`]: the producer side's marker ends (acknowledged offsets per partition);
//! - [`window`]: the producer side's stamp windows (how long moved keys' records carry their
//!   epoch: until the consumer groups settled the switch).
//!
//! # The wall
//!
//! This crate depends on `dkg-core`, `serde`, `serde_json` and `ahash` only: it cannot name
//! rdkafka or tokio, so the compiler refuses any I/O here. Reading the clock or sleeping is refused by clippy
//! (`clippy.toml`: `Instant::now`, `SystemTime::now`, `thread::sleep` are disallowed; CI runs clippy
//! with `-D warnings`). Times enter as arguments (`now`, a [`Monotonic`](consumer::Monotonic)
//! reading of the caller's monotonic clock, and `now_ms`, the wall clock), so the tests and the
//! simulation run on made-up time. The Kafka glue in `dkg-partitioner` moves bytes between
//! rdkafka and these types; `docs/architecture.md` shows the layers and where each rule lives.
#![forbid(unsafe_code)]

pub mod book;
pub mod connection;
pub mod consumer;
pub mod handoff;
pub mod headers;
pub mod lease;
pub mod marker;
pub mod window;
