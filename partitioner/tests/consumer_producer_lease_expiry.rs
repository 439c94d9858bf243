//! An ordering producer dies (dropped without `close`) between two epochs: consumers wait for its
//! barrier of the next epoch until its lease expires, then release the moved keys; nothing is
//! lost and the surviving producer's records keep their order and residence.
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::scenario::{
    CountingHooks, End, Log, Member, Setup, check, hold_histogram, spawn_producer, wait_for_all,
    wait_for_group,
};
use tokio::sync::watch;

const PER_PRODUCER: u64 = 20_000;
const RATE: f64 = 2_500.0;
const LEASE: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn consumer_producer_lease_expiry() {
    let setup = Setup::new("lease").await;
    let log = Arc::new(Log::default());
    let registry = prometheus::Registry::new();
    let hooks: Vec<Arc<CountingHooks>> = (0..3).map(|_| Arc::default()).collect();
    let mut members = Vec::new();
    for (i, h) in hooks.iter().enumerate() {
        let c = setup
            .consumer(&format!("c{i}"), &registry, Arc::clone(h))
            .await;
        members.push(Member::spawn(c, i, Arc::clone(&log)));
    }
    wait_for_group(&hooks, Duration::from_secs(30)).await;

    let survivor = setup.producer(LEASE).await;
    let doomed = setup.producer(LEASE).await;
    let (stop_survivor, rx0) = watch::channel(false);
    let (stop_doomed, rx1) = watch::channel(false);
    let t0 = spawn_producer(
        survivor.clone(),
        0,
        setup.topic.clone(),
        PER_PRODUCER,
        RATE,
        rx0,
    );
    let t1 = spawn_producer(
        doomed.clone(),
        1,
        setup.topic.clone(),
        PER_PRODUCER,
        RATE,
        rx1,
    );

    tokio::time::sleep(Duration::from_millis(1_300)).await;
    setup.publish(2).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    // The doomed producer stops sending and dies without closing: its lease is not renewed.
    stop_doomed.send(true).unwrap();
    let mut sent = t1.await.unwrap();
    drop(doomed);
    let died = Instant::now();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Epoch 3: consumers must wait for the dead producer's barrier until its lease expires.
    setup.publish(3).await;
    for epoch in 4..=6 {
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        setup.publish(epoch).await;
    }
    sent.extend(t0.await.unwrap());
    drop(stop_survivor);
    survivor.close().await.unwrap();
    assert!(
        died.elapsed() > LEASE,
        "the scenario outlives the dead producer's lease"
    );

    wait_for_all(&log, &sent, Duration::from_secs(60)).await;
    for m in members {
        m.stop(End::Close).await;
    }

    let entries = log.entries();
    // The dead producer's records: all delivered, but ordering is promised for live producers.
    let report = check(&sent, &entries, &setup.topic, &[0]);
    report.assert_holds(entries.len());
    // Moved keys of epoch 3 waited for the dead producer (a good part of a lease), and were then
    // released: nothing was held anywhere near the end of the run.
    let (held, within_half) = hold_histogram(&[&registry], 0.5);
    let (_, within_5s) = hold_histogram(&[&registry], 5.0);
    eprintln!("held {held}, <= 0.5 s {within_half}, <= 5 s {within_5s}");
    assert!(
        held > within_half,
        "some records waited > 0.5 s for the dead producer's lease"
    );
    assert_eq!(within_5s, held, "released once the lease expired");
}
