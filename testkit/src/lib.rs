//! Helpers shared by the integration tests and benches of `dkg-partitioner` and `dkg-sampler`, so each
//! is written once:
//!
//! - [`broker`] (feature `kafka`): the real single-node broker that `scripts/kafka start` runs. A
//!   missing broker FAILS the test with a clear message ([`broker::bootstrap`] panics); nothing here
//!   skips. Unique topic names, topic creation through the partitioner's topic layer.
//! - [`cluster`] (feature `kafka`): the 3-broker cluster of `scripts/kafka cluster` for the fault
//!   tests, started once per test binary; brokers killed, stopped and started by number.
//! - [`sasl`] (feature `kafka`): the SASL/SCRAM broker of `scripts/kafka sasl` with ACLs enforced,
//!   for the least-privilege tests: SCRAM users, ACL grants, the documented ACL set of every role.
//! - [`fixtures`]: valid `Assignment`s and their parts for tests.
//! - [`send`] (feature `kafka`): producing with a bounded window of deliveries in flight.
//! - [`process`]: child processes with their output in a log file (printed when a test fails), free
//!   local ports, a minimal HTTP GET, polling with a deadline.
//!
//! Test-only (`publish = false`): the helpers panic instead of returning errors, which is what a test
//! wants.

#[cfg(feature = "kafka")]
pub mod broker;
#[cfg(feature = "kafka")]
pub mod cluster;
pub mod fixtures;
pub mod process;
#[cfg(feature = "kafka")]
pub mod sasl;
#[cfg(feature = "kafka")]
pub mod send;
