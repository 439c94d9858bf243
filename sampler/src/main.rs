//! `dkg-sampler`: the DKG sidecar and its operator tools, the binary users deploy.
//!
//! Layout (in the library, `src/lib.rs`): `sidecar` is the long-running service (`run`); `tools` holds
//! the operator tools (`inspect`, `retract`). Each subcommand's module has `pub struct Args` (clap derive)
//! and `pub fn run(args)`. To add a subcommand: a module, a variant of [`Command`], and one arm in
//! [`run`]. The lab's tools (simulate, loadgen, consume, demo, e2e, soak) are the `dkg-lab` binary
//! (`lab/`), so their dependencies (plotters, a font, indicatif, rand_distr) stay out of this one.

// The clap doc comments are also `--help` texts, which write placeholders as `<topic>`.
#![allow(rustdoc::invalid_html_tags)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use dkg_sampler::{cli, sidecar, tools};

/// Skew-aware key partitioning for Apache Kafka (DKG, DEBS 2015): learns a topic's key distribution,
/// publishes partition assignments (`run`), and shows or retracts them (`inspect`, `retract`).
#[derive(Debug, Parser)]
#[command(name = "dkg-sampler", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// Log filter in tracing's EnvFilter syntax (e.g. `info`, `dkg_sampler=debug`). Falls back to
    /// RUST_LOG, then `info`. Logs go to stderr.
    #[arg(long, env = "DKG_LOG", global = true)]
    log_level: Option<String>,

    #[command(subcommand)]
    command: Command,
}

// `run`'s flags are many and the others' few: the enum is built once, so its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// The sidecar: learn a live topic's key skew, publish DKG assignments, serve Prometheus metrics.
    ///
    /// Consumes the topic in its own consumer group, keeps a decayed window of key frequencies
    /// (SpaceSaving + bucket counters), and every interval builds a migration-aware assignment for the
    /// topic's current partition count. Publishes (transactionally: one publisher per topic) when there is
    /// none yet, or when the current one's predicted imbalance exceeds --imbalance-threshold and a fresh
    /// one improves it by more than --improvement-margin. Instances with the same --group-id share the
    /// partitions and ship their windows to --sketches-topic; the owner of partition 0 merges and
    /// publishes. Serves /metrics (Prometheus), /assignment and /healthz on --metrics-addr. Every flag
    /// also reads the DKG_* variable shown.
    Run(sidecar::Args),
    /// Print a topic's current assignment from the control topic as JSON.
    Inspect(tools::inspect::Args),
    /// Retract a topic's assignment on the control topic (producers return to Kafka's placement):
    /// a tombstone, or with --control-format v2 a retraction document that keeps the epoch.
    Retract(tools::retract::Args),
}

fn run(cli: Cli) -> anyhow::Result<()> {
    cli::init_tracing(cli.log_level.as_deref())?;
    match cli.command {
        Command::Run(args) => sidecar::run(args).map_err(Into::into),
        Command::Inspect(args) => tools::inspect::run(args).map_err(Into::into),
        Command::Retract(args) => tools::retract::run(args).map_err(Into::into),
    }
}

fn main() -> ExitCode {
    cli::exit_code(run(Cli::parse()))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }

    /// The product binary carries the sidecar and the operator's tools only; the lab is `dkg-lab`.
    #[test]
    fn only_product_commands() {
        let names: Vec<String> = super::Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_owned())
            .collect();
        assert_eq!(names, ["run", "inspect", "retract"]);
    }
}
