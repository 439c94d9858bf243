//! `dkg-sampler demo`: the same skewed workload through Kafka's hash partitioner and through DKG, side by
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

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// Arguments of `dkg-sampler demo`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    scripts/demo                                          # build, start the local broker, run this\n  \
    dkg-sampler demo --bootstrap-servers 127.0.0.1:9092 --duration-secs 120 --alpha 1.2")]
pub struct Args {
    /// Kafka bootstrap servers (host:port[,host:port...]).
    #[arg(long, env = "DKG_BOOTSTRAP_SERVERS", default_value = "127.0.0.1:9092")]
    pub bootstrap_servers: String,

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
    let exe = std::env::current_exe().context("locating the dkg-sampler executable")?;
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
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &args.bootstrap_servers)
        .create()
        .context("creating the Kafka admin client")?;
    eprintln!(
        "demo: creating topics {} and {} ({} partitions) on {}",
        hash.topic, dkg.topic, args.partitions, args.bootstrap_servers
    );
    runtime.block_on(create_topics(
        &admin,
        &[&hash.topic, &dkg.topic],
        args.partitions,
    ))?;

    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        ctrlc_flag(stop, &runtime);
    }

    let mut children = Children::default();
    let outcome = (|| -> anyhow::Result<Summary> {
        let bs = args.bootstrap_servers.as_str();
        let interval = args.interval_secs.to_string();
        let count = (args.rate * args.duration_secs).to_string();
        let (alpha, keys, rate) = (
            args.alpha.to_string(),
            args.keys.to_string(),
            args.rate.to_string(),
        );
        for (side, dry) in [(&dkg, false), (&hash, true)] {
            let mut a = vec![
                "run",
                "--bootstrap-servers",
                bs,
                "--topic",
                &side.topic,
                "--control-topic",
                &args.control_topic,
                "--interval-secs",
                &interval,
            ]
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>();
            a.extend(["--metrics-addr".to_string(), side.metrics.to_string()]);
            if dry {
                a.push("--dry-run".into());
            }
            children.spawn(&exe, &format!("sampler-{}", side_name(side)), &a, &log_dir)?;
        }
        wait_healthy(
            &[&dkg, &hash],
            &mut children,
            Duration::from_secs(60),
            &stop,
        )?;
        for (side, plain) in [(&dkg, false), (&hash, true)] {
            let mut a: Vec<String> = [
                "loadgen",
                "--bootstrap-servers",
                bs,
                "--topic",
                &side.topic,
                "--control-topic",
                &args.control_topic,
                "--alpha",
                &alpha,
                "--keys",
                &keys,
                "--count",
                &count,
                "--rate",
                &rate,
            ]
            .into_iter()
            .map(str::to_string)
            .collect();
            if plain {
                a.push("--plain".into());
            }
            children.spawn(&exe, &format!("loadgen-{}", side_name(side)), &a, &log_dir)?;
        }
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
    if !args.keep_topics {
        if let Err(e) = runtime.block_on(delete_topics(&admin, &[&hash.topic, &dkg.topic])) {
            eprintln!("demo: could not delete the demo topics: {e:#}");
        }
    }
    result
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

async fn create_topics(
    admin: &AdminClient<DefaultClientContext>,
    topics: &[&str],
    partitions: u32,
) -> anyhow::Result<()> {
    let partitions = i32::try_from(partitions).context("partition count")?;
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|t| NewTopic::new(t, partitions, TopicReplication::Fixed(1)))
        .collect();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = admin
        .create_topics(&new, &opts)
        .await
        .context("creating the demo topics (is the broker up? scripts/kafka start)")?;
    for r in results {
        if let Err((topic, code)) = r {
            bail!("creating topic {topic}: {code}");
        }
    }
    Ok(())
}

async fn delete_topics(
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

/// The child processes, stopped (SIGTERM, then SIGKILL) when the demo ends.
#[derive(Debug, Default)]
struct Children {
    list: Vec<(String, Child, PathBuf)>,
}

impl Children {
    fn spawn(
        &mut self,
        exe: &Path,
        name: &str,
        args: &[String],
        log_dir: &Path,
    ) -> anyhow::Result<()> {
        let log = log_dir.join(format!("{name}.log"));
        let file =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        // Own process group: a Ctrl-C in the terminal reaches the demo only, which then stops the children
        // in order (SIGTERM) and still prints the summary.
        let child = Command::new(exe)
            .process_group(0)
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .spawn()
            .with_context(|| format!("starting {} {}", exe.display(), args.join(" ")))?;
        self.list.push((name.to_string(), child, log));
        Ok(())
    }

    /// The first child that has exited, with its status and the tail of its log.
    fn exited(&mut self) -> Option<(String, String, bool)> {
        for (name, child, log) in &mut self.list {
            if let Ok(Some(status)) = child.try_wait() {
                return Some((
                    name.clone(),
                    format!("{status}\n{}", tail(log, 15)),
                    status.success(),
                ));
            }
        }
        None
    }

    fn remove(&mut self, name: &str) {
        self.list.retain(|(n, _, _)| n != name);
    }

    fn stop_all(&mut self) {
        for (_, child, _) in &mut self.list {
            if matches!(child.try_wait(), Ok(None)) {
                // SIGTERM lets the samplers and producers shut down cleanly (flush, leave the group).
                let _ = Command::new("kill")
                    .args(["-TERM", &child.id().to_string()])
                    .stderr(Stdio::null())
                    .status();
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for (_, child, _) in &mut self.list {
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        self.list.clear();
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        self.stop_all();
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn wait_healthy(
    sides: &[&Side],
    children: &mut Children,
    timeout: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    for side in sides {
        loop {
            if let Some((name, detail, _)) = children.exited() {
                bail!("{name} exited before it served /healthz: {detail}");
            }
            if http_get(side.metrics, "/healthz").is_ok_and(|(code, _)| code == 200) {
                break;
            }
            if Instant::now() > deadline || stop.load(Ordering::SeqCst) {
                bail!(
                    "the sampler of {} did not answer /healthz on {} in time",
                    side.topic,
                    side.metrics
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    Ok(())
}

/// A minimal HTTP/1.0 GET on a loopback address: (status code, body).
fn http_get(addr: SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("malformed HTTP status line")?;
    Ok((code, body.to_string()))
}

/// Samples of the Prometheus text exposition format: (metric name, labels, value).
type Samples = Vec<(String, BTreeMap<String, String>, f64)>;

/// Parses the Prometheus text format (comments skipped; label values unescaped).
fn parse_metrics(text: &str) -> Samples {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => continue,
        };
        let mut labels = BTreeMap::new();
        let mut rest = rest;
        if let Some(body) = rest.strip_prefix('{') {
            let mut chars = body.char_indices().peekable();
            let mut end = None;
            loop {
                // label name
                while chars
                    .peek()
                    .is_some_and(|(_, c)| *c == ',' || c.is_whitespace())
                {
                    chars.next();
                }
                match chars.peek() {
                    Some((i, '}')) => {
                        end = Some(*i);
                        break;
                    }
                    None => break,
                    _ => {}
                }
                let mut key = String::new();
                for (_, c) in chars.by_ref() {
                    if c == '=' {
                        break;
                    }
                    key.push(c);
                }
                if chars.next().map(|(_, c)| c) != Some('"') {
                    break;
                }
                let mut value = String::new();
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => match chars.next().map(|(_, c)| c) {
                            Some('n') => value.push('\n'),
                            Some(other) => value.push(other),
                            None => break,
                        },
                        '"' => break,
                        c => value.push(c),
                    }
                }
                labels.insert(key.trim().to_string(), value);
            }
            let Some(end) = end else { continue };
            rest = &body[end + 1..];
        }
        let Some(value) = rest
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        else {
            continue;
        };
        out.push((name.to_string(), labels, value));
    }
    out
}

/// What one sampler shows about its topic.
#[derive(Debug, Default, Clone)]
struct View {
    share: BTreeMap<u32, f64>,
    rate: BTreeMap<u32, f64>,
    observed: Option<f64>,
    bound: Option<f64>,
    epoch: u64,
    publishes: u64,
    heavy_hitters: Option<f64>,
    top_keys: Vec<(u32, String, f64)>,
    consumed: f64,
}

impl View {
    fn from_samples(samples: &Samples, topic: &str) -> Self {
        let mut v = View::default();
        for (name, labels, value) in samples {
            if labels.get("topic").map(String::as_str) != Some(topic) {
                continue;
            }
            let partition = labels.get("partition").and_then(|p| p.parse::<u32>().ok());
            match (name.as_str(), partition) {
                ("dkg_sampler_partition_share_ratio", Some(p)) => {
                    v.share.insert(p, *value);
                }
                ("dkg_sampler_partition_records_per_second", Some(p)) => {
                    v.rate.insert(p, *value);
                }
                ("dkg_sampler_observed_imbalance_ratio", _) => v.observed = Some(*value),
                ("dkg_sampler_key_grouping_bound_ratio", _) => v.bound = Some(*value),
                ("dkg_sampler_epoch", _) => v.epoch = *value as u64,
                ("dkg_sampler_publishes_total", _) => v.publishes = *value as u64,
                ("dkg_sampler_heavy_hitters", _) => v.heavy_hitters = Some(*value),
                ("dkg_sampler_records_consumed_total", _) => v.consumed = *value,
                ("dkg_sampler_heavy_key_share_ratio", _) => {
                    let rank = labels
                        .get("rank")
                        .and_then(|r| r.parse().ok())
                        .unwrap_or(u32::MAX);
                    let key = labels.get("key").cloned().unwrap_or_default();
                    v.top_keys.push((rank, key, *value));
                }
                _ => {}
            }
        }
        v.top_keys.sort_by_key(|(rank, _, _)| *rank);
        v
    }
}

fn scrape(side: &Side) -> Option<View> {
    match http_get(side.metrics, "/metrics") {
        Ok((200, body)) => Some(View::from_samples(&parse_metrics(&body), &side.topic)),
        _ => None,
    }
}

/// Partition end offsets of a topic (records produced so far, as the topics start empty).
fn end_offsets(consumer: &BaseConsumer, topic: &str, partitions: u32) -> anyhow::Result<Vec<i64>> {
    (0..partitions)
        .map(|p| {
            let p = i32::try_from(p).context("partition index")?;
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .map(|(_, high)| high)
                .with_context(|| format!("reading the end offset of {topic}/{p}"))
        })
        .collect()
}

fn imbalance(counts: &[i64]) -> Option<f64> {
    let total: i64 = counts.iter().sum();
    let max = counts.iter().copied().max()?;
    (total > 0).then(|| max as f64 / (total as f64 / counts.len() as f64) - 1.0)
}

/// The measurements the summary prints.
#[derive(Debug)]
struct Summary {
    elapsed: Duration,
    hash_counts: Vec<i64>,
    dkg_counts: Vec<i64>,
    /// End offsets when the DKG producer's first assignment was in force (None: never).
    hash_at_epoch: Option<Vec<i64>>,
    dkg_at_epoch: Option<Vec<i64>>,
    first_epoch_after: Option<Duration>,
    last_hash: View,
    last_dkg: View,
    /// Means over the snapshots taken after the first epoch (steady state).
    steady_hash: Option<f64>,
    steady_dkg: Option<f64>,
    steady_bound: Option<f64>,
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |v| format!("{:.1}%", v * 100.0))
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

impl Summary {
    fn render(&self, args: &Args, hash: &Side, dkg: &Side) -> String {
        let mut s = String::new();
        let sum = |c: &[i64]| c.iter().sum::<i64>();
        let diff = |a: &[i64], b: &Option<Vec<i64>>| -> Option<Vec<i64>> {
            b.as_ref()
                .map(|b| a.iter().zip(b).map(|(x, y)| x - y).collect())
        };
        let hash_after = diff(&self.hash_counts, &self.hash_at_epoch);
        let dkg_after = diff(&self.dkg_counts, &self.dkg_at_epoch);
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "Summary: {} partitions, Zipf({}) over {} keys, {:.0} s, same workload in both topics",
            args.partitions,
            args.alpha,
            args.keys,
            self.elapsed.as_secs_f64()
        );
        let _ = writeln!(s, "  topics: {} (hash), {} (DKG)", hash.topic, dkg.topic);
        let _ = writeln!(
            s,
            "  imbalance = max / mean - 1 of the records per partition\n"
        );
        let _ = writeln!(s, "  {:<48} {:>12} {:>12}", "", "hash", "DKG");
        let _ = writeln!(
            s,
            "  {:<48} {:>12} {:>12}",
            "records produced",
            sum(&self.hash_counts),
            sum(&self.dkg_counts)
        );
        let _ = writeln!(
            s,
            "  {:<48} {:>12} {:>12}",
            "imbalance, all records",
            pct(imbalance(&self.hash_counts)),
            pct(imbalance(&self.dkg_counts))
        );
        match (&hash_after, &dkg_after, self.first_epoch_after) {
            (Some(h), Some(d), Some(t)) => {
                let _ = writeln!(
                    s,
                    "  {:<48} {:>12} {:>12}",
                    format!(
                        "imbalance, records after epoch 1 (t = {:.0} s)",
                        t.as_secs_f64()
                    ),
                    pct(imbalance(h)),
                    pct(imbalance(d))
                );
            }
            _ => {
                let _ = writeln!(
                    s,
                    "  no assignment was published during the run (try a longer --duration-secs)"
                );
            }
        }
        let _ = writeln!(
            s,
            "  {:<48} {:>12} {:>12}",
            "imbalance in the samplers' windows, steady state",
            pct(self.steady_hash),
            pct(self.steady_dkg)
        );
        let _ = writeln!(
            s,
            "  {:<48} {:>12} {:>12}",
            "imbalance in the samplers' windows, at the end",
            pct(self.last_hash.observed),
            pct(self.last_dkg.observed)
        );
        let _ = writeln!(
            s,
            "  {:<48} {:>12}",
            "key-grouping lower bound max(1, k*p1) - 1",
            pct(self.steady_bound.or(self.last_dkg.bound))
        );
        let _ = writeln!(
            s,
            "  {:<48} {:>12} {:>12}",
            "epochs published / heavy hitters",
            "-",
            format!(
                "{} / {}",
                self.last_dkg.publishes,
                self.last_dkg
                    .heavy_hitters
                    .map_or("n/a".into(), |h| format!("{h:.0}"))
            )
        );
        if let Some(top) = self.last_dkg.top_keys.first() {
            let _ = writeln!(
                s,
                "  hottest key: {:?} with {} of the records",
                top.1,
                pct(Some(top.2))
            );
        }
        s
    }
}

const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

/// Terminal width: COLUMNS, else `stty size` on the controlling terminal, else 100.
fn terminal_width() -> usize {
    if let Some(c) = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()) {
        return c;
    }
    std::fs::File::open("/dev/tty")
        .ok()
        .and_then(|tty| Command::new("stty").arg("size").stdin(tty).output().ok())
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
        })
        .unwrap_or(100)
}

/// A horizontal bar of `width` cells for `frac` in [0, 1], with eighth-block resolution.
fn bar(frac: f64, width: usize) -> String {
    const PARTS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    let eighths = (frac.clamp(0.0, 1.0) * width as f64 * 8.0).round() as usize;
    let mut s = "█".repeat(eighths / 8);
    if eighths % 8 > 0 {
        s.push(PARTS[eighths % 8]);
    }
    let len = s.chars().count();
    s.push_str(&" ".repeat(width.saturating_sub(len)));
    s
}

/// Width of the "p11  " column and of the gap between the two sides.
const PREFIX: usize = 5;
const GAP: usize = 3;

/// `text` padded or cut to exactly `w` characters.
fn fit(text: &str, w: usize) -> String {
    let n = text.chars().count();
    if n >= w {
        text.chars().take(w).collect()
    } else {
        format!("{text}{}", " ".repeat(w - n))
    }
}

struct Screen<'a> {
    args: &'a Args,
    color: bool,
    width: usize,
}

impl Screen<'_> {
    fn paint(&self, c: &str, text: &str) -> String {
        if self.color {
            format!("{c}{text}{RESET}")
        } else {
            text.to_string()
        }
    }

    fn render(&self, t: Duration, hash: (&Side, &View), dkg: (&Side, &View), note: &str) -> String {
        let k = self.args.partitions;
        let fair = 1.0 / f64::from(k);
        // Both sides on one scale: the largest share on screen fills the bar.
        let top = hash
            .1
            .share
            .values()
            .chain(dkg.1.share.values())
            .copied()
            .fold(fair * 1.5, f64::max);
        // "p11  " + column + gap + column, within the terminal width.
        let col = (self.width.saturating_sub(PREFIX + GAP + 1) / 2).clamp(30, 80);
        let bar_w = col - 7;
        let gap = " ".repeat(GAP);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}",
            self.paint(
                BOLD,
                &format!(
                    "DKG demo: {k} partitions, Zipf({}) over {} keys, {} records/s per topic",
                    self.args.alpha, self.args.keys, self.args.rate
                )
            )
        );
        let _ = writeln!(
            s,
            "t = {:>3.0}/{} s   share of records per partition, samplers' window   {} = 1/{k}",
            t.as_secs_f64(),
            self.args.duration_secs,
            self.paint(DIM, "|")
        );
        let _ = writeln!(s);
        let head = |side: &Side, v: &View| -> String {
            if side.label == "DKG" {
                if v.epoch == 0 {
                    "DKG (learning: hashed until epoch 1)".to_string()
                } else {
                    let plural = if v.publishes == 1 { "" } else { "es" };
                    format!("DKG (epoch {}, {} publish{plural})", v.epoch, v.publishes)
                }
            } else {
                "Kafka's default partitioner (hash)".to_string()
            }
        };
        let _ = writeln!(
            s,
            "{}{}{gap}{}",
            " ".repeat(PREFIX),
            self.paint(BOLD, &fit(&head(hash.0, hash.1), col)),
            self.paint(BOLD, &fit(&head(dkg.0, dkg.1), col))
        );
        let fair_cell = ((fair / top) * bar_w as f64).round() as usize;
        for p in 0..k {
            let mut cells = Vec::new();
            for v in [hash.1, dkg.1] {
                let share = v.share.get(&p).copied();
                let mut b: Vec<char> = bar(share.unwrap_or(0.0) / top, bar_w).chars().collect();
                if fair_cell < b.len() && b[fair_cell] == ' ' {
                    b[fair_cell] = '|';
                }
                let b: String = b.into_iter().collect();
                let colour = match share {
                    Some(x) if x > fair * 1.5 => RED,
                    Some(x) if x > fair * 1.15 => YELLOW,
                    _ => GREEN,
                };
                let value = share.map_or("     -".to_string(), |x| format!("{:>5.1}%", x * 100.0));
                cells.push(format!("{} {value}", self.paint(colour, &b)));
            }
            let _ = writeln!(
                s,
                "{}{}{gap}{}",
                fit(&format!("p{p}"), PREFIX),
                cells[0],
                cells[1]
            );
        }
        let _ = writeln!(s);
        let imb = |v: &View| -> String {
            let colour = match v.observed {
                Some(x) if x > 0.5 => RED,
                Some(x) if x > 0.15 => YELLOW,
                Some(_) => GREEN,
                None => DIM,
            };
            self.paint(colour, &fit(&format!("imbalance {}", pct(v.observed)), col))
        };
        let _ = writeln!(
            s,
            "{}{}{gap}{}",
            " ".repeat(PREFIX),
            imb(hash.1),
            imb(dkg.1)
        );
        let _ = writeln!(
            s,
            "{}key-grouping lower bound max(1, k*p1) - 1 = {}; heavy hitters: {}",
            " ".repeat(PREFIX),
            pct(dkg.1.bound.or(hash.1.bound)),
            dkg.1
                .heavy_hitters
                .map_or("n/a".into(), |h| format!("{h:.0}"))
        );
        let keys: Vec<String> = dkg
            .1
            .top_keys
            .iter()
            .take(5)
            .map(|(_, key, share)| format!("{key} {:.1}%", share * 100.0))
            .collect();
        if !keys.is_empty() {
            let _ = writeln!(s, "{}hottest keys: {}", " ".repeat(PREFIX), keys.join(", "));
        }
        if !note.is_empty() {
            let _ = writeln!(s);
            let _ = writeln!(s, "{}", self.paint(DIM, note));
        }
        s
    }
}

fn live(
    args: &Args,
    hash: &Side,
    dkg: &Side,
    children: &mut Children,
    stop: &AtomicBool,
    log_dir: &Path,
) -> anyhow::Result<Summary> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &args.bootstrap_servers)
        .create()
        .context("creating the Kafka client for end offsets")?;
    let tty = std::io::stdout().is_terminal() && !args.plain;
    let color = tty && std::env::var_os("NO_COLOR").is_none();
    let started = Instant::now();
    let run_for = Duration::from_secs(args.duration_secs);
    let refresh = Duration::from_millis(args.refresh_millis);
    let (mut last_hash, mut last_dkg) = (View::default(), View::default());
    let (mut hash_at_epoch, mut dkg_at_epoch, mut first_epoch_after) = (None, None, None);
    let (mut steady_h, mut steady_d, mut steady_b) = (Vec::new(), Vec::new(), Vec::new());
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
            if stop.load(Ordering::SeqCst) || started.elapsed() >= run_for + Duration::from_secs(2)
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
            if let Some(v) = scrape(hash) {
                last_hash = v;
            }
            if let Some(v) = scrape(dkg) {
                last_dkg = v;
            }
            if last_dkg.epoch >= 1 && first_epoch_after.is_none() {
                // The producer adopts a publish within a second; the records after this instant are
                // the ones routed by DKG.
                std::thread::sleep(Duration::from_secs(1));
                first_epoch_after = Some(started.elapsed());
                hash_at_epoch = Some(end_offsets(&consumer, &hash.topic, args.partitions)?);
                dkg_at_epoch = Some(end_offsets(&consumer, &dkg.topic, args.partitions)?);
            }
            // Steady state: two intervals after the first epoch, the window holds only DKG-routed records.
            if let Some(t) = first_epoch_after {
                if started.elapsed() > t + Duration::from_secs(2 * args.interval_secs) {
                    steady_h.extend(last_hash.observed);
                    steady_d.extend(last_dkg.observed);
                    steady_b.extend(last_dkg.bound);
                }
            }
            let screen = Screen {
                args,
                color,
                width: terminal_width(),
            };
            let frame = screen.render(
                started.elapsed(),
                (hash, &last_hash),
                (dkg, &last_dkg),
                &note,
            );
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
        let screen = Screen {
            args,
            color,
            width: terminal_width(),
        };
        let _ = writeln!(
            out,
            "{}",
            screen.render(started.elapsed(), (hash, &last_hash), (dkg, &last_dkg), "")
        );
    }
    result?;
    let elapsed = started.elapsed();
    // Let in-flight records land before the end offsets are read.
    std::thread::sleep(Duration::from_secs(1));
    Ok(Summary {
        elapsed,
        hash_counts: end_offsets(&consumer, &hash.topic, args.partitions)?,
        dkg_counts: end_offsets(&consumer, &dkg.topic, args.partitions)?,
        hash_at_epoch,
        dkg_at_epoch,
        first_epoch_after,
        last_hash,
        last_dkg,
        steady_hash: mean(&steady_h),
        steady_dkg: mean(&steady_d),
        steady_bound: mean(&steady_b),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_the_text_format_with_escaped_labels() {
        let text = "# HELP x y\n# TYPE dkg_sampler_epoch gauge\n\
            dkg_sampler_epoch{topic=\"t\"} 3\n\
            dkg_sampler_heavy_key_share_ratio{key=\"a\\\"b,c}\",rank=\"1\",topic=\"t\"} 0.25\n\
            dkg_sampler_partition_share_ratio{partition=\"10\",topic=\"t\"} 1e-1\n\
            dkg_sampler_partition_share_ratio{partition=\"2\",topic=\"other\"} 0.9\n\
            up 1\n";
        let samples = parse_metrics(text);
        assert_eq!(samples.len(), 5, "{samples:?}");
        let v = View::from_samples(&samples, "t");
        assert_eq!(v.epoch, 3);
        assert_eq!(v.top_keys, vec![(1, "a\"b,c}".to_string(), 0.25)]);
        assert_eq!(v.share, BTreeMap::from([(10, 0.1)]));
    }

    #[test]
    fn imbalance_is_max_over_mean_minus_one() {
        let cases: [(&[i64], Option<f64>); 4] = [
            (&[10, 10, 10, 10], Some(0.0)),
            (&[40, 0, 0, 0], Some(3.0)),
            (&[20, 10, 10, 0], Some(1.0)),
            (&[0, 0], None),
        ];
        for (counts, want) in cases {
            assert_eq!(imbalance(counts), want, "{counts:?}");
        }
    }

    #[test]
    fn bars_have_the_requested_width() {
        for frac in [0.0, 0.01, 0.5, 0.999, 1.0, 2.0] {
            assert_eq!(bar(frac, 20).chars().count(), 20, "{frac}");
        }
        assert_eq!(bar(1.0, 4), "████");
        assert_eq!(bar(0.5, 4), "██  ");
    }
}
