//! A member is killed (dropped without `close`: no final commit, no hooks) right as an epoch
//! switch starts, and a new member joins 1.5 s later: nothing is lost, every key's records still
//! come in each producer's send order (duplicates after the crash allowed: at-least-once), and
//! no old-partition record of a moved key is processed after a new-partition one, even among the
//! records the new owners re-process.
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::scenario::{
    CountingHooks, End, GroupProtocol, Log, Member, Pace, Setup, check, finish_producers,
    wait_for_all, wait_for_group,
};
use tokio::sync::watch;

const PER_PRODUCER: u64 = 20_000;
const RATE: f64 = 2_500.0;
/// The crash comes this long after the publication of epoch 3: old partitions are draining, some
/// moved keys are released and others still held.
const KILL_AFTER_MS: u64 = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn consumer_crash_during_switch() {
    crash_during_switch(GroupProtocol::Classic).await;
}

/// The same under KIP-848 (`group.protocol=consumer`): the broker reassigns the crashed member's
/// partitions and the newcomer's share.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn consumer_crash_during_switch_consumer_protocol() {
    crash_during_switch(GroupProtocol::Consumer).await;
}

async fn crash_during_switch(protocol: GroupProtocol) {
    let _serial = common::scenario::one_at_a_time().await;
    let setup = Setup::with_protocol("crash", protocol).await;
    let log = Arc::new(Log::default());
    let registry = prometheus::Registry::new();
    let hooks: Vec<Arc<CountingHooks>> = (0..4).map(|_| Arc::default()).collect();
    let pace = |i: usize| {
        Some(Pace {
            every: 700 + 300 * i as u64,
            pause: Duration::from_millis(150),
        })
    };
    let mut members: Vec<Option<Member>> = Vec::new();
    for (i, h) in hooks.iter().take(3).enumerate() {
        let c = setup
            .consumer(&format!("c{i}"), &registry, Arc::clone(h))
            .await;
        members.push(Some(Member::spawn_paced(c, i, Arc::clone(&log), pace(i))));
    }
    wait_for_group(&hooks[..3], Duration::from_secs(30)).await;

    let (stop_tx, stop) = watch::channel(false);
    let lease = Duration::from_secs(3);
    let (producers, tasks) = setup
        .start_producers(2, lease, PER_PRODUCER, RATE, &stop)
        .await;
    for epoch in 2..=6 {
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        setup.publish(epoch).await;
        if epoch == 3 {
            // Crash a member while the switch to epoch 3 is under way; a replacement joins later.
            tokio::time::sleep(Duration::from_millis(KILL_AFTER_MS)).await;
            members[1].take().unwrap().stop(End::Kill).await;
            let h = Arc::clone(&hooks[3]);
            let reg = registry.clone();
            let log = Arc::clone(&log);
            let s = &setup;
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            let c = s.consumer("c3", &reg, h).await;
            members.push(Some(Member::spawn_paced(c, 3, log, pace(3))));
        }
    }
    // The newcomer joined (the event), however long the rebalance took on this machine.
    let joined = Instant::now() + Duration::from_secs(60);
    let owned =
        |h: &CountingHooks| h.assigned.load(Ordering::Relaxed) - h.revoked.load(Ordering::Relaxed);
    while owned(&hooks[3]) == 0 {
        assert!(
            Instant::now() < joined,
            "the replacement member was assigned no partition within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sent = finish_producers(tasks, stop_tx, &producers, 2 * PER_PRODUCER).await;

    wait_for_all(&log, &sent, Duration::from_secs(90)).await;
    for m in members.into_iter().flatten() {
        m.stop(End::Close).await;
    }

    let entries = log.entries();
    let report = check(&sent, &entries, &setup.topic, &[0, 1]);
    report.assert_holds(entries.len());
    // The crashed member's partitions went to the others and the newcomer (which owned some,
    // above; whether records were left for it depends on how long its rebalance took).
    let newcomer = entries.iter().filter(|e| e.member == 3).count();
    eprintln!("the replacement member processed {newcomer} records");
}
