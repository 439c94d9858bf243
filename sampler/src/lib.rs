//! `dkg-sampler`'s code as a library: the sidecar ([`sidecar`], `dkg-sampler run`), the operator tools
//! ([`tools`]: `inspect`, `retract`) and what the lab's binary (`lab/`, `dkg-lab`: simulate, loadgen,
//! consume, demo, e2e, soak) shares with them: the Kafka flags and the scrubbed log ([`cli`]), the
//! `/metrics` server ([`serve`]), graceful shutdown ([`shutdown`]) and the Zipf workload ([`workload`]).
//! The binary itself is `src/main.rs`. Not a published API: the lab is its only other user.

// The clap doc comments are also `--help` texts, which write placeholders as `<topic>`.
#![allow(rustdoc::invalid_html_tags)]
// The module docs map private modules too: this library is the binaries' code, read (and checked in CI) with
// `--document-private-items`, not an API.
#![allow(rustdoc::private_intra_doc_links)]

pub mod cli;
pub mod serve;
pub mod shutdown;
pub mod sidecar;
pub mod tools;
pub mod workload;
