//! Live split placement (issue 15, items 1 and 2) on the real broker: one key at 30% of the records over
//! 12 partitions, produced through `DkgProducer`, and `dkg-sampler run --split-keys auto`. Before the
//! first assignment (Kafka's hash) the hot key's partition carries about 3.6 times the mean (~260%
//! imbalance, the key-grouping bound); once the producer has adopted the published document (format
//! version 2), which spreads the hot key over 4 partitions, the per-partition record counts read back
//! from the broker (end offsets) are within 10% of the mean.
//!
//! Both figures are record-count windows between end-offset snapshots, each bounded by events (the
//! producer holds after the topic's first 40,000 records, too few for a first epoch, until they are
//! measured; the second starts once the producer adopted the document and what it queued before
//! landed), not time windows: a 2 s interval alone once read 14% on CI while the test binaries
//! shared the two cores (quiet runs: 3-8% per interval), the machine's pace, not the placement.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use dkg_partitioner::DkgProducer;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureRecord, Producer};

const PARTITIONS: u32 = 12;
const HOT_SHARE: f64 = 0.3;
const COLD_KEYS: u64 = 5_000;
const RATE: u64 = 20_000;
/// Records of the hash-placed window, the topic's first: well below the ~120,000 sampled records the
/// sampler's first epoch waits for (--first-epoch-noise 0.025), so no publish can happen before them.
const BEFORE_WINDOW: i64 = 40_000;
/// Records of the window measured under the split assignment (three 2 s intervals at RATE).
const SETTLED_WINDOW: i64 = 120_000;

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
    let router = producer.router().clone();
    let stop = Arc::new(AtomicBool::new(false));
    let handed = Arc::new(AtomicU64::new(0));
    // The producer holds (sends nothing more) once it handed over this many records, until the test
    // releases it: the hash-placed window is exactly BEFORE_WINDOW records.
    let hold = Arc::new(AtomicU64::new(BEFORE_WINDOW as u64));
    let (s, t, h, held) = (
        Arc::clone(&stop),
        topic.clone(),
        Arc::clone(&handed),
        Arc::clone(&hold),
    );
    let produce = tokio::spawn(async move {
        let mut rng = SmallRng::seed_from_u64(15);
        let value = [b'v'; 100];
        // Paced from (instant, records sent then), reset after the hold: no catching-up burst.
        let (mut paced_from, mut sent) = ((Instant::now(), 0u64), 0u64);
        while !s.load(Ordering::Relaxed) {
            if sent >= held.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(10)).await;
                paced_from = (Instant::now(), sent);
                continue;
            }
            for _ in 0..RATE / 100 {
                if sent >= held.load(Ordering::Relaxed) {
                    break;
                }
                let key = if rng.random_bool(HOT_SHARE) {
                    "hot".to_owned()
                } else {
                    format!("cold-{}", rng.random_range(0..COLD_KEYS))
                };
                let record = FutureRecord::to(&t).key(key.as_bytes()).payload(&value[..]);
                match producer.send_result(record) {
                    Ok(_) => {
                        sent += 1;
                        h.store(sent, Ordering::Relaxed);
                    }
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    Err((e, _)) => panic!("send: {e}"),
                }
            }
            let due = Duration::from_secs_f64((sent - paced_from.1) as f64 / RATE as f64);
            if let Some(wait) = due.checked_sub(paced_from.0.elapsed()) {
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
    let (before, settled, assignment) = tokio::task::block_in_place(|| {
        // Hash placement: the held producer's BEFORE_WINDOW records, too few for the sampler's
        // first epoch, so none was placed by an assignment (checked: the producer adopted none).
        let end = offsets.wait_total(BEFORE_WINDOW);
        assert!(
            router.assignment(&topic).is_none(),
            "an assignment on {BEFORE_WINDOW} records: {}",
            sampler.log()
        );
        let before = imbalance_between(&vec![0; PARTITIONS as usize], &end);
        hold.store(u64::MAX, Ordering::Relaxed);
        // The first epoch waits for ~120,000 sampled records (6 s at RATE): the bound is for a
        // sampler that never publishes, not for a slow machine.
        let assignment = wait_for("a published assignment", Duration::from_secs(120), || {
            sampler.assignment()
        });
        // The event the measured window starts at: the producer routes by a document, and the
        // records it queued before (placed by hash) have landed.
        wait_for(
            "the producer to adopt the assignment",
            Duration::from_secs(60),
            || router.assignment(&topic),
        );
        let from = offsets.wait_total(handed.load(Ordering::Relaxed) as i64);
        let to = offsets.wait_total(from.iter().sum::<i64>() + SETTLED_WINDOW);
        (before, imbalance_between(&from, &to), assignment)
    });
    eprintln!("hash placement {before:.3}, under the assignment {settled:.3}");
    // 30% of 12 partitions: 3.6 fair shares on one partition under any key grouping.
    assert!(before > 2.0, "hash placement: {before}");
    assert!(
        settled < 0.10,
        "imbalance {settled:.3} over the {SETTLED_WINDOW} records after the producer adopted epoch {}",
        assignment.epoch()
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
    // The misplacement detector (issue 31 item 5) takes any part of a split key as right: the
    // hot key's records on its four partitions are not misplaced.
    let counter = |name| find(&m, name, &[("topic", topic.as_str())]).unwrap_or(0.0);
    let checked = counter("dkg_sampler_placement_checked_records_total");
    let misplaced = counter("dkg_sampler_misplaced_records_total");
    eprintln!("misplaced: {misplaced} of {checked} checked");
    assert!(
        checked > 0.0 && misplaced / checked < 0.005,
        "misplaced {misplaced} of {checked} checked"
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
