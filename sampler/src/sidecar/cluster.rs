//! Several `dkg-sampler run` instances for one huge topic: they share its partitions through their consumer
//! group, ship their windows to a compacted sketches topic, and ONE of them merges and publishes.
//!
//! # Protocol
//! - Sketches topic (default [`DEFAULT_SKETCHES_TOPIC`], 1 partition, `cleanup.policy=compact`, short
//!   segments so compaction keeps it small). Record key `<topic>/<member-id>` (topic names cannot contain
//!   `/`), value a [`ShippedSketch`] JSON document; a tombstone on graceful shutdown removes a member.
//! - Every instance ships its window (its [`Sketch`]) and its observed per-partition record rates once per
//!   interval, leader included (so a successor leader has everyone's data at once).
//! - The leader is the member that owns partition 0 of the data topic in the group. Why not the group
//!   leader: librdkafka does not expose which member leads the group, while partition ownership arrives in
//!   the rebalance callback of every member; exactly one member owns partition 0 per group generation.
//! - The leader merges its own window with every FRESH shipped window of the same topic, consumer group and
//!   partition count: SpaceSaving summaries merge with bounded error and bucket counters add up (Agarwal et
//!   al., PODS 2012, "Mergeable summaries"). Fresh = created within [`FRESH_INTERVALS`] intervals, so a
//!   member that died without its tombstone stops counting quickly.
//! - Publishing stays transactional (see `publish.rs`): a leader that lost partition 0 but does not know yet
//!   is fenced by its successor's `init_transactions`, so one epoch has exactly one document.
//!
//! Members own disjoint partitions, so the merged window is the topic's window. Right after a rebalance
//! a moved partition's records are briefly in the old owner's (decaying) window and in the new owner's:
//! the merged window over-weights them for about one decay half-life, which the hysteresis absorbs.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dkg_kafka::kafka::topic::TopicSpec;
use dkg_kafka_core::dkg::Sketch;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use super::RunError;
use super::window::Weight;

/// Default name of the sketches topic.
pub const DEFAULT_SKETCHES_TOPIC: &str = "_dkg.sketches";
/// Format name of a shipped sketch document.
pub const SKETCH_FORMAT: &str = "dkg.sketch";
/// Format version of a shipped sketch document.
pub const SKETCH_VERSION: u64 = 1;
/// A shipped sketch counts for the leader while younger than this many of its sender's intervals.
pub const FRESH_INTERVALS: f64 = 2.5;
/// Largest shipped sketch (the topic is created with a larger `max.message.bytes`).
pub const MAX_SKETCH_BYTES: usize = 16 * 1024 * 1024;
/// How far a shipped sketch's `created_at_ms` may be ahead of the reader's clock: more is a forged
/// (or badly skewed) document, which would otherwise stay "fresh" for as long as it is ahead.
pub const MAX_CLOCK_SKEW_MS: u64 = 60_000;
/// Largest window total a shipped sketch may claim (2^53: exact in a float64, as epochs): a
/// `u64::MAX` count would drown every honest member's window in the merge.
pub const MAX_SKETCH_TOTAL: u64 = 1 << 53;

/// One instance's window and observations, as shipped to the sketches topic.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShippedSketch {
    /// Always [`SKETCH_FORMAT`].
    pub format: String,
    /// Always [`SKETCH_VERSION`].
    pub version: u64,
    /// The data topic.
    pub topic: String,
    /// The sender's consumer group (only members of the leader's group are merged).
    pub group_id: String,
    /// The sender's member id.
    pub member_id: String,
    /// When the window was snapshotted (unix millis).
    pub created_at_ms: u64,
    /// The sender's interval (millis).
    pub interval_ms: u64,
    /// Partitions the sender owned.
    pub owned: Vec<u32>,
    /// Records per second the sender observed on each partition over its last interval.
    pub partition_rates: BTreeMap<u32, f64>,
    /// Bytes per second likewise (absent from older samplers).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub partition_byte_rates: BTreeMap<u32, f64>,
    /// What a record weighs in `sketch` (`--weight`; absent = records, as before the flag): windows of
    /// different weights are never merged.
    #[serde(default, skip_serializing_if = "Weight::is_records")]
    pub weight: Weight,
    /// The sender's effective sampled records in the window.
    pub window_samples: f64,
    /// The sender's decayed window (its partition count is the one it learned for).
    pub sketch: Sketch,
}

impl ShippedSketch {
    /// The record key: `<topic>/<member-id>`.
    pub fn key(topic: &str, member_id: &str) -> String {
        format!("{topic}/{member_id}")
    }

    /// Why this document cannot be merged at `now_ms`, if it cannot: a timestamp ahead of the
    /// reader's clock by more than [`MAX_CLOCK_SKEW_MS`], counts above the records the window
    /// claims (a counter above the window total, bucket weights summing to more than it, a total
    /// over [`MAX_SKETCH_TOTAL`]), or rates and sample counts that are not finite and `>= 0`.
    /// (The decoder already checked the sketch's own shape: `Sketch`'s `Deserialize`.)
    pub fn invalid(&self, now_ms: u64) -> Option<String> {
        if self.created_at_ms > now_ms.saturating_add(MAX_CLOCK_SKEW_MS) {
            return Some(format!(
                "created_at_ms {} is {} ms ahead of this clock (at most {MAX_CLOCK_SKEW_MS})",
                self.created_at_ms,
                self.created_at_ms - now_ms
            ));
        }
        if self.interval_ms == 0 {
            return Some("interval_ms is 0".to_owned());
        }
        let finite = |x: &f64| x.is_finite() && *x >= 0.0;
        if !finite(&self.window_samples)
            || !self.partition_rates.values().all(finite)
            || !self.partition_byte_rates.values().all(finite)
        {
            return Some("a rate or the sample count is not a finite number >= 0".to_owned());
        }
        let total = self.sketch.total();
        if total > MAX_SKETCH_TOTAL {
            return Some(format!("window total {total} over {MAX_SKETCH_TOTAL}"));
        }
        if let Some(c) = self
            .sketch
            .summary()
            .top(1)
            .first()
            .filter(|c| c.count > total)
        {
            return Some(format!(
                "a counter of {} over the window total {total}",
                c.count
            ));
        }
        // Decay rounds each bucket and the total separately: allow one unit per bucket and decay.
        let buckets: u128 = self
            .sketch
            .bucket_weights()
            .iter()
            .map(|&w| u128::from(w))
            .sum();
        let slack = 64 * self.sketch.bucket_weights().len() as u128;
        if buckets > u128::from(total) + slack {
            return Some(format!(
                "bucket weights sum to {buckets}, over the window total {total}"
            ));
        }
        None
    }

    /// Whether this document is fresh at `now_ms`.
    pub fn is_fresh(&self, now_ms: u64) -> bool {
        let max_age = (self.interval_ms as f64 * FRESH_INTERVALS) as u64;
        now_ms.saturating_sub(self.created_at_ms) <= max_age
    }
}

/// The sketches topic: compacted, 1 partition, room for the largest sketch, short segments (only a
/// closed segment is compacted, and readers start from recent offsets anyway).
pub fn sketches_topic_spec(name: &str, replication: i32) -> TopicSpec {
    TopicSpec::compacted(name, MAX_SKETCH_BYTES + 1024 * 1024)
        .replication(replication)
        .config("segment.ms", "600000")
        .config("min.cleanable.dirty.ratio", "0.1")
}

/// Ships this instance's windows (plain idempotent producer: a lost or repeated sketch only delays a
/// merge by one interval, so no transaction is needed).
#[derive(Clone)]
pub struct Shipper {
    producer: FutureProducer,
    sketches_topic: String,
}

impl std::fmt::Debug for Shipper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shipper")
            .field("sketches_topic", &self.sketches_topic)
            .finish_non_exhaustive()
    }
}

impl Shipper {
    /// A shipper producing with `base` connection settings.
    pub fn new(base: &ClientConfig, sketches_topic: &str) -> Result<Self, RunError> {
        let mut c = base.clone();
        c.set("enable.idempotence", "true")
            .set("acks", "all")
            .set("compression.type", "lz4")
            .set("linger.ms", "5")
            .set(
                "message.max.bytes",
                (MAX_SKETCH_BYTES + 64 * 1024).to_string(),
            );
        let producer = c.create().map_err(|e| RunError::Kafka {
            what: "creating the sketch producer".into(),
            source: e,
        })?;
        Ok(Self {
            producer,
            sketches_topic: sketches_topic.to_owned(),
        })
    }

    /// Ship one document (waits for the broker's acknowledgement, at most `timeout`).
    pub async fn ship(&self, doc: &ShippedSketch, timeout: Duration) -> Result<(), RunError> {
        let json = serde_json::to_vec(doc)
            .map_err(|e| RunError::Setup(format!("encoding a sketch: {e}")))?;
        if json.len() > MAX_SKETCH_BYTES {
            return Err(RunError::Setup(format!(
                "the sketch is {} bytes, over the {MAX_SKETCH_BYTES}-byte limit (lower 1/epsilon or mu)",
                json.len()
            )));
        }
        let key = ShippedSketch::key(&doc.topic, &doc.member_id);
        self.producer
            .send(
                FutureRecord::to(&self.sketches_topic)
                    .key(&key)
                    .payload(&json),
                timeout,
            )
            .await
            .map(|_| ())
            .map_err(|(e, _)| RunError::Kafka {
                what: "shipping the sketch".into(),
                source: e,
            })
    }

    /// Remove this member's document (graceful shutdown).
    pub async fn retract(
        &self,
        topic: &str,
        member_id: &str,
        timeout: Duration,
    ) -> Result<(), RunError> {
        let key = ShippedSketch::key(topic, member_id);
        let record: FutureRecord<'_, String, [u8]> =
            FutureRecord::to(&self.sketches_topic).key(&key);
        self.producer
            .send(record, timeout)
            .await
            .map(|_| ())
            .map_err(|(e, _)| RunError::Kafka {
                what: "retracting the sketch".into(),
                source: e,
            })
    }
}

/// The latest shipped sketch of every member of one topic, kept current by [`follow_sketches`].
#[derive(Debug, Default)]
pub struct Peers {
    latest: Mutex<HashMap<String, Arc<ShippedSketch>>>,
    /// `dkg_sampler_sketches_rejected_total{topic}`, if exported.
    rejected: Option<prometheus::IntCounter>,
}

impl Peers {
    /// No documents yet; rejected ones are counted on `rejected`.
    pub fn counting(rejected: prometheus::IntCounter) -> Self {
        Self {
            latest: Mutex::default(),
            rejected: Some(rejected),
        }
    }

    fn reject(&self, key: &str, why: &str) {
        tracing::warn!(key, "ignoring a sketch document: {why}");
        if let Some(c) = &self.rejected {
            c.inc();
        }
    }

    /// Fresh documents of `group_id` for `partitions`, other than `self_member`'s.
    pub fn fresh(
        &self,
        group_id: &str,
        partitions: u32,
        self_member: &str,
        now_ms: u64,
    ) -> Vec<Arc<ShippedSketch>> {
        let latest = self
            .latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out: Vec<_> = latest
            .values()
            .filter(|d| {
                d.group_id == group_id
                    && d.member_id != self_member
                    && d.sketch.partitions() == partitions
                    && d.is_fresh(now_ms)
            })
            .cloned()
            .collect();
        out.sort_by(|a, b| a.member_id.cmp(&b.member_id));
        out
    }

    fn apply(&self, topic: &str, key: &[u8], value: Option<&[u8]>) {
        let Ok(key) = std::str::from_utf8(key) else {
            return;
        };
        let Some(member) = key.strip_prefix(topic).and_then(|r| r.strip_prefix('/')) else {
            return;
        };
        let mut latest = self
            .latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(value) = value else {
            latest.remove(member);
            return;
        };
        match serde_json::from_slice::<ShippedSketch>(value) {
            Ok(doc)
                if doc.format == SKETCH_FORMAT
                    && doc.version == SKETCH_VERSION
                    && doc.topic == topic
                    && doc.member_id == member =>
            {
                match doc.invalid(super::now_ms()) {
                    None => {
                        latest.insert(member.to_owned(), Arc::new(doc));
                    }
                    Some(why) => self.reject(key, &why),
                }
            }
            Ok(doc) => self.reject(
                key,
                &format!(
                    "another format, version, topic or member ({} version {})",
                    doc.format, doc.version
                ),
            ),
            Err(e) => self.reject(key, &format!("malformed: {e}")),
        }
    }
}

/// Follow the sketches topic for `topic`'s members until `stop` fires. Starts at the records of the last
/// few intervals (`lookback`), not at the beginning: only fresh documents matter.
pub async fn follow_sketches(
    base: ClientConfig,
    sketches_topic: String,
    topic: String,
    lookback: Duration,
    peers: Arc<Peers>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<(), RunError> {
    let mut c = base;
    c.set("group.id", "dkg-sampler-sketch-reader") // never joins: manual assignment, no commits
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "100")
        .set(
            "fetch.message.max.bytes",
            (MAX_SKETCH_BYTES + 64 * 1024).to_string(),
        )
        .set("allow.auto.create.topics", "false");
    let consumer: StreamConsumer = c.create().map_err(|e| RunError::Kafka {
        what: "creating the sketch reader".into(),
        source: e,
    })?;
    let consumer = Arc::new(consumer);
    let since =
        super::now_ms().saturating_sub(u64::try_from(lookback.as_millis()).unwrap_or(u64::MAX));
    let start = {
        let consumer = Arc::clone(&consumer);
        let sketches_topic = sketches_topic.clone();
        tokio::task::spawn_blocking(move || -> rdkafka::error::KafkaResult<TopicPartitionList> {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(&sketches_topic, 0, Offset::Offset(since as i64))?;
            consumer.offsets_for_times(tpl, Duration::from_secs(10))
        })
        .await
        .map_err(|e| RunError::Setup(format!("sketch reader task: {e}")))?
    };
    let mut tpl = TopicPartitionList::new();
    let offset = match start {
        // No record at or after `since`: start at the end.
        Ok(t) => t
            .find_partition(&sketches_topic, 0)
            .map(|e| match e.offset() {
                Offset::Offset(o) => Offset::Offset(o),
                _ => Offset::End,
            })
            .unwrap_or(Offset::End),
        Err(e) => {
            tracing::warn!(
                "cannot look up sketch offsets by time ({e}); reading the sketches topic from its beginning"
            );
            Offset::Beginning
        }
    };
    tpl.add_partition_offset(&sketches_topic, 0, offset)
        .map_err(|e| RunError::Kafka {
            what: "assigning the sketches topic".into(),
            source: e,
        })?;
    consumer.assign(&tpl).map_err(|e| RunError::Kafka {
        what: "assigning the sketches topic".into(),
        source: e,
    })?;
    let mut logged_error = false;
    loop {
        tokio::select! {
            _ = stop.changed() => return Ok(()),
            next = consumer.recv() => match next {
                Ok(m) => {
                    logged_error = false;
                    if let Some(key) = m.key() {
                        peers.apply(&topic, key, m.payload());
                    }
                }
                Err(e) => {
                    if !logged_error {
                        tracing::warn!(sketches_topic = %sketches_topic, "sketch reader error (retrying): {e}");
                        logged_error = true;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }
}

/// The topic-wide view the leader decides on.
#[derive(Debug, Clone)]
pub struct MergedView {
    /// Own window merged with the fresh peers' windows.
    pub window: Sketch,
    /// Sum of the effective sample counts.
    pub window_samples: f64,
    /// Records per second per partition (each partition from its freshest reporter).
    pub partition_rates: BTreeMap<u32, f64>,
    /// Bytes per second per partition likewise (missing for partitions reported by older samplers).
    pub partition_byte_rates: BTreeMap<u32, f64>,
    /// Members merged (self included).
    pub members: usize,
}

/// Merge this instance's document `own` and `peers` (incompatible documents, and windows of another
/// `--weight`, are skipped with a warning).
pub fn merge_view(own: &ShippedSketch, peers: &[Arc<ShippedSketch>]) -> MergedView {
    let mut window = own.sketch.clone();
    let mut samples = own.window_samples;
    let mut members = 1;
    let mut rates = Freshest::default();
    let mut byte_rates = Freshest::default();
    rates.add(own.created_at_ms, &own.partition_rates);
    byte_rates.add(own.created_at_ms, &own.partition_byte_rates);
    for peer in peers {
        if peer.weight != own.weight {
            tracing::warn!(
                member = %peer.member_id,
                "skipping a peer's sketch: it weighs records by {} and this instance by {} (--weight)",
                peer.weight.as_str(),
                own.weight.as_str()
            );
            continue;
        }
        if let Err(e) = window.merge(&peer.sketch) {
            tracing::warn!(member = %peer.member_id, "skipping a peer's sketch: {e}");
            continue;
        }
        members += 1;
        samples += peer.window_samples;
        rates.add(peer.created_at_ms, &peer.partition_rates);
        byte_rates.add(peer.created_at_ms, &peer.partition_byte_rates);
    }
    MergedView {
        window,
        window_samples: samples,
        partition_rates: rates.into_rates(),
        partition_byte_rates: byte_rates.into_rates(),
        members,
    }
}

/// Per-partition values taken from their freshest reporter.
#[derive(Default)]
struct Freshest(BTreeMap<u32, (u64, f64)>);

impl Freshest {
    fn add(&mut self, created_ms: u64, values: &BTreeMap<u32, f64>) {
        for (&p, &v) in values {
            let entry = self.0.entry(p).or_insert((created_ms, v));
            if created_ms > entry.0 {
                *entry = (created_ms, v);
            }
        }
    }

    fn into_rates(self) -> BTreeMap<u32, f64> {
        self.0.into_iter().map(|(p, (_, v))| (p, v)).collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use dkg_kafka_core::dkg::DkgConfig;

    fn doc(member: &str, partitions: u32, created: u64, keys: &[&[u8]]) -> ShippedSketch {
        let mut sketch = Sketch::new(&DkgConfig::default(), partitions).unwrap();
        for k in keys {
            sketch.observe(k);
        }
        ShippedSketch {
            format: SKETCH_FORMAT.into(),
            version: SKETCH_VERSION,
            topic: "t".into(),
            group_id: "g".into(),
            member_id: member.into(),
            created_at_ms: created,
            interval_ms: 1000,
            owned: vec![1],
            partition_rates: BTreeMap::from([(1, 10.0)]),
            partition_byte_rates: BTreeMap::new(),
            weight: Weight::Records,
            window_samples: keys.len() as f64,
            sketch,
        }
    }

    #[test]
    fn peers_keep_the_latest_fresh_document_per_member() {
        let peers = Peers::default();
        let a = doc("a", 4, 10_000, &[b"x"]);
        peers.apply("t", b"t/a", Some(&serde_json::to_vec(&a).unwrap()));
        let b = doc("b", 4, 10_000, &[b"y"]);
        peers.apply("t", b"t/b", Some(&serde_json::to_vec(&b).unwrap()));
        // other topic, malformed, wrong member in the key: ignored
        peers.apply(
            "t",
            b"tt/c",
            Some(&serde_json::to_vec(&doc("c", 4, 10_000, &[])).unwrap()),
        );
        peers.apply("t", b"t/d", Some(b"{"));
        peers.apply(
            "t",
            b"t/e",
            Some(&serde_json::to_vec(&doc("x", 4, 10_000, &[])).unwrap()),
        );
        assert_eq!(peers.fresh("g", 4, "self", 10_500).len(), 2);
        assert_eq!(peers.fresh("g", 4, "a", 10_500).len(), 1, "self excluded");
        assert_eq!(
            peers.fresh("other", 4, "self", 10_500).len(),
            0,
            "other group"
        );
        assert_eq!(
            peers.fresh("g", 8, "self", 10_500).len(),
            0,
            "other partition count"
        );
        assert_eq!(
            peers.fresh("g", 4, "self", 13_000).len(),
            0,
            "stale after 2.5 intervals"
        );
        peers.apply("t", b"t/a", None);
        assert_eq!(
            peers.fresh("g", 4, "self", 10_500).len(),
            1,
            "tombstone removes"
        );
    }

    #[test]
    fn merged_view_adds_windows_and_takes_freshest_rates() {
        let mut own = doc("self", 4, 1000, &[b"x", b"x"]);
        own.partition_rates = BTreeMap::from([(0, 1.0)]);
        let p1 = Arc::new(doc("p1", 4, 900, &[b"y"]));
        let mut p2 = doc("p2", 4, 1100, &[b"x"]);
        p2.partition_rates = BTreeMap::from([(1, 99.0), (2, 5.0)]);
        let incompatible = Arc::new(doc("p3", 8, 1000, &[b"z"]));
        let view = merge_view(&own, &[p1, Arc::new(p2), incompatible]);
        assert_eq!(view.members, 3);
        assert_eq!(view.window.total(), 4);
        assert_eq!(view.window.summary().get(b"x").unwrap().count, 3);
        assert!((view.window_samples - 4.0).abs() < 1e-9);
        assert_eq!(
            view.partition_rates,
            BTreeMap::from([(0, 1.0), (1, 99.0), (2, 5.0)])
        );
        assert!(view.partition_byte_rates.is_empty());
    }

    #[test]
    fn byte_windows_merge_only_with_byte_windows() {
        let bytes = |member: &str, created: u64, rates: &[(u32, f64)]| {
            let mut d = doc(member, 4, created, &[b"x"]);
            d.weight = Weight::Bytes;
            d.partition_byte_rates = rates.iter().copied().collect();
            d
        };
        let own = bytes("self", 1000, &[(0, 500.0)]);
        let peer = Arc::new(bytes("p1", 1100, &[(0, 900.0), (1, 70.0)]));
        let by_records = Arc::new(doc("p2", 4, 1200, &[b"x"]));
        let view = merge_view(&own, &[peer, by_records]);
        assert_eq!(view.members, 2, "the records window is skipped");
        assert_eq!(view.window.total(), 2);
        assert_eq!(
            view.partition_byte_rates,
            BTreeMap::from([(0, 900.0), (1, 70.0)])
        );
        // The weight survives shipping; a document without it (older samplers) weighs records.
        let back: ShippedSketch =
            serde_json::from_slice(&serde_json::to_vec(&own).unwrap()).unwrap();
        assert_eq!(back.weight, Weight::Bytes);
        assert_eq!(back.partition_byte_rates, own.partition_byte_rates);
        let old = serde_json::to_value(doc("m", 4, 5, &[b"k"])).unwrap();
        assert!(old.get("weight").is_none() && old.get("partition_byte_rates").is_none());
        let back: ShippedSketch = serde_json::from_value(old).unwrap();
        assert_eq!(back.weight, Weight::Records);
    }

    #[test]
    fn shipped_sketch_round_trips() {
        let d = doc("m", 4, 5, &[b"k", b"k", b"j"]);
        let back: ShippedSketch = serde_json::from_slice(&serde_json::to_vec(&d).unwrap()).unwrap();
        assert_eq!(back.sketch.total(), 3);
        assert_eq!(back.member_id, "m");
    }

    /// A document edited as JSON (forged on the sketches topic), applied to `peers` under `m`.
    fn apply_edited(peers: &Peers, edit: impl FnOnce(&mut serde_json::Value)) {
        let now = super::super::now_ms();
        let mut v = serde_json::to_value(doc("m", 4, now, &[b"k", b"k", b"j"])).unwrap();
        edit(&mut v);
        peers.apply("t", b"t/m", Some(&serde_json::to_vec(&v).unwrap()));
    }

    #[test]
    fn forged_sketches_are_rejected_and_counted() {
        let counter = prometheus::IntCounter::new("c", "c").unwrap();
        let peers = Peers::counting(counter.clone());
        let now = super::super::now_ms();
        let count = |peers: &Peers| peers.fresh("g", 4, "x", now + 1).len();
        apply_edited(&peers, |_| {});
        assert_eq!(count(&peers), 1, "an honest document is merged");
        type Forge = Box<dyn Fn(&mut serde_json::Value)>;
        let forgeries: [(&str, Forge); 6] = [
            (
                "in the future",
                Box::new(move |v| v["created_at_ms"] = (now + 3_600_000).into()),
            ),
            (
                "a counter of u64::MAX",
                Box::new(|v| v["sketch"]["summary"]["counters"][0][1] = u64::MAX.into()),
            ),
            (
                "a total of u64::MAX",
                Box::new(|v| {
                    v["sketch"]["summary"]["total"] = u64::MAX.into();
                    v["sketch"]["summary"]["counters"][0][1] = u64::MAX.into();
                }),
            ),
            (
                "bucket weights over the total",
                Box::new(|v| v["sketch"]["bucket_weights"][0] = (1_u64 << 40).into()),
            ),
            ("interval 0", Box::new(|v| v["interval_ms"] = 0.into())),
            (
                "not JSON",
                Box::new(|v| *v = serde_json::Value::String("x".into())),
            ),
        ];
        for (i, (what, forge)) in forgeries.into_iter().enumerate() {
            let fresh = Peers::counting(counter.clone());
            apply_edited(&fresh, forge);
            assert_eq!(count(&fresh), 0, "{what} is not merged");
            assert_eq!(counter.get(), i as u64 + 1, "{what} is counted");
        }
        // A clock up to a minute ahead is tolerated.
        let peers = Peers::counting(counter.clone());
        apply_edited(&peers, move |v| v["created_at_ms"] = (now + 30_000).into());
        assert_eq!(peers.fresh("g", 4, "x", now + 30_000).len(), 1);
    }

    #[test]
    fn the_fuzz_seed_of_the_sketch_decoder_decodes() {
        let seed = include_bytes!("../../../fuzz/seeds/sketch_decode/small.json");
        let sketch: Sketch = serde_json::from_slice(seed).unwrap();
        assert_eq!((sketch.partitions(), sketch.total()), (2, 6));
    }
}
