//! The broker is stopped and started again while `DkgProducer` is producing: every record is
//! delivered exactly once (idempotent producer, acks=all) and still placed by the assignment, the
//! producer saw the outage (librdkafka reported the lost connection), and it keeps following the
//! control topic afterwards.
//!
//! Its own test binary with a single test: it restarts the shared broker, which no other test
//! running at the same moment would survive unharmed (cargo runs test binaries one at a time). It
//! restarts the broker `scripts/kafka` manages, so it refuses to run when `DKG_TEST_BOOTSTRAP`
//! names another one (it would restart one broker and watch another).
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::producer::{
    ControlledTopic, ReadBack, read_back, rotating_assignment, send_paced, wait_for_epoch,
};
use dkg_partitioner::{DkgProducer, EpochHeader};
use dkg_testkit::cluster::FaultWatch;

const RECORDS: u64 = 150_000;
const PARTITIONS: u32 = 4;
/// Paced so production spans the whole restart.
const RATE_PER_SEC: f64 = 10_000.0;
const RESTART_AT: u64 = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_broker_restart() {
    let bootstrap = common::bootstrap();
    let managed = common::kafka_script(&["bootstrap"]);
    assert_eq!(
        bootstrap, managed,
        "DKG_TEST_BOOTSTRAP={bootstrap} is not the broker scripts/kafka restarts ({managed}, from \
         DKG_KAFKA_PORT): set DKG_KAFKA_PORT (and DKG_KAFKA_DATA) to that broker's"
    );
    let status = common::kafka_script(&["status"]);
    assert!(
        status.contains(&managed),
        "scripts/kafka does not run the broker at {managed}: {status}"
    );
    let t = ControlledTopic::new("restart", PARTITIONS).await;
    let topic = &t.topic;

    let watch = FaultWatch::default();
    let producer: DkgProducer<FaultWatch> = t
        .producer_builder()
        .epoch_header(EpochHeader::All)
        .build_with_context(watch.clone())
        .await
        .unwrap();
    let assignment = rotating_assignment(topic, PARTITIONS, 1);
    t.publish(&assignment, Duration::from_secs(10)).await;
    wait_for_epoch(producer.router(), topic, 1).await;
    let errors_before = watch.errors();

    let start = Instant::now();
    let (sent, down_for) = send_paced(&producer, topic, RECORDS, RATE_PER_SEC, RESTART_AT, || {
        common::kafka_script(&["stop"]);
        let down = Instant::now();
        common::kafka_script(&["start"]);
        down.elapsed()
    })
    .await;
    println!(
        "broker stopped after {RESTART_AT} records, back after {down_for:?} with {} sent; {} records \
         in {:?}, longest delivery {:?}, {} client errors: {:?}",
        sent.sent_when_fault_done,
        sent.records,
        start.elapsed(),
        sent.max_latency,
        watch.errors() - errors_before,
        watch.first_errors()
    );
    sent.assert_spans_fault("broker restart");
    // The outage reached the producer: librdkafka reported the lost or refused connection.
    assert!(
        watch.errors() > errors_before,
        "the producer never reported the broker outage"
    );

    let counts = read_back(&bootstrap, topic, PARTITIONS, sent.records, &assignment).await;
    assert_eq!(
        counts,
        ReadBack::CLEAN,
        "every record once, placed by epoch 1"
    );

    // The control-topic reader survived the restart: a new epoch still reaches the producer.
    let next = rotating_assignment(topic, PARTITIONS, 2);
    t.publish(&next, Duration::from_secs(30)).await;
    wait_for_epoch(producer.router(), topic, 2).await;
}
