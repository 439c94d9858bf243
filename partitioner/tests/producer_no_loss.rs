//! No loss, no duplicates, exact placement: 10^6 Zipf-keyed records (a few more if the second
//! switch is slow to take effect) through `DkgProducer` while two
//! assignments are published mid-stream; consumed back, every record is present exactly once and
//! sits on the partition its `dkg-epoch` header's assignment names (Kafka's default placement when
//! it has no header).
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::producer::{ControlledTopic, assignment};
use dkg_kafka::Assignment;
use dkg_kafka::DeliveryFuture;
use dkg_kafka::EpochHeader;
use dkg_kafka::kafka::control::publish_assignment;
use dkg_kafka::kafka::epoch_of;
use dkg_kafka_core::kafka_partition;
use dkg_testkit::send::send_windowed;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, Zipf};
use rdkafka::Message as _;
use rdkafka::producer::FutureRecord;

const RECORDS: u64 = 1_000_000;
const PARTITIONS: u32 = 8;
const KEYS: u64 = 20_000;
/// Records routed under each of epochs 1 and 2 before the next step (see the send loop).
const PHASE: u64 = 20_000;

/// Epoch `e`: the three hottest key ids pinned, buckets rotated by `e`.
fn epoch_assignment(topic: &str, epoch: u64) -> Assignment {
    let table = (0..PARTITIONS * 8)
        .map(|b| (b + epoch as u32) % PARTITIONS)
        .collect();
    let hot: Vec<Vec<u8>> = (0..3_u64).map(|id| id.to_string().into_bytes()).collect();
    let heavy: Vec<(&[u8], u32)> = hot
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_slice(), (i as u32 + epoch as u32 * 3) % PARTITIONS))
        .collect();
    assignment(topic, PARTITIONS, epoch, table, &heavy)
}

#[derive(Default)]
struct Check {
    seen: Vec<u8>,
    duplicates: u64,
    misplaced: Vec<String>,
    by_epoch: HashMap<Option<u64>, u64>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_no_loss() {
    let t = ControlledTopic::new("noloss", PARTITIONS).await;
    let producer = t
        .producer(EpochHeader::All, &prometheus::Registry::new())
        .await;
    let (bootstrap, topic, control) = (t.bootstrap.clone(), t.topic.clone(), t.control.clone());
    let assignments: HashMap<u64, Assignment> =
        (1..=2).map(|e| (e, epoch_assignment(&topic, e))).collect();

    let zipf = Zipf::new(KEYS as f64, 1.1).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut in_flight: VecDeque<DeliveryFuture> = VecDeque::new();
    let mut failed = Vec::new();
    let mut publications = Vec::new();
    let settle = |r: Result<rdkafka::producer::future_producer::OwnedDeliveryResult, _>,
                  failed: &mut Vec<String>| match r {
        Ok(Ok(_)) => {}
        Ok(Err((e, _))) => failed.push(e.to_string()),
        Err(e) => failed.push(format!("canceled: {e:?}")),
    };
    // Three phases, each long enough by the event, not by the stream's pace: epoch 1 is published at
    // 30% of the records, epoch 2 once PHASE records were routed under epoch 1 (at 70% at the
    // earliest), and the stream goes on past RECORDS until PHASE records were routed under epoch 2
    // (within a minute).
    let mut routed_under: HashMap<Option<u64>, u64> = HashMap::new();
    let (mut published, mut seq) = (0_u64, 0_u64);
    let mut overtime: Option<std::time::Instant> = None;
    loop {
        let epoch_now = producer.router().assignment(&topic).map(|a| a.epoch());
        if seq >= RECORDS {
            if routed_under.get(&Some(2)).copied().unwrap_or(0) >= PHASE {
                break;
            }
            let since = *overtime.get_or_insert_with(std::time::Instant::now);
            assert!(
                since.elapsed() < Duration::from_secs(60),
                "epoch 2 was not adopted within a minute of the stream's planned end: {routed_under:?}"
            );
        }
        let due = match published {
            0 => seq >= RECORDS * 3 / 10,
            1 => {
                seq >= RECORDS * 7 / 10 && routed_under.get(&Some(1)).copied().unwrap_or(0) >= PHASE
            }
            _ => false,
        };
        if due {
            // Publish mid-stream without pausing production.
            published += 1;
            let (p, c, a) = (
                t.publisher.clone(),
                control.clone(),
                assignments[&published].clone(),
            );
            publications.push(tokio::spawn(async move {
                publish_assignment(&p, &c, &a, Duration::from_secs(10)).await
            }));
        }
        *routed_under.entry(epoch_now).or_default() += 1;
        let key = ((zipf.sample(&mut rng) as u64).clamp(1, KEYS) - 1).to_string();
        let payload = seq.to_le_bytes();
        let record = FutureRecord::to(&topic).key(&key).payload(&payload[..]);
        // The client's own `send_result` shape: the record comes back inside the error.
        #[allow(clippy::result_large_err)]
        let send = |r| producer.send_result(r);
        let settled = |r| settle(r, &mut failed);
        if let Err(e) = send_windowed(send, record, &mut in_flight, 50_000, settled).await {
            failed.push(e.to_string());
        }
        seq += 1;
    }
    let total = seq;
    for f in in_flight {
        settle(f.await, &mut failed);
    }
    for p in publications {
        p.await.unwrap().unwrap();
    }
    assert!(
        failed.is_empty(),
        "{} deliveries failed, first: {}",
        failed.len(),
        failed[0]
    );

    let check = Arc::new(Mutex::new(Check {
        seen: vec![0; total as usize],
        ..Check::default()
    }));
    let sink = Arc::clone(&check);
    let assignments = Arc::new(assignments);
    let read = common::producer::consume_all(
        &bootstrap,
        &topic,
        PARTITIONS,
        total as usize,
        Duration::from_secs(300),
        move |m| {
            let mut c = sink.lock().unwrap();
            let seq = u64::from_le_bytes(m.payload().unwrap().try_into().unwrap());
            let slot = &mut c.seen[seq as usize];
            *slot += 1;
            if *slot > 1 {
                c.duplicates += 1;
            }
            let key = m.key().unwrap();
            let epoch = m.headers().and_then(epoch_of);
            *c.by_epoch.entry(epoch).or_default() += 1;
            let expected = match epoch {
                Some(e) => assignments[&e].partition_for(key),
                None => kafka_partition(key, PARTITIONS),
            };
            if expected as i32 != m.partition() && c.misplaced.len() < 10 {
                c.misplaced.push(format!(
                    "seq {seq} key {:?} epoch {epoch:?} on {} expected {expected}",
                    String::from_utf8_lossy(key),
                    m.partition()
                ));
            }
        },
    )
    .await;

    let c = check.lock().unwrap();
    let missing = c.seen.iter().filter(|&&n| n == 0).count();
    println!("read {read} records; by epoch header: {:?}", c.by_epoch);
    assert_eq!(missing, 0, "records lost");
    assert_eq!(c.duplicates, 0, "records duplicated");
    assert_eq!(read as u64, total);
    assert!(c.misplaced.is_empty(), "misplaced: {:?}", c.misplaced);
    // All three placements really happened.
    for epoch in [None, Some(1), Some(2)] {
        assert!(
            c.by_epoch.get(&epoch).copied().unwrap_or(0) > PHASE / 2,
            "{:?}",
            c.by_epoch
        );
    }
}
