//! `dkg-sampler`: the DKG sidecar and its offline tools.
//!
//! Layout: [`sidecar`] is the long-running service (`run`); [`tools`] holds the offline and operator tools
//! (`simulate`, `inspect`, `retract`, `loadgen`, `consume`, `demo`, `e2e`). Each subcommand's module has `pub struct Args`
//! (clap derive) and `pub fn run(args)`. To add a subcommand: a module, a variant of [`Command`], and one
//! arm in [`main`].

// The clap doc comments are also `--help` texts, which write placeholders as `<topic>`.
#![allow(rustdoc::invalid_html_tags)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

mod cli;
mod serve;
mod shutdown;
mod sidecar;
mod tools;

/// Skew-aware key partitioning for Apache Kafka (DKG, DEBS 2015): learns a topic's key distribution,
/// publishes partition assignments, and simulates DKG offline.
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

#[derive(Debug, Subcommand)]
enum Command {
    /// Compare DKG with Kafka's hash partitioner and the optimum on Zipf streams or key traces.
    Simulate(tools::simulate::Args),
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
    /// Produce Zipf-skewed records through the DKG producer (or a plain one) and show the spread.
    Loadgen(tools::loadgen::Args),
    /// Consume a topic as a consumer group of DkgConsumers with a simulated cost per record, serve
    /// their dkg_consumer_* metrics, and print how the records spread over partitions and members.
    Consume(tools::consume::Args),
    /// Live terminal demo: the same skewed workload through Kafka's hash and through DKG, side by side.
    Demo(tools::demo::Args),
    /// End-to-end benchmark: consumer-group capacity and latency, Kafka's hash vs DKG, on twin topics.
    E2e(tools::e2e::Args),
    /// Soak: the sampler, drifting ordering producers and a consumer group as processes for a long
    /// run, then every record checked (lost, duplicated, misplaced) and each process's memory reported.
    Soak(tools::soak::Args),
}

fn init_tracing(level: Option<&str>) -> anyhow::Result<()> {
    let filter = match level {
        Some(level) => EnvFilter::try_new(level)
            .map_err(|e| anyhow::anyhow!("invalid --log-level {level:?}: {e}"))?,
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| cli::ScrubbedStderr)
        .init();
    Ok(())
}

fn run(cli: Cli) -> anyhow::Result<()> {
    init_tracing(cli.log_level.as_deref())?;
    match cli.command {
        Command::Simulate(args) => tools::simulate::run(args),
        Command::Run(args) => sidecar::run(args).map_err(Into::into),
        Command::Inspect(args) => tools::inspect::run(args).map_err(Into::into),
        Command::Retract(args) => tools::retract::run(args).map_err(Into::into),
        Command::Loadgen(args) => tools::loadgen::run(args).map_err(Into::into),
        Command::Consume(args) => tools::consume::run(args).map_err(Into::into),
        Command::Demo(args) => tools::demo::run(args),
        Command::E2e(args) => tools::e2e::run(args),
        Command::Soak(args) => tools::soak::run(args),
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", cli::scrubbed(&format!("{err:#}")));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
