//! The operator tools, one module per subcommand: [`inspect`] (print a topic's current assignment) and
//! [`retract`] (take it off the control topic). The sidecar itself is [`crate::sidecar`]; the lab's
//! tools (simulate, loadgen, consume, demo, e2e, soak) are the `dkg-lab` binary (`lab/`).

pub mod inspect;
pub mod retract;
