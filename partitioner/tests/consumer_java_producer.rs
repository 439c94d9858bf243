//! Java and Rust ordering producers on one topic (`docs/spec.md` 9.2.1): the Java plug-in's
//! `DkgKafkaProducer` (run as `tools/java/OrderingProducer.java`, compiled against the plug-in's
//! sources) and a Rust `DkgProducer` write the scenario's Zipf keys to 12
//! partitions while three `DkgConsumer` members consume and five epoch switches move the hot
//! keys. The assertions of the other ordering tests hold for both producers: nothing lost or
//! duplicated, each producer's records of a key in send order, a moved key's old partitions
//! before its new one. A plain reader of the data topic sees only the application's records (no
//! header but the stamps), and the Java producer wrote its lease and its marker of
//! the last epoch to the handoff topic.
//!
//! Missing java/javac fail the test; it never skips.
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::java::{JavaProducer, Workload};
use common::scenario::{
    End, Log, Setup, check, finish_producers, hold_distribution, hold_histogram, wait_for_all,
};
use tokio::sync::watch;

const PER_PRODUCER: u64 = 15_000;
const RATE: f64 = 2_500.0;
/// The Rust producer's index in the payloads and the check; the Java one's is 1.
const RUST: u32 = 0;
const JAVA: u32 = 1;
/// The last epoch published; the Java producer closes once it has adopted it.
const LAST_EPOCH: u64 = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn java_and_rust_ordering_producers_keep_each_keys_order_across_five_switches() {
    let setup = Setup::new("java-fleet").await;
    let log = Arc::new(Log::default());
    let registry = prometheus::Registry::new();
    let (_hooks, members) = setup
        .paced_members(3, &log, &registry, Duration::from_secs(30))
        .await;

    let lease = Duration::from_secs(3);
    let workload = Workload {
        idx: JAVA,
        count: PER_PRODUCER,
        rate: RATE,
        lease,
        last_epoch: LAST_EPOCH,
    };
    let mut java = tokio::task::block_in_place(|| JavaProducer::start(&setup, workload));
    let (stop_tx, stop) = watch::channel(false);
    let (producers, tasks) = setup
        .start_producers(1, lease, PER_PRODUCER, RATE, &stop)
        .await;
    java.go();
    for epoch in 2..=LAST_EPOCH {
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        setup.publish(epoch).await;
    }
    let mut sent = finish_producers(tasks, stop_tx, &producers, PER_PRODUCER).await;
    let java_id = java.id.clone();
    let java_sent = tokio::task::spawn_blocking(move || java.finish())
        .await
        .unwrap();
    assert_eq!(
        java_sent.len() as u64,
        PER_PRODUCER,
        "every Java send acknowledged"
    );
    sent.extend(java_sent);

    wait_for_all(&log, &sent, Duration::from_secs(60)).await;
    for m in members {
        m.stop(End::Close).await;
    }
    let entries = log.entries();
    let report = check(&sent, &entries, &setup.topic, &[RUST, JAVA]);
    report.assert_holds(entries.len());
    assert_eq!(report.duplicates, 0, "no crash, no duplicates");
    let (held, _) = hold_histogram(&[&registry], 2.0);
    eprintln!("{}", hold_distribution(&[&registry]));
    assert!(held > 0, "moved keys' records were held at some switch");
    // The Java producer followed every switch: its records of the hot keys (moved by every epoch)
    // came from more than one home.
    let mut homes: std::collections::HashMap<&str, std::collections::HashSet<i32>> =
        std::collections::HashMap::new();
    for e in entries.iter().filter(|e| e.producer == JAVA) {
        homes.entry(e.key.as_str()).or_default().insert(e.partition);
    }
    let hot_homes: Vec<(String, Option<&std::collections::HashSet<i32>>)> = (1
        ..=common::scenario::HOT)
        .map(|r| {
            let key = common::scenario::key(r);
            let h = homes.get(key.as_str());
            (key, h)
        })
        .collect();
    assert!(
        hot_homes
            .iter()
            .all(|(_, h)| h.is_some_and(|h| h.len() > 1)),
        "the Java producer's hot keys moved with the epochs: {hot_homes:?}"
    );

    // Nothing in the data topic but what the two applications sent, and no header but stamps.
    let plain = setup.read_plain(sent.len()).await;
    plain.assert_only_application_records(&sent);
    assert!(
        plain.stamped > 0,
        "moved keys' records are stamped inside the windows"
    );
    // The Java producer announced the last switch with a marker and holds a lease.
    let (markers, marker_leases) = setup.read_markers().await;
    assert_eq!(
        markers.get(&java_id),
        Some(&LAST_EPOCH),
        "the Java producer's marker of the last epoch"
    );
    assert!(marker_leases.contains(&java_id), "its lease2/ record");
    let rust_id = producers[0].producer_id().unwrap().as_str().to_owned();
    assert_eq!(markers.get(&rust_id), Some(&LAST_EPOCH));
}
