//! `dkg-lab e2e`: the end-to-end benchmark (issue 16, item 1). Twin topics get the same Zipf
//! workload, one through Kafka's hash (a plain producer, `partitioner=murmur2_random`, idempotent,
//! `acks=all`) and one through DKG (the [`DkgProducer`](dkg_partitioner::DkgProducer) with its defaults, following an assignment
//! that the learner built from a prefix of the same stream and that was published on the control
//! topic with the library's publish code). Each topic is consumed by a group with one member per
//! partition ([`group`]), each member a service of capacity `--member-capacity-rps` (modelled by
//! waiting, not CPU: on a small machine a busy-wait would measure the machine, not the partitioning).
//!
//! Measured, with the steps of the two groups interleaved:
//! - (a) each group's capacity: the highest offered rate at which no member's lag keeps growing,
//!   by bisection between one member's capacity (always sustainable) and 1.05x the group's total
//!   (never). A step offers a rate for `--step-secs` after the backlog of the previous one
//!   drained; it is sustained when every member kept up: for each partition, the least-squares
//!   slope of its lag (records sent to it and not yet processed) over the step's last two thirds is
//!   at most `--lag-slope-max-ratio` x one member's capacity per second, or its lag at the end is at
//!   most what that slope would have accumulated over the step (the member caught up: a transient
//!   stall of the shared machine is no overload; a real overload fails both). Per member, because a
//!   group's capacity is the highest rate at which no member falls behind (`drive::sustained`).
//! - (b) end-to-end latency (CreateTime to processed) p50/p99/max at 70% of the hash group's
//!   capacity, which both carry, in `--latency-rounds` alternating rounds (the DKG/hash p99 ratio is
//!   the median of the rounds' ratios, with min and max: the machine is shared), also for the
//!   worst partition's p99 (the highest p99 of one partition: what the keys of the busiest member
//!   see, since a hot partition's records are a minority of the group's 1%), and (c) over `--overload-secs` at 70% of DKG's capacity, where the
//!   hash group falls behind (latencies of the records processed within the window; its backlog at
//!   the end is reported too).
//!
//! Every step checks that the producer delivered the offered rate (at least `--min-delivered-ratio`
//! of it, acknowledged), so the broker and the box are never the bottleneck unnoticed: a step that
//! falls short fails the run (`--no-pace-check` only reports it: for tests of the tool, whose verdict
//! must not hang on the machine's pace). The predicted limit of the capacity ratio is
//! `(1 + hash imbalance) / (1 + key-grouping bound)` (DKG paper, DEBS 2015; `shared/paper-notes.md`),
//! with the imbalance `max/mean - 1` of the hash topic's per-partition counts of this run and the bound
//! `max(1, k * p1) - 1` from the measured share `p1` of the hottest key.
//!
//! Output: a table on stdout, `e2e-zipf<a>-p<k>.json` and `.png` (latency against offered rate) in
//! `--out-dir`. `scripts/e2e` starts the local broker and runs the grid.

mod drive;
mod group;
mod plot;
mod report;

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, ensure};
use dkg_partitioner::kafka::control::DEFAULT_CONTROL_TOPIC;

use dkg_sampler::cli::KafkaConfigArgs;

/// Arguments of `dkg-lab e2e`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    scripts/e2e                                   # start the local broker, run the grid\n  \
    dkg-lab e2e --bootstrap-servers 127.0.0.1:9092 --zipf 1.0 --partitions 12 --overload-secs 300")]
pub struct Args {
    /// Kafka bootstrap servers (host:port[,host:port...]).
    #[arg(long, env = "DKG_BOOTSTRAP_SERVERS", default_value = "127.0.0.1:9092")]
    pub bootstrap_servers: String,

    /// Extra librdkafka settings for every client.
    #[command(flatten)]
    pub kafka: KafkaConfigArgs,

    /// Zipf exponent of the key distribution (p_i ~ 1 / i^zipf).
    #[arg(long, env = "DKG_E2E_ZIPF", default_value_t = 1.0)]
    pub zipf: f64,

    /// Partitions of each twin topic (and members of each group).
    #[arg(long, env = "DKG_E2E_PARTITIONS", default_value_t = 12, value_parser = clap::value_parser!(u32).range(2..=256))]
    pub partitions: u32,

    /// Distinct keys of the workload.
    #[arg(long, env = "DKG_E2E_KEYS", default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub keys: u32,

    /// How records arrive: `paced` (evenly spaced at the offered rate) or `poisson` (exponential
    /// gaps with the offered rate as their mean, an open-loop load with the bursts of independent
    /// clients; the same seeded sequence for both groups at a given rate).
    #[arg(long, env = "DKG_E2E_ARRIVALS", value_enum, default_value_t = Arrivals::Paced)]
    pub arrivals: Arrivals,

    /// Records per second one group member can process (its simulated service capacity C).
    #[arg(long, env = "DKG_E2E_MEMBER_CAPACITY_RPS", default_value_t = 2_000.0)]
    pub member_capacity_rps: f64,

    /// Length of one capacity step, in seconds.
    #[arg(long, env = "DKG_E2E_STEP_SECS", default_value_t = 12, value_parser = clap::value_parser!(u64).range(2..=3_600))]
    pub step_secs: u64,

    /// Bisection steps per group for the capacity.
    #[arg(long, env = "DKG_E2E_BISECT_STEPS", default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub bisect_steps: u32,

    /// A step is sustained when no partition's lag grows by more than this fraction of one
    /// member's capacity per second (least-squares slope over the step's last two thirds), or the
    /// partition's lag at the end is at most that slope times the step's length.
    #[arg(long, env = "DKG_E2E_LAG_SLOPE_MAX_RATIO", default_value_t = 0.01)]
    pub lag_slope_max_ratio: f64,

    /// Duration of one round of the latency run at 70% of the hash group's capacity (b), in seconds.
    #[arg(long, env = "DKG_E2E_LATENCY_SECS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub latency_secs: u64,

    /// Rounds of (b), hash and DKG alternating; the p99 ratio is reported as the median of the
    /// rounds' ratios with its spread.
    #[arg(long, env = "DKG_E2E_LATENCY_ROUNDS", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub latency_rounds: u32,

    /// Duration of the run at 70% of the DKG group's capacity (c), in seconds (the recorded run
    /// uses 300; the default is a quick look).
    #[arg(long, env = "DKG_E2E_OVERLOAD_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub overload_secs: u64,

    /// Records of the stream's prefix the learner sees before the DKG assignment is published.
    #[arg(long, env = "DKG_E2E_LEARN_RECORDS", default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub learn_records: u64,

    /// Bytes of payload per record.
    #[arg(long, env = "DKG_E2E_VALUE_BYTES", default_value_t = 100)]
    pub value_bytes: usize,

    /// Seed of the key sequence (the same for both topics).
    #[arg(long, env = "DKG_E2E_SEED", default_value_t = 1)]
    pub seed: u64,

    /// A step fails the run when the producer's acknowledged rate is below this fraction of the
    /// offered rate.
    #[arg(long, env = "DKG_E2E_MIN_DELIVERED_RATIO", default_value_t = 0.95)]
    pub min_delivered_ratio: f64,

    /// Record the producer's pace (delivered rate, acknowledgement tail) in the report without
    /// failing a step on it: for runs that check the tool's behaviour, not the machine's pace
    /// (the tests); a benchmark keeps the check on.
    #[arg(long, env = "DKG_E2E_NO_PACE_CHECK")]
    pub no_pace_check: bool,

    /// Longest wait for a backlog to drain between steps, in seconds.
    #[arg(long, env = "DKG_E2E_DRAIN_TIMEOUT_SECS", default_value_t = 180, value_parser = clap::value_parser!(u64).range(1..))]
    pub drain_timeout_secs: u64,

    /// Control topic of the DKG side.
    #[arg(long, env = "DKG_CONTROL_TOPIC", default_value = DEFAULT_CONTROL_TOPIC)]
    pub control_topic: String,

    /// Prefix of the twin topics' and groups' names (`<prefix>-hash-<run id>`, `<prefix>-dkg-<run id>`).
    #[arg(long, env = "DKG_E2E_TOPIC_PREFIX", default_value = "dkg-e2e")]
    pub topic_prefix: String,

    /// Keep the twin topics after the run (by default they are deleted).
    #[arg(long, env = "DKG_E2E_KEEP_TOPICS")]
    pub keep_topics: bool,

    /// Directory for the JSON and the PNG.
    #[arg(long, env = "DKG_E2E_OUT_DIR", default_value = "target/e2e")]
    pub out_dir: PathBuf,
}

/// The arrival process of the offered load (`--arrivals`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Record `n` is due at `n / rate`.
    Paced,
    /// Gaps drawn from an exponential distribution of mean `1 / rate` (a Poisson process).
    Poisson,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    ensure!(
        args.zipf.is_finite() && args.zipf >= 0.0,
        "--zipf must be a finite number >= 0, got {}",
        args.zipf
    );
    ensure!(
        args.member_capacity_rps.is_finite() && args.member_capacity_rps >= 1.0,
        "--member-capacity-rps must be at least 1, got {}",
        args.member_capacity_rps
    );
    ensure!(
        args.lag_slope_max_ratio > 0.0 && args.lag_slope_max_ratio < 1.0,
        "--lag-slope-max-ratio must be in (0, 1), got {}",
        args.lag_slope_max_ratio
    );
    ensure!(
        args.min_delivered_ratio > 0.0 && args.min_delivered_ratio <= 1.0,
        "--min-delivered-ratio must be in (0, 1], got {}",
        args.min_delivered_ratio
    );
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("creating {}", args.out_dir.display()))?;
    let run_id = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    let runtime = crate::runtime().context("starting the async runtime")?;
    let result = runtime.block_on(drive::bench(&args, run_id))?;
    let stem = format!("e2e-zipf{}-p{}", args.zipf, args.partitions);
    let json_path = args.out_dir.join(format!("{stem}.json"));
    std::fs::write(&json_path, serde_json::to_string_pretty(&result)?)
        .with_context(|| format!("writing {}", json_path.display()))?;
    let png_path = args.out_dir.join(format!("{stem}.png"));
    plot::draw(&png_path, &result)?;
    print!("{}", report::table(&result));
    println!("wrote {} and {}", json_path.display(), png_path.display());
    // The runtime's leftover client threads must not hold the exit.
    runtime.shutdown_timeout(Duration::from_secs(5));
    Ok(())
}
