//! Per-key counts that stay exact while DKG epochs move keys between partitions and consumers.
//!
//! Each group member keeps a local cache of counts for the keys it processes and a shared store
//! (here an in-process map, standing for a database or a compacted topic) holds the counts of
//! keys nobody caches. The hooks hand state over:
//!
//! - a key's first record on a member loads its count from the store;
//! - `on_epoch`: keys that left a drained partition for another member are flushed to the store
//!   and evicted (the other member hands out their next record only after this hook returned);
//! - `on_partitions_revoked`: everything is flushed (a rebalance or close).
//!
//! The run publishes four epochs that move the hot keys mid-stream, then checks every key's count
//! in the store against what was produced.
//!
//! ```text
//! scripts/kafka start
//! cargo run -p dkg-kafka --example keyed_counts -- [records] [bootstrap] [KEY=VALUE...]
//! ```
//!
//! `KEY=VALUE` arguments are librdkafka settings for the two members, e.g. `group.protocol=consumer`
//! (the KIP-848 group protocol: the broker assigns the partitions).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dkg_kafka::Assignment;
use dkg_kafka::kafka::control;
use dkg_kafka::kafka::control::{publish_assignment, publisher_config};
use dkg_kafka::kafka::topic;
use dkg_kafka::kafka::topic::TopicSpec;
use dkg_kafka::{ConsumerHooks, DkgConsumer, DkgProducer, EpochChange};
use dkg_kafka_core::{AssignmentParts, BucketHash, HeavyKey, Params};
use rdkafka::ClientConfig;
use rdkafka::admin::AdminClient;
use rdkafka::producer::FutureRecord;

const PARTITIONS: u32 = 6;

type Store = Arc<Mutex<HashMap<Vec<u8>, u64>>>;

/// One member's state: its cache, and the shared store.
struct Counts {
    cache: Mutex<HashMap<Vec<u8>, u64>>,
    store: Store,
    handled: std::sync::atomic::AtomicU64,
}

impl Counts {
    fn count(&self, key: &[u8]) {
        let mut cache = self.cache.lock().expect("cache");
        if !cache.contains_key(key) {
            // First record of the key here: its count so far lives in the store.
            let stored = self
                .store
                .lock()
                .expect("store")
                .get(key)
                .copied()
                .unwrap_or(0);
            cache.insert(key.to_vec(), stored);
        }
        if let Some(c) = cache.get_mut(key) {
            *c += 1;
        }
        self.handled
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn flush(&self, keep: impl Fn(&[u8]) -> bool) {
        let mut cache = self.cache.lock().expect("cache");
        let mut store = self.store.lock().expect("store");
        cache.retain(|k, c| {
            if keep(k) {
                return true;
            }
            // A put, as with a real store: the last writer wins, so a member that loaded a stale
            // count would overwrite the right one.
            store.insert(k.clone(), *c);
            false
        });
    }
}

impl ConsumerHooks for Counts {
    fn on_epoch(&self, change: &EpochChange<'_>) {
        self.flush(|k| !change.moved_out(k));
    }

    fn on_partitions_revoked(&self, _partitions: &[u32]) {
        self.flush(|_| false);
    }
}

/// Epoch `e`: hot keys `key-0..key-5` on `(i + e) % PARTITIONS`, every other key by bucket.
fn assignment(topic: &str, e: u64) -> Assignment {
    let heavy = (0..6_u64)
        .map(|i| HeavyKey {
            key: format!("key-{i}").into_bytes(),
            partition: ((i + e) % u64::from(PARTITIONS)) as u32,
            weight: 100,
            split: Vec::new(),
        })
        .collect();
    Assignment::new(AssignmentParts {
        topic: topic.to_owned(),
        partitions: PARTITIONS,
        epoch: e,
        bucket_hash: BucketHash::default(),
        table: (0..PARTITIONS * 4).map(|b| b % PARTITIONS).collect(),
        heavy,
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

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1);
    let records: u64 = args.next().map_or(Ok(30_000), |a| a.parse())?;
    let bootstrap = args.next().unwrap_or_else(|| "127.0.0.1:9092".to_owned());
    let member_settings: Vec<(String, String)> = args
        .map(|a| match a.split_once('=') {
            Some((k, v)) => Ok((k.to_owned(), v.to_owned())),
            None => Err(format!("expected KEY=VALUE, got {a:?}")),
        })
        .collect::<Result<_, _>>()?;
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &bootstrap);

    let run = std::process::id();
    let topic = format!("keyed-counts-{run}");
    let control_topic = format!("keyed-counts-control-{run}");
    let handoff_topic = format!("keyed-counts-handoff-{run}");
    let admin: AdminClient<_> = config.create()?;
    let spec = TopicSpec::new(&topic, PARTITIONS).replication(1);
    topic::create_topic(&admin, &spec, Duration::from_secs(30)).await?;
    control::ensure_control_topic(&admin, &control_topic, 1).await?;
    let publisher: rdkafka::producer::FutureProducer = publisher_config(&config).create()?;
    publish_assignment(
        &publisher,
        &control_topic,
        &assignment(&topic, 1),
        Duration::from_secs(10),
    )
    .await?;

    // Two members of one group, each with its cache and hooks; one shared store.
    let store: Store = Arc::default();
    let mut members = Vec::new();
    let mut caches = Vec::new();
    for i in 0..2 {
        let counts = Arc::new(Counts {
            cache: Mutex::default(),
            store: Arc::clone(&store),
            handled: std::sync::atomic::AtomicU64::new(0),
        });
        let mut c = config.clone();
        c.set("auto.offset.reset", "earliest");
        for (k, v) in &member_settings {
            c.set(k, v);
        }
        let mut consumer = DkgConsumer::builder(c)
            .topic(&topic)
            .group(format!("keyed-counts-{run}"))
            .control_topic(&control_topic)
            .handoff_topic(&handoff_topic)
            .member(format!("member-{i}"))
            .hooks(Arc::clone(&counts))
            .build()
            .await?;
        let app = Arc::clone(&counts);
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    r = consumer.recv() => match r {
                        Ok(m) => {
                            if let Some(k) = m.key() {
                                app.count(k);
                            }
                        }
                        Err(e) => eprintln!("consumer error (continuing): {e}"),
                    },
                    _ = &mut stopped => break,
                }
            }
            consumer.close().await
        });
        members.push((stop, task));
        caches.push(counts);
    }

    // An ordering producer; hot keys take half the records.
    let producer = DkgProducer::builder(config.clone())
        .control_topic(&control_topic)
        .handoff_topic(&handoff_topic)
        .topics([topic.as_str()])
        .ordering(true)
        .build()
        .await?;
    let mut produced: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut deliveries = Vec::new();
    for n in 0..records {
        let key = if n % 2 == 0 {
            format!("key-{}", n % 12 / 2)
        } else {
            format!("key-{}", 6 + n % 500)
        };
        *produced.entry(key.clone().into_bytes()).or_insert(0) += 1;
        deliveries.push(
            producer
                .send_result(FutureRecord::to(&topic).key(&key).payload("1"))
                .map_err(|(e, _)| e)?,
        );
        // Four switches spread over the run, each moving every hot key.
        if n > 0 && n % (records / 5).max(1) == 0 && n / (records / 5).max(1) <= 4 {
            let e = 1 + n / (records / 5).max(1);
            publish_assignment(
                &publisher,
                &control_topic,
                &assignment(&topic, e),
                Duration::from_secs(10),
            )
            .await?;
        }
        if n % 1_000 == 999 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    for d in deliveries {
        d.await?.map_err(|(e, _)| e)?;
    }
    producer.close().await?;

    // Let the members catch up, then close them (their revocation hooks flush the caches).
    let expected: u64 = produced.values().sum();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let counted: u64 = caches
            .iter()
            .map(|c| c.handled.load(std::sync::atomic::Ordering::Relaxed))
            .sum();
        if counted >= expected || tokio::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (stop, task) in members {
        let _ = stop.send(());
        task.await??;
    }

    let handled: u64 = caches
        .iter()
        .map(|c| c.handled.load(std::sync::atomic::Ordering::Relaxed))
        .sum();
    let store = store.lock().expect("store");
    let wrong: Vec<_> = produced
        .iter()
        .filter(|(k, n)| store.get(*k) != Some(n))
        .collect();
    println!(
        "{expected} records of {} keys through 5 epochs; handled {handled} \
         ({} delivered twice); {} keys counted wrong",
        produced.len(),
        handled.saturating_sub(expected),
        wrong.len()
    );
    for (k, n) in wrong.iter().take(10) {
        println!(
            "  {}: produced {n}, counted {:?}",
            String::from_utf8_lossy(k),
            store.get(*k)
        );
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err("counts differ".into())
    }
}
