//! Marker mode (`docs/spec.md` 9.2.1) on the broker, exactly: an ordering producer whose
//! application drops every delivery future still learns every record's offset (its own producer
//! context sees the reports), so after each epoch switch its marker says precisely where its
//! older-epoch records end: `ends[p]` = the partition's end offset once those records are in
//! (the producer is the topic's only writer, and sent nothing under the new epoch yet). Nothing
//! but the application's records reaches the data topic.
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::scenario::{PARTITIONS, Setup};
use dkg_partitioner::kafka::OrderingMode;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureRecord, Producer};

/// Every partition's end offset.
fn log_ends(bootstrap: &str, topic: &str) -> Vec<i64> {
    let consumer: BaseConsumer = common::producer::client_config(bootstrap).create().unwrap();
    (0..PARTITIONS as i32)
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .unwrap()
                .1
        })
        .collect()
}

/// The producer's marker of `epoch`, waiting for it up to 30 s.
async fn marker_of(setup: &Setup, producer: &str, epoch: u64) -> Vec<i64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = setup.marker_log().await;
        if let Some(ends) = log
            .get(producer)
            .and_then(|m| m.iter().find(|(e, _)| *e == epoch))
        {
            return ends.1.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no marker of epoch {epoch}: {log:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Send `n` keyed records and drop every future at once.
fn send_and_forget(producer: &dkg_partitioner::kafka::DkgProducer, topic: &str, from: u32, n: u32) {
    for i in from..from + n {
        let key = format!("k{:04}", i % 997);
        let value = format!("v{i}");
        let record = FutureRecord::to(topic).key(&key).payload(&value);
        drop(producer.send_result(record).map_err(|(e, _)| e).unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_marker_mode() {
    let setup = Setup::new("marker-mode").await;
    let producer = setup.producer(Duration::from_secs(5)).await;
    assert_eq!(producer.ordering_mode(), Some(OrderingMode::Markers));
    let id = producer.producer_id().unwrap().as_str().to_owned();

    // Epoch 1 (in effect at build): 6,000 records, futures dropped.
    send_and_forget(&producer, &setup.topic, 0, 6_000);
    producer.flush(Duration::from_secs(30)).unwrap();
    let after_epoch_1 = log_ends(&setup.bootstrap, &setup.topic);
    assert_eq!(after_epoch_1.iter().sum::<i64>(), 6_000);
    setup.publish(2).await;
    assert_eq!(
        marker_of(&setup, &id, 2).await,
        after_epoch_1,
        "the marker of 2 ends exactly above the epoch-1 records"
    );

    // Epoch 2: more records; the marker of 3 ends above them.
    send_and_forget(&producer, &setup.topic, 6_000, 3_000);
    producer.flush(Duration::from_secs(30)).unwrap();
    let after_epoch_2 = log_ends(&setup.bootstrap, &setup.topic);
    setup.publish(3).await;
    assert_eq!(marker_of(&setup, &id, 3).await, after_epoch_2);

    producer.close().await.unwrap();
    let plain = setup.read_plain(9_000).await;
    assert_eq!(plain.payloads.len(), 9_000);
    assert_eq!((plain.other, plain.barriers), (0, 0));
    let (_, leases) = setup.read_markers().await;
    assert!(leases.contains(&id), "a lease2/ lease");
}
