//! The operator and offline tools, one module per subcommand: [`simulate`] (DKG vs hashing on synthetic
//! streams or traces, no broker), [`inspect`] (print a topic's current assignment), [`retract`] (take it off the control topic), [`loadgen`] (produce a
//! skewed workload), [`consume`] (a consumer group of `DkgConsumer`s with a simulated cost per record) and
//! [`demo`] (hash vs DKG side by side, live) [`e2e`] (the end-to-end consumer-group benchmark) and [`soak`] (the whole system for a long time, checked afterwards); [`workload`] is the Zipf key generator they share. The
//! sidecar itself is [`crate::sidecar`].

pub mod children;
pub mod consume;
pub mod demo;
pub mod e2e;
pub mod inspect;
pub mod loadgen;
pub mod retract;
pub mod simulate;
pub mod soak;
pub mod workload;
