//! The broker is stopped and started again while `DkgProducer` is producing: every record is
//! delivered exactly once (idempotent producer, acks=all) and still placed by the assignment, and
//! the producer keeps following the control topic afterwards.
//!
//! Its own test binary with a single test: it restarts the shared broker, which no other test
//! running at the same moment would survive unharmed (cargo runs test binaries one at a time).
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::producer::{client_config, raw_publisher, rotating_assignment, wait_for_epoch};
use dkg_partitioner::kafka::{DkgProducer, EpochHeader, epoch_of, publish_assignment};
use rdkafka::Message as _;
use rdkafka::error::KafkaError;
use rdkafka::producer::{DeliveryFuture, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;

const RECORDS: u64 = 150_000;
const PARTITIONS: u32 = 4;
/// Paced so production spans the whole restart.
const RATE_PER_SEC: f64 = 10_000.0;
const RESTART_AT: u64 = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_broker_restart() {
    let bootstrap = common::bootstrap();
    let topic = common::unique_topic("restart");
    let control = common::unique_topic("restart-control");
    common::create_topic(&bootstrap, &topic, PARTITIONS, &[]).await;

    let producer = DkgProducer::builder(client_config(&bootstrap))
        .control_topic(&control)
        .topics([topic.as_str()])
        .epoch_header(EpochHeader::All)
        .build()
        .await
        .unwrap();
    let assignment = rotating_assignment(&topic, PARTITIONS, 1);
    publish_assignment(
        &raw_publisher(&bootstrap),
        &control,
        &assignment,
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    wait_for_epoch(producer.router(), &topic, 1).await;

    let produced_at_stop = Arc::new(AtomicU64::new(u64::MAX));
    let produced = Arc::new(AtomicU64::new(0));
    let mut restart = None;
    let mut in_flight: VecDeque<DeliveryFuture> = VecDeque::new();
    let mut failed = Vec::new();
    let start = Instant::now();
    for seq in 0..RECORDS {
        if seq == RESTART_AT {
            let (at_stop, produced) = (Arc::clone(&produced_at_stop), Arc::clone(&produced));
            restart = Some(tokio::task::spawn_blocking(move || {
                at_stop.store(produced.load(Ordering::SeqCst), Ordering::SeqCst);
                common::kafka_script(&["stop"]);
                let down = Instant::now();
                common::kafka_script(&["start"]);
                (produced.load(Ordering::SeqCst), down.elapsed())
            }));
        }
        let due = Duration::from_secs_f64(seq as f64 / RATE_PER_SEC);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        let key = format!("key-{}", seq % 997);
        let payload = seq.to_le_bytes();
        let mut record = FutureRecord::to(&topic).key(&key).payload(&payload[..]);
        loop {
            match producer.send_result(record) {
                Ok(f) => {
                    in_flight.push_back(f);
                    break;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    match in_flight.pop_front() {
                        Some(oldest) => {
                            if let Ok(Err((e, _))) = oldest.await {
                                failed.push(e.to_string());
                            }
                        }
                        None => tokio::time::sleep(Duration::from_millis(10)).await,
                    }
                }
                Err((e, _)) => {
                    failed.push(e.to_string());
                    break;
                }
            }
        }
        produced.store(seq + 1, Ordering::SeqCst);
        while in_flight.len() > 20_000 {
            if let Ok(Err((e, _))) = in_flight.pop_front().unwrap().await {
                failed.push(e.to_string());
            }
        }
    }
    for f in in_flight {
        match f.await {
            Ok(Ok(_)) => {}
            Ok(Err((e, _))) => failed.push(e.to_string()),
            Err(e) => failed.push(format!("canceled: {e:?}")),
        }
    }
    let (produced_after_restart, down_for) = restart.unwrap().await.unwrap();
    let at_stop = produced_at_stop.load(Ordering::SeqCst);
    println!(
        "broker stopped after {at_stop} records, back after {down_for:?} with {produced_after_restart} \
         produced; {RECORDS} records in {:?}",
        start.elapsed()
    );
    assert!(
        failed.is_empty(),
        "{} deliveries failed, first: {}",
        failed.len(),
        failed[0]
    );
    assert!(
        produced_after_restart < RECORDS,
        "the restart finished before production did, so it happened mid-stream"
    );

    let seen = Arc::new(Mutex::new((vec![0_u8; RECORDS as usize], 0_u64, 0_u64)));
    let sink = Arc::clone(&seen);
    let a = assignment.clone();
    let read = common::producer::consume_all(
        &bootstrap,
        &topic,
        PARTITIONS,
        RECORDS as usize,
        Duration::from_secs(120),
        move |m| {
            let mut s = sink.lock().unwrap();
            let seq = u64::from_le_bytes(m.payload().unwrap().try_into().unwrap());
            s.0[seq as usize] += 1;
            if s.0[seq as usize] > 1 {
                s.1 += 1;
            }
            let placed_by_assignment = m.headers().and_then(epoch_of) == Some(1)
                && a.partition_for(m.key().unwrap()) as i32 == m.partition();
            if !placed_by_assignment {
                s.2 += 1;
            }
        },
    )
    .await;
    {
        let s = seen.lock().unwrap();
        assert_eq!(s.0.iter().filter(|&&n| n == 0).count(), 0, "records lost");
        assert_eq!(s.1, 0, "records duplicated");
        assert_eq!(read as u64, RECORDS);
        assert_eq!(s.2, 0, "records not placed by epoch 1");
    }

    // The control-topic reader survived the restart: a new epoch still reaches the producer.
    let next = rotating_assignment(&topic, PARTITIONS, 2);
    publish_assignment(
        &raw_publisher(&bootstrap),
        &control,
        &next,
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    wait_for_epoch(producer.router(), &topic, 2).await;
}
