//! Helpers shared by the sampler's integration tests (`tests/sampler_*.rs`) and the lab's that need a
//! sidecar (`lab/tests/*.rs` include this file with `#[path]`). Every test runs against the
//! real single-node broker that `scripts/kafka start` runs (`.ci/run` starts it); a missing broker FAILS the
//! test with a clear message, nothing skips.
//!
//! - [`bootstrap`], [`unique_topic`], [`create_topic`], [`free_addr`], [`http_get`], [`wait_for`]: from
//!   `dkg-testkit`, shared with the partitioner's tests.
//! - [`Sampler`]: a `dkg-sampler run` child process with its HTTP endpoints, stopped by SIGTERM.
//! - [`Workload`]: a Zipf-skewed keyed stream produced in the background, through `DkgProducer` (following the
//!   control topic) or a plain producer, whose hot keys can be switched (drift).
//! - [`read_control_topic`]: every assignment published for a topic, in log order.

// Each test binary uses a subset.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dkg_partitioner::Assignment;
use dkg_partitioner::DkgProducer;
#[allow(unused_imports)] // not every test binary uses every helper
pub use dkg_testkit::broker::{bootstrap, create_topic, unique_topic};
use dkg_testkit::process::LoggedChild;
pub use dkg_testkit::process::{free_addr, http_get, wait_for};
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Zipf};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

/// The `dkg-sampler` binary: cargo's for the sampler's own tests, the workspace's for the lab's (which
/// include this file with `#[path]`).
pub fn sampler_bin() -> std::path::PathBuf {
    option_env!("CARGO_BIN_EXE_dkg-sampler").map_or_else(
        || dkg_testkit::process::workspace_bin("dkg-sampler"),
        std::path::PathBuf::from,
    )
}

/// The default control topic (the sampler's and the producer's default).
pub const CONTROL_TOPIC: &str = "_dkg.assignments";

/// One sample of the Prometheus text format.
#[derive(Debug, Clone)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parse the Prometheus text format (the subset the prometheus crate writes).
pub fn parse_metrics(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("sample line has a value");
        let value: f64 = value.parse().expect("numeric sample");
        let (name, labels) = match series.split_once('{') {
            None => (series.to_owned(), BTreeMap::new()),
            Some((name, rest)) => {
                let rest = rest.strip_suffix('}').expect("labels close");
                let mut labels = BTreeMap::new();
                // Values are quoted and may contain commas or escaped quotes: scan.
                let mut chars = rest.chars().peekable();
                while chars.peek().is_some() {
                    let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
                    assert_eq!(chars.next(), Some('"'));
                    let mut val = String::new();
                    while let Some(c) = chars.next() {
                        match c {
                            '\\' => val.push(chars.next().unwrap_or('\\')),
                            '"' => break,
                            c => val.push(c),
                        }
                    }
                    if chars.peek() == Some(&',') {
                        chars.next();
                    }
                    labels.insert(key.trim().to_owned(), val);
                }
                (name.to_owned(), labels)
            }
        };
        out.push(Sample {
            name,
            labels,
            value,
        });
    }
    out
}

/// A `dkg-sampler run` child process. Stopped with SIGTERM (or killed) on drop; its log is printed when the
/// test panics.
pub struct Sampler {
    pub name: String,
    pub addr: SocketAddr,
    process: LoggedChild,
}

impl Sampler {
    /// Start `dkg-sampler run --bootstrap-servers B --topic T --metrics-addr <free> EXTRA...`.
    pub fn start(name: &str, topic: &str, extra: &[&str]) -> Self {
        Self::start_on(&bootstrap(), name, topic, extra, &[])
    }

    /// Run `dkg-sampler run --once --interval-secs 1` as `name` and assert it publishes and exits 0.
    pub fn run_once(name: &str, topic: &str) {
        let mut s = Self::start(name, topic, &["--once", "--interval-secs", "1"]);
        let status = s.wait_exit(Duration::from_secs(60));
        assert!(
            status.success(),
            "--once exits 0 after publishing: {status}\n{}",
            s.log()
        );
    }

    /// [`Sampler::start`] against `bootstrap` (e.g. the fault-test cluster), with extra environment.
    pub fn start_on(
        bootstrap: &str,
        name: &str,
        topic: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let addr = free_addr();
        let log =
            std::env::temp_dir().join(format!("{}-{name}.log", unique_topic("dkg-sampler-test")));
        let mut command = Command::new(sampler_bin());
        command
            .arg("run")
            .args(["--bootstrap-servers", bootstrap, "--topic", topic])
            .args(["--metrics-addr", &addr.to_string()])
            .args(extra)
            .env("DKG_LOG", "info,librdkafka=warn,rdkafka=warn")
            // The first epoch on --min-samples, as in scripts/test (see there); a test of the
            // confidence rule passes --first-epoch-noise.
            .env("DKG_FIRST_EPOCH_NOISE", "1")
            .envs(env.iter().copied());
        Self {
            name: name.to_owned(),
            addr,
            process: LoggedChild::spawn(&format!("sampler {name}"), command, log),
        }
    }

    /// The process's log so far.
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.addr, path).ok()
    }

    /// `/healthz` as JSON (None while the server is not up).
    pub fn health(&self) -> Option<serde_json::Value> {
        let (_, body) = self.get("/healthz")?;
        serde_json::from_str(&body).ok()
    }

    /// `/metrics`, parsed.
    pub fn metrics(&self) -> Vec<Sample> {
        self.get("/metrics")
            .map(|(_, b)| parse_metrics(&b))
            .unwrap_or_default()
    }

    /// The value of `name` with `labels` (a subset), if exported.
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        find(&self.metrics(), name, labels)
    }

    /// Wait (blocking) until the sampler serves an assignment; `timeout` is a fault's bound.
    pub fn wait_assignment(&self, timeout: Duration) -> Assignment {
        wait_for("the sampler's first assignment", timeout, || {
            self.assignment()
        })
    }

    /// Wait (blocking) until the sampler serves an assignment for `partitions` partitions.
    pub fn wait_assignment_for(&self, partitions: u32, timeout: Duration) -> Assignment {
        wait_for(
            &format!("the sampler's assignment for {partitions} partitions"),
            timeout,
            || self.assignment().filter(|a| a.partitions() == partitions),
        )
    }

    /// `/assignment`, parsed (None on 404).
    pub fn assignment(&self) -> Option<Assignment> {
        match self.get("/assignment")? {
            (200, body) => {
                Some(Assignment::from_json(body.as_bytes()).expect("valid assignment JSON"))
            }
            _ => None,
        }
    }

    /// Completed intervals (from /healthz).
    pub fn intervals(&self) -> u64 {
        self.health()
            .and_then(|h| h["intervals"].as_u64())
            .unwrap_or(0)
    }

    /// Whether the process has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.process.exited()
    }

    /// Wait for the process to exit by itself (e.g. `--once`), at most `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        self.process.wait_exit(timeout)
    }

    /// SIGTERM, then wait for a graceful exit (at most `timeout`).
    pub fn terminate(&mut self, timeout: Duration) -> ExitStatus {
        self.process.terminate(timeout)
    }

    /// SIGKILL (a crash).
    pub fn kill(&mut self) -> ExitStatus {
        self.process.kill()
    }
}

/// The value of `name` with `labels` (a subset) in `samples`.
pub fn find(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
}

/// The 16-byte key of Zipf rank `rank` (1 = most frequent) in key space `generation`: switching the
/// generation makes different keys hot (drift).
pub fn zipf_key(generation: u64, rank: u64) -> String {
    format!("g{generation:02}-k{rank:011}")
}

/// Workload settings.
#[derive(Debug, Clone)]
pub struct WorkloadSpec {
    pub topic: String,
    pub alpha: f64,
    pub keys: u64,
    pub records_per_second: u64,
    /// Through `DkgProducer` (follows the control topic) or a plain producer (Kafka's hashing).
    pub dkg: bool,
    pub seed: u64,
}

impl WorkloadSpec {
    /// The stream most tests need: Zipf(1.0) over 10,000 keys at 10,000 records/s through
    /// `DkgProducer`. A test changes only what it is about: `WorkloadSpec { alpha: 1.2, ..zipf }`.
    pub fn zipf(topic: &str, seed: u64) -> Self {
        Self {
            topic: topic.to_owned(),
            alpha: 1.0,
            keys: 10_000,
            records_per_second: 10_000,
            dkg: true,
            seed,
        }
    }
}

/// A fresh topic of `partitions` with [`WorkloadSpec::zipf`]'s stream running on it.
pub async fn topic_with_workload(name: &str, partitions: u32, seed: u64) -> (String, Workload) {
    let topic = unique_topic(name);
    create_topic(&bootstrap(), &topic, partitions, &[]).await;
    let workload = Workload::start(WorkloadSpec::zipf(&topic, seed)).await;
    (topic, workload)
}

/// A background producer of Zipf-keyed records (16-byte keys, 100-byte values).
pub struct Workload {
    stop: Arc<AtomicBool>,
    generation: Arc<AtomicU64>,
    produced: Arc<AtomicU64>,
    errors: Arc<Mutex<Vec<String>>>,
    /// Records after which sending pauses (u64::MAX: never).
    hold: Arc<AtomicU64>,
    handle: Option<tokio::task::JoinHandle<()>>,
    /// The `DkgProducer`'s router (a `dkg` workload): what it has adopted, an event tests wait for.
    router: Option<dkg_partitioner::DkgRouter>,
    topic: String,
}

impl Workload {
    /// Start producing (call inside a multi-thread tokio runtime).
    pub async fn start(spec: WorkloadSpec) -> Self {
        Self::start_on(&bootstrap(), spec).await
    }

    /// [`Workload::start`], holding (sending nothing more) once `records` were handed over, until
    /// [`Workload::release`]: a test can make the topic hold exactly what a scenario needs, whatever
    /// the machine's pace.
    pub async fn start_held(spec: WorkloadSpec, records: u64) -> Self {
        Self::start_inner(&bootstrap(), spec, records).await
    }

    /// [`Workload::start`] against `bootstrap`.
    pub async fn start_on(bootstrap: &str, spec: WorkloadSpec) -> Self {
        Self::start_inner(bootstrap, spec, u64::MAX).await
    }

    async fn start_inner(bootstrap: &str, spec: WorkloadSpec, hold: u64) -> Self {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", bootstrap)
            .set("linger.ms", "5")
            .set("log_level", "3");
        let sender: Sender = if spec.dkg {
            let p = DkgProducer::builder(config)
                .topics([spec.topic.clone()])
                .build()
                .await
                .expect("build DkgProducer");
            Sender::Dkg(p)
        } else {
            Sender::Plain(config.create().expect("plain producer"))
        };
        let router = match &sender {
            Sender::Dkg(p) => Some(p.router().clone()),
            Sender::Plain(_) => None,
        };
        let topic = spec.topic.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let generation = Arc::new(AtomicU64::new(0));
        let produced = Arc::new(AtomicU64::new(0));
        let hold = Arc::new(AtomicU64::new(hold));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let (s, g, n, e, h) = (
            Arc::clone(&stop),
            Arc::clone(&generation),
            Arc::clone(&produced),
            Arc::clone(&errors),
            Arc::clone(&hold),
        );
        let handle = tokio::spawn(async move {
            let zipf = Zipf::new(spec.keys as f64, spec.alpha).expect("zipf");
            let mut rng = SmallRng::seed_from_u64(spec.seed);
            let value = [b'v'; 100];
            let batch = (spec.records_per_second / 100).max(1);
            // Paced from (instant, records sent then): reset after a hold, so a released workload
            // goes on at its rate rather than catching up in a burst.
            let mut paced_from = (Instant::now(), 0u64);
            let mut sent: u64 = 0;
            while !s.load(Ordering::Relaxed) {
                if sent >= h.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    paced_from = (Instant::now(), sent);
                    continue;
                }
                let gen_now = g.load(Ordering::Relaxed);
                for _ in 0..batch {
                    if sent >= h.load(Ordering::Relaxed) {
                        break;
                    }
                    let rank = zipf.sample(&mut rng) as u64;
                    let key = zipf_key(gen_now, rank);
                    let record = FutureRecord::to(&spec.topic)
                        .key(key.as_bytes())
                        .payload(&value[..]);
                    let res = match &sender {
                        Sender::Dkg(p) => p.send_result(record).map(drop).map_err(|(e, _)| e),
                        Sender::Plain(p) => p.send_result(record).map(drop).map_err(|(e, _)| e),
                    };
                    match res {
                        Ok(()) => sent += 1,
                        Err(KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)) => {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        Err(err) => e.lock().expect("errors").push(err.to_string()),
                    }
                }
                n.store(sent, Ordering::Relaxed);
                // Pace to the target rate.
                let due = Duration::from_secs_f64(
                    (sent - paced_from.1) as f64 / spec.records_per_second as f64,
                );
                if let Some(wait) = due.checked_sub(paced_from.0.elapsed()) {
                    tokio::time::sleep(wait).await;
                }
            }
            let _ = match &sender {
                Sender::Dkg(p) => p.inner().flush(Duration::from_secs(10)),
                Sender::Plain(p) => p.flush(Duration::from_secs(10)),
            };
        });
        Self {
            stop,
            generation,
            produced,
            errors,
            hold,
            handle: Some(handle),
            router,
            topic,
        }
    }

    /// The epoch of the assignment the workload's `DkgProducer` routes by (None: none adopted, or a
    /// plain workload).
    pub fn adopted_epoch(&self) -> Option<u64> {
        self.router
            .as_ref()?
            .assignment(&self.topic)
            .map(|a| a.epoch())
    }

    /// Make other keys hot from now on.
    pub fn set_generation(&self, generation: u64) {
        self.generation.store(generation, Ordering::Relaxed);
    }

    /// Send on (after [`Workload::start_held`]).
    pub fn release(&self) {
        self.hold.store(u64::MAX, Ordering::Relaxed);
    }

    /// Records handed to the producer so far.
    pub fn produced(&self) -> u64 {
        self.produced.load(Ordering::Relaxed)
    }

    /// Stop and flush; panics if sends failed.
    pub async fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            h.await.expect("workload task");
        }
        let errors = self.errors.lock().expect("errors");
        assert!(
            errors.is_empty(),
            "workload send errors: {:?}",
            &errors[..errors.len().min(5)]
        );
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

enum Sender {
    Dkg(DkgProducer),
    Plain(FutureProducer),
}

/// One control-topic record for a topic: offset and document (None = tombstone).
#[derive(Debug, Clone)]
pub struct ControlRecord {
    pub offset: i64,
    pub assignment: Option<Assignment>,
}

/// Every record of `topic` on the control topic, in log order, read with `read_committed` (what producers
/// see) or `read_uncommitted`.
pub fn read_control_topic(topic: &str, read_committed: bool) -> Vec<ControlRecord> {
    read_control_topic_on(&bootstrap(), topic, read_committed)
}

/// [`read_control_topic`] from the brokers at `bootstrap`.
pub fn read_control_topic_on(
    bootstrap: &str,
    topic: &str,
    read_committed: bool,
) -> Vec<ControlRecord> {
    read_keyed_on(bootstrap, CONTROL_TOPIC, read_committed, |k| {
        k == topic.as_bytes()
    })
    .into_iter()
    .map(|(offset, _, v)| ControlRecord {
        offset,
        assignment: v
            .map(|v| Assignment::from_json(&v).expect("valid assignment on the control topic")),
    })
    .collect()
}

/// Records of a (single-partition) topic whose key matches, in log order: (offset, key, value).
///
/// PANICS when it cannot tell: the topic's end offset cannot be fetched (a missing topic included) or the
/// read does not reach that end within 30 s. An empty result means "read to the end, nothing matched", so
/// checks of "nothing was published" cannot pass because the read failed.
pub fn read_keyed(
    name: &str,
    read_committed: bool,
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<(i64, Vec<u8>, Option<Vec<u8>>)> {
    read_keyed_on(&bootstrap(), name, read_committed, keep)
}

/// [`read_keyed`] from the brokers at `bootstrap`.
pub fn read_keyed_on(
    bootstrap: &str,
    name: &str,
    read_committed: bool,
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<(i64, Vec<u8>, Option<Vec<u8>>)> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    read_keyed_with(config, name, read_committed, keep)
}

/// [`read_keyed`] with a whole client configuration (a SASL user's, say).
pub fn read_keyed_with(
    mut config: ClientConfig,
    name: &str,
    read_committed: bool,
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<(i64, Vec<u8>, Option<Vec<u8>>)> {
    let consumer: BaseConsumer = config
        .set("group.id", "dkg-sampler-tests-reader")
        .set("enable.auto.commit", "false")
        .set(
            "isolation.level",
            if read_committed {
                "read_committed"
            } else {
                "read_uncommitted"
            },
        )
        .set("enable.partition.eof", "true")
        .create()
        .expect("reader");
    let (low, high) = consumer
        .fetch_watermarks(name, 0, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("the end offset of {name}/0 (does the topic exist?): {e}"));
    if high <= low {
        return Vec::new();
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(name, 0, Offset::Beginning)
        .expect("tpl");
    consumer.assign(&tpl).expect("assign");
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                let offset = m.offset();
                if let Some(k) = m.key()
                    && keep(k)
                {
                    out.push((offset, k.to_vec(), m.payload().map(<[u8]>::to_vec)));
                }
                if offset + 1 >= high {
                    return out;
                }
            }
            // The end (a read_committed reader may stop short of `high`: the rest is aborted data or
            // transaction markers, which it never returns).
            Some(Err(KafkaError::PartitionEOF(_))) => return out,
            // Lost connections are reported as consumer errors and librdkafka reconnects by itself
            // (a starved broker on a busy CI box): read on until the deadline.
            Some(Err(KafkaError::MessageConsumption(
                RDKafkaErrorCode::AllBrokersDown | RDKafkaErrorCode::BrokerTransportFailure,
            ))) => {}
            Some(Err(e)) => panic!("reading {name}: {e}"),
            None => {}
        }
    }
    panic!("reading {name} to offset {high} timed out");
}

/// Whether the broker's metadata lists `name` (panics if the metadata cannot be read): lets a check of
/// "nothing was written to a topic" tell an absent topic from a failed read.
pub fn topic_exists(name: &str) -> bool {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("metadata client");
    let md = consumer
        .fetch_metadata(Some(name), Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("metadata of {name}: {e}"));
    md.topics()
        .iter()
        .any(|t| t.name() == name && t.error().is_none() && !t.partitions().is_empty())
}

/// Epochs of the documents (tombstones skipped), in log order.
pub fn epochs(records: &[ControlRecord]) -> Vec<u64> {
    records
        .iter()
        .filter_map(|r| r.assignment.as_ref().map(Assignment::epoch))
        .collect()
}

/// Panics unless `epochs` strictly increase.
pub fn assert_strictly_increasing(epochs: &[u64]) {
    assert!(
        epochs.windows(2).all(|w| w[0] < w[1]),
        "epochs must strictly increase: {epochs:?}"
    );
}

/// Publish `assignment` on the control topic with a plain (non-transactional) producer (creating
/// the control topic first, so the result does not depend on which test ran before).
pub async fn publish_raw(assignment: &Assignment) {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap());
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
        c.create().expect("admin client");
    dkg_partitioner::kafka::control::ensure_control_topic(&admin, CONTROL_TOPIC, -1)
        .await
        .expect("the control topic");
    dkg_partitioner::kafka::control::publish_assignment(
        &control_publisher(),
        CONTROL_TOPIC,
        assignment,
        Duration::from_secs(10),
    )
    .await
    .expect("publish");
}

/// A plain (non-sidecar) producer of control records on the test broker.
fn control_publisher() -> FutureProducer {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap());
    dkg_partitioner::kafka::control::publisher_config(&c)
        .create()
        .expect("publisher")
}

/// Retract `topic`'s assignment (a tombstone) with a plain producer.
pub async fn retract_raw(topic: &str) {
    dkg_partitioner::kafka::control::retract_assignment(
        &control_publisher(),
        CONTROL_TOPIC,
        topic,
        Duration::from_secs(10),
    )
    .await
    .expect("retract");
}

/// The key-grouping lower bound `max(1, k * p1) - 1` of Zipf(alpha) over `keys` keys.
pub fn zipf_bound(alpha: f64, keys: u64, partitions: u32) -> f64 {
    let h: f64 = (1..=keys).map(|i| 1.0 / (i as f64).powf(alpha)).sum();
    (f64::from(partitions) / h).max(1.0) - 1.0
}

/// The broker's end offsets of a topic's partitions: how many records each partition has received, read
/// back from the log. A sampler's per-interval rates come from its fetches, which arrive in lumps while the
/// test binaries share the machine's two cores; the end offsets are what the producers actually placed.
pub struct EndOffsets {
    consumer: BaseConsumer,
    topic: String,
    partitions: u32,
}

impl EndOffsets {
    /// A reader of `topic`'s `partitions` end offsets on the test broker.
    pub fn new(topic: &str, partitions: u32) -> Self {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap())
            .set("group.id", "dkg-test-end-offsets")
            .create()
            .expect("end-offset reader");
        Self {
            consumer,
            topic: topic.to_owned(),
            partitions,
        }
    }

    /// Every partition's end offset, in partition order, from one ListOffsets request, so the
    /// partitions are read at one moment: twelve requests in a row spread a snapshot over up to half
    /// a second on a loaded machine, which at the tests' rates is several percent of a partition's
    /// records between two snapshots (PANICS when it cannot be fetched).
    pub fn read(&self) -> Vec<i64> {
        self.try_read().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`EndOffsets::read`], or why it failed (e.g. partitions of a topic just created, whose
    /// leaders the broker is still electing).
    pub fn try_read(&self) -> Result<Vec<i64>, String> {
        let mut latest = TopicPartitionList::new();
        for p in 0..self.partitions as i32 {
            latest
                .add_partition_offset(&self.topic, p, Offset::End)
                .map_err(|e| format!("end offset of {}/{p}: {e}", self.topic))?;
        }
        let answer = self
            .consumer
            .offsets_for_times(latest, Duration::from_secs(10))
            .map_err(|e| format!("end offsets of {}: {e}", self.topic))?;
        (0..self.partitions as i32)
            .map(|p| {
                match answer
                    .find_partition(&self.topic, p)
                    .map(|e| (e.offset(), e.error()))
                {
                    Some((Offset::Offset(o), Ok(()))) => Ok(o),
                    other => Err(format!("end offset of {}/{p}: {other:?}", self.topic)),
                }
            })
            .collect()
    }

    /// The records on the topic: the sum of [`EndOffsets::read`] (a topic without transactions or
    /// deletions, whose offsets count records).
    pub fn total(&self) -> i64 {
        self.read().iter().sum()
    }

    /// Wait until the topic holds at least `records` records, and return that snapshot. The bound
    /// (60 s) only a fault reaches: the tests produce thousands of records a second.
    pub fn wait_total(&self, records: i64) -> Vec<i64> {
        wait_for(
            &format!("{records} records on {}", self.topic),
            Duration::from_secs(60),
            || {
                // A failed read (each is printed) is retried up to the bound.
                let now = self
                    .try_read()
                    .map_err(|e| eprintln!("reading end offsets (retried): {e}"))
                    .ok()?;
                (now.iter().sum::<i64>() >= records).then_some(now)
            },
        )
    }

    /// A record-count window: the snapshot now, and the first one at least `records` records later.
    /// Windows defined by what arrived, not by time, judge placement the same on a quiet and on a
    /// loaded machine (a time window of a starved producer holds too few records to judge).
    pub fn window(&self, records: i64) -> (Vec<i64>, Vec<i64>) {
        let from = self.read();
        let to = self.wait_total(from.iter().sum::<i64>() + records);
        (from, to)
    }
}

/// max / mean - 1 of the records each partition received between two [`EndOffsets::read`] snapshots
/// (PANICS when fewer than 100 records per partition came in between: too few to judge).
pub fn imbalance_between(from: &[i64], to: &[i64]) -> f64 {
    let counts: Vec<f64> = from.iter().zip(to).map(|(a, b)| (b - a) as f64).collect();
    let mean = counts.iter().sum::<f64>() / counts.len() as f64;
    assert!(
        mean > 100.0,
        "too few records between the snapshots: {counts:?}"
    );
    counts.iter().copied().fold(0.0, f64::max) / mean - 1.0
}

/// Grow `topic` to `partitions` partitions (CreatePartitions), failing the test on any error.
pub async fn grow_partitions(topic: &str, partitions: usize) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("admin");
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for r in admin
        .create_partitions([&NewPartitions::new(topic, partitions)], &opts)
        .await
        .expect("CreatePartitions")
    {
        r.unwrap_or_else(|(t, e)| panic!("CreatePartitions {t}: {e}"));
    }
}
