//! Live split placement (issue 15, items 1 and 2) on the real broker: one key at 30% of the records over
//! 12 partitions, produced through `DkgProducer`, and `dkg-sampler run --split-keys auto`. Before the
//! first assignment (Kafka's hash) the hot key's partition carries about 3.6 times the mean (~260%
//! imbalance, the key-grouping bound); from two sampler intervals after the publish on, the
//! per-partition record counts read back from the broker (end offsets) are within 10% of the mean (the
//! median of intervals two to four), because the published document (format version 2) spreads the
//! hot key over 4 partitions.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use dkg_partitioner::kafka::DkgProducer;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureRecord, Producer};

const PARTITIONS: u32 = 12;
const HOT_SHARE: f64 = 0.3;
const COLD_KEYS: u64 = 5_000;
const RATE: u64 = 20_000;

/// The log without its ANSI colour sequences (`ESC [ ... m`).
fn without_colours(log: &str) -> String {
    let mut out = String::with_capacity(log.len());
    let mut chars = log.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_at_30_percent_is_split_and_the_measured_imbalance_falls_under_10_percent() {
    let topic = unique_topic("sampler-split");
    create_topic(&bootstrap(), &topic, PARTITIONS, &[]).await;
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap())
        .set("linger.ms", "5")
        .set("log_level", "3");
    let producer = DkgProducer::builder(config)
        .topics([topic.clone()])
        .build()
        .await
        .expect("build DkgProducer");
    let stop = Arc::new(AtomicBool::new(false));
    let (s, t) = (Arc::clone(&stop), topic.clone());
    let produce = tokio::spawn(async move {
        let mut rng = SmallRng::seed_from_u64(15);
        let value = [b'v'; 100];
        let (started, mut sent) = (Instant::now(), 0u64);
        while !s.load(Ordering::Relaxed) {
            for _ in 0..RATE / 100 {
                let key = if rng.random_bool(HOT_SHARE) {
                    "hot".to_owned()
                } else {
                    format!("cold-{}", rng.random_range(0..COLD_KEYS))
                };
                let record = FutureRecord::to(&t).key(key.as_bytes()).payload(&value[..]);
                match producer.send_result(record) {
                    Ok(_) => sent += 1,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    Err((e, _)) => panic!("send: {e}"),
                }
            }
            let due = Duration::from_secs_f64(sent as f64 / RATE as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                tokio::time::sleep(wait).await;
            }
        }
        producer
            .inner()
            .flush(Duration::from_secs(10))
            .expect("flush");
    });

    let offsets = EndOffsets::new(&topic, PARTITIONS);
    let sampler = Sampler::start(
        "split",
        &topic,
        // The first epoch waits for a window whose sampling noise is at most 2.5% (about 120,000 sampled
        // records, 6 s here) instead of the test suite's publish-at-min-samples: an assignment fitted to a
        // smaller window was about 10% off under CI load (its own prediction rose from 4.0% to 8.6% over the
        // next intervals, and the broker measured 10-16%), which is the window's noise, not the split.
        &[
            "--interval-secs",
            "2",
            "--split-keys",
            "auto",
            "--first-epoch-noise",
            "0.025",
        ],
    );
    let (before, published, settled, assignment) = tokio::task::block_in_place(|| {
        // Hash placement until the first publish.
        wait_for("records on the topic", Duration::from_secs(20), || {
            (offsets.read().iter().sum::<i64>() > 2_000).then_some(())
        });
        let start = offsets.read();
        let (published_at, assignment) =
            wait_for("a published assignment", Duration::from_secs(40), || {
                let a = sampler.assignment()?;
                Some((sampler.intervals(), a))
            });
        let before = imbalance_between(&start, &offsets.read());
        // The interval after the publish lets the producer switch; the next one is measured.
        wait_for(
            "one interval after the publish",
            Duration::from_secs(20),
            || (sampler.intervals() > published_at).then_some(()),
        );
        // Intervals two to four after the publish, each measured from the broker's end offsets.
        let mut from = offsets.read();
        let mut intervals = Vec::new();
        for after in 1..=3 {
            wait_for(
                "the next interval after the publish",
                Duration::from_secs(20),
                || (sampler.intervals() > published_at + after).then_some(()),
            );
            let to = offsets.read();
            intervals.push(imbalance_between(&from, &to));
            from = to;
        }
        (before, published_at, intervals, assignment)
    });
    // The median of the three: one 2 s interval alone once read 14% on CI while the test binaries shared the
    // two cores (quiet runs: 3-8% for each interval).
    let mut sorted = settled.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[1];
    eprintln!("hash placement {before:.3}, intervals two to four after the publish {settled:.3?}");
    // 30% of 12 partitions: 3.6 fair shares on one partition under any key grouping.
    assert!(before > 2.0, "hash placement: {before}");
    assert!(
        median < 0.10,
        "imbalance {median} (median of the intervals two to four after the publish at interval {published}: \
         {settled:?})"
    );
    let hot = assignment
        .heavy()
        .iter()
        .find(|h| h.key == b"hot")
        .expect("the hot key is heavy");
    assert_eq!(hot.split.len(), 4, "ceil(0.3 * 12) parts: {:?}", hot.split);
    assert!(
        assignment.heavy().iter().filter(|h| h.is_split()).count() == 1,
        "only the hot key is split"
    );
    assert_eq!(assignment.format_version(), 2);
    let m = sampler.metrics();
    assert_eq!(
        find(&m, "dkg_sampler_split_keys", &[("topic", topic.as_str())]),
        Some(1.0)
    );
    let log = without_colours(&sampler.log());
    assert!(
        log.lines()
            .any(|l| l.contains("published a new assignment") && l.contains("split_keys=hot/4")),
        "the publish log line names the split key: {log}"
    );
    stop.store(true, Ordering::Relaxed);
    produce.await.expect("producer task");
    drop(sampler);
}
