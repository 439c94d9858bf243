//! The standard pattern for split keys: partial aggregates per partition, merged downstream.
//! Shared by the example (`main.rs`) and the broker test `tests/consumer_split_keys.rs`, which
//! runs the same pipeline and checks it.
//!
//! A split key's records are spread over several partitions, so no member sees all of them and
//! their order across the parts is not kept. Each member therefore counts per (partition, key)
//! and emits its partial counts as deltas, keyed by the key, to a `partials` topic (on
//! revocation, so nothing is lost when a partition changes owner, and at the end). A merger sums
//! the deltas per key and writes each key's total to a compacted `totals` topic keyed by the key:
//! its latest record per key is the exact count. Whole keys go through the same path unchanged
//! (a key that moved between partitions simply has two partials).
#![allow(dead_code)] // the example and the test use different parts

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dkg_kafka::Assignment;
use dkg_kafka::kafka::control;
use dkg_kafka::kafka::control::{publish_assignment, publisher_config};
use dkg_kafka::kafka::topic;
use dkg_kafka::kafka::topic::TopicSpec;
use dkg_kafka::{ConsumerHooks, DkgConsumer, DkgProducer, SplitChange};
use dkg_kafka_core::assignment::SplitPart;
use dkg_kafka_core::{AssignmentParts, BucketHash, HeavyKey, Params};
use rdkafka::admin::AdminClient;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

pub const PARTITIONS: u32 = 6;
pub const HOT: &[u8] = b"hot";
/// Where `hot` lives: whole on 0 (epoch 1), split over 1, 2 and 3 (epoch 2), whole on 5 (epoch
/// 3). Neither whole home is a part, so a whole record of `hot` is never taken for split.
pub const PARTS: [u32; 3] = [1, 2, 3];
pub const WHOLE: [u32; 2] = [0, 5];

/// Epoch `e` (1..=3) of the run; every other key goes by bucket and never moves.
pub fn assignment(topic: &str, e: u64) -> Assignment {
    let hot = match e {
        2 => HeavyKey {
            key: HOT.to_vec(),
            partition: PARTS[0],
            weight: 300,
            split: PARTS
                .iter()
                .map(|&partition| SplitPart {
                    partition,
                    weight: 1,
                })
                .collect(),
        },
        1 => HeavyKey::whole(HOT, WHOLE[0], 300),
        _ => HeavyKey::whole(HOT, WHOLE[1], 300),
    };
    Assignment::new(AssignmentParts {
        topic: topic.to_owned(),
        partitions: PARTITIONS,
        epoch: e,
        bucket_hash: BucketHash::default(),
        table: (0..PARTITIONS * 4).map(|b| b % PARTITIONS).collect(),
        heavy: vec![hot],
        params: Params {
            theta: 0.05,
            epsilon: 0.01,
            mu: 4.0,
            window_records: 10_000,
        },
        created_at_ms: 0,
        predicted_load: vec![1.0 / f64::from(PARTITIONS); PARTITIONS as usize],
    })
    .expect("a valid assignment")
}

/// One member's partial counts per (partition, key), and the deltas it has to emit.
#[derive(Default)]
pub struct Partials {
    counts: Mutex<HashMap<u32, HashMap<Vec<u8>, u64>>>,
    outbox: Mutex<Vec<(Vec<u8>, u64)>>,
    /// Split transitions seen by the hooks.
    pub changes: Mutex<Vec<SplitChange>>,
}

impl Partials {
    pub fn add(&self, partition: u32, key: &[u8]) {
        let mut counts = self.counts.lock().expect("counts");
        *counts
            .entry(partition)
            .or_default()
            .entry(key.to_vec())
            .or_insert(0) += 1;
    }

    /// Move the partial counts of `partitions` (all when `None`) to the outbox.
    pub fn flush(&self, partitions: Option<&[u32]>) {
        let mut counts = self.counts.lock().expect("counts");
        let mut outbox = self.outbox.lock().expect("outbox");
        counts.retain(|p, keys| {
            if partitions.is_some_and(|ps| !ps.contains(p)) {
                return true;
            }
            outbox.extend(keys.drain());
            false
        });
    }

    /// Emit the outbox as `key -> delta` records (decimal payload) to `partials`.
    pub async fn emit(&self, producer: &FutureProducer, partials: &str) {
        let deltas = std::mem::take(&mut *self.outbox.lock().expect("outbox"));
        for (key, delta) in deltas {
            let value = delta.to_string();
            producer
                .send(
                    FutureRecord::to(partials).key(&key).payload(&value),
                    Duration::from_secs(10),
                )
                .await
                .map_err(|(e, _)| e)
                .expect("emit a partial count");
        }
    }
}

impl ConsumerHooks for Partials {
    fn on_partitions_revoked(&self, partitions: &[u32]) {
        // Before the final commit of these partitions: their partials leave with them.
        self.flush(Some(partitions));
    }

    fn on_split_change(&self, change: &SplitChange) {
        self.changes.lock().expect("changes").push(change.clone());
    }
}

/// One record as the application saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// Global processing order.
    pub order: u64,
    pub member: usize,
    pub key: Vec<u8>,
    /// The producer's phase (= epoch in effect when sent) and per-key sequence number.
    pub phase: u64,
    pub seq: u64,
    pub partition: i32,
    pub split: Option<u32>,
}

/// What a run produced and what the pipeline made of it.
pub struct Outcome {
    pub topic: String,
    /// Records sent per key.
    pub produced: HashMap<Vec<u8>, u64>,
    /// (key, phase, seq, partition) of every acknowledged record.
    pub sent: Vec<(Vec<u8>, u64, u64, i32)>,
    pub seen: Vec<Seen>,
    /// The latest total per key in the compacted `totals` topic.
    pub totals: HashMap<Vec<u8>, u64>,
    pub members: Vec<Arc<Partials>>,
    pub registry: prometheus::Registry,
}

/// Run the pipeline: `per_phase` records in each of epochs 1, 2 and 3 (a third of them `hot`),
/// two `DkgConsumer` members counting partials, then the merge into the compacted totals topic.
/// `slow_hot` (tests): the application takes this long over each `hot` record of phases 1 and 2,
/// and starts on them only once the next phase's records were acknowledged, so the key's old
/// partitions certainly lag while its next phase's records arrive (the transitions must wait,
/// however fast or slow the machine).
pub async fn run(bootstrap: &str, per_phase: u64, slow_hot: Duration) -> Outcome {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    let run = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    );
    let name = |what: &str| format!("split-aggregates-{what}-{run}");
    let (topic, control_topic, handoff_topic) = (name("data"), name("control"), name("handoff"));
    let (partials, totals) = (name("partials"), name("totals"));
    let admin: AdminClient<_> = config.create().expect("admin client");
    for spec in [
        TopicSpec::new(&topic, PARTITIONS).replication(1),
        TopicSpec::new(&partials, 3).replication(1),
        TopicSpec::compacted(&totals, 1 << 20).replication(1),
    ] {
        topic::create_topic(&admin, &spec, Duration::from_secs(30))
            .await
            .expect("create a topic");
    }
    control::ensure_control_topic(&admin, &control_topic, 1)
        .await
        .expect("create the control topic");
    let publisher: FutureProducer = publisher_config(&config).create().expect("publisher");
    let publish = |e: u64| {
        let (publisher, control_topic, a) = (&publisher, &control_topic, assignment(&topic, e));
        async move {
            publish_assignment(publisher, control_topic, &a, Duration::from_secs(10))
                .await
                .expect("publish an assignment");
        }
    };
    publish(1).await;

    // Two members of one group, each counting partials; every record logged.
    let registry = prometheus::Registry::new();
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let order = Arc::new(AtomicU64::new(0));
    // The last phase whose records were all acknowledged.
    let acked_phase = Arc::new(AtomicU64::new(0));
    let emitter: FutureProducer = config.create().expect("partials producer");
    let mut members = Vec::new();
    let mut tasks = Vec::new();
    let mut stops = Vec::new();
    for i in 0..2 {
        let partials_hooks = Arc::new(Partials::default());
        let mut c = config.clone();
        c.set("auto.offset.reset", "earliest");
        let mut consumer = DkgConsumer::builder(c)
            .topic(&topic)
            .group(name("group"))
            .control_topic(&control_topic)
            .handoff_topic(&handoff_topic)
            .member(format!("member-{i}"))
            .metrics(&registry)
            .hooks(Arc::clone(&partials_hooks))
            .build()
            .await
            .expect("build a DkgConsumer");
        let (app, seen, order, acked_phase) = (
            Arc::clone(&partials_hooks),
            Arc::clone(&seen),
            Arc::clone(&order),
            Arc::clone(&acked_phase),
        );
        let (emitter, partials) = (emitter.clone(), partials.clone());
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::select! {
                    r = consumer.recv() => {
                        let m = r.expect("recv");
                        let key = m.key().unwrap_or_default().to_vec();
                        let payload = String::from_utf8_lossy(m.payload().unwrap_or_default())
                            .into_owned();
                        let (phase, seq) = payload.split_once(':').expect("phase:seq");
                        let (phase, seq): (u64, u64) =
                            (phase.parse().expect("phase"), seq.parse().expect("seq"));
                        app.add(m.partition() as u32, &key);
                        if key == HOT && phase < 3 && !slow_hot.is_zero() {
                            while acked_phase.load(Ordering::SeqCst) <= phase {
                                tokio::time::sleep(Duration::from_millis(5)).await;
                            }
                            tokio::time::sleep(slow_hot).await;
                        }
                        seen.lock().expect("seen").push(Seen {
                            order: order.fetch_add(1, Ordering::SeqCst),
                            member: i,
                            key,
                            phase,
                            seq,
                            partition: m.partition(),
                            split: m.split_parts(),
                        });
                    }
                    _ = &mut stopped => break,
                }
                app.emit(&emitter, &partials).await;
            }
            // Close: the revocation hook flushes every partition's partials.
            consumer.close().await.expect("close");
            app.flush(None);
            app.emit(&emitter, &partials).await;
        }));
        stops.push(stop);
        members.push(partials_hooks);
    }

    let producer = DkgProducer::builder(config.clone())
        .control_topic(&control_topic)
        .handoff_topic(&handoff_topic)
        .topics([topic.as_str()])
        .ordering(true)
        .build()
        .await
        .expect("an ordering producer");
    let mut produced: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut sent = Vec::new();
    let mut sent_before = [0_usize; 4];
    for phase in 1..=3_u64 {
        sent_before[phase as usize] = sent.len();
        if phase > 1 {
            // The switch to the previous epoch drains before the next one is published (split
            // records carry no epoch: the condition their rule needs): every record of the
            // epochs before it is processed, and its progress committed. The previous epoch's
            // own records may still wait: the transition has to hold what follows them.
            let before = sent_before[phase as usize - 1];
            wait(Duration::from_secs(60), || {
                seen.lock().expect("seen").len() >= before
            })
            .await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            publish(phase).await;
        }
        wait(Duration::from_secs(30), || {
            producer
                .router()
                .assignment(&topic)
                .is_some_and(|a| a.epoch() == phase)
        })
        .await;
        let mut deliveries = Vec::new();
        for n in 0..per_phase {
            let key = if n % 3 == 0 {
                HOT.to_vec()
            } else {
                format!("key-{}", n % 40).into_bytes()
            };
            let seq = produced.entry(key.clone()).or_insert(0);
            *seq += 1;
            let payload = format!("{phase}:{seq}");
            let d = producer
                .send_result(FutureRecord::to(&topic).key(&key).payload(&payload))
                .map_err(|(e, _)| e)
                .expect("enqueue");
            deliveries.push((key, *seq, d));
        }
        for (key, seq, d) in deliveries {
            let delivery = d.await.expect("delivery").map_err(|(e, _)| e).expect("ack");
            sent.push((key, phase, seq, delivery.partition));
        }
        acked_phase.store(phase, Ordering::SeqCst);
    }
    producer.close().await.expect("close the producer");
    let total: usize = produced.values().sum::<u64>() as usize;
    wait(Duration::from_secs(60), || {
        seen.lock().expect("seen").len() >= total
    })
    .await;
    for stop in stops {
        let _ = stop.send(());
    }
    for t in tasks {
        t.await.expect("member task");
    }

    let totals_read = merge(&config, &partials, &totals, &name("merger")).await;
    let seen = std::mem::take(&mut *seen.lock().expect("seen"));
    Outcome {
        topic,
        produced,
        sent,
        seen,
        totals: totals_read,
        members,
        registry,
    }
}

/// The downstream merge: sum every delta of `partials` per key, write the totals to the
/// compacted `totals` topic, and read that back (latest record per key).
async fn merge(
    config: &ClientConfig,
    partials: &str,
    totals: &str,
    group: &str,
) -> HashMap<Vec<u8>, u64> {
    let mut sums: HashMap<Vec<u8>, u64> = HashMap::new();
    for (key, value) in read_all(config, partials, group).await {
        let delta: u64 = String::from_utf8_lossy(&value).parse().expect("a delta");
        *sums.entry(key).or_insert(0) += delta;
    }
    let producer: FutureProducer = config.create().expect("totals producer");
    for (key, sum) in &sums {
        producer
            .send(
                FutureRecord::to(totals).key(key).payload(&sum.to_string()),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(e, _)| e)
            .expect("write a total");
    }
    read_all(config, totals, &format!("{group}-totals"))
        .await
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8_lossy(&v).parse().expect("a total")))
        .collect()
}

/// Every record of `topic` up to its current end, in partition order.
async fn read_all(config: &ClientConfig, topic: &str, group: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut c = config.clone();
    c.set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest");
    let consumer: StreamConsumer = c.create().expect("a reader");
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("metadata");
    let mut tpl = TopicPartitionList::new();
    let mut ends = HashMap::new();
    for p in metadata.topics()[0].partitions() {
        let (_, high) = consumer
            .fetch_watermarks(topic, p.id(), Duration::from_secs(10))
            .expect("watermarks");
        if high > 0 {
            ends.insert(p.id(), high);
            tpl.add_partition_offset(topic, p.id(), Offset::Beginning)
                .expect("partition");
        }
    }
    let mut out = Vec::new();
    if ends.is_empty() {
        return out;
    }
    consumer.assign(&tpl).expect("assign");
    while !ends.is_empty() {
        let m = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("read within 30 s")
            .expect("a record");
        out.push((
            m.key().unwrap_or_default().to_vec(),
            m.payload().unwrap_or_default().to_vec(),
        ));
        if ends
            .get(&m.partition())
            .is_some_and(|&end| m.offset() + 1 >= end)
        {
            ends.remove(&m.partition());
        }
    }
    out
}

/// Wait until `cond` holds; panics after `timeout`.
async fn wait(timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < timeout, "not reached within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
