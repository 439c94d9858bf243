//! `dkg-sampler run`: the sidecar (this folder), which learns a live topic's key skew and publishes DKG
//! assignments.
//!
//! # Data flow
//! ```text
//!  topic T ──(consumer group dkg-sampler.T)──> consume thread ──observe──> Window (decayed Sketch)
//!                                                   │ snapshot every interval
//!                                                   v
//!  _dkg.sketches <──ship── driver ──(leader = owner of partition 0)──> merge peers' windows
//!       │                                                                  │ build (lpt_sticky on current)
//!       └──────────────> peers' windows ───────────────────────────────────┤ predict current vs fresh
//!                                                                          v decide (hysteresis)
//!  _dkg.assignments <──transaction (transactional.id dkg-sampler.T)── publish epoch max+1
//!       └──read_committed──> ControlView (current assignment, max epoch) ──> /assignment, decisions
//! ```
//!
//! Module map: [`settings`] (the flags and their validation), [`startup`] (connecting, with backoff, and
//! shutting down), [`metadata`] (the data topic's partition count), [`interval`] (one interval: measure -> merge -> decide -> publish; its arithmetic in [`calc`]), [`window`] (the
//! learning window: decay vs ring, sampling), [`ingest`] (the hot loop consuming the data topic),
//! [`fraction`] (`--read-fraction`: which chunks of the log it reads, and their weights),
//! [`decide`] (hysteresis), [`misplaced`] (records a producer placed elsewhere), [`publish`] (transactions, fencing, epochs), [`cluster`] (several
//! instances, mergeable sketches), [`metrics`] and [`http`] (Prometheus and the endpoints).
//!
//! References: DKG (Rivetti, Querzoni, Anceaume, Busnel, Sericola, DEBS 2015), SpaceSaving (Metwally,
//! Agrawal, El Abbadi, ICDT 2005), mergeable summaries (Agarwal et al., PODS 2012), LPT (Graham 1969).
//!
//! # Operations
//! Every flag also reads a `DKG_*` environment variable. An unreachable broker or a missing topic is
//! reported and retried with capped exponential backoff (never a crash). SIGTERM/SIGINT: the current
//! interval's publish (a whole transaction) finishes, the consumer commits its offsets and leaves the
//! group, the sketch is retracted, producers flush; a second signal exits at once.

mod calc;
pub mod cluster;
pub mod decide;
pub mod fraction;
pub mod http;
pub mod ingest;
mod interval;
mod metadata;
pub mod metrics;
pub mod misplaced;
pub mod publish;
mod settings;
mod startup;
#[cfg(test)]
mod stationary;
pub mod window;

use std::sync::Arc;

use rdkafka::error::KafkaError;
use tokio::sync::watch;

use self::http::{Health, HttpState};
use self::metrics::SamplerMetrics;
pub use self::settings::Args;
use self::settings::Settings;

/// Errors of `dkg-sampler run`.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A flag is out of range.
    #[error("invalid --{flag}: {reason}")]
    InvalidArgument {
        /// The flag (without dashes).
        flag: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A Kafka client call failed.
    #[error("{what}: {source}")]
    Kafka {
        /// What the sampler was doing.
        what: String,
        /// The client's error.
        #[source]
        source: KafkaError,
    },
    /// Setting up failed (port taken, misconfigured topic, ...).
    #[error("{0}")]
    Setup(String),
    /// `--once` could not publish.
    #[error("--once: {0}")]
    Once(String),
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Run the sidecar until SIGTERM/SIGINT (or after one interval with `--once`).
pub fn run(args: Args) -> Result<(), RunError> {
    let settings = Settings::from_args(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("dkg-sampler")
        .build()
        .map_err(|e| RunError::Setup(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(main_task(settings))
}

async fn main_task(s: Settings) -> Result<(), RunError> {
    let (stop_tx, mut stop) = watch::channel(false);
    crate::shutdown::spawn_signal_handler(
        stop_tx.clone(),
        "finishing the current interval, committing offsets, shutting down",
    );

    let registry = prometheus::Registry::new();
    let metrics = SamplerMetrics::new(&registry, &s.args.cluster.topic, s.args.weight)
        .map_err(|e| RunError::Setup(format!("registering metrics: {e}")))?;
    let http = Arc::new(HttpState::new(
        metrics.clone(),
        Health {
            state: "starting",
            message: None,
            topic: s.args.cluster.topic.clone(),
            group_id: s.group_id.clone(),
            member_id: s.member_id.clone(),
            role: "member",
            publisher: if s.args.dry_run { "dry-run" } else { "standby" },
            partitions: 0,
            owned: vec![],
            members: 0,
            intervals: 0,
            epoch: 0,
            publishes: 0,
            last_interval_ms: 0,
            interval_ms: u64::try_from(s.interval.as_millis()).unwrap_or(u64::MAX),
            weight: s.args.weight.as_str(),
            warning: None,
        },
    ));
    let server = http::serve(s.args.metrics_addr, Arc::clone(&http), stop.clone()).await?;
    // Validated by Settings::from_args already; secrets shown as <redacted>.
    let kafka_config = s
        .args
        .cluster
        .kafka
        .describe()
        .map_err(|e| settings::invalid("kafka-config", e.to_string()))?;
    tracing::info!(
        topic = %s.args.cluster.topic,
        group_id = %s.group_id,
        member_id = %s.member_id,
        transactional_id = %s.transactional_id,
        bootstrap_servers = %s.args.cluster.bootstrap_servers,
        kafka_config = %kafka_config,
        interval_secs = s.args.interval_secs,
        dry_run = s.args.dry_run,
        once = s.args.once,
        "dkg-sampler run starting"
    );

    let result = startup::run_sampler(&s, &http, &mut stop).await;
    let _ = stop_tx.send(true);
    http.update_health(|h| h.state = "stopping");
    let _ = server.await;
    match &result {
        Ok(()) => tracing::info!("dkg-sampler run stopped"),
        Err(e) => tracing::error!("dkg-sampler run failed: {e}"),
    }
    result
}
