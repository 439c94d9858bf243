//! When a topic's partition count grows, the wrapper stops using the assignment built for the old
//! count and falls back to Kafka's default placement for the new count, until an assignment for the
//! new count is published.
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::producer::{
    ControlledTopic, client_config, constant_assignment, metric_value, wait_for_epoch, wait_until,
};
use dkg_kafka::{DkgProducer, RouteKind};
use dkg_kafka_core::kafka_partition;
use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions};
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::FutureRecord;

async fn send_all(producer: &DkgProducer, topic: &str, keys: &[String]) -> Vec<i32> {
    let mut out = Vec::new();
    for k in keys {
        let d = producer
            .send(
                FutureRecord::to(topic).key(k).payload("v"),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(e, _)| e)
            .unwrap();
        out.push(d.partition);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_partition_count_change() {
    let t = ControlledTopic::new("grow", 4).await;

    let registry = prometheus::Registry::new();
    let producer = t
        .producer_builder()
        .metrics(&registry)
        .metadata_refresh_interval(Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    let (bootstrap, topic) = (t.bootstrap.clone(), t.topic.clone());
    let router = producer.router().clone();
    // The producer's per-topic metrics, as a dashboard reads them.
    let topic_metric = |name: &str| metric_value(&registry, name, &[("topic", &topic)]);
    let keys: Vec<String> = (0..100).map(|i| format!("user-{i}")).collect();
    // Publish `a`, wait until the producer routes by it, and check every key goes to `partition`.
    let adopt_and_send_all_to = async |a: &dkg_kafka::Assignment, partition: i32| {
        t.publish(a, Duration::from_secs(10)).await;
        wait_for_epoch(&router, &topic, a.epoch()).await;
        assert_eq!(
            send_all(&producer, &topic, &keys).await,
            vec![partition; keys.len()]
        );
    };
    assert_eq!(router.partition_count(&topic), Some(4));
    let count_changes = || topic_metric("dkg_producer_partition_count_changes_total");
    assert_eq!(count_changes(), 0.0, "the first count known is no change");

    // An assignment for 4 partitions: everything on partition 3.
    let four = constant_assignment(&topic, 4, 1, 3, &[]);
    adopt_and_send_all_to(&four, 3).await;

    // Grow to 8 partitions.
    let admin: AdminClient<DefaultClientContext> = client_config(&bootstrap).create().unwrap();
    let results = admin
        .create_partitions(
            [&NewPartitions::new(&topic, 8)],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await
        .unwrap();
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    wait_until(
        "the wrapper to see 8 partitions",
        Duration::from_secs(15),
        || router.partition_count(&topic) == Some(8),
    )
    .await;

    assert_eq!(
        count_changes(),
        1.0,
        "a change moves keys outside the guarantee"
    );
    // The 4-partition assignment is kept but not used: Kafka's placement over 8 partitions.
    assert_eq!(router.assignment(&topic).unwrap().epoch(), 1);
    let fallback = send_all(&producer, &topic, &keys).await;
    for (k, p) in keys.iter().zip(&fallback) {
        assert_eq!(*p as u32, kafka_partition(k.as_bytes(), 8), "{k}");
    }
    assert!(fallback.iter().any(|&p| p >= 4), "new partitions are used");
    let r = router.route(&topic, b"user-1");
    assert_eq!((r.route, r.epoch), (RouteKind::Fallback, None));
    assert_eq!(topic_metric("dkg_producer_assignment_in_effect"), 0.0);
    assert!(
        metric_value(
            &registry,
            "dkg_producer_partition_records_total",
            &[("topic", &topic), ("partition", "7")]
        ) > 0.0
    );

    // A matching assignment takes over.
    let eight = constant_assignment(&topic, 8, 2, 7, &[]);
    adopt_and_send_all_to(&eight, 7).await;
    assert_eq!(topic_metric("dkg_producer_assignment_in_effect"), 1.0);

    // An assignment for more partitions than exist is held back, never used.
    let sixteen = constant_assignment(&topic, 16, 3, 15, &[]);
    t.publish(&sixteen, Duration::from_secs(10)).await;
    wait_for_epoch(&router, &topic, 3).await;
    let held = send_all(&producer, &topic, &keys).await;
    for (k, p) in keys.iter().zip(&held) {
        assert_eq!(*p as u32, kafka_partition(k.as_bytes(), 8), "{k}");
    }
}
