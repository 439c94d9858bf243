//! When a topic's partition count grows, the wrapper stops using the assignment built for the old
//! count and falls back to Kafka's default placement for the new count, until an assignment for the
//! new count is published.
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::producer::{
    client_config, constant_assignment, metric_value, raw_publisher, wait_for_epoch, wait_until,
};
use dkg_core::kafka_partition;
use dkg_partitioner::kafka::control::publish_assignment;
use dkg_partitioner::{DkgProducer, RouteKind};
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
    let bootstrap = common::bootstrap();
    let topic = common::unique_topic("grow");
    let control = common::unique_topic("grow-control");
    common::create_topic(&bootstrap, &topic, 4, &[]).await;

    let registry = prometheus::Registry::new();
    let producer = DkgProducer::builder(client_config(&bootstrap))
        .control_topic(&control)
        .topics([topic.as_str()])
        .metrics(&registry)
        .metadata_refresh_interval(Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    let router = producer.router().clone();
    let publisher = raw_publisher(&bootstrap);
    let keys: Vec<String> = (0..100).map(|i| format!("user-{i}")).collect();
    assert_eq!(router.partition_count(&topic), Some(4));
    let count_changes = || {
        metric_value(
            &registry,
            "dkg_producer_partition_count_changes_total",
            &[("topic", &topic)],
        )
    };
    assert_eq!(count_changes(), 0.0, "the first count known is no change");

    // An assignment for 4 partitions: everything on partition 3.
    let four = constant_assignment(&topic, 4, 1, 3, &[]);
    publish_assignment(&publisher, &control, &four, Duration::from_secs(10))
        .await
        .unwrap();
    wait_for_epoch(&router, &topic, 1).await;
    assert!(
        send_all(&producer, &topic, &keys)
            .await
            .iter()
            .all(|&p| p == 3)
    );

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
    assert_eq!(
        metric_value(
            &registry,
            "dkg_producer_assignment_in_effect",
            &[("topic", &topic)]
        ),
        0.0
    );
    assert!(
        metric_value(
            &registry,
            "dkg_producer_partition_records_total",
            &[("topic", &topic), ("partition", "7")]
        ) > 0.0
    );

    // A matching assignment takes over.
    let eight = constant_assignment(&topic, 8, 2, 7, &[]);
    publish_assignment(&publisher, &control, &eight, Duration::from_secs(10))
        .await
        .unwrap();
    wait_for_epoch(&router, &topic, 2).await;
    assert!(
        send_all(&producer, &topic, &keys)
            .await
            .iter()
            .all(|&p| p == 7)
    );
    assert_eq!(
        metric_value(
            &registry,
            "dkg_producer_assignment_in_effect",
            &[("topic", &topic)]
        ),
        1.0
    );

    // An assignment for more partitions than exist is held back, never used.
    let sixteen = constant_assignment(&topic, 16, 3, 15, &[]);
    publish_assignment(&publisher, &control, &sixteen, Duration::from_secs(10))
        .await
        .unwrap();
    wait_for_epoch(&router, &topic, 3).await;
    let held = send_all(&producer, &topic, &keys).await;
    for (k, p) in keys.iter().zip(&held) {
        assert_eq!(*p as u32, kafka_partition(k.as_bytes(), 8), "{k}");
    }
}
