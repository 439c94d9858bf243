//! Helpers for the producer-wrapper tests (`tests/producer_*.rs`): assignments to publish (from
//! `dkg-testkit`'s fixtures), a raw control-topic publisher, consuming a topic back, reading metrics.

use std::time::{Duration, Instant};

use dkg_partitioner::kafka::{DkgRouter, publisher_config};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};

#[allow(unused_imports)] // not every test binary uses every helper
pub use dkg_testkit::broker::client_config;
#[allow(unused_imports)]
pub use dkg_testkit::fixtures::{assignment, constant_assignment, now_ms, rotating_assignment};

/// A producer for raw control-topic records (large values allowed, lz4).
pub fn raw_publisher(bootstrap: &str) -> FutureProducer {
    publisher_config(&client_config(bootstrap))
        .create()
        .expect("create the control-topic publisher")
}

/// Publish raw bytes (or a tombstone with `value = None`) under `key` on the control topic.
pub async fn publish_raw(
    producer: &FutureProducer,
    control_topic: &str,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) {
    let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(control_topic);
    record.key = key;
    record.payload = value;
    producer
        .send(record, Duration::from_secs(10))
        .await
        .map_err(|(e, _)| e)
        .expect("control-topic record delivered");
}

/// Poll `cond` every 2 ms until it holds; panic with `what` after `timeout`. Returns the wait.
pub async fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    start.elapsed()
}

/// Wait until `router` has adopted `epoch` for `topic`.
pub async fn wait_for_epoch(router: &DkgRouter, topic: &str, epoch: u64) -> Duration {
    wait_until(
        &format!("epoch {epoch} of {topic} to be adopted"),
        Duration::from_secs(10),
        || router.assignment(topic).is_some_and(|a| a.epoch() == epoch),
    )
    .await
}

/// Read every partition of `topic` from the beginning, calling `f` per record, until `expected`
/// records were seen and every partition reported its end, or `timeout` passes (panics). Runs on
/// a blocking thread; returns the number of records read.
pub async fn consume_all<F>(
    bootstrap: &str,
    topic: &str,
    partitions: u32,
    expected: usize,
    timeout: Duration,
    f: F,
) -> usize
where
    F: FnMut(&BorrowedMessage<'_>) + Send + 'static,
{
    let (bootstrap, topic) = (bootstrap.to_owned(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        consume_all_blocking(&bootstrap, &topic, partitions, expected, timeout, f)
    })
    .await
    .expect("consumer thread")
}

fn consume_all_blocking<F>(
    bootstrap: &str,
    topic: &str,
    partitions: u32,
    expected: usize,
    timeout: Duration,
    mut f: F,
) -> usize
where
    F: FnMut(&BorrowedMessage<'_>),
{
    let consumer: BaseConsumer = client_config(bootstrap)
        .set("group.id", "dkg-test-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("create the test consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p as i32, Offset::Beginning)
            .expect("add partition");
    }
    consumer.assign(&tpl).expect("assign");
    let deadline = Instant::now() + timeout;
    let mut seen = 0;
    let mut at_end = vec![false; partitions as usize];
    loop {
        if seen >= expected && at_end.iter().all(|&e| e) {
            return seen;
        }
        assert!(
            Instant::now() < deadline,
            "consumed {seen} of {expected} records of {topic} within {timeout:?}"
        );
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Ok(m)) => {
                use rdkafka::Message as _;
                at_end[m.partition() as usize] = false;
                f(&m);
                seen += 1;
            }
            Some(Err(KafkaError::PartitionEOF(p))) => at_end[p as usize] = true,
            Some(Err(e)) => eprintln!("test consumer error (retrying): {e}"),
        }
    }
}

/// The value of a metric sample from `registry` with all `labels` matching.
pub fn metric_value(registry: &prometheus::Registry, name: &str, labels: &[(&str, &str)]) -> f64 {
    for family in registry.gather() {
        if family.name() != name {
            continue;
        }
        let is_counter = family.get_field_type() == prometheus::proto::MetricType::COUNTER;
        for m in family.get_metric() {
            let matches = labels.iter().all(|(k, v)| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == *k && l.value() == *v)
            });
            if matches {
                return if is_counter {
                    m.get_counter().get_value()
                } else {
                    m.get_gauge().get_value()
                };
            }
        }
    }
    0.0
}
