//! `dkg-lab demo`: the same skewed workload through Kafka's hash partitioner and through DKG, side by
//! side, live in the terminal.
//!
//! It creates twin topics (fresh names per run), then runs four child processes of this very binary:
//! `loadgen --plain` into the hash topic and `loadgen` (the DKG producer wrapper) into the DKG topic, with
//! the same Zipf workload, plus `run` (the sidecar, publishing assignments) for the DKG topic and
//! `run --dry-run` for the hash topic, so both topics are measured by the same estimator. The screen shows
//! each partition's share of the records in the samplers' windows (`dkg_sampler_partition_share_ratio`,
//! scraped from their `/metrics`), the observed imbalance `max / mean - 1` of each topic and the
//! key-grouping lower bound `max(1, k * p1) - 1` (DKG paper, DEBS 2015: no partitioner that keeps every
//! key on one partition can go below it).
//!
//! The summary at the end is measured on the topics themselves (partition end offsets): the imbalance of
//! every record produced, and of the records produced after the first assignment was in force (before it,
//! the DKG wrapper routes by Kafka's hash as well).
//!
//! `scripts/demo` builds the binary, starts the local broker (`scripts/kafka start`) and runs this.

mod children;
mod scrape;
mod screen;
mod summary;

use std::io::{IsTerminal, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use dkg_kafka::kafka::topic;
use dkg_kafka::kafka::topic::TopicSpec;
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::BaseConsumer;

use self::children::wait_healthy;
use self::screen::{Screen, terminal_width};
use self::summary::{Summary, Tracker};
use crate::children::Children;
use dkg_sampler::cli::KafkaConfigArgs;

/// Arguments of `dkg-lab demo`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    scripts/demo                                          # build, start the local broker, run this\n  \
    dkg-lab demo --bootstrap-servers 127.0.0.1:9092 --duration-secs 120 --alpha 1.2")]
pub struct Args {
    /// Kafka bootstrap servers (host:port[,host:port...]).
    #[arg(long, env = "DKG_BOOTSTRAP_SERVERS", default_value = "127.0.0.1:9092")]
    pub bootstrap_servers: String,

    /// Extra librdkafka settings for every client, the children's included.
    #[command(flatten)]
    pub kafka: KafkaConfigArgs,

    /// Partitions of each of the twin topics.
    #[arg(long, env = "DKG_DEMO_PARTITIONS", default_value_t = 12, value_parser = clap::value_parser!(u32).range(2..=256))]
    pub partitions: u32,

    /// Zipf exponent of the key distribution (p_i ~ 1 / i^alpha).
    #[arg(long, env = "DKG_DEMO_ALPHA", default_value_t = 1.0)]
    pub alpha: f64,

    /// Distinct keys of the workload.
    #[arg(long, env = "DKG_DEMO_KEYS", default_value_t = 100_000)]
    pub keys: u32,

    /// Records per second produced into EACH topic.
    #[arg(long, env = "DKG_DEMO_RATE", default_value_t = 5_000)]
    pub rate: u64,

    /// How long the workload runs, in seconds.
    #[arg(long, env = "DKG_DEMO_DURATION_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(10..=86_400))]
    pub duration_secs: u64,

    /// The samplers' learning / decision interval, in seconds (`run --interval-secs`).
    #[arg(long, env = "DKG_DEMO_INTERVAL_SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub interval_secs: u64,

    /// Prefix of the twin topics' names (`<prefix>-hash-<run id>`, `<prefix>-dkg-<run id>`).
    #[arg(long, env = "DKG_DEMO_TOPIC_PREFIX", default_value = "dkg-demo")]
    pub topic_prefix: String,

    /// Control topic the sampler publishes to and the DKG producer follows.
    #[arg(long, env = "DKG_CONTROL_TOPIC", default_value = "_dkg.assignments")]
    pub control_topic: String,

    /// Keep the twin topics after the demo (by default they are deleted).
    #[arg(long, env = "DKG_DEMO_KEEP_TOPICS")]
    pub keep_topics: bool,

    /// Directory for the child processes' logs (default: a fresh directory under the system temp dir).
    #[arg(long, env = "DKG_DEMO_LOG_DIR")]
    pub log_dir: Option<PathBuf>,

    /// Screen refresh period, in milliseconds.
    #[arg(long, env = "DKG_DEMO_REFRESH_MILLIS", default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub refresh_millis: u64,

    /// Print a plain snapshot every few seconds instead of redrawing the screen (the default when
    /// stdout is not a terminal).
    #[arg(long, env = "DKG_DEMO_PLAIN")]
    pub plain: bool,
}

/// One side of the demo: a topic, its producer and its sampler.
#[derive(Debug, Clone)]
struct Side {
    label: &'static str,
    topic: String,
    metrics: SocketAddr,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    ensure!(
        args.alpha.is_finite() && args.alpha >= 0.0,
        "--alpha must be a finite number >= 0, got {}",
        args.alpha
    );
    ensure!(args.keys >= 1, "--keys must be at least 1");
    ensure!(args.rate >= 1, "--rate must be at least 1 record/s");
    // Before any topic exists: the samplers are the dkg-sampler binary's (children::exe_for).
    crate::children::sampler_exe()?;
    let run_id = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let log_dir = match &args.log_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("dkg-demo-{run_id}-{}", std::process::id())),
    };
    std::fs::create_dir_all(&log_dir).with_context(|| format!("creating {}", log_dir.display()))?;

    let hash = Side {
        label: "Kafka default partitioner (hash)",
        topic: format!("{}-hash-{run_id}", args.topic_prefix),
        metrics: free_local_addr()?,
    };
    let dkg = Side {
        label: "DKG",
        topic: format!("{}-dkg-{run_id}", args.topic_prefix),
        metrics: free_local_addr()?,
    };

    // One worker thread: it also drives the Ctrl-C handler while the main thread renders.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let admin: AdminClient<DefaultClientContext> = connection(&args)?
        .create()
        .context("creating the Kafka admin client")?;
    eprintln!(
        "demo: creating topics {} and {} ({} partitions) on {}",
        hash.topic, dkg.topic, args.partitions, args.bootstrap_servers
    );
    runtime.block_on(create_topics(
        &connection(&args)?,
        &[&hash.topic, &dkg.topic],
        args.partitions,
    ))?;

    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        ctrlc_flag(stop, &runtime);
    }

    let mut children = Children::default();
    let launch = Launch {
        args: &args,
        hash: &hash,
        dkg: &dkg,
        log_dir: &log_dir,
    };
    let outcome = (|| -> anyhow::Result<Summary> {
        launch.samplers(&mut children)?;
        wait_healthy(
            &[&dkg, &hash],
            &mut children,
            Duration::from_secs(60),
            &stop,
        )?;
        launch.loadgens(&mut children)?;
        live(&args, &hash, &dkg, &mut children, &stop, &log_dir)
    })();

    children.stop_all();
    let summary = outcome;
    let result = match summary {
        Ok(s) => {
            println!("{}", s.render(&args, &hash, &dkg));
            Ok(())
        }
        Err(e) => Err(e.context(format!("child logs are in {}", log_dir.display()))),
    };
    if !args.keep_topics
        && let Err(e) = runtime.block_on(delete_topics(&admin, &[&hash.topic, &dkg.topic]))
    {
        eprintln!("demo: could not delete the demo topics: {e:#}");
    }
    result
}

/// What the demo's child processes are started from.
struct Launch<'a> {
    args: &'a Args,
    hash: &'a Side,
    dkg: &'a Side,
    log_dir: &'a Path,
}

impl Launch<'_> {
    /// The samplers: `run` for the DKG topic, `run --dry-run` for the hash topic (the same estimator
    /// measures both).
    fn samplers(&self, children: &mut Children) -> anyhow::Result<()> {
        let interval = self.args.interval_secs.to_string();
        for (side, dry) in [(self.dkg, false), (self.hash, true)] {
            let metrics = side.metrics.to_string();
            // A 4-point first-epoch bound (the default is 2): at the demo's 5,000 records/s over 12
            // partitions the default would keep hash placement for ~40 of the 60 s; 4 points needs
            // ~47,000 sampled records (~10 s) and still shows the skew fall by tens of points.
            let mut rest = vec![
                "--interval-secs",
                &interval,
                "--metrics-addr",
                &metrics,
                "--first-epoch-noise",
                "0.04",
            ];
            if dry {
                rest.push("--dry-run");
            }
            self.spawn(children, "sampler", "run", side, &rest)?;
        }
        Ok(())
    }

    /// The same workload into both topics: `loadgen` (the DKG producer) and `loadgen --plain`
    /// (Kafka's hash).
    fn loadgens(&self, children: &mut Children) -> anyhow::Result<()> {
        let args = self.args;
        let count = (args.rate * args.duration_secs).to_string();
        let (alpha, keys, rate) = (
            args.alpha.to_string(),
            args.keys.to_string(),
            args.rate.to_string(),
        );
        for (side, plain) in [(self.dkg, false), (self.hash, true)] {
            let mut rest = vec![
                "--alpha", &alpha, "--keys", &keys, "--count", &count, "--rate", &rate,
            ];
            if plain {
                rest.push("--plain");
            }
            self.spawn(children, "loadgen", "loadgen", side, &rest)?;
        }
        Ok(())
    }

    /// `SUBCOMMAND --bootstrap-servers B --topic T --control-topic C REST...` for one side, as the
    /// child `<role>-<side>`.
    fn spawn(
        &self,
        children: &mut Children,
        role: &str,
        subcommand: &str,
        side: &Side,
        rest: &[&str],
    ) -> anyhow::Result<()> {
        let a: Vec<String> = [
            subcommand,
            "--bootstrap-servers",
            &self.args.bootstrap_servers,
            "--topic",
            &side.topic,
            "--control-topic",
            &self.args.control_topic,
        ]
        .iter()
        .chain(rest)
        .map(|s| (*s).to_owned())
        .collect();
        let name = format!("{role}-{}", side_name(side));
        children.spawn(
            &crate::children::exe_for(subcommand)?,
            &name,
            &a,
            &self.args.kafka.child_env(),
            self.log_dir,
        )
    }
}

fn side_name(side: &Side) -> &'static str {
    if side.label == "DKG" { "dkg" } else { "hash" }
}

/// Ctrl-C (and SIGTERM) end the workload early; the children are stopped and the summary still prints.
fn ctrlc_flag(stop: Arc<AtomicBool>, runtime: &tokio::runtime::Runtime) {
    runtime.spawn(async move {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = term => {}
        }
        stop.store(true, Ordering::SeqCst);
    });
}

fn free_local_addr() -> anyhow::Result<SocketAddr> {
    let l = TcpListener::bind("127.0.0.1:0").context("finding a free local port")?;
    Ok(l.local_addr()?)
}

/// Create the demo's fresh topics and wait until every partition has a leader.
/// The demo's own clients: the bootstrap servers and the --kafka-config settings.
fn connection(args: &Args) -> anyhow::Result<ClientConfig> {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &args.bootstrap_servers);
    args.kafka.apply(&mut c)?;
    Ok(c)
}

async fn create_topics(
    connection: &ClientConfig,
    topics: &[&str],
    partitions: u32,
) -> anyhow::Result<()> {
    for name in topics {
        let spec = TopicSpec::new(*name, partitions).replication(1);
        topic::create_and_wait(connection, &spec, Duration::from_secs(30))
            .await
            .with_context(|| {
                format!("creating the demo topic {name} (is the broker up? scripts/kafka start)")
            })?;
    }
    Ok(())
}

pub(crate) async fn delete_topics(
    admin: &AdminClient<DefaultClientContext>,
    topics: &[&str],
) -> anyhow::Result<()> {
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for r in admin.delete_topics(topics, &opts).await? {
        if let Err((topic, code)) = r {
            bail!("deleting topic {topic}: {code}");
        }
    }
    Ok(())
}

/// Render the screen until the workload ends (or Ctrl-C), then measure the summary.
fn live(
    args: &Args,
    hash: &Side,
    dkg: &Side,
    children: &mut Children,
    stop: &AtomicBool,
    log_dir: &Path,
) -> anyhow::Result<Summary> {
    let consumer: BaseConsumer = connection(args)?
        .create()
        .context("creating the Kafka client for end offsets")?;
    let tty = std::io::stdout().is_terminal() && !args.plain;
    let color = tty && std::env::var_os("NO_COLOR").is_none();
    let screen = || Screen {
        args,
        color,
        width: terminal_width(),
    };
    let mut tracker = Tracker::new(Instant::now());
    let run_for = Duration::from_secs(args.duration_secs);
    let refresh = Duration::from_millis(args.refresh_millis);
    let mut loadgens_done = 0;
    let mut last_plain = Instant::now() - Duration::from_secs(60);
    let note = format!(
        "Ctrl-C ends early (the summary still prints). Child logs: {}",
        log_dir.display()
    );
    let mut out = std::io::stdout();
    if tty {
        // Alternate screen, cursor hidden; restored below.
        let _ = write!(out, "\x1b[?1049h\x1b[?25l");
    }
    let result = (|| -> anyhow::Result<()> {
        loop {
            if stop.load(Ordering::SeqCst) || tracker.elapsed() >= run_for + Duration::from_secs(2)
            {
                return Ok(());
            }
            while let Some((name, detail, ok)) = children.exited() {
                if ok && name.starts_with("loadgen") {
                    loadgens_done += 1;
                    children.remove(&name);
                } else {
                    bail!("{name} exited: {detail}");
                }
            }
            if loadgens_done == 2 {
                return Ok(());
            }
            tracker.observe(args, hash, dkg, &consumer)?;
            let frame = tracker.frame(&screen(), hash, dkg, &note);
            if tty {
                let _ = write!(out, "\x1b[H\x1b[2J{frame}");
                let _ = out.flush();
            } else if last_plain.elapsed() >= Duration::from_secs(5) {
                last_plain = Instant::now();
                let _ = writeln!(out, "{frame}");
            }
            std::thread::sleep(refresh);
        }
    })();
    if tty {
        let _ = write!(out, "\x1b[?25h\x1b[?1049l");
        let _ = out.flush();
        // The last frame stays on the normal screen above the summary.
        let _ = writeln!(out, "{}", tracker.frame(&screen(), hash, dkg, ""));
    }
    result?;
    tracker.finish(args, hash, dkg, &consumer)
}
