//! The misplacement detector on the real broker (issue 31 item 5): a producer that places keys by
//! Kafka's plain murmur2 (a Go, Node or .NET producer, or a Java one without the plug-in) writing
//! about a tenth of a topic's records beside a `DkgProducer` shows as
//! `dkg_sampler_misplaced_records_ratio` 0.10 +- 0.02 once the first epoch is adopted, with a
//! warning in the log and on `/healthz` (still 200); wrapped producers alone stay below 0.005 over
//! the whole run, the switch from the fallback to the first epoch included.
//!
//! The stray producer's keys are uniform over the workload's key space, so the share of its records
//! that an assignment happens to put where murmur2 does is about 1/k; the test also computes the
//! exact misplaced share from what it sent and the adopted assignment, and the detector must agree
//! with it within 0.01 (the accuracy BENCHMARKS.md reports).

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use dkg_core::hash::kafka_partition;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};

const PARTITIONS: u32 = 12;
const KEYS: u64 = 10_000;
const DKG_RATE: u64 = 4_500;
const STRAY_RATE: u64 = 500;

/// A plain producer with Kafka's murmur2 placement, sending uniform keys at `rate`; counts what it
/// sent per key.
struct Stray {
    stop: Arc<AtomicBool>,
    sent: Arc<Mutex<HashMap<String, u64>>>,
    handle: tokio::task::JoinHandle<()>,
}

impl Stray {
    fn start(topic: &str, rate: u64) -> Self {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap())
            .set("linger.ms", "5")
            .set("partitioner", "murmur2_random")
            .create()
            .expect("plain producer");
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(Mutex::new(HashMap::new()));
        let (s, counts, topic) = (Arc::clone(&stop), Arc::clone(&sent), topic.to_owned());
        let handle = tokio::spawn(async move {
            let mut rng = SmallRng::seed_from_u64(7);
            let value = [b's'; 100];
            let started = std::time::Instant::now();
            let mut n: u64 = 0;
            while !s.load(Ordering::Relaxed) {
                for _ in 0..(rate / 100).max(1) {
                    let key = zipf_key(0, rng.random_range(1..=KEYS));
                    let record = FutureRecord::to(&topic)
                        .key(key.as_bytes())
                        .payload(&value[..]);
                    match producer.send_result(record) {
                        Ok(_) => {
                            n += 1;
                            *counts.lock().expect("counts").entry(key).or_insert(0) += 1;
                        }
                        Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        Err((e, _)) => panic!("stray producer: {e}"),
                    }
                }
                let due = Duration::from_secs_f64(n as f64 / rate as f64);
                if let Some(wait) = due.checked_sub(started.elapsed()) {
                    tokio::time::sleep(wait).await;
                }
            }
            producer.flush(Duration::from_secs(10)).expect("flushed");
        });
        Self { stop, sent, handle }
    }

    fn counts(&self) -> HashMap<String, u64> {
        self.sent.lock().expect("counts").clone()
    }

    async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.await.expect("stray producer task");
    }
}

/// The sampler's cumulative (checked, misplaced) counters.
fn counters(sampler: &Sampler, topic: &str) -> (f64, f64) {
    let m = sampler.metrics();
    let get = |name| find(&m, name, &[("topic", topic)]).unwrap_or_else(|| panic!("{name}"));
    (
        get("dkg_sampler_placement_checked_records_total"),
        get("dkg_sampler_misplaced_records_total"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_producer_beside_a_dkg_producer_is_a_tenth_misplaced() {
    let topic = unique_topic("sampler-misplaced");
    create_topic(&bootstrap(), &topic, PARTITIONS, &[]).await;
    let workload = Workload::start(WorkloadSpec {
        topic: topic.clone(),
        alpha: 1.0,
        keys: KEYS,
        records_per_second: DKG_RATE,
        dkg: true,
        seed: 3,
    })
    .await;
    let stray = Stray::start(&topic, STRAY_RATE);
    let sampler = Sampler::start("misplaced", &topic, &["--interval-secs", "2"]);
    let label = [("topic", topic.as_str())];

    let epoch = tokio::task::block_in_place(|| {
        wait_for(
            "the DkgProducer to adopt the first assignment",
            Duration::from_secs(90),
            || workload.adopted_epoch(),
        )
    });
    let assignment = sampler
        .assignment()
        .expect("the sampler serves its assignment");
    assert_eq!(assignment.epoch(), epoch);
    // One whole interval after the adoption, so the window holds no record of the switch.
    let after = sampler.intervals() + 2;
    tokio::task::block_in_place(|| {
        wait_for(
            "two intervals after the adoption",
            Duration::from_secs(30),
            || (sampler.intervals() >= after).then_some(()),
        )
    });
    let (c0, stray0, dkg0) = (
        counters(&sampler, &topic),
        stray.counts(),
        workload.produced(),
    );
    let until = sampler.intervals() + 4;
    let gauge_and_health = tokio::task::block_in_place(|| {
        wait_for("four more intervals", Duration::from_secs(60), || {
            (sampler.intervals() >= until).then_some(())
        });
        (
            sampler.metric("dkg_sampler_misplaced_records_ratio", &label),
            sampler.get("/healthz"),
        )
    });
    let (c1, stray1, dkg1) = (
        counters(&sampler, &topic),
        stray.counts(),
        workload.produced(),
    );
    stray.stop().await;
    workload.stop().await;

    // What the stray producer sent in the window, and how much of it the assignment puts elsewhere.
    let mut stray_sent = 0.0;
    let mut stray_misplaced = 0.0;
    for (key, n) in &stray1 {
        let n = (n - stray0.get(key).copied().unwrap_or(0)) as f64;
        stray_sent += n;
        if assignment.partition_for(key.as_bytes()) != kafka_partition(key.as_bytes(), PARTITIONS) {
            stray_misplaced += n;
        }
    }
    let expected = stray_misplaced / (stray_sent + (dkg1 - dkg0) as f64);
    let measured = (c1.1 - c0.1) / (c1.0 - c0.0);
    let gauge = gauge_and_health.0.expect("the ratio gauge");
    eprintln!(
        "misplaced: measured {measured:.4} over {} records checked, last interval {gauge:.4}, \
         expected {expected:.4} (stray share {:.4})",
        c1.0 - c0.0,
        stray_sent / (stray_sent + (dkg1 - dkg0) as f64)
    );
    assert!(
        (measured - 0.10).abs() <= 0.02,
        "measured {measured}, expected about 0.10"
    );
    assert!((gauge - 0.10).abs() <= 0.02, "last interval {gauge}");
    assert!(
        (measured - expected).abs() <= 0.01,
        "measured {measured} vs exact {expected}"
    );
    let (code, body) = gauge_and_health.1.expect("/healthz");
    assert_eq!(code, 200, "a warning is not a failure: {body}");
    let health: serde_json::Value = serde_json::from_str(&body).expect("json");
    let warning = health["warning"].as_str().unwrap_or_default();
    assert!(
        warning.contains("without the DKG wrapper"),
        "healthz warning: {body}"
    );
    assert!(
        sampler
            .log()
            .contains("are not on the partition the assignment in effect"),
        "a WARN line in the log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrapped_producers_alone_are_not_misplaced() {
    let topic = unique_topic("sampler-placed");
    create_topic(&bootstrap(), &topic, PARTITIONS, &[]).await;
    let workloads = [
        Workload::start(WorkloadSpec {
            topic: topic.clone(),
            alpha: 1.0,
            keys: KEYS,
            records_per_second: DKG_RATE / 2,
            dkg: true,
            seed: 4,
        })
        .await,
        Workload::start(WorkloadSpec {
            topic: topic.clone(),
            alpha: 1.0,
            keys: KEYS,
            records_per_second: DKG_RATE / 2,
            dkg: true,
            seed: 5,
        })
        .await,
    ];
    let sampler = Sampler::start("placed", &topic, &["--interval-secs", "2"]);
    let label = [("topic", topic.as_str())];
    tokio::task::block_in_place(|| {
        wait_for(
            "both DkgProducers to adopt the first assignment",
            Duration::from_secs(90),
            || {
                workloads
                    .iter()
                    .all(|w| w.adopted_epoch().is_some())
                    .then_some(())
            },
        );
        let until = sampler.intervals() + 4;
        wait_for(
            "four intervals after the adoption",
            Duration::from_secs(60),
            || (sampler.intervals() >= until).then_some(()),
        );
    });
    // Over the whole run: the fallback before epoch 1 and the switch to it included.
    let (checked, misplaced) = counters(&sampler, &topic);
    let gauge = sampler
        .metric("dkg_sampler_misplaced_records_ratio", &label)
        .expect("the ratio gauge");
    let health = sampler.health().expect("/healthz");
    for w in workloads {
        w.stop().await;
    }
    eprintln!("wrapped only: {misplaced} of {checked} misplaced, last interval {gauge:.4}");
    assert!(checked > 20_000.0, "checked only {checked}");
    assert!(misplaced / checked < 0.005, "{misplaced} of {checked}");
    assert!(gauge < 0.005, "last interval {gauge}");
    assert!(health["warning"].is_null(), "{health}");
}
