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
//! Module map: [`window`] (the learning window: decay vs ring, sampling), [`ingest`] (the hot loop consuming
//! the data topic), [`decide`] (hysteresis), [`publish`] (transactions, fencing, epochs), [`cluster`] (several
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

pub mod cluster;
pub mod decide;
pub mod http;
pub mod ingest;
pub mod metrics;
pub mod publish;
pub mod window;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dkg_partitioner::assignment::Assignment;
use dkg_partitioner::dkg::{DEFAULT_MU, DkgConfig, Sketch, imbalance};
use dkg_partitioner::hash::BucketHash;
use dkg_partitioner::kafka::control::{self, DEFAULT_CONTROL_TOPIC};
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaRespErr;
use tokio::sync::watch;

use self::cluster::{DEFAULT_SKETCHES_TOPIC, Peers, ShippedSketch, Shipper};
use self::decide::{Current, Decision, Policy, Situation};
use self::http::{Health, HttpState};
use self::ingest::{Command, ConsumeLoop, ConsumerHandle, Shared};
use self::metrics::SamplerMetrics;
use self::publish::{ControlView, PublishFailure, Publisher, PublisherState};
use self::window::{IntervalSnapshot, RecordSampler, Window};

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

/// Learn a topic's key skew and publish DKG assignments (the sidecar).
///
/// Consumes the topic in its own consumer group, keeps a decayed window of key frequencies (SpaceSaving +
/// bucket counters), and every interval builds a migration-aware assignment for the topic's current
/// partition count. It publishes (transactionally, so one publisher per topic) when there is none yet or
/// when the current one's predicted imbalance exceeds --imbalance-threshold and a fresh one improves it
/// by more than --improvement-margin. Several instances with the same --group-id share the topic's
/// partitions, ship their windows to --sketches-topic, and the owner of partition 0 merges and publishes.
/// Serves /metrics (Prometheus), /assignment and /healthz on --metrics-addr.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Examples:\n  dkg-sampler run --bootstrap-servers 127.0.0.1:9092 --topic orders\n  \
                  dkg-sampler run --bootstrap-servers 127.0.0.1:9092 --topic orders --dry-run --interval-secs 10\n  \
                  DKG_BOOTSTRAP_SERVERS=kafka:9092 DKG_TOPIC=orders dkg-sampler run --once"
)]
pub struct Args {
    /// Kafka bootstrap servers (host:port[,host:port...]).
    #[arg(long, env = "DKG_BOOTSTRAP_SERVERS")]
    pub bootstrap_servers: String,

    /// The data topic to learn and publish assignments for.
    #[arg(long, env = "DKG_TOPIC")]
    pub topic: String,

    /// The compacted control topic assignments are published to (created if missing).
    #[arg(long, env = "DKG_CONTROL_TOPIC", default_value = DEFAULT_CONTROL_TOPIC)]
    pub control_topic: String,

    /// The compacted topic where several sampler instances exchange their windows (created if missing).
    #[arg(long, env = "DKG_SKETCHES_TOPIC", default_value = DEFAULT_SKETCHES_TOPIC)]
    pub sketches_topic: String,

    /// Seconds between decisions (each interval: snapshot the window, build, maybe publish, decay).
    #[arg(long, env = "DKG_INTERVAL_SECS", default_value_t = 30.0)]
    pub interval_secs: f64,

    /// Address of the HTTP server for /metrics, /assignment and /healthz.
    #[arg(long, env = "DKG_METRICS_ADDR", default_value = "127.0.0.1:9464")]
    pub metrics_addr: SocketAddr,

    /// Compute and serve what would be published (metrics, /assignment), publish nothing. Consumes in its
    /// own group (default `dkg-sampler.<topic>.dry-run`), never touches the transactional id.
    #[arg(long, env = "DKG_DRY_RUN")]
    pub dry_run: bool,

    /// Learn for one interval, publish (regardless of hysteresis), exit. Exits non-zero if the interval
    /// held fewer than --min-samples records. Consumes in its own group (`dkg-sampler.<topic>.once`).
    #[arg(long, env = "DKG_ONCE")]
    pub once: bool,

    /// Fraction of the records to observe, in (0, 1]; kept records are weighted back by 1/ratio, so
    /// frequencies stay unbiased (records are chosen at random, not by key).
    #[arg(long, env = "DKG_SAMPLE_RATIO", default_value_t = 1.0)]
    pub sample_ratio: f64,

    /// Consumer group of the sampler instances of this topic [default: dkg-sampler.<topic>].
    #[arg(long, env = "DKG_GROUP_ID")]
    pub group_id: Option<String>,

    /// This instance's id in the sketches topic and client ids [default: <hostname>-<pid>-<random>].
    #[arg(long, env = "DKG_MEMBER_ID")]
    pub member_id: Option<String>,

    /// Transactional id of the publisher; one per topic fences duplicate publishers
    /// [default: dkg-sampler.<topic>].
    #[arg(long, env = "DKG_TRANSACTIONAL_ID")]
    pub transactional_id: Option<String>,

    /// Heavy-hitter threshold as a share of the window, in (0, 1] [default: min(0.25 / k, 0.1)].
    #[arg(long, env = "DKG_THETA")]
    pub theta: Option<f64>,

    /// SpaceSaving error bound as a share of the window, in (0, 1]; memory is ceil(1/epsilon) counters
    /// [default: theta / 2].
    #[arg(long, env = "DKG_EPSILON")]
    pub epsilon: Option<f64>,

    /// Buckets per partition (ceil(mu * k) buckets for the non-heavy keys).
    #[arg(long, env = "DKG_MU", default_value_t = DEFAULT_MU)]
    pub mu: f64,

    /// Seed of the bucket hash (murmur2) [default: the library's].
    #[arg(long, env = "DKG_BUCKET_SEED")]
    pub bucket_seed: Option<u32>,

    /// Factor the window is multiplied by after each interval, in [0, 1): 0.5 = a half-life of one
    /// interval; 0 = the window is the last interval only.
    #[arg(long, env = "DKG_DECAY", default_value_t = 0.5)]
    pub decay: f64,

    /// Republish only when the current assignment's predicted imbalance (max/mean - 1) exceeds this ratio.
    #[arg(long, env = "DKG_IMBALANCE_THRESHOLD", default_value_t = 0.10)]
    pub imbalance_threshold: f64,

    /// ... and a fresh assignment lowers it by more than this ratio (raised automatically to 3 standard
    /// deviations of the sampling noise on small windows).
    #[arg(long, env = "DKG_IMPROVEMENT_MARGIN", default_value_t = 0.05)]
    pub improvement_margin: f64,

    /// Sampled records the window must hold before any decision.
    #[arg(long, env = "DKG_MIN_SAMPLES", default_value_t = 1000)]
    pub min_samples: u64,

    /// Heavy keys exported as dkg_sampler_heavy_key_share_ratio series (0-20).
    #[arg(long, env = "DKG_TOP_N", default_value_t = 10, value_parser = clap::value_parser!(u8).range(0..=20))]
    pub top_n: u8,

    /// Where a new consumer group starts reading the topic.
    #[arg(long, env = "DKG_AUTO_OFFSET_RESET", default_value = "latest", value_parser = ["latest", "earliest"])]
    pub auto_offset_reset: String,

    /// Replication factor for the control and sketches topics when the sampler creates them (-1 = the
    /// broker's default.replication.factor).
    #[arg(long, env = "DKG_REPLICATION_FACTOR", default_value_t = -1, allow_negative_numbers = true)]
    pub replication_factor: i32,

    /// Extra librdkafka settings for every client (security, timeouts), e.g.
    /// `security.protocol=SASL_SSL`; repeat the flag or separate with commas in the variable.
    #[arg(
        long = "kafka-config",
        env = "DKG_KAFKA_CONFIG",
        value_delimiter = ',',
        value_name = "KEY=VALUE"
    )]
    pub kafka_config: Vec<String>,

    /// Cap of the exponential backoff while the broker is unreachable or the topic missing.
    #[arg(long, env = "DKG_MAX_BACKOFF_SECS", default_value_t = 30.0)]
    pub max_backoff_secs: f64,
}

/// Validated settings.
#[derive(Debug, Clone)]
struct Settings {
    args: Args,
    interval: Duration,
    group_id: String,
    member_id: String,
    transactional_id: String,
    dkg: DkgConfig,
    policy: Policy,
    connection: ClientConfig,
    max_backoff: Duration,
    /// Leader by construction (--once, --dry-run: standalone, own group).
    standalone: bool,
}

fn invalid(flag: &'static str, reason: impl Into<String>) -> RunError {
    RunError::InvalidArgument {
        flag,
        reason: reason.into(),
    }
}

fn in_unit(flag: &'static str, v: f64, zero_ok: bool, one_ok: bool) -> Result<(), RunError> {
    let ok =
        v.is_finite() && (v > 0.0 || (zero_ok && v == 0.0)) && (v < 1.0 || (one_ok && v == 1.0));
    if ok {
        Ok(())
    } else {
        Err(invalid(flag, format!("{v} is outside its range")))
    }
}

impl Settings {
    fn from_args(args: Args) -> Result<Self, RunError> {
        if args.topic.is_empty() {
            return Err(invalid("topic", "empty"));
        }
        if !(args.interval_secs.is_finite() && args.interval_secs >= 0.1) {
            return Err(invalid(
                "interval-secs",
                format!("{} (must be >= 0.1)", args.interval_secs),
            ));
        }
        in_unit("sample-ratio", args.sample_ratio, false, true)?;
        in_unit("decay", args.decay, true, false)?;
        if !(args.imbalance_threshold.is_finite() && args.imbalance_threshold >= 0.0) {
            return Err(invalid("imbalance-threshold", "must be >= 0"));
        }
        if !(args.improvement_margin.is_finite() && args.improvement_margin >= 0.0) {
            return Err(invalid("improvement-margin", "must be >= 0"));
        }
        if !(args.max_backoff_secs.is_finite() && args.max_backoff_secs >= 0.1) {
            return Err(invalid("max-backoff-secs", "must be >= 0.1"));
        }
        if args.once && args.dry_run {
            return Err(invalid("once", "cannot be combined with --dry-run"));
        }
        let mut builder = DkgConfig::builder().mu(args.mu);
        if let Some(t) = args.theta {
            builder = builder.theta(t);
        }
        if let Some(e) = args.epsilon {
            builder = builder.epsilon(e);
        }
        if let Some(seed) = args.bucket_seed {
            builder = builder.bucket_hash(BucketHash::Murmur2 { seed });
        }
        let dkg = builder
            .build()
            .map_err(|e| invalid("theta/epsilon/mu", e.to_string()))?;
        let group_id = args.group_id.clone().unwrap_or_else(|| {
            let base = format!("dkg-sampler.{}", args.topic);
            if args.dry_run {
                format!("{base}.dry-run")
            } else if args.once {
                format!("{base}.once")
            } else {
                base
            }
        });
        let member_id = args.member_id.clone().unwrap_or_else(default_member_id);
        if member_id.is_empty() || member_id.contains('/') {
            return Err(invalid("member-id", "must be non-empty and without '/'"));
        }
        let transactional_id = args
            .transactional_id
            .clone()
            .unwrap_or_else(|| format!("dkg-sampler.{}", args.topic));
        let mut connection = ClientConfig::new();
        connection.set("bootstrap.servers", &args.bootstrap_servers);
        connection.set("client.id", format!("dkg-sampler-{member_id}"));
        for kv in &args.kafka_config {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(invalid("kafka-config", format!("{kv:?} is not KEY=VALUE")));
            };
            connection.set(k.trim(), v.trim());
        }
        Ok(Self {
            interval: Duration::from_secs_f64(args.interval_secs),
            group_id,
            member_id,
            transactional_id,
            dkg,
            policy: Policy {
                imbalance_threshold: args.imbalance_threshold,
                improvement_margin: args.improvement_margin,
                min_samples: args.min_samples,
                noise_z: Policy::default().noise_z,
            },
            connection,
            max_backoff: Duration::from_secs_f64(args.max_backoff_secs),
            standalone: args.once || args.dry_run,
            args,
        })
    }
}

fn default_member_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "sampler".to_owned());
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let nonce = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos()))
        ^ std::process::id().rotate_left(16);
    format!("{host}-{}-{:04x}", std::process::id(), nonce & 0xffff)
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

/// Exponential backoff, capped.
#[derive(Debug)]
struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    fn new(max: Duration) -> Self {
        Self {
            next: Duration::from_secs(1).min(max),
            max,
        }
    }

    /// Sleep the next delay; `false` if `stop` fired meanwhile.
    async fn wait(&mut self, stop: &mut watch::Receiver<bool>) -> bool {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        tokio::select! {
            _ = tokio::time::sleep(delay) => true,
            _ = stop.wait_for(|s| *s) => false,
        }
    }
}

/// Why the topic's metadata is not usable.
#[derive(Debug)]
enum TopicProblem {
    Unreachable(String),
    Missing,
    Other(String),
}

async fn topic_partitions(
    admin: &Arc<AdminClient<DefaultClientContext>>,
    topic: &str,
) -> Result<u32, TopicProblem> {
    let admin = Arc::clone(admin);
    let topic = topic.to_owned();
    let res = tokio::task::spawn_blocking(move || {
        admin
            .inner()
            .fetch_metadata(Some(&topic), Duration::from_secs(5))
            .map(|md| {
                md.topics()
                    .iter()
                    .find(|t| t.name() == topic)
                    .map(|t| (t.error(), t.partitions().len()))
            })
    })
    .await
    .map_err(|e| TopicProblem::Other(format!("metadata task: {e}")))?;
    match res {
        Ok(Some((None, n))) if n > 0 => Ok(u32::try_from(n).unwrap_or(u32::MAX)),
        Ok(Some((Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART), _)))
        | Ok(Some((None, _)))
        | Ok(None) => Err(TopicProblem::Missing),
        Ok(Some((Some(e), _))) => Err(TopicProblem::Other(format!("{e:?}"))),
        Err(e) => Err(TopicProblem::Unreachable(e.to_string())),
    }
}

/// Retry `f` with capped exponential backoff until it succeeds (`Some`) or `stop` fires (`None`).
async fn with_backoff<T, F, Fut>(
    what: &str,
    max: Duration,
    stop: &mut watch::Receiver<bool>,
    state: &HttpState,
    mut f: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let mut backoff = Backoff::new(max);
    loop {
        if *stop.borrow() {
            return None;
        }
        match f().await {
            Ok(v) => return Some(v),
            Err(e) => {
                tracing::warn!(
                    "{what}: {e}; retrying in {:.1} s",
                    backoff.next.as_secs_f64()
                );
                state.update_health(|h| {
                    h.state = "waiting";
                    h.message = Some(format!("{what}: {e}"));
                });
                if !backoff.wait(stop).await {
                    return None;
                }
            }
        }
    }
}

async fn main_task(s: Settings) -> Result<(), RunError> {
    let (stop_tx, mut stop) = watch::channel(false);
    crate::shutdown::spawn_signal_handler(
        stop_tx.clone(),
        "finishing the current interval, committing offsets, shutting down",
    );

    let registry = prometheus::Registry::new();
    let metrics = SamplerMetrics::new(&registry, &s.args.topic)
        .map_err(|e| RunError::Setup(format!("registering metrics: {e}")))?;
    let http = Arc::new(HttpState::new(
        metrics.clone(),
        Health {
            state: "starting",
            message: None,
            topic: s.args.topic.clone(),
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
        },
    ));
    let server = http::serve(s.args.metrics_addr, Arc::clone(&http), stop.clone()).await?;
    tracing::info!(
        topic = %s.args.topic,
        group_id = %s.group_id,
        member_id = %s.member_id,
        interval_secs = s.args.interval_secs,
        dry_run = s.args.dry_run,
        once = s.args.once,
        "dkg-sampler run starting"
    );

    let result = run_sampler(&s, &http, &mut stop).await;
    let _ = stop_tx.send(true);
    http.update_health(|h| h.state = "stopping");
    let _ = server.await;
    match &result {
        Ok(()) => tracing::info!("dkg-sampler run stopped"),
        Err(e) => tracing::error!("dkg-sampler run failed: {e}"),
    }
    result
}

async fn run_sampler(
    s: &Settings,
    http: &Arc<HttpState>,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), RunError> {
    let topic = s.args.topic.clone();
    let admin: AdminClient<DefaultClientContext> = control::connection_config(&s.connection)
        .create()
        .map_err(|e| RunError::Kafka {
            what: "creating the admin client".into(),
            source: e,
        })?;
    let admin = Arc::new(admin);

    // 1. The broker and the topic.
    let bootstrap = s.args.bootstrap_servers.clone();
    let Some(partitions) = with_backoff("waiting for the topic", s.max_backoff, stop, http, || {
        let admin = Arc::clone(&admin);
        let topic = topic.clone();
        let bootstrap = bootstrap.clone();
        async move {
            topic_partitions(&admin, &topic).await.map_err(|p| match p {
                TopicProblem::Unreachable(e) => {
                    format!("cannot reach the Kafka broker at {bootstrap}: {e}")
                }
                TopicProblem::Missing => format!("topic {topic:?} does not exist on {bootstrap}"),
                TopicProblem::Other(e) => format!("metadata for topic {topic:?}: {e}"),
            })
        }
    })
    .await
    else {
        return Ok(());
    };
    tracing::info!(topic = %topic, partitions, "topic found");

    // 2. The control topic (and the sketches topic for sampler groups).
    if !s.args.dry_run {
        let name = s.args.control_topic.clone();
        let misconfigured = std::sync::Mutex::new(None);
        let ok = with_backoff(
            "preparing the control topic",
            s.max_backoff,
            stop,
            http,
            || {
                let admin = Arc::clone(&admin);
                let name = name.clone();
                let misconfigured = &misconfigured;
                async move {
                    match control::ensure_control_topic(
                        admin.as_ref(),
                        &name,
                        s.args.replication_factor,
                    )
                    .await
                    {
                        Ok(_) => Ok(()),
                        Err(e @ dkg_partitioner::Error::ControlTopicMisconfigured { .. }) => {
                            *misconfigured
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner) =
                                Some(e.to_string());
                            Ok(())
                        }
                        Err(e) => Err(e.to_string()),
                    }
                }
            },
        )
        .await;
        if ok.is_none() {
            return Ok(());
        }
        if let Some(e) = misconfigured
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            return Err(RunError::Setup(e));
        }
    }
    let clustered = !s.standalone;
    if clustered {
        let name = s.args.sketches_topic.clone();
        let ok = with_backoff(
            "preparing the sketches topic",
            s.max_backoff,
            stop,
            http,
            || {
                let admin = Arc::clone(&admin);
                let name = name.clone();
                async move {
                    cluster::ensure_sketches_topic(admin.as_ref(), &name, s.args.replication_factor)
                        .await
                        .map_err(|e| e.to_string())
                }
            },
        )
        .await;
        if ok.is_none() {
            return Ok(());
        }
    }

    // 3. The control topic view.
    let connection = control::connection_config(&s.connection);
    let view_stop = stop.clone();
    let Some(control_view) = with_backoff(
        "reading the control topic",
        s.max_backoff,
        stop,
        http,
        || {
            let connection = connection.clone();
            let stop = view_stop.clone();
            let control_topic = s.args.control_topic.clone();
            let topic = topic.clone();
            async move {
                ControlView::start(&connection, &control_topic, &topic, stop)
                    .await
                    .map_err(|e| e.to_string())
            }
        },
    )
    .await
    else {
        return Ok(());
    };
    let initial = control_view.state();
    tracing::info!(
        topic = %topic,
        epoch = initial.current.as_ref().map_or(0, |a| a.epoch()),
        max_epoch = initial.max_epoch,
        "read the control topic"
    );

    // 4. The consumer thread.
    let shared = Arc::new(Shared::default());
    let window = Window::new(
        &s.dkg,
        partitions,
        RecordSampler::new(s.args.sample_ratio, rand_seed()),
    )
    .map_err(|e| invalid("theta/epsilon/mu", e.to_string()))?;
    let stats_ms = s.interval.as_millis().clamp(1000, 10_000) as u64;
    let mut consumer_config = ingest::consumer_config(
        &s.connection,
        &s.group_id,
        &s.args.auto_offset_reset,
        stats_ms,
    );
    if s.standalone {
        // --once / --dry-run look at the live stream: never resume from (or store) old offsets.
        consumer_config
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false");
    }
    let (mut consume_loop, consumer) =
        ConsumeLoop::new(&consumer_config, &topic, window, Arc::clone(&shared)).map_err(|e| {
            RunError::Kafka {
                what: format!("creating the consumer of {topic:?}"),
                source: e,
            }
        })?;
    let consumer_thread = std::thread::Builder::new()
        .name("dkg-consume".into())
        .spawn(move || consume_loop.run(None))
        .map_err(|e| RunError::Setup(format!("cannot start the consumer thread: {e}")))?;

    // 5. Cluster plumbing.
    let peers = Arc::new(Peers::default());
    let shipper = if clustered {
        let lookback = s.interval.mul_f64(cluster::FRESH_INTERVALS + 1.0);
        let follow = cluster::follow_sketches(
            connection.clone(),
            s.args.sketches_topic.clone(),
            topic.clone(),
            lookback,
            Arc::clone(&peers),
            stop.clone(),
        );
        tokio::spawn(async move {
            if let Err(e) = follow.await {
                tracing::error!("sketch reader stopped: {e}");
            }
        });
        Some(Shipper::new(&connection, &s.args.sketches_topic)?)
    } else {
        None
    };
    let publisher = if s.args.dry_run {
        Publisher::dry_run(&connection, &s.args.control_topic)
    } else {
        Publisher::new(&connection, &s.args.control_topic, &s.transactional_id)
    };

    let mut driver = Driver {
        s,
        http: Arc::clone(http),
        admin,
        consumer: consumer.clone(),
        shared,
        control: control_view,
        peers,
        shipper,
        publisher,
        partitions,
        partition_window: BTreeMap::new(),
        awaiting_coverage: false,
        caught_up: false,
        uncovered_logged: false,
        dry_current: None,
        last_published: 0,
        publishes: 0,
        intervals: 0,
    };
    if s.args.dry_run {
        driver.dry_current = initial.current.clone();
    }
    let result = driver.run(stop).await;

    // Shutdown: the consumer commits and leaves the group; the sketch is retracted; producers flush on drop.
    consumer.send(Command::Shutdown);
    let joined = tokio::task::spawn_blocking(move || consumer_thread.join()).await;
    if !matches!(joined, Ok(Ok(()))) {
        tracing::error!("the consumer thread ended abnormally");
    }
    if let Some(shipper) = &driver.shipper
        && let Err(e) = shipper
            .retract(&topic, &s.member_id, Duration::from_secs(5))
            .await
    {
        tracing::warn!("could not retract this member's sketch: {e}");
    }
    result
}

fn rand_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ u64::from(std::process::id()).rotate_left(32)
}

/// The per-interval logic.
struct Driver<'a> {
    s: &'a Settings,
    http: Arc<HttpState>,
    admin: Arc<AdminClient<DefaultClientContext>>,
    consumer: ConsumerHandle,
    shared: Arc<Shared>,
    control: ControlView,
    peers: Arc<Peers>,
    shipper: Option<Shipper>,
    publisher: Publisher,
    /// The partition count the window learns for.
    partitions: u32,
    /// Decayed per-partition record counts (leader's view), for the share gauges.
    partition_window: BTreeMap<u32, f64>,
    /// The partition count changed: restart the window once the group consumes every partition.
    awaiting_coverage: bool,
    /// The control topic was read to its end since this instance took the transactional id.
    caught_up: bool,
    /// "Partitions not consumed" was logged for the current gap.
    uncovered_logged: bool,
    /// `--dry-run`: what it would have published last.
    dry_current: Option<Arc<Assignment>>,
    last_published: u64,
    publishes: u64,
    intervals: u64,
}

enum Tick {
    Continue,
    /// `--once` is done.
    Done,
}

impl Driver<'_> {
    fn metrics(&self) -> &SamplerMetrics {
        &self.http.metrics
    }

    async fn snapshot(&self) -> Result<IntervalSnapshot, RunError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if !self.consumer.send(Command::Snapshot {
            decay: self.s.args.decay,
            reply: tx,
        }) {
            return Err(RunError::Setup("the consumer thread stopped".into()));
        }
        match tokio::time::timeout(Duration::from_secs(30), rx).await {
            Ok(Ok(snap)) => Ok(snap),
            Ok(Err(_)) => Err(RunError::Setup("the consumer thread stopped".into())),
            Err(_) => Err(RunError::Setup(
                "the consumer thread did not answer within 30 s".into(),
            )),
        }
    }

    async fn run(&mut self, stop: &mut watch::Receiver<bool>) -> Result<(), RunError> {
        // The first interval starts when the group has given us partitions, so it is a full interval.
        let waited = Instant::now();
        let mut warned = false;
        while self.shared.ownership().generation == 0 {
            if *stop.borrow() {
                return Ok(());
            }
            if !warned && waited.elapsed() > Duration::from_secs(30) {
                tracing::warn!(group_id = %self.s.group_id, "no partitions assigned after 30 s; still waiting for the consumer group");
                warned = true;
            }
            self.http.update_health(|h| {
                h.state = "waiting";
                h.message = Some("joining the consumer group".into());
            });
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = stop.wait_for(|s| *s) => return Ok(()),
            }
        }
        let _ = self.snapshot().await?; // discard: start the first interval now
        self.http.update_health(|h| {
            h.state = "running";
            h.message = None;
            h.partitions = self.partitions;
        });
        let mut ticker = tokio::time::interval_at(
            tokio::time::Instant::now() + self.s.interval,
            self.s.interval,
        );
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = stop.wait_for(|s| *s) => return Ok(()),
            }
            let outcome = self.tick().await;
            let publisher = self.publisher.state().as_str();
            self.http.update_health(|h| h.publisher = publisher);
            match outcome {
                Ok(Tick::Continue) => {}
                Ok(Tick::Done) => return Ok(()),
                Err(e @ RunError::Once(_)) => return Err(e),
                Err(e) => {
                    tracing::warn!("interval skipped: {e}");
                    self.http.update_health(|h| h.message = Some(e.to_string()));
                }
            }
        }
    }

    async fn tick(&mut self) -> Result<Tick, RunError> {
        let topic = self.s.args.topic.clone();
        // Re-read the partition count; on a change the old window says nothing about the new placement.
        match topic_partitions(&self.admin, &topic).await {
            Ok(k) if k != self.partitions => {
                tracing::warn!(topic = %topic, from = self.partitions, to = k, "partition count changed: starting a new window");
                self.consumer.send(Command::Reset { partitions: k });
                self.partitions = k;
                self.partition_window.clear();
                self.awaiting_coverage = true;
                self.http.update_health(|h| h.partitions = k);
                return Ok(Tick::Continue);
            }
            Ok(_) => {}
            Err(TopicProblem::Missing) => {
                tracing::warn!(topic = %topic, "topic no longer exists; waiting for it");
                return Ok(Tick::Continue);
            }
            Err(TopicProblem::Unreachable(e) | TopicProblem::Other(e)) => {
                tracing::warn!(topic = %topic, "cannot read the topic's metadata ({e}); deciding on the known partition count");
            }
        }
        let snap = self.snapshot().await?;
        if snap.window.partitions() != self.partitions {
            // A reset is still in flight.
            return Ok(Tick::Continue);
        }
        self.intervals += 1;
        let now = now_ms();
        let m = self.metrics().clone();
        m.records_consumed
            .with_label_values(&[&topic])
            .inc_by(snap.consumed);
        m.records_sampled
            .with_label_values(&[&topic])
            .inc_by(snap.sampled);
        let lag: Vec<(u32, f64)> = self
            .shared
            .lag()
            .into_iter()
            .map(|(p, l)| (p, l as f64))
            .collect();
        m.set_per_partition(&m.consumer_lag, &lag);

        let ownership = self.shared.ownership();
        let elapsed = snap.elapsed.as_secs_f64().max(1e-3);
        let owned: Vec<u32> = if self.s.standalone && ownership.partitions.is_empty() {
            (0..self.partitions).collect()
        } else {
            ownership.partitions.iter().copied().collect()
        };
        let mut own_rates: BTreeMap<u32, f64> = owned.iter().map(|&p| (p, 0.0)).collect();
        for (p, &c) in snap.partition_counts.iter().enumerate() {
            if c > 0 || own_rates.contains_key(&(p as u32)) {
                own_rates.insert(p as u32, c as f64 / elapsed);
            }
        }

        if let Some(shipper) = &self.shipper {
            let doc = ShippedSketch {
                format: cluster::SKETCH_FORMAT.into(),
                version: cluster::SKETCH_VERSION,
                topic: topic.clone(),
                group_id: self.s.group_id.clone(),
                member_id: self.s.member_id.clone(),
                created_at_ms: now,
                interval_ms: u64::try_from(self.s.interval.as_millis()).unwrap_or(u64::MAX),
                owned: owned.clone(),
                partition_rates: own_rates.clone(),
                window_samples: snap.window_samples,
                sketch: snap.window.clone(),
            };
            if let Err(e) = shipper.ship(&doc, Duration::from_secs(10)).await {
                tracing::warn!("could not ship this member's window: {e}");
            }
        }

        let control = self.control.state();
        let current: Option<Arc<Assignment>> = if self.s.args.dry_run {
            self.dry_current.clone()
        } else {
            control.current.clone()
        };
        let epoch_now = current.as_ref().map_or(0, |a| a.epoch());
        m.epoch.with_label_values(&[&topic]).set(epoch_now as f64);
        let leader = self.s.standalone || ownership.owns_partition_zero();
        let consumer_error = self.shared.last_error().map(|e| format!("consumer: {e}"));
        if snap.keyless > 0 {
            tracing::debug!(topic = %topic, keyless = snap.keyless, "keyless records (counted as load, not learned)");
        }
        self.http.update_health(|h| {
            h.owned = owned.clone();
            h.intervals = self.intervals;
            h.last_interval_ms = now;
            h.epoch = epoch_now;
            h.role = if leader { "leader" } else { "member" };
            h.message = consumer_error;
        });
        self.serve_assignment(current.as_deref());
        if !leader {
            m.clear_global();
            self.publisher.deactivate();
            self.http.update_health(|h| {
                h.publisher = self.publisher.state().as_str();
                h.members = 0;
            });
            return Ok(Tick::Continue);
        }

        // The topic-wide window.
        let fresh_peers =
            self.peers
                .fresh(&self.s.group_id, self.partitions, &self.s.member_id, now);
        let view = cluster::merge_view(
            &snap.window,
            snap.window_samples,
            &own_rates,
            now,
            &fresh_peers,
        );
        self.observe_metrics(&view.window, &view.partition_rates, elapsed);
        self.http.update_health(|h| h.members = view.members);

        // Decide only on data from every partition: after a partition-count change the group needs a
        // metadata refresh and a rebalance to consume the new partitions, and a member that died without
        // leaving holds its partitions until its session times out.
        let mut covered: BTreeSet<u32> = ownership.partitions.clone();
        for peer in &fresh_peers {
            covered.extend(peer.owned.iter().copied());
        }
        let uncovered: Vec<u32> = (0..self.partitions)
            .filter(|p| !covered.contains(p))
            .collect();
        if !uncovered.is_empty() {
            if !self.uncovered_logged {
                tracing::info!(topic = %topic, ?uncovered, "not deciding: no fresh member consumes these partitions yet");
                self.uncovered_logged = true;
            }
            return Ok(Tick::Continue);
        }
        self.uncovered_logged = false;
        if self.awaiting_coverage {
            tracing::info!(topic = %topic, partitions = self.partitions, "every partition is consumed again: starting a clean window");
            self.awaiting_coverage = false;
            self.consumer.send(Command::Reset {
                partitions: self.partitions,
            });
            return Ok(Tick::Continue);
        }

        if view.window.total() == 0 {
            m.predicted_imbalance.reset();
            if self.s.args.once {
                return Err(RunError::Once(format!(
                    "no keyed records in the interval of {elapsed:.1} s on topic {topic:?}; nothing published"
                )));
            }
            return Ok(Tick::Continue);
        }
        if self.s.args.once && view.window_samples < self.s.policy.min_samples as f64 {
            // Before taking the transactional id: a failed --once must not fence a running sampler.
            return Err(RunError::Once(format!(
                "only {:.0} sampled records in the interval (--min-samples {}); nothing published",
                view.window_samples, self.s.policy.min_samples
            )));
        }
        // Hold the transactional id before choosing an epoch (see publish.rs): once after taking it, read
        // the control topic to its end; afterwards no one else can commit, and the live view suffices.
        let was_active = self.publisher.state() == PublisherState::Active;
        let may_publish = match self.publisher.activate(ownership.generation).await {
            Ok(ok) => ok,
            Err(e) => {
                tracing::warn!("cannot become the publisher this interval: {e}");
                false
            }
        };
        if may_publish && !was_active {
            self.caught_up = false;
        }
        let control = if may_publish && !self.caught_up {
            match self.control.catch_up().await {
                Ok(c) => {
                    self.caught_up = true;
                    c
                }
                Err(e) => {
                    tracing::warn!("{e}; not publishing this interval");
                    return Ok(Tick::Continue);
                }
            }
        } else {
            control
        };
        let current = if self.s.args.dry_run {
            self.dry_current.clone()
        } else {
            control.current.clone()
        };
        let window = &view.window;
        let next_epoch = control
            .max_epoch
            .max(self.last_published)
            .max(current.as_ref().map_or(0, |a| a.epoch()))
            + 1;

        let build = window
            .build(&topic, next_epoch, now, current.as_deref())
            .map_err(|e| RunError::Setup(format!("building an assignment: {e}")))?;
        let fresh_imbalance = window
            .predict(&build.assignment)
            .map_or(build.predicted_imbalance, |l| imbalance(&l));
        let hash_imbalance = imbalance(&window.predict_hash());
        let current_state = match &current {
            None => Current::None,
            Some(a) if a.partitions() != self.partitions => Current::OtherPartitionCount {
                partitions: a.partitions(),
            },
            Some(a) => match window.predict(a) {
                Some(loads) => Current::Predicted {
                    imbalance: imbalance(&loads),
                },
                None => Current::Unpredictable,
            },
        };
        let placement = |p: &str, v: f64| {
            m.predicted_imbalance
                .with_label_values(&[topic.as_str(), p])
                .set(v)
        };
        placement("hash", hash_imbalance);
        placement("fresh", fresh_imbalance);
        match current_state {
            Current::Predicted { imbalance } => placement("current", imbalance),
            _ => {
                let _ = m
                    .predicted_imbalance
                    .remove_label_values(&[topic.as_str(), "current"]);
            }
        }
        m.heavy_hitters
            .with_label_values(&[&topic])
            .set(build.heavy_hitters as f64);

        let decision = decide::decide(
            &self.s.policy,
            &Situation {
                partitions: self.partitions,
                window_samples: view.window_samples,
                current: current_state,
                fresh_imbalance,
                force: self.s.args.once,
            },
        );
        let reason = match decision {
            Decision::Keep(reason) => {
                tracing::info!(topic = %topic, epoch = epoch_now, "keeping the current assignment: {reason}");
                if self.s.args.once {
                    return Err(RunError::Once(format!("{reason}; nothing published")));
                }
                return Ok(Tick::Continue);
            }
            Decision::Publish(reason) => reason,
        };
        if !may_publish && !self.s.args.dry_run {
            tracing::warn!(
                topic = %topic,
                publisher = self.publisher.state().as_str(),
                "would publish epoch {next_epoch} ({reason}) but this instance does not hold the transactional id {:?}",
                self.publisher.transactional_id()
            );
            self.http
                .update_health(|h| h.publisher = self.publisher.state().as_str());
            if self.s.args.once {
                return Err(RunError::Once(
                    "not allowed to publish (fenced or no transactional id)".into(),
                ));
            }
            return Ok(Tick::Continue);
        }
        let assignment = Arc::new(build.assignment);
        if self.s.args.dry_run {
            tracing::info!(topic = %topic, epoch = next_epoch, moved = build.moved_share, "dry run: would publish ({reason})");
            self.dry_current = Some(Arc::clone(&assignment));
        } else {
            match self
                .publisher
                .publish(&assignment, ownership.generation)
                .await
            {
                Ok(()) => {
                    tracing::info!(
                        topic = %topic,
                        epoch = next_epoch,
                        heavy_hitters = build.heavy_hitters,
                        moved_share = build.moved_share,
                        predicted_imbalance = fresh_imbalance,
                        "published a new assignment ({reason})"
                    );
                    self.control.note_published(Arc::clone(&assignment));
                }
                Err(PublishFailure::Fenced) => {
                    self.http
                        .update_health(|h| h.publisher = self.publisher.state().as_str());
                    if self.s.args.once {
                        return Err(RunError::Once("fenced by another instance".into()));
                    }
                    return Ok(Tick::Continue);
                }
                Err(PublishFailure::Retry(e)) => {
                    tracing::warn!(topic = %topic, "publishing epoch {next_epoch} failed ({e}); retrying next interval");
                    self.http
                        .update_health(|h| h.publisher = self.publisher.state().as_str());
                    if self.s.args.once {
                        return Err(RunError::Once(format!("publishing failed: {e}")));
                    }
                    return Ok(Tick::Continue);
                }
            }
        }
        self.last_published = next_epoch;
        self.publishes += 1;
        m.publishes.with_label_values(&[&topic]).inc();
        m.moved_share
            .with_label_values(&[&topic])
            .set(build.moved_share);
        m.epoch.with_label_values(&[&topic]).set(next_epoch as f64);
        self.serve_assignment(Some(&assignment));
        let publishes = self.publishes;
        self.http.update_health(|h| {
            h.epoch = next_epoch;
            h.publishes = publishes;
            h.publisher = self.publisher.state().as_str();
        });
        Ok(if self.s.args.once {
            Tick::Done
        } else {
            Tick::Continue
        })
    }

    fn serve_assignment(&self, a: Option<&Assignment>) {
        self.http.set_assignment(a.map(Assignment::to_json));
    }

    /// Observed and window metrics of the topic-wide view.
    fn observe_metrics(&mut self, window: &Sketch, rates: &BTreeMap<u32, f64>, elapsed: f64) {
        let m = self.metrics().clone();
        let topic = m.topic().to_owned();
        let k = self.partitions;
        let rate_vec: Vec<(u32, f64)> = rates
            .iter()
            .filter(|(p, _)| **p < k)
            .map(|(&p, &r)| (p, r))
            .collect();
        m.set_per_partition(&m.partition_rate, &rate_vec);
        // Observed imbalance over the partitions someone reported (all of them once the group is stable).
        let loads: Vec<f64> = rate_vec.iter().map(|(_, r)| *r).collect();
        m.observed_imbalance
            .with_label_values(&[&topic])
            .set(imbalance(&loads));
        // Window shares: per-partition counts decayed like the sketch.
        let decay = self.s.args.decay;
        for v in self.partition_window.values_mut() {
            *v *= decay;
        }
        for (p, r) in &rate_vec {
            *self.partition_window.entry(*p).or_insert(0.0) += r * elapsed;
        }
        self.partition_window.retain(|p, _| *p < k);
        let total: f64 = self.partition_window.values().sum();
        let shares: Vec<(u32, f64)> = self
            .partition_window
            .iter()
            .map(|(&p, &c)| (p, if total > 0.0 { c / total } else { 0.0 }))
            .collect();
        m.set_per_partition(&m.partition_share, &shares);

        let total = window.total();
        let top = window.summary().top(usize::from(self.s.args.top_n));
        let keys: Vec<(Vec<u8>, f64)> = top
            .iter()
            .map(|c| {
                (
                    c.key.to_vec(),
                    if total > 0 {
                        c.count as f64 / total as f64
                    } else {
                        0.0
                    },
                )
            })
            .collect();
        m.set_top_keys(&keys);
        // Key-grouping lower bound with the most frequent key's GUARANTEED count, so it stays a lower bound.
        let p1 = window.summary().top(1).first().map_or(0.0, |c| {
            if total > 0 {
                c.count.saturating_sub(c.error) as f64 / total as f64
            } else {
                0.0
            }
        });
        m.bound
            .with_label_values(&[&topic])
            .set((f64::from(k) * p1).max(1.0) - 1.0);
    }
}
