//! The upgrade path of traceless ordering (`docs/spec.md` 9): on one topic, a producer of the
//! previous release's kind (barrier records in the data topic) and one of this release's
//! (offset markers on the handoff topic), three `DkgConsumer` members, five epoch switches. Every
//! key's records still reach the application in each producer's send order, none lost, moved keys
//! old-partition-first; the data topic holds the barrier producer's barriers and nothing else
//! that the application did not send, and the marker producer wrote its marker of every switch.
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::scenario::{
    End, Log, PARTITIONS, Setup, check, finish_producers, hold_histogram, wait_for_all,
};
use dkg_partitioner::kafka::OrderingMode;
use tokio::sync::watch;

const PER_PRODUCER: u64 = 15_000;
const RATE: f64 = 2_500.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn consumer_mixed_fleet() {
    let setup = Setup::new("mixed").await;
    let log = Arc::new(Log::default());
    let registry = prometheus::Registry::new();
    let (_hooks, members) = setup
        .paced_members(3, &log, &registry, Duration::from_secs(30))
        .await;

    let (stop_tx, stop) = watch::channel(false);
    let modes = [OrderingMode::Barriers, OrderingMode::Markers];
    let (producers, tasks) = setup
        .start_producers_in(&modes, Duration::from_secs(3), PER_PRODUCER, RATE, &stop)
        .await;
    assert_eq!(producers[0].ordering_mode(), Some(OrderingMode::Barriers));
    assert_eq!(producers[1].ordering_mode(), Some(OrderingMode::Markers));
    for epoch in 2..=6 {
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        setup.publish(epoch).await;
    }
    // Every producer adopted the last epoch before it closes (its marker of 6 is checked below).
    for p in &producers {
        common::producer::wait_for_epoch(p.router(), &setup.topic, 6).await;
    }
    let sent = finish_producers(tasks, stop_tx, &producers, 2 * PER_PRODUCER).await;

    wait_for_all(&log, &sent, Duration::from_secs(60)).await;
    for m in members {
        m.stop(End::Close).await;
    }
    let entries = log.entries();
    let report = check(&sent, &entries, &setup.topic, &[0, 1]);
    report.assert_holds(entries.len());
    assert_eq!(report.duplicates, 0, "no crash, no duplicates");
    let (held, _) = hold_histogram(&[&registry], 2.0);
    assert!(held > 0, "moved keys' records were held at some switch");

    // The barrier producer's barriers are the only records the application did not send: one per
    // partition per completed set (at least the last epoch's: its close completes it).
    let plain = setup.read_plain(sent.len() + PARTITIONS as usize).await;
    assert!(
        plain.barriers >= PARTITIONS as usize && plain.barriers % PARTITIONS as usize == 0,
        "{} barrier records",
        plain.barriers
    );
    assert_eq!(
        plain.other, plain.barriers,
        "nothing else without key and value"
    );
    let mut payloads = plain.payloads.clone();
    payloads.sort();
    payloads.dedup();
    assert_eq!(payloads.len(), sent.len(), "each sent record exactly once");
    let (markers, marker_leases) = setup.read_markers().await;
    let barrier_id = producers[0].producer_id().unwrap().as_str().to_owned();
    let marker_id = producers[1].producer_id().unwrap().as_str().to_owned();
    assert_eq!(
        markers.get(&marker_id),
        Some(&6),
        "its marker of the last epoch"
    );
    assert!(marker_leases.contains(&marker_id));
    assert!(!markers.contains_key(&barrier_id) && !marker_leases.contains(&barrier_id));
}
