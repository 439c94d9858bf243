//! `dkg-lab`: the project's lab, tools for us rather than for the people who deploy DKG (they run
//! `dkg-sampler`, the product binary). Each subcommand's module has `pub struct Args` (clap derive) and
//! `pub fn run(args)`: [`simulate`] (DKG vs hashing on synthetic streams or traces, no broker),
//! [`loadgen`] (a skewed workload), [`consume`] (a consumer group of `DkgConsumer`s with a simulated cost
//! per record), [`demo`] (hash vs DKG side by side, live), [`e2e`] (the end-to-end consumer-group
//! benchmark) and [`soak`] (the whole system for a long time, checked afterwards). The tools that need
//! a sidecar start `dkg-sampler run` as a child process ([`children`]); the Kafka flags, the scrubbed
//! log, `/metrics` and the Zipf workload come from the sampler's library (`dkg_sampler`).

// The clap doc comments are also `--help` texts, which write placeholders as `<topic>`.
#![allow(rustdoc::invalid_html_tags)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use dkg_sampler::cli;

mod children;
mod connection;
mod consume;
mod demo;
mod e2e;
mod loadgen;
mod simulate;
mod soak;

/// The async runtime the Kafka-driving tools run on: two worker threads.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// The DKG lab: simulations, load generators, consumer groups, the live demo, the end-to-end benchmark
/// and the soak. The sidecar is `dkg-sampler run`.
#[derive(Debug, Parser)]
#[command(name = "dkg-lab", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// Log filter in tracing's EnvFilter syntax (e.g. `info`, `dkg_lab=debug`). Falls back to
    /// RUST_LOG, then `info`. Logs go to stderr.
    #[arg(long, env = "DKG_LOG", global = true)]
    log_level: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compare DKG with Kafka's hash partitioner and the optimum on Zipf streams or key traces.
    Simulate(simulate::Args),
    /// Produce Zipf-skewed records through the DKG producer (or a plain one) and show the spread.
    Loadgen(loadgen::Args),
    /// Consume a topic as a consumer group of DkgConsumers with a simulated cost per record, serve
    /// their dkg_consumer_* metrics, and print how the records spread over partitions and members.
    Consume(consume::Args),
    /// Live terminal demo: the same skewed workload through Kafka's hash and through DKG, side by side.
    Demo(demo::Args),
    /// End-to-end benchmark: consumer-group capacity and latency, Kafka's hash vs DKG, on twin topics.
    E2e(e2e::Args),
    /// Soak: the sampler, drifting ordering producers and a consumer group as processes for a long
    /// run, then every record checked (lost, duplicated, misplaced) and each process's memory reported.
    Soak(soak::Args),
}

fn run(cli: Cli) -> anyhow::Result<()> {
    cli::init_tracing(cli.log_level.as_deref())?;
    match cli.command {
        Command::Simulate(args) => simulate::run(args),
        Command::Loadgen(args) => loadgen::run(args).map_err(Into::into),
        Command::Consume(args) => consume::run(args).map_err(Into::into),
        Command::Demo(args) => demo::run(args),
        Command::E2e(args) => e2e::run(args),
        Command::Soak(args) => soak::run(args),
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
}
