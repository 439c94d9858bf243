//! The consumer-rebalancer scenario (`tests/consumer_*.rs`): ordering producers writing Zipf keys to
//! a 12-partition topic, `DkgConsumer` members logging every record they hand to the application
//! into one shared log (global sequence numbers), epoch switches that move the hot keys, and the
//! checks: nothing lost, each producer's send order per key, and old-partition-before-new-partition
//! processing of every moved key.
#![allow(clippy::unwrap_used)]

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dkg_kafka::Assignment;
use dkg_kafka::DeliveryFuture;
use dkg_kafka::kafka::control::publish_assignment;
use dkg_kafka::{ConsumerHooks, DkgConsumer, DkgProducer, DkgProducerBuilder, EpochChange};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, Zipf};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::producer::{assignment, client_config, consume_all, raw_publisher};

pub const PARTITIONS: u32 = 12;
/// Heavy keys `k0001..k0012`, moved by every epoch.
pub const HOT: u64 = 12;
/// Distinct keys (Zipf ranks).
pub const KEYS: u64 = 2_000;
/// Buckets of the test assignments; buckets below [`MOVING_BUCKETS`] move every epoch too.
pub const BUCKETS: u32 = 48;
pub const MOVING_BUCKETS: u32 = 4;

pub fn key(rank: u64) -> String {
    format!("k{rank:04}")
}

/// The test's assignment of epoch `e` (1..=6): hot key of rank r on `(r + 2e) % 12`, bucket b on
/// `b % 12`, except buckets below 4 on `(b + 2e) % 12`. Over epochs 1..=6 a moving key visits six
/// distinct partitions and never returns to one, so the partition of a record names its
/// residence period.
pub fn epoch_assignment(topic: &str, e: u64) -> Assignment {
    let shift = |x: u64| ((x + 2 * e) % u64::from(PARTITIONS)) as u32;
    let table = (0..BUCKETS)
        .map(|b| {
            if b < MOVING_BUCKETS {
                shift(u64::from(b))
            } else {
                b % PARTITIONS
            }
        })
        .collect();
    let hot: Vec<(String, u32)> = (1..=HOT).map(|r| (key(r), shift(r))).collect();
    let heavy: Vec<(&[u8], u32)> = hot.iter().map(|(k, p)| (k.as_bytes(), *p)).collect();
    assignment(topic, PARTITIONS, e, table, &heavy)
}

/// Publish the test's assignment of epoch `e`.
pub async fn publish_epoch(publisher: &FutureProducer, control: &str, topic: &str, e: u64) {
    publish_assignment(
        publisher,
        control,
        &epoch_assignment(topic, e),
        Duration::from_secs(10),
    )
    .await
    .expect("publish an assignment");
}

/// One record handed to the application.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Global processing order.
    pub seq: u64,
    pub member: usize,
    pub key: String,
    pub producer: u32,
    pub pseq: u64,
    pub partition: i32,
    pub offset: i64,
}

/// The shared processing log.
#[derive(Debug, Default)]
pub struct Log {
    seq: AtomicU64,
    entries: Mutex<Vec<Entry>>,
}

impl Log {
    pub fn entries(&self) -> Vec<Entry> {
        let mut v = self.entries.lock().unwrap().clone();
        v.sort_by_key(|e| e.seq);
        v
    }

    pub fn len(&self) -> usize {
        self.entries.lock().unwrap().len()
    }

    /// Distinct (producer, pseq) pairs logged.
    pub fn distinct(&self) -> HashSet<(u32, u64)> {
        self.entries
            .lock()
            .unwrap()
            .iter()
            .map(|e| (e.producer, e.pseq))
            .collect()
    }
}

/// A record acknowledged by the broker.
#[derive(Clone, Debug)]
pub struct Sent {
    pub producer: u32,
    pub pseq: u64,
    pub key: String,
    pub partition: i32,
}

/// Send `count` Zipf-keyed records at `rate` per second (payload `"<producer>:<seq>"`); returns
/// the acknowledged ones in send order. Stops early when `stop` turns true.
pub fn spawn_producer(
    producer: DkgProducer,
    idx: u32,
    topic: String,
    count: u64,
    rate: f64,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<Vec<Sent>> {
    tokio::spawn(async move {
        let zipf = Zipf::new(KEYS as f64, 1.1).expect("zipf");
        let mut rng = StdRng::seed_from_u64(u64::from(idx) * 7919 + 1);
        let mut pending: std::collections::VecDeque<(u64, String, DeliveryFuture)> =
            std::collections::VecDeque::new();
        let mut acked = Vec::with_capacity(count as usize);
        let start = Instant::now();
        for seq in 0..count {
            if *stop.borrow_and_update() {
                break;
            }
            if seq % 50 == 0 {
                let due = start + Duration::from_secs_f64(seq as f64 / rate);
                tokio::time::sleep_until(due.into()).await;
            }
            let k = key(zipf.sample(&mut rng) as u64);
            let payload = format!("{idx}:{seq}");
            let mut record = FutureRecord::to(&topic)
                .key(k.as_bytes())
                .payload(payload.as_bytes());
            let retry_until = Instant::now() + Duration::from_secs(30);
            let delivery = loop {
                match producer.send_result(record) {
                    Ok(d) => break d,
                    Err((e, r)) => {
                        assert!(
                            Instant::now() < retry_until,
                            "producer {idx}: could not enqueue for 30 s: {e}"
                        );
                        record = r;
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            };
            pending.push_back((seq, k, delivery));
            while pending.len() > 2_000 {
                collect(&mut pending, &mut acked, idx).await;
            }
        }
        while !pending.is_empty() {
            collect(&mut pending, &mut acked, idx).await;
        }
        acked
    })
}

async fn collect(
    pending: &mut std::collections::VecDeque<(u64, String, DeliveryFuture)>,
    acked: &mut Vec<Sent>,
    idx: u32,
) {
    if let Some((pseq, key, d)) = pending.pop_front() {
        let delivered = tokio::time::timeout(Duration::from_secs(60), d)
            .await
            .unwrap_or_else(|_| panic!("producer {idx}: no delivery report within 60 s"));
        if let Ok(Ok(delivery)) = delivered {
            acked.push(Sent {
                producer: idx,
                pseq,
                key,
                partition: delivery.partition,
            });
        }
    }
}

/// Hooks that count how often keys moved out of a member (proves the hook runs).
#[derive(Debug, Default)]
pub struct CountingHooks {
    pub epochs: AtomicU64,
    pub assigned: AtomicU64,
    pub revoked: AtomicU64,
}

impl ConsumerHooks for CountingHooks {
    fn on_partitions_assigned(&self, partitions: &[u32]) {
        self.assigned
            .fetch_add(partitions.len() as u64, Ordering::Relaxed);
    }
    fn on_partitions_revoked(&self, partitions: &[u32]) {
        self.revoked
            .fetch_add(partitions.len() as u64, Ordering::Relaxed);
    }
    fn on_epoch(&self, _change: &EpochChange<'_>) {
        self.epochs.fetch_add(1, Ordering::Relaxed);
    }
}

/// How a consumer task ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Running,
    Close,
    /// Dropped without `close`: a crash.
    Kill,
}

/// A running consumer: logs every record it receives.
#[derive(Debug)]
pub struct Member {
    end: watch::Sender<End>,
    task: JoinHandle<()>,
}

/// Processing pace of a member: a pause of `pause` every `every` records (slow processing,
/// GC pauses): its partitions fall behind, which is when a moved key's new records would overtake
/// its old ones without the protocol.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    pub every: u64,
    pub pause: Duration,
}

impl Member {
    pub fn spawn(consumer: DkgConsumer, member: usize, log: Arc<Log>) -> Self {
        Self::spawn_paced(consumer, member, log, None)
    }

    pub fn spawn_paced(
        mut consumer: DkgConsumer,
        member: usize,
        log: Arc<Log>,
        pace: Option<Pace>,
    ) -> Self {
        let (end, mut rx) = watch::channel(End::Running);
        let task = tokio::spawn(async move {
            let mut n = 0_u64;
            loop {
                tokio::select! {
                    r = consumer.recv() => match r {
                        Ok(m) => {
                            let key = String::from_utf8(m.key().expect("a keyed record").to_vec())
                                .expect("utf-8 key");
                            let payload = std::str::from_utf8(m.payload().expect("a payload"))
                                .expect("utf-8 payload");
                            let (p, s) = payload.split_once(':').expect("producer:seq payload");
                            let seq = log.seq.fetch_add(1, Ordering::SeqCst);
                            log.entries.lock().unwrap().push(Entry {
                                seq,
                                member,
                                key,
                                producer: p.parse().unwrap(),
                                pseq: s.parse().unwrap(),
                                partition: m.partition(),
                                offset: m.offset(),
                            });
                            n += 1;
                            if let Some(p) = pace.filter(|p| n.is_multiple_of(p.every)) {
                                tokio::time::sleep(p.pause).await;
                            }
                        }
                        Err(e) => eprintln!("member {member}: consumer error (continuing): {e}"),
                    },
                    _ = rx.changed() => break,
                }
            }
            let how = *rx.borrow();
            match how {
                End::Close => consumer.close().await.unwrap_or_else(|e| {
                    panic!("member {member}: close (final commit, leave the group): {e}")
                }),
                // Dropped without close (a crash): the drop still leaves the group (unsubscribe
                // first, then librdkafka's close), which blocks; on a plain thread so that a stuck
                // drop fails the test instead of hanging the runtime.
                _ => {
                    let (done, dropped) = tokio::sync::oneshot::channel();
                    std::thread::spawn(move || {
                        drop(consumer);
                        let _ = done.send(());
                    });
                    tokio::time::timeout(Duration::from_secs(30), dropped)
                        .await
                        .unwrap_or_else(|_| {
                            panic!("member {member}: dropped consumer did not leave within 30 s")
                        })
                        .expect("drop thread");
                }
            }
        });
        Self { end, task }
    }

    pub async fn stop(self, how: End) {
        self.end.send(how).expect("member task alive");
        tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .expect("member stops in time")
            .expect("member task");
    }
}

/// Collect what the sending `tasks` acknowledged, stop them (`stop`) and close the `producers`;
/// asserts that all `expected` sends were acknowledged.
pub async fn finish_producers(
    tasks: Vec<JoinHandle<Vec<Sent>>>,
    stop: watch::Sender<bool>,
    producers: &[DkgProducer],
    expected: u64,
) -> Vec<Sent> {
    let mut sent = Vec::new();
    for t in tasks {
        sent.extend(t.await.unwrap());
    }
    drop(stop);
    for p in producers {
        p.close().await.unwrap();
    }
    assert_eq!(sent.len() as u64, expected, "every send acknowledged");
    sent
}

/// Wait until the log holds every acknowledged record (or panic after `timeout`).
pub async fn wait_for_all(log: &Log, sent: &[Sent], timeout: Duration) {
    let want: HashSet<(u32, u64)> = sent.iter().map(|s| (s.producer, s.pseq)).collect();
    let start = Instant::now();
    loop {
        let seen = log.distinct();
        let missing = want.iter().filter(|k| !seen.contains(k)).count();
        if missing == 0 {
            return;
        }
        assert!(
            start.elapsed() < timeout,
            "{missing} of {} acknowledged records never reached the application within {timeout:?}",
            want.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Result of [`check`].
#[derive(Debug, Default)]
pub struct Report {
    pub lost: usize,
    pub duplicates: usize,
    /// A record processed before an earlier record (same key, same producer) was.
    pub order_violations: Vec<String>,
    /// A record of a key processed from an older home after one from a newer home.
    pub residence_violations: Vec<String>,
    /// Records on a partition no epoch placed their key on.
    pub misplaced: usize,
    /// Keys that moved at least once in the log (a record on a later home).
    pub moved_keys: usize,
}

impl Report {
    /// Print the report of `records` handed out and assert what every scenario promises: nothing
    /// lost, every record on a partition an epoch placed its key on, each ordering producer's
    /// records of a key in send order, a moved key's old partitions before its new one, and the hot
    /// keys did move (at least 12).
    pub fn assert_holds(&self, records: usize) {
        eprintln!(
            "records {records} (duplicates {}), moved keys {}, lost {}, order violations {}, \
             residence violations {}, misplaced {}",
            self.duplicates,
            self.moved_keys,
            self.lost,
            self.order_violations.len(),
            self.residence_violations.len(),
            self.misplaced
        );
        assert_eq!(self.lost, 0, "records lost");
        assert_eq!(
            self.misplaced, 0,
            "every record on a partition an epoch placed its key on"
        );
        assert!(
            self.order_violations.is_empty(),
            "{:#?}",
            &self.order_violations[..self.order_violations.len().min(10)]
        );
        assert!(
            self.residence_violations.is_empty(),
            "{:#?}",
            &self.residence_violations[..self.residence_violations.len().min(10)]
        );
        assert!(
            self.moved_keys >= 12,
            "the hot keys moved: {}",
            self.moved_keys
        );
    }
}

/// Check the log against what was acknowledged. Order is checked for the producers in `ordered`,
/// residence (old partitions before new) over records of producers in `ordered` only.
pub fn check(sent: &[Sent], log: &[Entry], topic: &str, ordered: &[u32]) -> Report {
    let mut report = Report::default();
    // Each key's homes over the epochs, in order (distinct by construction).
    let assignments: Vec<Assignment> = (1..=6).map(|e| epoch_assignment(topic, e)).collect();
    let homes = |k: &str| -> Vec<i32> {
        let mut v: Vec<i32> = Vec::new();
        for a in &assignments {
            let p = a.partition_for(k.as_bytes()) as i32;
            if v.last() != Some(&p) {
                v.push(p);
            }
        }
        v
    };
    // Send order per (key, producer).
    let mut sends: HashMap<(&str, u32), Vec<u64>> = HashMap::new();
    for s in sent {
        sends.entry((&s.key, s.producer)).or_default().push(s.pseq);
    }
    let mut position: HashMap<(u32, u64), usize> = HashMap::new();
    for ((_, producer), seqs) in &sends {
        for (i, &pseq) in seqs.iter().enumerate() {
            position.insert((*producer, pseq), i);
        }
    }
    let seen: HashSet<(u32, u64)> = log.iter().map(|e| (e.producer, e.pseq)).collect();
    report.lost = sent
        .iter()
        .filter(|s| !seen.contains(&(s.producer, s.pseq)))
        .count();
    report.duplicates = log.len() - seen.len();

    let mut next: HashMap<(String, u32), usize> = HashMap::new();
    let mut residence: HashMap<String, usize> = HashMap::new();
    let mut home_cache: HashMap<String, Vec<i32>> = HashMap::new();
    let mut moved: HashSet<String> = HashSet::new();
    for e in log {
        if !ordered.contains(&e.producer) {
            continue;
        }
        // Send order (prefix property: every earlier record of the key and producer seen before).
        if let Some(&i) = position.get(&(e.producer, e.pseq)) {
            let n = next.entry((e.key.clone(), e.producer)).or_insert(0);
            if i == *n {
                *n += 1;
            } else if i > *n {
                report.order_violations.push(format!(
                    "key {} producer {}: record #{i} (seq {}) processed by member {} before record #{}",
                    e.key, e.producer, e.pseq, e.member, *n
                ));
                *n = i + 1;
            }
        }
        // Residence: never back to an older home.
        let h = home_cache
            .entry(e.key.clone())
            .or_insert_with(|| homes(&e.key));
        let Some(r) = h.iter().position(|&p| p == e.partition) else {
            report.misplaced += 1;
            continue;
        };
        if r > 0 {
            moved.insert(e.key.clone());
        }
        let max = residence.entry(e.key.clone()).or_insert(0);
        if r < *max {
            report.residence_violations.push(format!(
                "key {}: record (producer {}, seq {}) from home #{r} (partition {}) processed by \
                 member {} after records from home #{}",
                e.key, e.producer, e.pseq, e.partition, e.member, *max
            ));
        } else {
            *max = r;
        }
    }
    report.moved_keys = moved.len();
    report
}

/// `dkg_consumer_hold_seconds` summed over `registries`: the observation count and the cumulative
/// count per bucket bound (bounds as integer microseconds: exact keys).
fn hold_buckets(
    registries: &[&prometheus::Registry],
) -> (u64, std::collections::BTreeMap<u64, u64>) {
    let mut buckets = std::collections::BTreeMap::new();
    let mut total = 0;
    for r in registries {
        for family in r.gather() {
            if family.name() != "dkg_consumer_hold_seconds" {
                continue;
            }
            for m in family.get_metric() {
                let h = m.get_histogram();
                total += h.get_sample_count();
                for b in h.get_bucket() {
                    *buckets
                        .entry((b.upper_bound() * 1e6).round() as u64)
                        .or_default() += b.cumulative_count();
                }
            }
        }
    }
    (total, buckets)
}

/// Observations of `dkg_consumer_hold_seconds` in `registries`: (count, count <= `le`).
pub fn hold_histogram(registries: &[&prometheus::Registry], le: f64) -> (u64, u64) {
    let (total, buckets) = hold_buckets(registries);
    let below = buckets
        .get(&((le * 1e6).round() as u64))
        .copied()
        .unwrap_or(0);
    (total, below)
}

/// The smallest bucket bound of `dkg_consumer_hold_seconds` (summed over `registries`) that covers
/// the `q`-quantile of the held records (nearest rank), as a Prometheus histogram is read; `None`
/// without held records. The Java bench (`ConsumerBench`) reads its histogram the same way.
pub fn hold_quantile(registries: &[&prometheus::Registry], q: f64) -> Option<f64> {
    let (total, buckets) = hold_buckets(registries);
    if total == 0 {
        return None;
    }
    let rank = (q * total as f64).ceil() as u64;
    Some(
        buckets
            .iter()
            .find(|&(_, &c)| c >= rank)
            .map_or(f64::INFINITY, |(&le, _)| le as f64 / 1e6),
    )
}

/// One line describing `dkg_consumer_hold_seconds` (summed over `registries`): the held records at
/// a few bounds and p50/p99 as bucket bounds. `scripts/bench-hold` reads these lines (and the Java
/// bench's) for its comparison.
pub fn hold_distribution(registries: &[&prometheus::Registry]) -> String {
    let buckets: Vec<String> = [0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.5, 2.0]
        .iter()
        .map(|&le| format!("<= {le} s: {}", hold_histogram(registries, le).1))
        .collect();
    let quantile = |q| hold_quantile(registries, q).map_or("-".into(), |s| format!("{s}"));
    format!(
        "hold time distribution: {} held records, {}; p50 <= {} s, p99 <= {} s (bucket bounds)",
        hold_histogram(registries, 0.0).0,
        buckets.join(", "),
        quantile(0.5),
        quantile(0.99)
    )
}

/// Sum of a counter over every series in `registries`.
pub fn counter_sum(registries: &[&prometheus::Registry], name: &str) -> f64 {
    metric_sum(registries, name, |m| m.get_counter().get_value())
}

/// Sum of a gauge over every series in `registries`.
pub fn gauge_sum(registries: &[&prometheus::Registry], name: &str) -> f64 {
    metric_sum(registries, name, |m| m.get_gauge().get_value())
}

/// Sum of `value` over every series of `name` in `registries`.
fn metric_sum(
    registries: &[&prometheus::Registry],
    name: &str,
    value: impl Fn(&prometheus::proto::Metric) -> f64,
) -> f64 {
    registries
        .iter()
        .flat_map(|r| r.gather())
        .filter(|f| f.name() == name)
        .flat_map(|f| f.get_metric().to_vec())
        .map(|m| value(&m))
        .sum()
}

/// Wait until the members own all partitions between them, each some (assigned minus revoked,
/// over the members' hooks).
pub async fn wait_for_group(hooks: &[Arc<CountingHooks>], timeout: Duration) {
    let start = Instant::now();
    let each = || {
        hooks
            .iter()
            .map(|h| h.assigned.load(Ordering::Relaxed) - h.revoked.load(Ordering::Relaxed))
            .collect::<Vec<u64>>()
    };
    let owned = || each().iter().sum::<u64>();
    // Every member owns some: under KIP-848 the first member to join can own all of them for a
    // few heartbeats before the broker moves some to the others (group.consumer.heartbeat.interval.ms,
    // 5 s by default), so "all owned" alone is not a settled group.
    let settled = || owned() == u64::from(PARTITIONS) && each().iter().all(|&n| n > 0);
    while !settled() {
        assert!(
            start.elapsed() < timeout,
            "the group assigned {} of {PARTITIONS} partitions within {timeout:?}",
            owned()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Names and clients of one scenario run (unique topics, so runs never see each other).
/// The data topic as a plain consumer sees it ([`Setup::read_plain`]).
#[derive(Debug, Default)]
pub struct PlainView {
    /// Payloads of the keyed records with a value (the application's, in these tests).
    pub payloads: Vec<String>,
    /// Records without a key or a value (anything the application did not send).
    pub other: usize,
    /// Records carrying `dkg-epoch`.
    pub stamped: usize,
    /// Every header name seen.
    pub header_names: std::collections::BTreeSet<String>,
}

impl PlainView {
    /// Only what the application sent, each record once (`sent`: payloads `"<producer>:<seq>"`),
    /// and no header but the stamps of moved keys.
    pub fn assert_only_application_records(&self, sent: &[Sent]) {
        assert_eq!(self.other, 0, "records the application did not send");
        let want: HashSet<String> = sent
            .iter()
            .map(|s| format!("{}:{}", s.producer, s.pseq))
            .collect();
        let got: HashSet<&str> = self.payloads.iter().map(String::as_str).collect();
        assert_eq!(self.payloads.len(), got.len(), "a record duplicated");
        assert_eq!(got.len(), want.len(), "records read != records sent");
        assert!(
            want.iter().all(|w| got.contains(w.as_str())),
            "a sent record missing"
        );
        let allowed = ["dkg-epoch", "dkg-producer"];
        assert!(
            self.header_names
                .iter()
                .all(|h| allowed.contains(&h.as_str())),
            "headers beyond the moved keys' stamps: {:?}",
            self.header_names
        );
    }
}

/// Holds the test binary's scenarios one at a time (a test run under both group protocols is two tests
/// in one binary, which cargo would otherwise run side by side: their members and producers would then
/// share the 2 cores, and the hold-time bounds would measure that).
pub async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}

/// The consumer group protocol the members join with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupProtocol {
    /// The classic protocol (librdkafka's default): client-side cooperative-sticky assignment.
    Classic,
    /// KIP-848 (`group.protocol=consumer`): the broker assigns; the members set nothing else of
    /// the group's (no session timeout, heartbeat interval or strategy: librdkafka refuses them).
    Consumer,
}

pub struct Setup {
    pub bootstrap: String,
    pub protocol: GroupProtocol,
    pub topic: String,
    pub control: String,
    pub handoff: String,
    pub group: String,
    pub publisher: FutureProducer,
}

impl Setup {
    /// Create the data topic on the test broker and publish epoch 1.
    pub async fn new(prefix: &str) -> Self {
        Self::with_protocol(prefix, GroupProtocol::Classic).await
    }

    /// [`Setup::new`] whose members join with `protocol`.
    pub async fn with_protocol(prefix: &str, protocol: GroupProtocol) -> Self {
        let bootstrap = super::bootstrap();
        let topic = super::unique_topic(prefix);
        super::create_topic(&bootstrap, &topic, PARTITIONS, &[]).await;
        let mut setup = Self::with_topic(bootstrap, topic, prefix, 1).await;
        setup.protocol = protocol;
        setup
    }

    /// The same on the 3-broker fault-test cluster: data and control topics replicated 3 times
    /// (the handoff topic takes the brokers' default, 3 there too).
    pub async fn on_cluster(cluster: &dkg_testkit::cluster::Cluster, prefix: &str) -> Self {
        let topic = super::unique_topic(prefix);
        cluster.create_topic(&topic, PARTITIONS, &[]).await;
        Self::with_topic(cluster.bootstrap().to_owned(), topic, prefix, 3).await
    }

    async fn with_topic(bootstrap: String, topic: String, prefix: &str, replication: i32) -> Self {
        let setup = Self {
            control: super::unique_topic(&format!("{prefix}-control")),
            handoff: super::unique_topic(&format!("{prefix}-handoff")),
            group: super::unique_topic(&format!("{prefix}-group")),
            publisher: raw_publisher(&bootstrap),
            bootstrap,
            protocol: GroupProtocol::Classic,
            topic,
        };
        let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
            client_config(&setup.bootstrap)
                .create()
                .expect("admin client");
        dkg_kafka::kafka::control::ensure_control_topic(&admin, &setup.control, replication)
            .await
            .expect("create the control topic");
        setup.publish(1).await;
        setup
    }

    pub async fn publish(&self, epoch: u64) {
        publish_epoch(&self.publisher, &self.control, &self.topic, epoch).await;
    }

    /// A group member (earliest offsets, periodic commits every second).
    pub async fn consumer(
        &self,
        member: &str,
        registry: &prometheus::Registry,
        hooks: Arc<CountingHooks>,
    ) -> DkgConsumer {
        self.consumer_in(&self.group, member, registry, hooks).await
    }

    /// [`Setup::consumer`] in the consumer group `group`, with any hooks.
    pub async fn consumer_in(
        &self,
        group: &str,
        member: &str,
        registry: &prometheus::Registry,
        hooks: impl ConsumerHooks,
    ) -> DkgConsumer {
        self.consumer_with_protocol(group, member, registry, hooks, self.protocol)
            .await
    }

    /// [`Setup::consumer_in`] of a group of `protocol`, whatever the setup's.
    pub async fn consumer_with_protocol(
        &self,
        group: &str,
        member: &str,
        registry: &prometheus::Registry,
        hooks: impl ConsumerHooks,
        protocol: GroupProtocol,
    ) -> DkgConsumer {
        let mut config = client_config(&self.bootstrap);
        config.set("auto.offset.reset", "earliest");
        match protocol {
            GroupProtocol::Classic => {
                config
                    .set("session.timeout.ms", "6000")
                    .set("heartbeat.interval.ms", "500");
            }
            GroupProtocol::Consumer => {
                config.set("group.protocol", "consumer");
            }
        }
        DkgConsumer::builder(config)
            .topic(&self.topic)
            .group(group)
            .control_topic(&self.control)
            .handoff_topic(&self.handoff)
            .member(member)
            .metrics(registry)
            .hooks(hooks)
            .commit_interval(Some(Duration::from_secs(1)))
            .build()
            .await
            .expect("build a DkgConsumer")
    }

    /// `n` members (`c0`, `c1`, ...) logging into `log`, stuttering at different rates (a pause of
    /// 150 ms every 700, 1000, 1300, ... records) so their partitions lag behind each other; waits
    /// until they own every partition (at most `group_timeout`).
    pub async fn paced_members(
        &self,
        n: usize,
        log: &Arc<Log>,
        registry: &prometheus::Registry,
        group_timeout: Duration,
    ) -> (Vec<Arc<CountingHooks>>, Vec<Member>) {
        let hooks: Vec<Arc<CountingHooks>> = (0..n).map(|_| Arc::default()).collect();
        let mut members = Vec::new();
        for (i, h) in hooks.iter().enumerate() {
            let c = self
                .consumer(&format!("c{i}"), registry, Arc::clone(h))
                .await;
            let pace = Pace {
                every: 700 + 300 * i as u64,
                pause: Duration::from_millis(150),
            };
            members.push(Member::spawn_paced(c, i, Arc::clone(log), Some(pace)));
        }
        wait_for_group(&hooks, group_timeout).await;
        (hooks, members)
    }

    /// An ordering producer with the default header mode (moved keys only).
    pub async fn producer(&self, lease: Duration) -> DkgProducer {
        self.producer_with(lease, &[]).await
    }

    /// [`Setup::producer`] with client `settings` on top of the defaults.
    pub async fn producer_with(&self, lease: Duration, settings: &[(&str, &str)]) -> DkgProducer {
        self.producer_builder(lease, settings)
            .build()
            .await
            .expect("build an ordering DkgProducer")
    }

    /// The builder of [`Setup::producer_with`], for a test that sets more (a stamp window, metrics).
    pub fn producer_builder(
        &self,
        lease: Duration,
        settings: &[(&str, &str)],
    ) -> DkgProducerBuilder {
        let mut config = client_config(&self.bootstrap);
        config.set("linger.ms", "5");
        for (k, v) in settings {
            config.set(*k, *v);
        }
        DkgProducer::builder(config)
            .control_topic(&self.control)
            .handoff_topic(&self.handoff)
            .topics([self.topic.as_str()])
            .ordering(true)
            .lease_duration(lease)
    }

    /// Announce on the handoff topic, as a consumer group `group` would, that it has drained
    /// `drained` on every partition (what ordering producers read to close stamp windows).
    pub async fn announce_group(&self, group: &str, drained: u64) {
        let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
            client_config(&self.bootstrap).create().unwrap();
        dkg_kafka::kafka::handoff::ensure_handoff_topic(&admin, &self.handoff, 1)
            .await
            .unwrap();
        let writer = dkg_kafka::kafka::handoff::HandoffWriter::new(
            &client_config(&self.bootstrap),
            &self.handoff,
        )
        .unwrap();
        for partition in 0..PARTITIONS {
            let progress = dkg_kafka::kafka::handoff::Progress {
                group: group.to_owned(),
                topic: self.topic.clone(),
                partition,
                drained,
                passed: Default::default(),
                committed_offset: 0,
                updated_at_ms: 0,
            };
            writer.put_progress(&progress).await.unwrap();
        }
    }

    /// What a plain consumer (librdkafka and nothing of ours, as `kcat`) reads from the data topic.
    pub async fn read_plain(&self, expected: usize) -> PlainView {
        let view = Arc::new(Mutex::new(PlainView::default()));
        let sink = Arc::clone(&view);
        consume_all(
            &self.bootstrap,
            &self.topic,
            PARTITIONS,
            expected,
            Duration::from_secs(120),
            move |m| {
                use rdkafka::Message as _;
                use rdkafka::message::Headers as _;
                let mut v = sink.lock().unwrap();
                let mut stamped = false;
                if let Some(h) = m.headers() {
                    for header in h.iter() {
                        stamped |= header.key == "dkg-epoch";
                        v.header_names.insert(header.key.to_owned());
                    }
                }
                v.stamped += usize::from(stamped);
                match (m.key(), m.payload().map(String::from_utf8_lossy)) {
                    (Some(_), Some(p)) => v.payloads.push(p.into_owned()),
                    _ => v.other += 1,
                }
            },
        )
        .await;
        Arc::try_unwrap(view).unwrap().into_inner().unwrap()
    }

    /// Every record of the handoff topic, in log order: `(key, value)`.
    pub async fn handoff_log(&self) -> Vec<(String, Option<Vec<u8>>)> {
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&out);
        consume_all(
            &self.bootstrap,
            &self.handoff,
            1,
            1,
            Duration::from_secs(60),
            move |m| {
                use rdkafka::Message as _;
                let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
                sink.lock()
                    .unwrap()
                    .push((key, m.payload().map(<[u8]>::to_vec)));
            },
        )
        .await;
        Arc::try_unwrap(out).unwrap().into_inner().unwrap()
    }

    /// The wall-clock expiry (ms) of `producer`'s latest lease on the handoff topic, as written by
    /// its last renewal.
    pub async fn lease_expiry_ms(&self, producer: &str) -> Option<u64> {
        let key = format!("lease2/{}/{producer}", self.topic);
        self.handoff_log()
            .await
            .into_iter()
            .filter(|(k, v)| *k == key && v.is_some())
            .filter_map(|(_, v)| serde_json::from_slice::<serde_json::Value>(&v?).ok())
            .filter_map(|v| v["expires_at_ms"].as_u64())
            .next_back()
    }

    /// Each producer's markers on the handoff topic, in log order: `(epoch, ends)`.
    pub async fn marker_log(&self) -> HashMap<String, Vec<(u64, Vec<i64>)>> {
        let prefix = format!("marker/{}/", self.topic);
        let mut markers: HashMap<String, Vec<(u64, Vec<i64>)>> = HashMap::new();
        for (key, value) in self.handoff_log().await {
            if let (Some(producer), Some(value)) = (key.strip_prefix(&prefix), value) {
                let v: serde_json::Value = serde_json::from_slice(&value).unwrap();
                let ends = v["ends"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e.as_i64().unwrap())
                    .collect();
                markers
                    .entry(producer.to_owned())
                    .or_default()
                    .push((v["epoch"].as_u64().unwrap(), ends));
            }
        }
        markers
    }

    /// The latest marker epoch of each producer on the handoff topic, and the producers with a
    /// lease (`lease2/`), read from its log.
    pub async fn read_markers(&self) -> (HashMap<String, u64>, HashSet<String>) {
        let latest = self
            .marker_log()
            .await
            .into_iter()
            .map(|(p, m)| (p, m.iter().map(|(e, _)| *e).max().unwrap_or(0)))
            .collect();
        let prefix = format!("lease2/{}/", self.topic);
        let leases = self
            .handoff_log()
            .await
            .into_iter()
            .filter_map(|(key, _)| key.strip_prefix(&prefix).map(str::to_owned))
            .collect();
        (latest, leases)
    }

    /// `n` ordering producers (lease `lease`), each sending `count` records at `rate` through
    /// [`spawn_producer`] until `stop` turns true: the producers and their sending tasks.
    pub async fn start_producers(
        &self,
        n: u32,
        lease: Duration,
        count: u64,
        rate: f64,
        stop: &watch::Receiver<bool>,
    ) -> (Vec<DkgProducer>, Vec<JoinHandle<Vec<Sent>>>) {
        let mut producers = Vec::new();
        let mut tasks = Vec::new();
        for idx in 0..n {
            let p = self.producer(lease).await;
            tasks.push(spawn_producer(
                p.clone(),
                idx,
                self.topic.clone(),
                count,
                rate,
                stop.clone(),
            ));
            producers.push(p);
        }
        (producers, tasks)
    }
}
