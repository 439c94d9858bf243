//! `dkg-lab consume`: a consumer-group workload on the library's consumer-side rebalancer
//! ([`DkgConsumer`]), to watch what skew does to the consumers: `--members` group members in this
//! process, each paying a simulated processing cost per record, exporting the library's
//! `dkg_consumer_*` metrics (lag, held records, records per partition and per member, hold times).
//!
//! With a cost per record, a member can process at most `1e6 / --work-us` records/s. Under Kafka's
//! hash partitioner the member owning the partition of the hottest keys gets more than that and falls
//! behind while the others idle; on a DKG-partitioned topic every partition stays under it. The
//! docker-compose stack runs one instance per twin topic to show exactly this.
//!
//! The cost is simulated by *waiting*, as for a call to a database or a service, not by burning CPU:
//! twelve members of a demo stack on a small machine must not compete for cores, or the comparison
//! would measure the machine. A member owes `--work-us` per record and sleeps once it owes at least
//! [`SLEEP_QUANTUM`] (the timer's granularity makes per-record sleeps of a few microseconds
//! meaningless); oversleeping is credited to the next records, so the long-run rate is exact.
//!
//! Records come out of [`DkgConsumer::recv_borrowed`] and count as processed at the next call, as
//! the library defines it; records produced without the DKG wrapper carry no `dkg-*` header and
//! pass straight through. SIGTERM / Ctrl-C, `--count` or `--duration-secs` end the run: every member
//! [`close`](DkgConsumer::close)s (final commit, leaves the group), then a per-partition and
//! per-member summary is printed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use clap::Parser;
use dkg_kafka::DkgConsumer;
use dkg_kafka::kafka::control::DEFAULT_CONTROL_TOPIC;
use dkg_kafka_core::imbalance;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::connection::Connection;
use dkg_sampler::cli::BadKafkaConfig;

/// Debt below which a member does not sleep (see the module docs).
pub const SLEEP_QUANTUM: Duration = Duration::from_millis(5);

/// Run a consumer group on a topic with DkgConsumer and a simulated cost per record.
#[derive(Debug, Parser)]
#[command(
    after_help = "Examples:\n  dkg-lab consume --bootstrap-servers 127.0.0.1:9092 --topic orders --count 100000\n  \
                  dkg-lab consume --bootstrap-servers 127.0.0.1:9092 --topic orders --members 12 --work-us 4000 --metrics-addr 127.0.0.1:9102"
)]
pub struct Args {
    #[command(flatten)]
    pub connection: Connection,

    /// The topic to consume.
    #[arg(long, env = "DKG_TOPIC")]
    pub topic: String,

    /// The consumer group (default: dkg-consume.<topic>).
    #[arg(long, env = "DKG_GROUP_ID")]
    pub group_id: Option<String>,

    /// The control topic the consumers follow for assignments (which keys an epoch moved).
    #[arg(long, env = "DKG_CONTROL_TOPIC", default_value = DEFAULT_CONTROL_TOPIC)]
    pub control_topic: String,

    /// Group members to run in this process (each a DkgConsumer with its own `member` label).
    #[arg(long, env = "DKG_CONSUME_MEMBERS", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub members: u32,

    /// Simulated processing cost per record, in microseconds, paid by waiting (not CPU): a member
    /// processes at most 1e6/work-us records/s. 0 = no cost.
    #[arg(long, env = "DKG_CONSUME_WORK_US", default_value_t = 0)]
    pub work_us: u64,

    /// Prefix of the members' names (`<prefix>-<i>`, the `member` metric label and client.id);
    /// default: $HOSTNAME, else consume-<pid>. Give replicas of one group distinct prefixes.
    #[arg(long, env = "DKG_CONSUME_MEMBER_PREFIX")]
    pub member_prefix: Option<String>,

    /// Where a group without committed offsets starts: earliest or latest.
    #[arg(long, env = "DKG_CONSUME_AUTO_OFFSET_RESET", default_value = "earliest", value_parser = ["earliest", "latest"])]
    pub auto_offset_reset: String,

    /// Stop once this many records were processed (over all members; concurrent members may
    /// process a few more before they stop, all counted).
    #[arg(long, env = "DKG_CONSUME_COUNT", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,

    /// Stop after this many seconds.
    #[arg(long, env = "DKG_CONSUME_DURATION_SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub duration_secs: Option<u64>,

    /// Serve Prometheus metrics (the members' dkg_consumer_*) at http://ADDR/metrics and a status
    /// document at /healthz (200 once every member runs; each member's partitions).
    #[arg(long, env = "DKG_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
}

/// Errors of `dkg-lab consume`.
#[derive(Debug, thiserror::Error)]
pub enum ConsumeError {
    /// A `--kafka-config` entry or file is malformed.
    #[error("{0}")]
    KafkaConfig(#[from] BadKafkaConfig),
    /// Building a member failed (missing topic, unreachable broker, ...).
    #[error("starting member {member}: {source}")]
    Build {
        /// The member's name.
        member: String,
        /// The library's error.
        #[source]
        source: dkg_kafka::Error,
    },
    /// Some members did not close cleanly (their records since the last commit will be
    /// delivered again to the next owners).
    #[error("{failed} of {members} members did not close cleanly; first: {first}")]
    Close {
        /// Members whose close failed.
        failed: usize,
        /// Members.
        members: usize,
        /// The first error.
        first: String,
    },
    /// The metrics address cannot be served.
    #[error("cannot listen on {addr} (--metrics-addr): {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The async runtime could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[from] std::io::Error),
    /// A member's task failed (panicked or was cancelled).
    #[error("a member task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// Run `consume`.
pub fn run(args: Args) -> Result<(), ConsumeError> {
    let runtime = crate::runtime()?;
    runtime.block_on(consume(args))
}

const STARTING: u8 = 0;
const RUNNING: u8 = 1;
const STOPPING: u8 = 2;

/// What `/healthz` reports.
#[derive(Debug)]
struct Health {
    state: AtomicU8,
    records: Arc<AtomicU64>,
    topic: String,
    group: String,
    /// Each member's partitions, refreshed every [`HEALTH_EVERY`].
    owned: Mutex<BTreeMap<String, Vec<u32>>>,
}

/// How often a member refreshes its entry of the health document.
const HEALTH_EVERY: Duration = Duration::from_secs(1);

impl Health {
    fn response(&self) -> axum::response::Response {
        let state = self.state.load(Ordering::Acquire);
        let doc = serde_json::json!({
            "state": match state { STARTING => "starting", RUNNING => "running", _ => "stopping" },
            "topic": self.topic,
            "group_id": self.group,
            "members": *self.owned.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
            "records": self.records.load(Ordering::Relaxed),
        });
        let code = if state == RUNNING {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        (
            code,
            [(header::CONTENT_TYPE, "application/json")],
            doc.to_string(),
        )
            .into_response()
    }
}

/// One member's outcome.
#[derive(Debug)]
struct MemberReport {
    name: String,
    per_partition: BTreeMap<i32, u64>,
    records: u64,
    errors: u64,
    close: Result<(), String>,
}

async fn consume(args: Args) -> Result<(), ConsumeError> {
    let group = args
        .group_id
        .clone()
        .unwrap_or_else(|| format!("dkg-consume.{}", args.topic));
    let registry = prometheus::Registry::new();
    let total = Arc::new(AtomicU64::new(0));
    let health = Arc::new(Health {
        state: AtomicU8::new(STARTING),
        records: Arc::clone(&total),
        topic: args.topic.clone(),
        group: group.clone(),
        owned: Mutex::new(BTreeMap::new()),
    });
    if let Some(addr) = args.metrics_addr {
        serve(addr, &registry, &health).await?;
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    dkg_sampler::shutdown::spawn_signal_handler(stop_tx.clone(), "closing the members");

    let consumers = build_members(&args, &group, &registry).await?;
    #[allow(clippy::cast_precision_loss)]
    let capacity = match args.work_us {
        0 => "no simulated cost".to_owned(),
        us => format!(
            "each member processes at most {:.0} records/s",
            1e6 / us as f64
        ),
    };
    info!(
        topic = %args.topic,
        group = %group,
        members = args.members,
        work_us = args.work_us,
        "consuming; {capacity}"
    );
    health.state.store(RUNNING, Ordering::Release);

    let start = Instant::now();
    if let Some(secs) = args.duration_secs {
        let stop = stop_tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(secs)).await;
            let _ = stop.send(true);
        });
    }
    let member = Member {
        health: Arc::clone(&health),
        work: Work::new(Duration::from_micros(args.work_us)),
        total,
        limit: args.count,
        stop_tx,
        stop: stop_rx,
    };
    let reports = run_members(consumers, &member).await;
    let elapsed = start.elapsed();
    print!("{}", summary(&args, &group, &reports, elapsed));

    let failed: Vec<&String> = reports
        .iter()
        .filter_map(|r| r.close.as_ref().err())
        .collect();
    if let Some(first) = failed.first() {
        return Err(ConsumeError::Close {
            failed: failed.len(),
            members: reports.len(),
            first: (*first).clone(),
        });
    }
    Ok(())
}

/// Serve the members' metrics and `/healthz` at `addr` for the rest of the run.
async fn serve(
    addr: SocketAddr,
    registry: &prometheus::Registry,
    health: &Arc<Health>,
) -> Result<(), ConsumeError> {
    let h = Arc::clone(health);
    let routes = axum::Router::new().route(
        "/healthz",
        axum::routing::get(move || {
            let h = Arc::clone(&h);
            async move { h.response() }
        }),
    );
    dkg_sampler::serve::serve_metrics(addr, registry.clone(), routes)
        .await
        .map(drop)
        .map_err(|source| ConsumeError::Listen { addr, source })
}

/// Build the `--members` consumers. They join concurrently: a group of N waits for one rebalance
/// round, not N in turn. If one fails, the others are closed and its error returned.
async fn build_members(
    args: &Args,
    group: &str,
    registry: &prometheus::Registry,
) -> Result<Vec<DkgConsumer>, ConsumeError> {
    let prefix = args.member_prefix.clone().unwrap_or_else(|| {
        std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.trim().is_empty())
            .unwrap_or_else(|| format!("consume-{}", std::process::id()))
    });
    let config = args
        .connection
        .client_config(&[("auto.offset.reset", &args.auto_offset_reset)])?;
    let mut builds = Vec::new();
    for i in 0..args.members {
        let name = format!("{prefix}-{i}");
        let mut member_config = config.clone();
        member_config.set("client.id", &name);
        let builder = DkgConsumer::builder(member_config)
            .topic(&args.topic)
            .group(group)
            .control_topic(&args.control_topic)
            .member(&name)
            .metrics(registry);
        builds.push(tokio::spawn(async move {
            builder.build().await.map_err(|source| ConsumeError::Build {
                member: name,
                source,
            })
        }));
    }
    let mut consumers = Vec::new();
    let mut first_error = None;
    for b in builds {
        match b.await {
            Ok(Ok(c)) => consumers.push(c),
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(e) => {
                first_error.get_or_insert(ConsumeError::Task(e));
            }
        }
    }
    if let Some(e) = first_error {
        for c in consumers {
            let _ = c.close().await;
        }
        return Err(e);
    }
    Ok(consumers)
}

/// Run every consumer as a member like `template` until the stop fires (count, duration or signal);
/// each then closes. Their reports (a failed task stops the others and has none).
async fn run_members(consumers: Vec<DkgConsumer>, template: &Member) -> Vec<MemberReport> {
    let tasks: Vec<_> = consumers
        .into_iter()
        .map(|c| tokio::spawn(template.clone().run(c)))
        .collect();
    {
        let health = Arc::clone(&template.health);
        let mut stop = template.stop.clone();
        tokio::spawn(async move {
            let _ = stop.wait_for(|s| *s).await;
            health.state.store(STOPPING, Ordering::Release);
        });
    }
    let mut reports = Vec::new();
    for t in tasks {
        match t.await {
            Ok(r) => reports.push(r),
            Err(e) => {
                warn!("a member task failed: {e}");
                let _ = template.stop_tx.send(true);
            }
        }
    }
    reports
}

/// One group member's loop.
#[derive(Clone)]
struct Member {
    health: Arc<Health>,
    work: Work,
    total: Arc<AtomicU64>,
    limit: Option<u64>,
    stop_tx: watch::Sender<bool>,
    stop: watch::Receiver<bool>,
}

impl Member {
    async fn run(mut self, mut consumer: DkgConsumer) -> MemberReport {
        let name = consumer.member().to_owned();
        let mut per_partition: BTreeMap<i32, u64> = BTreeMap::new();
        let mut records = 0_u64;
        let mut errors = 0_u64;
        let mut health_at = Instant::now();
        loop {
            if health_at <= Instant::now() {
                health_at = Instant::now() + HEALTH_EVERY;
                let owned = consumer.owned_partitions();
                self.health
                    .owned
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(name.clone(), owned);
            }
            let next = tokio::select! {
                biased;
                _ = self.stop.wait_for(|s| *s) => break,
                r = consumer.recv_borrowed() => r.map(|record| record.partition()),
                // recv is cancellation safe: an idle member still refreshes its health entry.
                () = tokio::time::sleep_until(health_at.into()) => continue,
            };
            match next {
                Ok(partition) => {
                    *per_partition.entry(partition).or_default() += 1;
                    records += 1;
                    let done = self.total.fetch_add(1, Ordering::Relaxed) + 1;
                    if self.limit.is_some_and(|limit| done >= limit) {
                        let _ = self.stop_tx.send(true);
                    }
                    tokio::select! {
                        biased;
                        _ = self.stop.wait_for(|s| *s) => break,
                        () = self.work.pay() => {}
                    }
                }
                Err(e) => {
                    // The client's errors are transient (the library's contract): report, go on.
                    errors += 1;
                    warn!(member = %name, error = %e, "receiving");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        // The last record counts as processed: close commits it and leaves the group.
        let close = consumer.close().await.map_err(|e| e.to_string());
        if let Err(e) = &close {
            warn!(member = %name, error = %e, "close");
        }
        MemberReport {
            name,
            per_partition,
            records,
            errors,
            close,
        }
    }
}

/// The simulated processing cost of one member (see the module docs): a debt in nanoseconds,
/// paid by sleeping in quanta.
#[derive(Clone, Debug)]
pub(crate) struct Work {
    per_record_ns: i128,
    /// Owed wait minus credit from oversleeping (negative = credit).
    owed_ns: i128,
}

impl Work {
    pub(crate) fn new(per_record: Duration) -> Self {
        Self {
            per_record_ns: i128::try_from(per_record.as_nanos()).unwrap_or(i128::MAX / 4),
            owed_ns: 0,
        }
    }

    /// Charge one record; how long to sleep now, if the debt reached [`SLEEP_QUANTUM`].
    fn charge(&mut self) -> Option<Duration> {
        if self.per_record_ns == 0 {
            return None;
        }
        self.owed_ns = self.owed_ns.saturating_add(self.per_record_ns);
        (self.owed_ns >= i128::from(quantum_ns()))
            .then(|| Duration::from_nanos(u64::try_from(self.owed_ns).unwrap_or(u64::MAX)))
    }

    /// `slept` was actually slept: pay it off. Oversleeping is credited, at most one quantum (a
    /// stalled runtime must not buy a burst of free records).
    fn paid(&mut self, slept: Duration) {
        let slept = i128::try_from(slept.as_nanos()).unwrap_or(i128::MAX / 4);
        self.owed_ns = (self.owed_ns - slept).max(-i128::from(quantum_ns()));
    }

    /// Charge one record and sleep if due.
    pub(crate) async fn pay(&mut self) {
        if let Some(owed) = self.charge() {
            let t = Instant::now();
            tokio::time::sleep(owed).await;
            self.paid(t.elapsed());
        }
    }
}

fn quantum_ns() -> u64 {
    u64::try_from(SLEEP_QUANTUM.as_nanos()).unwrap_or(u64::MAX)
}

fn share(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        #[allow(clippy::cast_precision_loss)]
        let s = part as f64 / total as f64;
        s
    }
}

/// The exit summary: records per partition and per member, with shares.
fn summary(args: &Args, group: &str, reports: &[MemberReport], elapsed: Duration) -> String {
    let total: u64 = reports.iter().map(|r| r.records).sum();
    let mut partitions: BTreeMap<i32, (u64, Vec<&str>)> = BTreeMap::new();
    for r in reports {
        for (&p, &n) in &r.per_partition {
            let e = partitions.entry(p).or_default();
            e.0 += n;
            e.1.push(&r.name);
        }
    }
    let secs = elapsed.as_secs_f64();
    #[allow(clippy::cast_precision_loss)]
    let rate = if secs > 0.0 { total as f64 / secs } else { 0.0 };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "consumed {total} records from {} in {secs:.2} s ({rate:.0} records/s); group {group}, {} members, work {} us/record",
        args.topic,
        reports.len(),
        args.work_us
    );
    let _ = writeln!(
        out,
        "{:>9}  {:>12}  {:>7}  members",
        "partition", "records", "share"
    );
    for (p, (n, members)) in &partitions {
        let _ = writeln!(
            out,
            "{p:>9}  {n:>12}  {:>6.2}%  {}",
            share(*n, total) * 100.0,
            members.join(",")
        );
    }
    let _ = writeln!(
        out,
        "{:<24}  {:>12}  {:>7}  partitions",
        "member", "records", "share"
    );
    for r in reports {
        let owned: Vec<String> = r.per_partition.keys().map(i32::to_string).collect();
        let _ = writeln!(
            out,
            "{:<24}  {:>12}  {:>6.2}%  {}",
            r.name,
            r.records,
            share(r.records, total) * 100.0,
            owned.join(",")
        );
    }
    #[allow(clippy::cast_precision_loss)]
    let loads: Vec<f64> = partitions.values().map(|(n, _)| *n as f64).collect();
    if !loads.is_empty() {
        let _ = writeln!(
            out,
            "imbalance of the partitions consumed (max/mean - 1): {:.2}%",
            imbalance(&loads) * 100.0
        );
    }
    let errors: u64 = reports.iter().map(|r| r.errors).sum();
    if errors > 0 {
        let _ = writeln!(out, "receive errors: {errors}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records charged, with every requested sleep slept `oversleep` longer: total slept time and
    /// number of sleeps.
    fn simulate(per_record: Duration, records: u32, oversleep: Duration) -> (Duration, u32) {
        let mut w = Work::new(per_record);
        let (mut slept, mut sleeps) = (Duration::ZERO, 0);
        for _ in 0..records {
            if let Some(d) = w.charge() {
                assert!(d >= SLEEP_QUANTUM, "sleeps at least a quantum, got {d:?}");
                let actual = d + oversleep;
                w.paid(actual);
                slept += actual;
                sleeps += 1;
            }
        }
        (slept, sleeps)
    }

    #[test]
    fn work_sleeps_in_quanta_and_keeps_the_long_run_rate() {
        let us = Duration::from_micros;
        let ms = Duration::from_millis;
        // (per record, records, oversleep per sleep, expected sleeps)
        let cases = [
            (us(100), 10_000, Duration::ZERO, 200),
            (us(4000), 500, Duration::ZERO, 250),
            (us(4000), 500, ms(1), 250),
            (us(7000), 100, us(300), 100),
            (us(1), 100_000, Duration::ZERO, 20),
        ];
        for (per_record, records, oversleep, want_sleeps) in cases {
            let (slept, sleeps) = simulate(per_record, records, oversleep);
            let want = per_record * records;
            // Whatever the oversleep, the total is the cost of the records to within a quantum
            // plus one oversleep (owed at the end, or credited beyond the cap).
            let diff = slept.abs_diff(want);
            assert!(
                diff <= SLEEP_QUANTUM + oversleep,
                "{per_record:?} x {records} (+{oversleep:?}): slept {slept:?}, want ~{want:?}"
            );
            assert!(
                sleeps.abs_diff(want_sleeps) <= 1,
                "{per_record:?} x {records} (+{oversleep:?}): {sleeps} sleeps, want ~{want_sleeps}"
            );
        }
    }

    #[test]
    fn zero_work_never_sleeps() {
        let mut w = Work::new(Duration::ZERO);
        assert!((0..10_000).all(|_| w.charge().is_none()));
    }

    #[test]
    fn a_long_stall_is_credited_one_quantum_at_most() {
        let mut w = Work::new(Duration::from_millis(5));
        let d = w.charge().expect("a quantum owed");
        w.paid(d + Duration::from_secs(10));
        // One quantum of credit: the next record is free, the one after sleeps again.
        assert_eq!(w.charge(), None);
        assert_eq!(w.charge(), Some(Duration::from_millis(5)));
    }
}
