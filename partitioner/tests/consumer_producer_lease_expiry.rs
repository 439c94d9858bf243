//! An ordering producer dies (dropped without `close`) between two epochs: consumers wait for its
//! marker of the next epoch until its lease expires, then release the moved keys; nothing is
//! lost and the surviving producer's records keep their order and residence.
//!
//! The timing checks are tied to the events they are about, never to the test's own sleeps: the
//! hold is observed (the consumers' `dkg_consumer_held_records` gauge) while the dead producer's
//! lease is live, and its end is compared with the lease's expiry as the producer last wrote it
//! on the handoff topic.
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::scenario::{
    CountingHooks, End, Log, Member, Setup, check, gauge_sum, spawn_producer, wait_for_all,
    wait_for_group,
};
use tokio::sync::watch;

const RATE: f64 = 2_500.0;
/// Long enough that the switch is adopted well inside the dead producer's remaining lease (at
/// least two thirds of it: leases are renewed every third) on a busy machine.
const LEASE: Duration = Duration::from_secs(6);
/// The survivor sends through the whole scenario: two switches, the hold, three more switches.
const PER_PRODUCER: u64 = 36_000;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

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
    let doomed_id = doomed
        .producer_id()
        .expect("an ordering producer")
        .to_string();
    let (stop_survivor, rx0) = watch::channel(false);
    let (stop_doomed, rx1) = watch::channel(false);
    let [t0, t1] = [(&survivor, 0, rx0), (&doomed, 1, rx1)].map(|(producer, idx, stop)| {
        spawn_producer(
            producer.clone(),
            idx,
            setup.topic.clone(),
            PER_PRODUCER,
            RATE,
            stop,
        )
    });

    tokio::time::sleep(Duration::from_millis(1_300)).await;
    setup.publish(2).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    // Epoch 2's switch settled (nothing held) before the next one, so the hold watched below is
    // epoch 3's alone.
    let settle = Instant::now() + Duration::from_secs(30);
    while gauge_sum(&[&registry], "dkg_consumer_held_records") > 0.0 {
        assert!(
            Instant::now() < settle,
            "epoch 2's switch did not settle within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The doomed producer stops sending and dies without closing: its lease is not renewed.
    stop_doomed.send(true).unwrap();
    let mut sent = t1.await.unwrap();
    drop(doomed);
    // Epoch 3 at once: consumers must wait for the dead producer's marker until its lease expires.
    setup.publish(3).await;

    // Watch the hold: when moved keys were first held, and when the last of them was released.
    let deadline = Instant::now() + LEASE + Duration::from_secs(20);
    let (mut first_held_ms, mut released_ms) = (None, None);
    while Instant::now() < deadline {
        let held = gauge_sum(&[&registry], "dkg_consumer_held_records");
        let now = now_ms();
        if held > 0.0 {
            first_held_ms.get_or_insert(now);
        } else if first_held_ms.is_some() {
            released_ms = Some(now);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for epoch in 4..=6 {
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        setup.publish(epoch).await;
    }
    sent.extend(t0.await.unwrap());
    drop(stop_survivor);
    survivor.close().await.unwrap();

    wait_for_all(&log, &sent, Duration::from_secs(60)).await;
    for m in members {
        m.stop(End::Close).await;
    }

    let entries = log.entries();
    // The dead producer's records: all delivered, but ordering is promised for live producers.
    let report = check(&sent, &entries, &setup.topic, &[0]);
    report.assert_holds(entries.len());

    // The lease as the dead producer last renewed it (read now: no renewal can still be in flight).
    let expiry_ms = setup
        .lease_expiry_ms(&doomed_id)
        .await
        .expect("the dead producer's lease on the handoff topic");
    let first_held_ms =
        first_held_ms.expect("moved keys of epoch 3 were held (the held-records gauge rose)");
    let released_ms = released_ms.unwrap_or_else(|| {
        panic!(
            "the held records of epoch 3 were not released by {} ms after the dead producer's \
             lease expired",
            now_ms().saturating_sub(expiry_ms)
        )
    });
    eprintln!(
        "lease expiry at {expiry_ms}: first held {} ms before it, released {} ms after it",
        expiry_ms as i64 - first_held_ms as i64,
        released_ms as i64 - expiry_ms as i64
    );
    assert!(
        first_held_ms < expiry_ms,
        "the consumers adopted epoch 3 only {} ms after the dead producer's lease expired ({} s \
         lease): the scenario never tested the wait",
        first_held_ms - expiry_ms,
        LEASE.as_secs()
    );
    // Released no earlier than the expiry (the gauge is sampled every 20 ms: it can only be seen
    // late), and soon after it: the dead producer is no longer awaited.
    assert!(
        released_ms + 50 >= expiry_ms,
        "moved keys were released {} ms before the dead producer's lease expired",
        expiry_ms - released_ms
    );
    assert!(
        released_ms <= expiry_ms + 10_000,
        "moved keys were released {} ms after the dead producer's lease expired",
        released_ms - expiry_ms
    );
}
