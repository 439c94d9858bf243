//! `dkg-lab loadgen`: produce Zipf-skewed keyed records through the DKG producer wrapper (or a
//! plain rdkafka producer with `--plain`) and report where they landed.
//!
//! Keys: the tools' one workload generator ([`dkg_sampler::workload::ZipfKeys`], the same as `simulate`'s):
//! rank `r` of a Zipf(`--keys`, `--alpha`) law (alias method, O(1) per record) is mapped through a seeded
//! random permutation of `0..keys` to an id, and the key is the id in decimal. Without the permutation
//! the hottest keys would be "0", "1", ... and the hash placement would depend on how those particular
//! strings hash. The same `--seed` gives the same key sequence, so a `--plain` run and a wrapper run are
//! directly comparable.
//!
//! The table at the end counts records per partition from the delivery reports (where the broker
//! stored them), with each partition's share and the imbalance `max/mean - 1`.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use clap::Parser;
use dkg_kafka::kafka::control::DEFAULT_CONTROL_TOPIC;
use dkg_kafka::kafka::producer_config;
use dkg_kafka::kafka::topic;
use dkg_kafka::kafka::topic::TopicSpec;
use dkg_kafka::{DeliveryFuture, DkgProducer, EpochHeader};
use dkg_kafka_core::imbalance;
use indicatif::{ProgressBar, ProgressStyle};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use tracing::info;

use super::simulate::ValueBytes;
use crate::connection::Connection;
use dkg_sampler::cli::BadKafkaConfig;
use dkg_sampler::workload::ZipfKeys;

/// Produce Zipf-skewed records and print how they spread over the partitions.
#[derive(Debug, Parser)]
#[command(
    after_help = "Examples:\n  dkg-lab loadgen --bootstrap-servers 127.0.0.1:9092 --topic orders --alpha 1.2 --keys 10000 --count 1000000\n  \
                  dkg-lab loadgen --bootstrap-servers 127.0.0.1:9092 --topic orders --alpha 1.2 --keys 10000 --count 1000000 --plain\n  \
                  dkg-lab loadgen --bootstrap-servers 127.0.0.1:9092 --topic orders --alpha 1.0 --keys 1000 --count 100000 --rate 5000 --create-partitions 12"
)]
pub struct Args {
    #[command(flatten)]
    pub connection: Connection,

    /// The topic to produce to.
    #[arg(long, env = "DKG_TOPIC")]
    pub topic: String,

    /// Zipf exponent of the key distribution (p_i ~ 1/i^alpha; 0 = uniform).
    #[arg(long, env = "DKG_LOADGEN_ALPHA", value_parser = parse_alpha)]
    pub alpha: f64,

    /// Number of distinct keys.
    #[arg(long, env = "DKG_LOADGEN_KEYS", value_parser = clap::value_parser!(u32).range(1..))]
    pub keys: u32,

    /// Number of records to produce.
    #[arg(long, env = "DKG_LOADGEN_COUNT")]
    pub count: u64,

    /// Target rate in records per second (default: as fast as the producer goes).
    #[arg(long, env = "DKG_LOADGEN_RATE", value_parser = parse_rate)]
    pub rate: Option<f64>,

    /// Produce through a plain rdkafka FutureProducer (Kafka's default placement) instead of the
    /// DKG wrapper. Same safety defaults (idempotence, acks=all, murmur2 partitioner).
    #[arg(long, env = "DKG_LOADGEN_PLAIN")]
    pub plain: bool,

    /// Bytes of payload per record.
    #[arg(long, env = "DKG_LOADGEN_VALUE_BYTES", default_value_t = 100)]
    pub value_bytes: usize,

    /// Per-key value sizes instead of --value-bytes for every record: each key gets one size drawn from
    /// `fixed:N` or `lognormal:MU,SIGMA` (median e^MU bytes), independently of its rank and seeded by
    /// --seed, as in `simulate --value-bytes`: the keys heavy in bytes are then not the keys heavy in
    /// records (for `run --weight bytes`). With --value-prefix the prefix counts toward the size.
    #[arg(long, env = "DKG_LOADGEN_KEY_VALUE_BYTES", value_name = "SPEC")]
    pub key_value_bytes: Option<ValueBytes>,

    /// Seed of the key permutation and the key sequence.
    #[arg(long, env = "DKG_LOADGEN_SEED", default_value_t = 1)]
    pub seed: u64,

    /// The control topic the wrapper follows (ignored with --plain).
    #[arg(long, env = "DKG_CONTROL_TOPIC", default_value = DEFAULT_CONTROL_TOPIC)]
    pub control_topic: String,

    /// Create the topic with this many partitions if it does not exist (replication factor: the
    /// broker's default). Without it a missing topic is an error.
    #[arg(long, env = "DKG_LOADGEN_CREATE_PARTITIONS", value_parser = clap::value_parser!(u32).range(1..))]
    pub create_partitions: Option<u32>,

    /// Most records awaiting their delivery report at once.
    #[arg(long, env = "DKG_LOADGEN_MAX_IN_FLIGHT", default_value_t = 50_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_in_flight: u32,

    /// Take part in the consumer-side rebalancer's ordering protocol (a lease, and a marker on the
    /// handoff topic at every epoch switch: what an application needs for per-key order across
    /// switches with `DkgConsumer`). Ignored with --plain.
    #[arg(long, env = "DKG_LOADGEN_ORDERING")]
    pub ordering: bool,

    /// Which records carry the `dkg-epoch` header (ignored with --plain): `auto` (the library's
    /// default: `moved` with --ordering, `off` without), `moved` (records of keys the latest epoch
    /// switch moved), `all` (every record an assignment placed, so a reader can check each
    /// record's placement against its epoch), `off`.
    #[arg(long, env = "DKG_LOADGEN_EPOCH_HEADER", value_enum, default_value_t = HeaderMode::Auto)]
    pub epoch_header: HeaderMode,

    /// Make every value unique and checkable: `PREFIX:SEQ:` (SEQ = 0, 1, ... in send order), then
    /// padding up to --value-bytes. Give each loadgen of a run its own prefix; `dkg-lab soak`
    /// checks the topic for lost and duplicated records this way. Without it values are padding only.
    #[arg(long, env = "DKG_LOADGEN_VALUE_PREFIX")]
    pub value_prefix: Option<String>,

    /// Drift: every this many seconds of the run the Zipf ranks are mapped to other keys (the key
    /// permutation is re-seeded with --seed + 1, + 2, ...), so the hot keys change and the sampler
    /// has to publish new epochs. Without it the distribution is stationary.
    #[arg(long, env = "DKG_LOADGEN_DRIFT_SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub drift_secs: Option<u64>,

    /// Serve Prometheus metrics at http://ADDR/metrics while producing: the wrapper's dkg_producer_*
    /// (with --plain: dkg_producer_partition_records_total, counted from the delivery reports).
    #[arg(long, env = "DKG_METRICS_ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
}

/// `--epoch-header`: the library's [`EpochHeader`] modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HeaderMode {
    /// `moved` with --ordering, `off` without.
    Auto,
    /// Records of keys the latest epoch switch moved.
    Moved,
    /// Every record an assignment placed.
    All,
    /// None.
    Off,
}

impl From<HeaderMode> for EpochHeader {
    fn from(m: HeaderMode) -> Self {
        match m {
            HeaderMode::Auto => EpochHeader::Auto,
            HeaderMode::Moved => EpochHeader::Moved,
            HeaderMode::All => EpochHeader::All,
            HeaderMode::Off => EpochHeader::Off,
        }
    }
}

fn parse_alpha(s: &str) -> Result<f64, String> {
    let a: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if a.is_finite() && a >= 0.0 {
        Ok(a)
    } else {
        Err("must be a finite number >= 0".to_owned())
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let r: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if r.is_finite() && r > 0.0 {
        Ok(r)
    } else {
        Err("must be a finite number > 0 (records per second)".to_owned())
    }
}

/// Errors of `dkg-lab loadgen`.
#[derive(Debug, thiserror::Error)]
pub enum LoadgenError {
    /// A `--kafka-config` entry or file is malformed.
    #[error("{0}")]
    KafkaConfig(#[from] BadKafkaConfig),
    /// A Kafka client call failed.
    #[error("{what}: {source}")]
    Kafka {
        /// What loadgen was doing.
        what: String,
        /// The client's error.
        #[source]
        source: KafkaError,
    },
    /// Building the DKG producer failed.
    #[error("building the DKG producer: {0}")]
    Producer(#[from] dkg_kafka::Error),
    /// The topic does not exist (and --create-partitions was not given).
    #[error(
        "topic {topic:?} does not exist on {bootstrap} (pass --create-partitions N to create it)"
    )]
    MissingTopic {
        /// The topic.
        topic: String,
        /// The bootstrap servers.
        bootstrap: String,
    },
    /// A flag value is unusable.
    #[error("invalid --{flag}: {reason}")]
    InvalidArgument {
        /// The flag.
        flag: &'static str,
        /// Why.
        reason: String,
    },
    /// Creating the topic (--create-partitions) failed.
    #[error("creating topic {topic:?}: {source}")]
    CreateTopic {
        /// The topic.
        topic: String,
        /// The cause.
        #[source]
        source: dkg_kafka::Error,
    },
    /// Some records were not delivered.
    #[error("{failed} of {total} records were not delivered; first error: {first}")]
    DeliveryFailed {
        /// Records whose delivery failed.
        failed: u64,
        /// Records attempted.
        total: u64,
        /// The first delivery error.
        first: String,
    },
    /// The async runtime could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[from] std::io::Error),
}

fn kafka(what: impl Into<String>) -> impl FnOnce(KafkaError) -> LoadgenError {
    let what = what.into();
    move |source| LoadgenError::Kafka { what, source }
}

/// Run `loadgen`.
pub fn run(args: Args) -> Result<(), LoadgenError> {
    let runtime = crate::runtime()?;
    runtime.block_on(generate(args))
}

/// `send_result`'s outcome: the delivery future, or the error with the record handed back.
pub(crate) type SendResult<'a> = Result<DeliveryFuture, (KafkaError, FutureRecord<'a, [u8], [u8]>)>;

/// The producer used: the wrapper or a plain one.
pub(crate) enum Sender {
    Dkg(DkgProducer),
    Plain(FutureProducer),
}

impl Sender {
    #[allow(clippy::result_large_err)]
    pub(crate) fn send<'a>(&self, record: FutureRecord<'a, [u8], [u8]>) -> SendResult<'a> {
        match self {
            Sender::Dkg(p) => p.send_result(record),
            Sender::Plain(p) => p.send_result(record).map(DeliveryFuture::from),
        }
    }

    /// Hand `record` to the producer and push its delivery future on `in_flight`. While librdkafka's
    /// queue is full, the oldest future in flight is settled with `settle` (or, with none in flight,
    /// it pauses) and the send retried; any other error comes back.
    pub(crate) async fn send_queued(
        &self,
        mut record: FutureRecord<'_, [u8], [u8]>,
        in_flight: &mut VecDeque<DeliveryFuture>,
        mut settle: impl AsyncFnMut(DeliveryFuture),
    ) -> Result<(), KafkaError> {
        loop {
            match self.send(record) {
                Ok(future) => {
                    in_flight.push_back(future);
                    return Ok(());
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    match in_flight.pop_front() {
                        Some(oldest) => settle(oldest).await,
                        None => tokio::time::sleep(Duration::from_millis(10)).await,
                    }
                }
                Err((e, _)) => return Err(e),
            }
        }
    }

    pub(crate) fn flush(&self, timeout: Duration) -> Result<(), KafkaError> {
        match self {
            Sender::Dkg(p) => p.flush(timeout),
            Sender::Plain(p) => p.flush(timeout),
        }
    }
}

/// Delivery bookkeeping.
pub(crate) struct Tally {
    /// Records acknowledged per partition.
    pub(crate) per_partition: Vec<u64>,
    /// Records whose delivery failed, and the first error.
    pub(crate) failed: u64,
    pub(crate) first_error: Option<String>,
    /// --plain with --metrics-addr: dkg_producer_partition_records_total of this topic.
    delivered: Option<(prometheus::IntCounterVec, String)>,
}

impl Tally {
    /// No deliveries yet on a topic of `partitions` partitions.
    pub(crate) fn new(partitions: u32) -> Self {
        Self {
            per_partition: vec![0; partitions as usize],
            failed: 0,
            first_error: None,
            delivered: None,
        }
    }

    pub(crate) async fn settle(&mut self, future: DeliveryFuture) {
        match future.await {
            Ok(Ok(delivery)) => {
                let p = usize::try_from(delivery.partition).unwrap_or(usize::MAX);
                if p >= self.per_partition.len() {
                    self.per_partition
                        .resize(p.saturating_add(1).min(1 << 20), 0);
                }
                if let Some(c) = self.per_partition.get_mut(p) {
                    *c += 1;
                }
                if let Some((counter, topic)) = &self.delivered {
                    counter
                        .with_label_values(&[topic.as_str(), &delivery.partition.to_string()])
                        .inc();
                }
            }
            Ok(Err((e, _))) => self.fail(e.to_string()),
            Err(_) => self.fail("producer dropped before the delivery report".to_owned()),
        }
    }

    pub(crate) fn fail(&mut self, error: String) {
        self.failed += 1;
        if self.first_error.is_none() {
            self.first_error = Some(error);
        }
    }
}

async fn generate(args: Args) -> Result<(), LoadgenError> {
    // Keys: Zipf rank -> permuted id -> decimal string.
    let mut zipf =
        ZipfKeys::new(args.keys, args.alpha, args.seed).ok_or(LoadgenError::InvalidArgument {
            flag: "alpha",
            reason: format!(
                "no Zipf law over {} keys with alpha {}",
                args.keys, args.alpha
            ),
        })?;
    let user_config = args.connection.client_config(&[])?;
    let partitions = ensure_topic(&args, &user_config).await?;
    let registry = prometheus::Registry::new();
    let delivered = match args.metrics_addr {
        Some(addr) => {
            serve_metrics(addr, registry.clone()).await?;
            if args.plain {
                Some((plain_partition_counter(&registry)?, args.topic.clone()))
            } else {
                None
            }
        }
        None => None,
    };

    let sender = make_sender(&args, &user_config, &registry, partitions).await?;
    let bar = progress_bar(args.count);
    let mut tally = Tally {
        delivered,
        ..Tally::new(partitions)
    };
    let start = Instant::now();
    produce(&args, &sender, &mut zipf, &mut tally, &bar, start).await?;
    if let Sender::Dkg(producer) = &sender {
        // Ordering producers: final markers and a closed lease, so consumers stop waiting at once.
        producer.close().await?;
    }
    bar.finish_and_clear();
    let elapsed = start.elapsed();

    print_report(&args, &tally, elapsed);
    if tally.failed > 0 {
        return Err(LoadgenError::DeliveryFailed {
            failed: tally.failed,
            total: args.count,
            first: tally.first_error.unwrap_or_default(),
        });
    }
    Ok(())
}

/// The producer: a plain one (`--plain`) or the DKG wrapper, which logs the assignment it starts with.
async fn make_sender(
    args: &Args,
    user_config: &ClientConfig,
    registry: &prometheus::Registry,
    partitions: u32,
) -> Result<Sender, LoadgenError> {
    if args.plain {
        let producer: FutureProducer = producer_config(user_config)
            .create()
            .map_err(kafka("creating the producer"))?;
        return Ok(Sender::Plain(producer));
    }
    let producer = DkgProducer::builder(user_config.clone())
        .control_topic(&args.control_topic)
        .topics([args.topic.as_str()])
        .metrics(registry)
        .ordering(args.ordering)
        .epoch_header(args.epoch_header)
        .build()
        .await?;
    match producer.router().assignment(&args.topic) {
        Some(a) if a.partitions() == partitions => info!(
            topic = %args.topic,
            epoch = a.epoch(),
            "producing through the DKG wrapper with assignment epoch {}", a.epoch()
        ),
        Some(a) => info!(
            topic = %args.topic,
            epoch = a.epoch(),
            "the assignment is for {} partitions, the topic has {partitions}: Kafka's default placement",
            a.partitions()
        ),
        None => info!(
            topic = %args.topic,
            "no assignment on {}: Kafka's default placement until one is published",
            args.control_topic
        ),
    }
    Ok(Sender::Dkg(producer))
}

fn progress_bar(count: u64) -> ProgressBar {
    let bar = ProgressBar::new(count);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} records {per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// Send `--count` records (paced to `--rate` from `start`), at most `--max-in-flight` awaiting their
/// delivery report; then flush and settle every report.
async fn produce(
    args: &Args,
    sender: &Sender,
    zipf: &mut ZipfKeys,
    tally: &mut Tally,
    bar: &ProgressBar,
    start: Instant,
) -> Result<(), LoadgenError> {
    // Value size by key id (ids are a random permutation of the ranks, so sizes are independent of rank).
    let sizes: Option<Vec<usize>> = args.key_value_bytes.map(|spec| {
        spec.draw(args.keys as usize, args.seed)
            .into_iter()
            .map(|b| usize::try_from(b).unwrap_or(usize::MAX))
            .collect()
    });
    let largest = sizes
        .as_ref()
        .and_then(|s| s.iter().copied().max())
        .unwrap_or(args.value_bytes);
    let padding = vec![b'x'; largest];
    let mut value: Vec<u8> = Vec::with_capacity(largest.max(32));
    let mut in_flight: VecDeque<DeliveryFuture> = VecDeque::new();
    let max_in_flight = args.max_in_flight as usize;
    let mut key = String::with_capacity(12);
    let mut drift_step = 0_u64;
    for i in 0..args.count {
        if let Some(every) = args.drift_secs {
            let step = start.elapsed().as_secs() / every;
            if step != drift_step {
                drift_step = step;
                // Same law, other keys: the hot ranks land on new ids.
                if let Some(next) =
                    ZipfKeys::new(args.keys, args.alpha, args.seed.wrapping_add(step))
                {
                    *zipf = next;
                }
                info!(step, "drift: the hot keys changed");
            }
        }
        if let Some(rate) = args.rate {
            // Pace against the schedule (not per-record sleeps), so the average rate holds.
            #[allow(clippy::cast_precision_loss)]
            let due = Duration::from_secs_f64(i as f64 / rate);
            let elapsed = start.elapsed();
            if due > elapsed + Duration::from_millis(1) {
                tokio::time::sleep(due - elapsed).await;
            }
        }
        key.clear();
        let id = zipf.next_id();
        let _ = write!(key, "{id}");
        let size = sizes
            .as_ref()
            .and_then(|s| s.get(id as usize).copied())
            .unwrap_or(args.value_bytes);
        let payload: &[u8] = match &args.value_prefix {
            Some(prefix) => {
                value.clear();
                let _ = write!(Bytes(&mut value), "{prefix}:{i}:");
                let pad = size.saturating_sub(value.len());
                value.extend_from_slice(&padding[..pad]);
                &value
            }
            None => &padding[..size],
        };
        let record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&args.topic)
            .key(key.as_bytes())
            .payload(payload);
        let sent = sender
            .send_queued(record, &mut in_flight, async |oldest| {
                tally.settle(oldest).await;
                bar.inc(1);
            })
            .await;
        if let Err(e) = sent {
            tally.fail(e.to_string());
            bar.inc(1);
        }
        while in_flight.len() >= max_in_flight {
            if let Some(oldest) = in_flight.pop_front() {
                tally.settle(oldest).await;
                bar.inc(1);
            }
        }
        // Keep the generator fair to the tokio workers without a per-record yield.
        if i % 4096 == 4095 {
            tokio::task::yield_now().await;
        }
    }
    sender
        .flush(Duration::from_secs(120))
        .map_err(kafka("flushing the producer"))?;
    for future in in_flight.drain(..) {
        tally.settle(future).await;
        bar.inc(1);
    }
    Ok(())
}

/// `fmt::Write` into a byte buffer (the value is built without a `String` per record).
struct Bytes<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Bytes<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// The topic's partition count, creating the topic if asked to.
async fn ensure_topic(args: &Args, config: &ClientConfig) -> Result<u32, LoadgenError> {
    let probe: BaseConsumer = config
        .create()
        .map_err(kafka("creating a metadata client"))?;
    let count = |probe: &BaseConsumer| -> Result<u32, LoadgenError> {
        let md = probe
            .fetch_metadata(Some(&args.topic), Duration::from_secs(10))
            .map_err(kafka(format!(
                "reading metadata of {:?} from {}",
                args.topic, args.connection.bootstrap_servers
            )))?;
        Ok(md
            .topics()
            .iter()
            .find(|t| t.name() == args.topic)
            .map_or(0, |t| {
                u32::try_from(t.partitions().len()).unwrap_or(u32::MAX)
            }))
    };
    let existing = count(&probe)?;
    if existing > 0 {
        return Ok(existing);
    }
    let Some(partitions) = args.create_partitions else {
        return Err(LoadgenError::MissingTopic {
            topic: args.topic.clone(),
            bootstrap: args.connection.bootstrap_servers.clone(),
        });
    };
    // Wait until the metadata shows it, so the first records do not race the creation.
    let spec = TopicSpec::new(&args.topic, partitions);
    topic::create_and_wait(config, &spec, Duration::from_secs(30))
        .await
        .map_err(|source| LoadgenError::CreateTopic {
            topic: args.topic.clone(),
            source,
        })?;
    info!(topic = %args.topic, partitions, "created the topic");
    count(&probe)
}

fn print_report(args: &Args, tally: &Tally, elapsed: Duration) {
    let delivered: u64 = tally.per_partition.iter().sum();
    #[allow(clippy::cast_precision_loss)]
    let loads: Vec<f64> = tally.per_partition.iter().map(|&c| c as f64).collect();
    let mode = if args.plain {
        "plain FutureProducer"
    } else {
        "DkgProducer"
    };
    println!(
        "{mode}: {delivered} records delivered to {} in {:.2} s ({:.0} records/s); alpha {}, {} keys, seed {}",
        args.topic,
        elapsed.as_secs_f64(),
        rate(delivered, elapsed),
        args.alpha,
        args.keys,
        args.seed
    );
    println!("{:>9}  {:>12}  {:>7}", "partition", "records", "share");
    for (p, &c) in tally.per_partition.iter().enumerate() {
        #[allow(clippy::cast_precision_loss)]
        let share = if delivered == 0 {
            0.0
        } else {
            c as f64 / delivered as f64
        };
        println!("{p:>9}  {c:>12}  {:>6.2}%", share * 100.0);
    }
    println!(
        "imbalance (max/mean - 1): {:.2}%",
        imbalance(&loads) * 100.0
    );
    if tally.failed > 0 {
        println!("failed deliveries: {}", tally.failed);
    }
}

fn rate(records: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    #[allow(clippy::cast_precision_loss)]
    if secs > 0.0 {
        records as f64 / secs
    } else {
        0.0
    }
}

/// The plain producer's per-partition counter (same name and labels as the wrapper's, so the dashboards
/// compare both topics with one query).
fn plain_partition_counter(
    registry: &prometheus::Registry,
) -> Result<prometheus::IntCounterVec, LoadgenError> {
    let invalid = |e: prometheus::Error| LoadgenError::InvalidArgument {
        flag: "metrics-addr",
        reason: e.to_string(),
    };
    let counter = prometheus::IntCounterVec::new(
        prometheus::Opts::new(
            "dkg_producer_partition_records_total",
            "Keyed records delivered to each partition by the plain (hash-partitioned) producer.",
        ),
        &["topic", "partition"],
    )
    .map_err(invalid)?;
    registry
        .register(Box::new(counter.clone()))
        .map_err(invalid)?;
    Ok(counter)
}

/// Serve `registry` at `http://addr/metrics` (Prometheus text format) for the rest of the run. Binds
/// now, so a taken port fails at start.
async fn serve_metrics(
    addr: std::net::SocketAddr,
    registry: prometheus::Registry,
) -> Result<(), LoadgenError> {
    dkg_sampler::serve::serve_metrics(addr, registry, axum::Router::new())
        .await
        .map(drop)
        .map_err(|e| LoadgenError::InvalidArgument {
            flag: "metrics-addr",
            reason: format!("cannot listen on {addr}: {e}"),
        })
}
