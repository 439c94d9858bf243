//! `dkg-lab soak`: the whole system for a long time (issue 13, item 7). It starts, as separate
//! processes, the sampler sidecar (`dkg-sampler run`), `--producers` ordering producers
//! (`loadgen --ordering --epoch-header all`) whose key distribution drifts every `--drift-secs`, and a
//! consumer group of `DkgConsumer`s (`consume`), on a fresh topic and control topic, for
//! `--duration-secs`. Then it reads both topics back and reports:
//!
//! - **lost / duplicated**: every producer writes values `p<i>:<seq>:` with `seq = 0..count`, so
//!   the data topic must hold each exactly once;
//! - **misplaced**: every record an assignment placed carries its epoch (`--epoch-header all`) and
//!   must sit on that epoch's partition for its key (the committed documents of the control topic,
//!   read with `read_committed`); an unstamped record must sit on Kafka's default placement;
//! - **epochs** the sampler published, and what the consumer group processed;
//! - **memory**: each process's resident set (`VmRSS`) at the start (the first sample after
//!   `--warmup-secs`) and at the end (the last sample before it exited), and its peak (`VmHWM`).
//!
//! It fails (exit 1) when a record is lost, duplicated or misplaced, or a process failed. Key order
//! through the consumer group is not checked here (the consumer tests check it); the group is part
//! of the load, and its memory and throughput are what a soak watches. `scripts/soak` starts the
//! broker and runs it; BENCHMARKS.md "Soak" has a result.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use dkg_kafka::Assignment;
use dkg_kafka::kafka::control::ensure_control_topic;
use dkg_kafka::kafka::epoch_of;
use dkg_kafka::kafka::topic;
use dkg_kafka::kafka::topic::TopicSpec;
use dkg_kafka_core::kafka_partition;
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;

use crate::children::Children;
use dkg_sampler::cli::KafkaConfigArgs;

/// Arguments of `dkg-lab soak`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    scripts/soak                                   # start the local broker, 30 minutes\n  \
    dkg-lab soak --bootstrap-servers 127.0.0.1:9092 --duration-secs 120 --drift-secs 30")]
pub struct Args {
    /// Kafka bootstrap servers (host:port[,host:port...]).
    #[arg(long, env = "DKG_BOOTSTRAP_SERVERS", default_value = "127.0.0.1:9092")]
    pub bootstrap_servers: String,

    /// Extra librdkafka settings for every client (passed to the child processes through their
    /// environment, never on a command line).
    #[command(flatten)]
    pub kafka: KafkaConfigArgs,

    /// How long the producers run, in seconds.
    #[arg(long, env = "DKG_SOAK_DURATION_SECS", default_value_t = 1800, value_parser = clap::value_parser!(u64).range(5..))]
    pub duration_secs: u64,

    /// Producer processes.
    #[arg(long, env = "DKG_SOAK_PRODUCERS", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub producers: u32,

    /// Records per second of each producer.
    #[arg(long, env = "DKG_SOAK_RATE_PER_PRODUCER", default_value_t = 2000)]
    pub rate_per_producer: u32,

    /// Partitions of the soak's topic.
    #[arg(long, env = "DKG_SOAK_PARTITIONS", default_value_t = 12, value_parser = clap::value_parser!(u32).range(2..=1024))]
    pub partitions: u32,

    /// Distinct keys of the workload.
    #[arg(long, env = "DKG_SOAK_KEYS", default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub keys: u32,

    /// Zipf exponent of the key distribution.
    #[arg(long, env = "DKG_SOAK_ALPHA", default_value_t = 1.0)]
    pub alpha: f64,

    /// Every this many seconds the hot keys change (the producers' `--drift-secs`).
    #[arg(long, env = "DKG_SOAK_DRIFT_SECS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..))]
    pub drift_secs: u64,

    /// The sampler's decision interval (its `--interval-secs`).
    #[arg(long, env = "DKG_SOAK_INTERVAL_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub interval_secs: u64,

    /// Members of the consumer group (one `consume` process).
    #[arg(long, env = "DKG_SOAK_MEMBERS", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub members: u32,

    /// Simulated processing cost per record of each member, in microseconds.
    #[arg(long, env = "DKG_SOAK_WORK_US", default_value_t = 0)]
    pub work_us: u64,

    /// The first memory sample is taken this many seconds after the start.
    #[arg(long, env = "DKG_SOAK_WARMUP_SECS", default_value_t = 30)]
    pub warmup_secs: u64,

    /// How long the consumer group may take after the producers finished to process everything.
    #[arg(long, env = "DKG_SOAK_DRAIN_TIMEOUT_SECS", default_value_t = 300)]
    pub drain_timeout_secs: u64,

    /// Prefix of the soak's topic names (`<prefix>-<ms>`, `<prefix>-control-<ms>`).
    #[arg(long, env = "DKG_SOAK_TOPIC_PREFIX", default_value = "dkg-soak")]
    pub topic_prefix: String,

    /// Directory for the processes' logs and `soak.json`.
    #[arg(long, env = "DKG_SOAK_OUT_DIR", default_value = "soak-out")]
    pub out_dir: PathBuf,
}

/// One child process and its memory samples.
struct Proc {
    name: String,
    pid: u32,
    /// (seconds since start, VmRSS KiB).
    first: Option<(f64, u64)>,
    last: Option<(f64, u64)>,
    peak_kib: u64,
    exit: Option<std::process::ExitStatus>,
}

impl Proc {
    fn sample(&mut self, at: f64, warm: bool) {
        if self.exit.is_some() {
            return;
        }
        if let Some((rss, hwm)) = memory_kib(self.pid) {
            if warm && self.first.is_none() {
                self.first = Some((at, rss));
            }
            self.last = Some((at, rss));
            self.peak_kib = self.peak_kib.max(hwm);
        }
    }

    fn poll_exit(
        &mut self,
        children: &mut Children,
    ) -> anyhow::Result<Option<std::process::ExitStatus>> {
        if self.exit.is_none() {
            self.exit = children.status(&self.name)?;
        }
        Ok(self.exit)
    }
}

/// `VmRSS` and `VmHWM` of a process, in KiB (Linux `/proc`).
fn memory_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Memory of one process in the report.
#[derive(Debug, Serialize)]
struct MemoryRow {
    process: String,
    start_secs: f64,
    start_rss_mib: f64,
    end_secs: f64,
    end_rss_mib: f64,
    peak_rss_mib: f64,
}

/// What reading the topics back found.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct Verdict {
    /// Records expected (every producer's count).
    pub expected: u64,
    /// Data records read.
    pub read: u64,
    /// Expected values never read.
    pub lost: u64,
    /// Values read more than once (each extra copy counts).
    pub duplicated: u64,
    /// Records on another partition than their epoch's assignment (or Kafka's placement) names.
    pub misplaced: u64,
    /// Records stamped with an epoch the control topic has no committed document for.
    pub unknown_epoch: u64,
    /// Values not of the form `p<i>:<seq>:`, or with a producer or sequence out of range.
    pub foreign: u64,
    /// Records by the epoch that placed them (0: Kafka's default placement).
    pub per_epoch: BTreeMap<u64, u64>,
}

impl Verdict {
    /// Nothing lost, duplicated, misplaced or unexplained.
    pub fn clean(&self) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.misplaced == 0
            && self.unknown_epoch == 0
            && self.foreign == 0
    }
}

/// Checks records against what the producers sent: `counts[i]` records from producer `i`.
pub struct Checker {
    partitions: u32,
    counts: Vec<u64>,
    assignments: BTreeMap<u64, Assignment>,
    seen: Vec<Vec<u64>>,
    verdict: Verdict,
}

impl Checker {
    /// A checker for `counts[i]` records of producer `i` on a topic of `partitions` partitions,
    /// placed by `assignments` (by epoch).
    pub fn new(counts: &[u64], partitions: u32, assignments: BTreeMap<u64, Assignment>) -> Self {
        Self {
            partitions,
            counts: counts.to_vec(),
            assignments,
            seen: counts
                .iter()
                .map(|&n| vec![0; n.div_ceil(64) as usize])
                .collect(),
            verdict: Verdict {
                expected: counts.iter().sum(),
                ..Verdict::default()
            },
        }
    }

    /// One data record: its partition, key, value and stamped epoch (None: unstamped).
    pub fn record(&mut self, partition: i32, key: &[u8], value: &[u8], epoch: Option<u64>) {
        self.verdict.read += 1;
        let placed_by = match epoch {
            Some(e) => match self.assignments.get(&e) {
                Some(a) => Some(a.partition_for(key)),
                None => {
                    self.verdict.unknown_epoch += 1;
                    None
                }
            },
            None => Some(kafka_partition(key, self.partitions)),
        };
        *self
            .verdict
            .per_epoch
            .entry(epoch.unwrap_or(0))
            .or_default() += 1;
        if placed_by.is_some_and(|p| i64::from(p) != i64::from(partition)) {
            self.verdict.misplaced += 1;
        }
        let Some((producer, seq)) = parse_value(value) else {
            self.verdict.foreign += 1;
            return;
        };
        if self.counts.get(producer).is_none_or(|&n| seq >= n) {
            self.verdict.foreign += 1;
            return;
        }
        let (word, bit) = ((seq / 64) as usize, 1_u64 << (seq % 64));
        match self.seen.get_mut(producer).and_then(|b| b.get_mut(word)) {
            Some(w) => {
                if *w & bit != 0 {
                    self.verdict.duplicated += 1;
                }
                *w |= bit;
            }
            _ => self.verdict.foreign += 1,
        }
    }

    /// The verdict, counting what was never read as lost.
    pub fn finish(mut self) -> Verdict {
        let mut lost = 0;
        for (bits, &n) in self.seen.iter().zip(&self.counts) {
            let got: u64 = bits.iter().map(|w| u64::from(w.count_ones())).sum();
            lost += n.saturating_sub(got);
        }
        self.verdict.lost = lost;
        self.verdict
    }
}

/// `p<i>:<seq>:...` -> (i, seq).
fn parse_value(value: &[u8]) -> Option<(usize, u64)> {
    let rest = value.strip_prefix(b"p")?;
    let mut parts = rest.splitn(3, |&b| b == b':');
    let producer = std::str::from_utf8(parts.next()?).ok()?.parse().ok()?;
    let seq = std::str::from_utf8(parts.next()?).ok()?.parse().ok()?;
    parts.next()?;
    Some((producer, seq))
}

/// Run `dkg-lab soak`.
pub fn run(args: Args) -> anyhow::Result<()> {
    ensure!(
        args.alpha.is_finite() && args.alpha >= 0.0,
        "--alpha must be a finite number >= 0"
    );
    ensure!(
        args.rate_per_producer > 0,
        "--rate-per-producer must be > 0"
    );
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("creating {}", args.out_dir.display()))?;
    let runtime = crate::runtime()?;
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &args.bootstrap_servers);
    args.kafka.apply(&mut config)?;
    let id = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis();
    let data_topic = format!("{}-{id}", args.topic_prefix);
    let control_topic = format!("{}-control-{id}", args.topic_prefix);
    runtime.block_on(async {
        topic::create_and_wait(
            &config,
            &TopicSpec::new(&data_topic, args.partitions),
            Duration::from_secs(60),
        )
        .await
        .with_context(|| format!("creating {data_topic}"))?;
        let admin: AdminClient<DefaultClientContext> = config.create()?;
        ensure_control_topic(&admin, &control_topic, -1)
            .await
            .with_context(|| format!("creating {control_topic}"))?;
        anyhow::Ok(())
    })?;
    println!(
        "soak: topic {data_topic} ({} partitions), control topic {control_topic}, {} s, {} producers x {} records/s, drift every {} s",
        args.partitions,
        args.duration_secs,
        args.producers,
        args.rate_per_producer,
        args.drift_secs
    );
    let counts: Vec<u64> = (0..args.producers)
        .map(|_| args.duration_secs * u64::from(args.rate_per_producer))
        .collect();
    let total: u64 = counts.iter().sum();
    let started = Instant::now();
    let mut children = Children::default();
    let mut procs = spawn_all(
        &args,
        &mut children,
        &data_topic,
        &control_topic,
        &counts,
        total,
    )?;
    let outcome = supervise(&args, &mut children, &mut procs, started);
    // Whatever happened: nothing of ours keeps running (SIGTERM: final commits, closed leases).
    children.stop_all();
    outcome?;
    let elapsed = started.elapsed();
    let consumed = consumed_records(&args.out_dir.join("consume.log"));

    let (epochs, verdict) = runtime.block_on(async {
        let assignments = read_assignments(&config, &control_topic, &data_topic)?;
        let epochs: Vec<u64> = assignments.keys().copied().collect();
        let mut checker = Checker::new(&counts, args.partitions, assignments);
        read_data(&config, &data_topic, &mut checker)?;
        anyhow::Ok((epochs, checker.finish()))
    })?;
    let memory: Vec<MemoryRow> = procs.iter().map(memory_row).collect();
    let report = Report {
        topic: data_topic,
        duration_secs: args.duration_secs,
        elapsed_secs: elapsed.as_secs_f64(),
        producers: args.producers,
        rate_per_producer: args.rate_per_producer,
        partitions: args.partitions,
        drift_secs: args.drift_secs,
        epochs_published: epochs.len(),
        epochs,
        consumed,
        verdict,
        memory,
    };
    print!("{}", report.text());
    let json = args.out_dir.join("soak.json");
    std::fs::write(&json, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("writing {}", json.display()))?;
    println!("report: {}", json.display());
    if !report.verdict.clean() {
        bail!("records lost, duplicated or misplaced (see the report)");
    }
    Ok(())
}

/// The soak's result, as printed and in `soak.json`.
#[derive(Debug, Serialize)]
struct Report {
    topic: String,
    duration_secs: u64,
    elapsed_secs: f64,
    producers: u32,
    rate_per_producer: u32,
    partitions: u32,
    drift_secs: u64,
    epochs_published: usize,
    epochs: Vec<u64>,
    consumed: Option<u64>,
    verdict: Verdict,
    memory: Vec<MemoryRow>,
}

impl Report {
    fn text(&self) -> String {
        let v = &self.verdict;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "soak of {} s ({:.0} s with the drain): {} records expected, {} read; lost {}, duplicated {}, misplaced {}, unknown epoch {}, foreign {}",
            self.duration_secs,
            self.elapsed_secs,
            v.expected,
            v.read,
            v.lost,
            v.duplicated,
            v.misplaced,
            v.unknown_epoch,
            v.foreign
        );
        let _ = writeln!(
            out,
            "epochs published: {} ({:?}); records per placing epoch (0 = Kafka's placement): {:?}",
            self.epochs_published, self.epochs, v.per_epoch
        );
        match self.consumed {
            Some(n) => {
                let _ = writeln!(out, "consumer group processed {n} records");
            }
            None => {
                let _ = writeln!(out, "consumer group: no summary (see consume.log)");
            }
        }
        let _ = writeln!(
            out,
            "{:<10} {:>9} {:>12} {:>9} {:>12} {:>12}",
            "process", "start s", "start MiB", "end s", "end MiB", "peak MiB"
        );
        for m in &self.memory {
            let _ = writeln!(
                out,
                "{:<10} {:>9.0} {:>12.1} {:>9.0} {:>12.1} {:>12.1}",
                m.process, m.start_secs, m.start_rss_mib, m.end_secs, m.end_rss_mib, m.peak_rss_mib
            );
        }
        out
    }
}

#[allow(clippy::cast_precision_loss)]
fn memory_row(p: &Proc) -> MemoryRow {
    let mib = |kib: u64| kib as f64 / 1024.0;
    let (start_secs, start) = p.first.or(p.last).unwrap_or((0.0, 0));
    let (end_secs, end) = p.last.unwrap_or((0.0, 0));
    MemoryRow {
        process: p.name.clone(),
        start_secs,
        start_rss_mib: mib(start),
        end_secs,
        end_rss_mib: mib(end),
        peak_rss_mib: mib(p.peak_kib),
    }
}

/// The sampler, the consumer group and the producers, each a process (`dkg-sampler run`, the
/// rest this binary: `crate::children::exe_for`) with its output in `out_dir` (`<name>.log`).
fn spawn_all(
    args: &Args,
    children: &mut Children,
    data_topic: &str,
    control_topic: &str,
    counts: &[u64],
    total: u64,
) -> anyhow::Result<Vec<Proc>> {
    let common = |sub: &str| -> Vec<String> {
        vec![
            sub.to_owned(),
            "--bootstrap-servers".into(),
            args.bootstrap_servers.clone(),
            "--topic".into(),
            data_topic.to_owned(),
            "--control-topic".into(),
            control_topic.to_owned(),
        ]
    };
    let mut procs = Vec::new();
    let mut sampler = common("run");
    sampler.extend(["--interval-secs".into(), args.interval_secs.to_string()]);
    procs.push(spawn(args, children, "sampler", &sampler)?);
    let mut consume = common("consume");
    consume.extend([
        "--members".into(),
        args.members.to_string(),
        "--work-us".into(),
        args.work_us.to_string(),
        "--count".into(),
        total.to_string(),
        "--group-id".into(),
        format!("{data_topic}-group"),
        "--duration-secs".into(),
        (args.duration_secs + args.drain_timeout_secs + 60).to_string(),
    ]);
    procs.push(spawn(args, children, "consume", &consume)?);
    for (i, &count) in counts.iter().enumerate() {
        let mut loadgen = common("loadgen");
        loadgen.extend([
            "--alpha".into(),
            args.alpha.to_string(),
            "--keys".into(),
            args.keys.to_string(),
            "--count".into(),
            count.to_string(),
            "--rate".into(),
            args.rate_per_producer.to_string(),
            "--ordering".into(),
            "--epoch-header".into(),
            "all".into(),
            "--value-prefix".into(),
            format!("p{i}"),
            "--drift-secs".into(),
            args.drift_secs.to_string(),
        ]);
        procs.push(spawn(args, children, &format!("producer{i}"), &loadgen)?);
    }
    Ok(procs)
}

fn spawn(
    args: &Args,
    children: &mut Children,
    name: &str,
    argv: &[String],
) -> anyhow::Result<Proc> {
    let exe = crate::children::exe_for(&argv[0])?;
    // Settings (secrets too) reach the children through their environment, not their argv.
    let settings = args.kafka.settings()?;
    let mut env = Vec::new();
    if !settings.is_empty() {
        let lines: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        env.push(("DKG_KAFKA_CONFIG", lines.join("\n")));
    }
    children.spawn(&exe, name, argv, &env, &args.out_dir)?;
    let pid = children
        .pid(name)
        .with_context(|| format!("{name} was not started"))?;
    Ok(Proc {
        name: name.to_owned(),
        pid,
        first: None,
        last: None,
        peak_kib: 0,
        exit: None,
    })
}

/// Samples memory every second until the producers are done and the group has processed
/// everything (or the drain timeout passes); fails as soon as a process fails.
fn supervise(
    args: &Args,
    children: &mut Children,
    procs: &mut [Proc],
    started: Instant,
) -> anyhow::Result<()> {
    let mut producers_done_at: Option<Instant> = None;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let at = started.elapsed().as_secs_f64();
        #[allow(clippy::cast_precision_loss)]
        let warm = at >= args.warmup_secs as f64;
        for p in procs.iter_mut() {
            p.sample(at, warm);
            if let Some(status) = p.poll_exit(children)? {
                let producer = p.name.starts_with("producer");
                if !status.success() || (!producer && p.name == "sampler") {
                    bail!(
                        "{} exited with {status} at {at:.0} s (see {})",
                        p.name,
                        args.out_dir.join(format!("{}.log", p.name)).display()
                    );
                }
            }
        }
        let producers_done = procs
            .iter()
            .filter(|p| p.name.starts_with("producer"))
            .all(|p| p.exit.is_some());
        if producers_done && producers_done_at.is_none() {
            producers_done_at = Some(Instant::now());
        }
        let consume_done = procs
            .iter()
            .any(|p| p.name == "consume" && p.exit.is_some());
        if producers_done && consume_done {
            return Ok(());
        }
        if let Some(t) = producers_done_at
            && t.elapsed() > Duration::from_secs(args.drain_timeout_secs)
        {
            // The group did not process everything in time: reported, not fatal (what was
            // produced is still checked).
            eprintln!(
                "soak: the consumer group had not processed every record {} s after the producers finished",
                args.drain_timeout_secs
            );
            return Ok(());
        }
    }
}

/// `consumed N records` from `consume`'s summary.
fn consumed_records(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("consumed "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// A consumer that reads `topic` from the beginning of every partition, committed records only.
fn reader(config: &ClientConfig, topic: &str) -> anyhow::Result<(BaseConsumer, Vec<(i32, i64)>)> {
    let consumer: BaseConsumer = config
        .clone()
        .set("group.id", format!("{topic}-soak-check"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()?;
    let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(30))?;
    let partitions: Vec<i32> = md
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .map(|t| t.partitions().iter().map(|p| p.id()).collect())
        .unwrap_or_default();
    ensure!(!partitions.is_empty(), "topic {topic} has no partitions");
    let mut ends = Vec::new();
    let mut tpl = TopicPartitionList::new();
    for &p in &partitions {
        let (_, high) = consumer.fetch_watermarks(topic, p, Duration::from_secs(30))?;
        ends.push((p, high));
        tpl.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&tpl)?;
    Ok((consumer, ends))
}

/// Calls `each` for every record below the high watermarks taken at the start.
fn read_all(
    config: &ClientConfig,
    topic: &str,
    mut each: impl FnMut(&rdkafka::message::BorrowedMessage<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let (consumer, ends) = reader(config, topic)?;
    let mut open: BTreeMap<i32, i64> = ends.into_iter().filter(|&(_, h)| h > 0).collect();
    let deadline = Instant::now() + Duration::from_secs(600);
    while !open.is_empty() {
        ensure!(
            Instant::now() < deadline,
            "reading {topic} back took over 10 minutes"
        );
        let Some(msg) = consumer.poll(Duration::from_millis(500)) else {
            // Transaction markers and aborted records take offsets without a message: done once
            // the position reached the end.
            let positions = consumer.position()?;
            open.retain(|&p, &mut high| {
                !matches!(positions.find_partition(topic, p).map(|e| e.offset()), Some(Offset::Offset(o)) if o >= high)
            });
            continue;
        };
        let msg = msg.with_context(|| format!("reading {topic}"))?;
        if let Some(&high) = open.get(&msg.partition()) {
            if msg.offset() < high {
                each(&msg)?;
            }
            if msg.offset() + 1 >= high {
                open.remove(&msg.partition());
            }
        }
    }
    Ok(())
}

/// The committed assignment documents of `data_topic` on the control topic, by epoch.
fn read_assignments(
    config: &ClientConfig,
    control_topic: &str,
    data_topic: &str,
) -> anyhow::Result<BTreeMap<u64, Assignment>> {
    let mut out = BTreeMap::new();
    read_all(config, control_topic, |msg| {
        if msg.key() != Some(data_topic.as_bytes()) {
            return Ok(());
        }
        if let Some(value) = msg.payload() {
            let a = Assignment::from_json(value)
                .with_context(|| format!("control record at offset {}", msg.offset()))?;
            out.insert(a.epoch(), a);
        }
        Ok(())
    })?;
    Ok(out)
}

fn read_data(config: &ClientConfig, topic: &str, checker: &mut Checker) -> anyhow::Result<()> {
    read_all(config, topic, |msg| {
        let headers = msg.headers();
        let epoch = headers.and_then(epoch_of);
        checker.record(
            msg.partition(),
            msg.key().unwrap_or_default(),
            msg.payload().unwrap_or_default(),
            epoch,
        );
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    type Case<'a> = (&'a [u8], Option<(usize, u64)>);

    fn assignment(epoch: u64, table: Vec<u32>) -> Assignment {
        let mut parts = dkg_testkit::fixtures::parts(4, table, vec![]);
        parts.epoch = epoch;
        Assignment::new(parts).unwrap()
    }

    #[test]
    fn values_parse_and_others_do_not() {
        let cases: &[Case<'_>] = &[
            (b"p0:0:", Some((0, 0))),
            (b"p3:12345:xxxx", Some((3, 12345))),
            (b"p1:7", None),
            (b"q1:7:", None),
            (b"p:7:", None),
            (b"p1:-7:", None),
            (b"", None),
        ];
        for (value, want) in cases {
            assert_eq!(parse_value(value), *want, "{value:?}");
        }
    }

    #[test]
    fn checker_counts_lost_duplicated_misplaced_and_unknown() {
        let a1 = assignment(1, vec![2; 64]);
        let mut checker = Checker::new(&[3, 2], 4, BTreeMap::from([(1, a1)]));
        let hash = i32::try_from(kafka_partition(b"k", 4)).unwrap();
        checker.record(2, b"k", b"p0:0:", Some(1)); // right
        checker.record(2, b"k", b"p0:0:", Some(1)); // duplicate
        checker.record(1, b"k", b"p0:1:", Some(1)); // misplaced
        checker.record(hash, b"k", b"p1:0:", None); // Kafka's placement: right
        checker.record((hash + 1) % 4, b"k", b"p1:1:", None); // misplaced
        checker.record(2, b"k", b"p0:2:", Some(9)); // unknown epoch
        checker.record(2, b"k", b"p7:0:", Some(1)); // no producer 7
        checker.record(2, b"k", b"junk", Some(1));
        checker.record(2, b"k", b"p1:2:", Some(1)); // producer 1 sent 2 records only
        let v = checker.finish();
        assert_eq!(v.read, 9);
        assert_eq!(v.lost, 0, "{v:?}");
        assert_eq!(v.duplicated, 1);
        assert_eq!(v.misplaced, 2);
        assert_eq!(v.unknown_epoch, 1);
        assert_eq!(v.foreign, 3);
        assert_eq!(v.per_epoch, BTreeMap::from([(0, 2), (1, 6), (9, 1)]));
        assert!(!v.clean());

        let mut checker = Checker::new(&[3], 4, BTreeMap::new());
        checker.record(hash, b"k", b"p0:0:", None);
        checker.record(hash, b"k", b"p0:2:", None);
        let v = checker.finish();
        assert_eq!(v.lost, 1, "p0:1 never read");
        assert!(!v.clean());
    }

    #[test]
    fn a_complete_run_is_clean() {
        let mut checker = Checker::new(&[100], 4, BTreeMap::new());
        for seq in 0..100 {
            let key = format!("k{seq}");
            let p = i32::try_from(kafka_partition(key.as_bytes(), 4)).unwrap();
            checker.record(p, key.as_bytes(), format!("p0:{seq}:pad").as_bytes(), None);
        }
        let v = checker.finish();
        assert!(v.clean(), "{v:?}");
        assert_eq!((v.expected, v.read), (100, 100));
    }
}
