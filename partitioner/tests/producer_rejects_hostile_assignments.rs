//! Hostile control-topic values (malformed JSON, unknown version, out-of-range partitions, an older
//! or conflicting epoch, a wrong topic, a key that is no topic name, an oversize value) are rejected and counted
//! by topic and reason while production continues with the last good assignment. A rejected record
//! of a topic this producer does not write counts under `topic="(other)"` (issue 31: one topic's
//! rejects used to show on every producer of the shared control topic, with no topic to tell).
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::producer::{
    ControlledTopic, client_config, constant_assignment, metric_value, publish_raw, wait_for_epoch,
    wait_until,
};
use dkg_kafka::kafka::control::RejectReason;
use dkg_kafka::kafka::epoch_of;
use dkg_kafka::kafka::metrics::OTHER_TOPIC;
use dkg_kafka::{DkgProducer, EpochHeader};
use dkg_kafka_core::MAX_ASSIGNMENT_BYTES;
use rdkafka::Message as _;
use rdkafka::producer::FutureRecord;

const PARTITIONS: u32 = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_rejects_hostile_assignments() {
    let t = ControlledTopic::new("hostile", PARTITIONS).await;
    let other_topic = common::unique_topic("hostile-other");

    let registry = prometheus::Registry::new();
    let producer = t.producer(EpochHeader::All, &registry).await;
    let (bootstrap, topic, control) = (t.bootstrap.clone(), t.topic.clone(), t.control.clone());
    let router = producer.router().clone();

    // The last good assignment: everything on partition 3, epoch 5.
    let good = constant_assignment(&topic, PARTITIONS, 5, 3, &[]);
    t.publish(&good, Duration::from_secs(10)).await;
    wait_for_epoch(&router, &topic, 5).await;

    let good_json = String::from_utf8(good.to_json()).unwrap();
    let unknown_version = good_json.replacen("\"version\":1", "\"version\":99", 1);
    assert_ne!(unknown_version, good_json);
    let out_of_range = good_json.replacen("\"table\":[3,", "\"table\":[17,", 1);
    assert_ne!(out_of_range, good_json);
    let older = constant_assignment(&topic, PARTITIONS, 4, 0, &[]).to_json();
    let conflicting = constant_assignment(&topic, PARTITIONS, 5, 1, &[]).to_json();
    let wrong_topic = constant_assignment(&other_topic, PARTITIONS, 9, 0, &[]).to_json();
    // Bigger than any accepted document; lz4 makes it a small batch on the wire.
    let oversize = vec![b' '; MAX_ASSIGNMENT_BYTES + 1];

    let key = Some(topic.as_bytes());
    // (record key, record value, expected rejection)
    type Hostile<'a> = (Option<&'a [u8]>, &'a [u8], RejectReason);
    let hostile: Vec<Hostile<'_>> = vec![
        (
            key,
            b"{\"format\":\"dkg.assignment\",",
            RejectReason::MalformedJson,
        ),
        (key, b"\xff\xfe not even utf-8", RejectReason::MalformedJson),
        (
            key,
            unknown_version.as_bytes(),
            RejectReason::UnsupportedVersion,
        ),
        (key, out_of_range.as_bytes(), RejectReason::OutOfRange),
        (key, &older, RejectReason::StaleEpoch),
        (key, &conflicting, RejectReason::EpochConflict),
        (key, &wrong_topic, RejectReason::TopicMismatch),
        // (A keyless record never gets this far: the broker refuses it on a compacted topic.)
        (Some(b"\xff\xfe"), &older, RejectReason::BadKey),
        (key, &oversize, RejectReason::Oversize),
    ];
    for (k, v, _) in &hostile {
        publish_raw(&t.publisher, &control, *k, Some(v)).await;
    }
    // Another producer's topic: its bad record counts here under "(other)", not under `topic`.
    publish_raw(
        &t.publisher,
        &control,
        Some(other_topic.as_bytes()),
        Some(b"{\"format\""),
    )
    .await;
    let count = |topic: &str, reason: RejectReason| {
        metric_value(
            &registry,
            "dkg_producer_assignments_rejected_total",
            &[("topic", topic), ("reason", reason.as_str())],
        )
    };
    // The record's topic if it is this producer's, else "(other)" (a key that is no topic name too).
    let label = |k: Option<&[u8]>| {
        if k == key {
            topic.as_str()
        } else {
            OTHER_TOPIC
        }
    };
    wait_until(
        "every hostile record to be rejected",
        Duration::from_secs(20),
        || {
            hostile
                .iter()
                .all(|(k, _, reason)| count(label(*k), *reason) >= 1.0)
                && count(OTHER_TOPIC, RejectReason::MalformedJson) >= 1.0
        },
    )
    .await;
    assert_eq!(count(&topic, RejectReason::MalformedJson), 2.0);
    assert_eq!(count(OTHER_TOPIC, RejectReason::MalformedJson), 1.0);
    for reason in [
        RejectReason::UnsupportedVersion,
        RejectReason::OutOfRange,
        RejectReason::StaleEpoch,
        RejectReason::EpochConflict,
        RejectReason::TopicMismatch,
        RejectReason::Oversize,
    ] {
        assert_eq!(count(&topic, reason), 1.0, "{reason}");
        assert_eq!(count(OTHER_TOPIC, reason), 0.0, "{reason}");
    }
    assert_eq!(count(OTHER_TOPIC, RejectReason::BadKey), 1.0);
    assert_eq!(count(&topic, RejectReason::BadKey), 0.0);
    assert_eq!(count(&topic, RejectReason::Invalid), 0.0);
    // Bounded: the producer's one topic and "(other)", every reason from the start.
    let series: Vec<String> = registry
        .gather()
        .iter()
        .filter(|f| f.name() == "dkg_producer_assignments_rejected_total")
        .flat_map(|f| f.get_metric().iter())
        .filter_map(|m| m.get_label().iter().find(|l| l.name() == "topic"))
        .map(|l| l.value().to_owned())
        .collect();
    assert_eq!(series.len(), 2 * RejectReason::ALL.len(), "{series:?}");
    assert!(!series.contains(&other_topic), "{series:?}");

    // The last good assignment is still in force and production goes on with it.
    assert_eq!(router.assignment(&topic).unwrap().epoch(), 5);
    assert!(
        router.assignment(&other_topic).is_none(),
        "no topic hijacked"
    );
    for i in 0..50 {
        let k = format!("k{i}");
        let delivery = producer
            .send(
                FutureRecord::to(&topic).key(&k).payload("v"),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(e, _)| e)
            .unwrap();
        assert_eq!(delivery.partition, 3);
    }
    let epochs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = std::sync::Arc::clone(&epochs);
    common::producer::consume_all(
        &bootstrap,
        &topic,
        PARTITIONS,
        50,
        Duration::from_secs(30),
        move |m| sink.lock().unwrap().push(m.headers().and_then(epoch_of)),
    )
    .await;
    assert!(epochs.lock().unwrap().iter().all(|e| *e == Some(5)));

    // The reader is alive: a valid newer epoch is still adopted after all that.
    let next = constant_assignment(&topic, PARTITIONS, 6, 1, &[]);
    t.publish(&next, Duration::from_secs(10)).await;
    wait_for_epoch(&router, &topic, 6).await;
    assert_eq!(router.route(&topic, b"x").partition, Some(1));

    // A producer started now reads the same history to the same result.
    let late = DkgProducer::builder(client_config(&bootstrap))
        .control_topic(&control)
        .build()
        .await
        .unwrap();
    assert_eq!(late.router().assignment(&topic).unwrap().epoch(), 6);
    assert!(late.router().assignment(&other_topic).is_none());
}

// The helper the counts above go through fails loudly instead of reading a missing metric as 0, so
// `count(..) == 0.0` cannot pass because a family or label is missing or misspelt.
#[test]
#[should_panic(expected = "no metric family dkg_producer_assignments_rejected_total")]
fn metric_value_fails_on_a_missing_family() {
    metric_value(
        &prometheus::Registry::new(),
        "dkg_producer_assignments_rejected_total",
        &[],
    );
}

#[test]
#[should_panic(expected = "has no label reasons")]
fn metric_value_fails_on_a_misspelt_label() {
    let registry = prometheus::Registry::new();
    let c = prometheus::IntCounterVec::new(prometheus::Opts::new("dkg_x_total", "x"), &["reason"])
        .unwrap();
    registry.register(Box::new(c.clone())).unwrap();
    c.with_label_values(&["a"]).inc_by(0);
    metric_value(&registry, "dkg_x_total", &[("reasons", "a")]);
}
