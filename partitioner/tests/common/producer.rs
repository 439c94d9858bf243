//! Helpers for the producer-wrapper tests (`tests/producer_*.rs`): assignments to publish (from
//! `dkg-testkit`'s fixtures), a raw control-topic publisher, consuming a topic back, reading metrics.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dkg_partitioner::Assignment;
use dkg_partitioner::DeliveryFuture;
use dkg_partitioner::kafka::control::{publish_assignment, publisher_config};
use dkg_partitioner::kafka::epoch_of;
use dkg_partitioner::{DkgProducer, DkgProducerBuilder, DkgRouter, EpochHeader};
use prometheus::Registry;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::RDKafkaErrorCode;
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

/// A fresh data topic with a control topic of its own and a plain publisher of control records:
/// what every producer-wrapper test starts from.
#[allow(dead_code)] // not every test binary uses every helper
pub struct ControlledTopic {
    pub bootstrap: String,
    pub topic: String,
    pub control: String,
    pub publisher: FutureProducer,
}

#[allow(dead_code)]
impl ControlledTopic {
    /// Create `<prefix>-…` with `partitions` on the test broker; the control topic is created by
    /// the first publication or producer that needs it.
    pub async fn new(prefix: &str, partitions: u32) -> Self {
        let bootstrap = super::bootstrap();
        let topic = super::unique_topic(prefix);
        let control = super::unique_topic(&format!("{prefix}-control"));
        super::create_topic(&bootstrap, &topic, partitions, &[]).await;
        let publisher = raw_publisher(&bootstrap);
        Self {
            bootstrap,
            topic,
            control,
            publisher,
        }
    }

    /// A `DkgProducer` builder for the topic that follows the control topic; the test adds what
    /// it is about (epoch headers, metrics, a context).
    pub fn producer_builder(&self) -> DkgProducerBuilder {
        DkgProducer::builder(client_config(&self.bootstrap))
            .control_topic(&self.control)
            .topics([self.topic.as_str()])
    }

    /// [`ControlledTopic::producer_builder`] built with `header` on its records and its metrics in
    /// `registry`.
    pub async fn producer(&self, header: EpochHeader, registry: &Registry) -> DkgProducer {
        self.producer_builder()
            .epoch_header(header)
            .metrics(registry)
            .build()
            .await
            .expect("build the producer")
    }

    /// Publish `assignment` on the control topic (a sidecar's write, without the sidecar).
    pub async fn publish(&self, assignment: &Assignment, timeout: Duration) {
        publish_assignment(&self.publisher, &self.control, assignment, timeout)
            .await
            .expect("the assignment published");
    }
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
        Duration::from_secs(60),
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

/// The value of a metric sample from `registry` with all `labels` matching. PANICS when `registry`
/// has no family `name`, when a label name is not one of the family's, or when no sample matches:
/// a check that a counter is zero must not pass because the metric is missing or misspelt.
pub fn metric_value(registry: &prometheus::Registry, name: &str, labels: &[(&str, &str)]) -> f64 {
    let families = registry.gather();
    let Some(family) = families.iter().find(|f| f.name() == name) else {
        let names: Vec<&str> = families.iter().map(|f| f.name()).collect();
        panic!("no metric family {name} in the registry (it has {names:?})");
    };
    let is_counter = family.get_field_type() == prometheus::proto::MetricType::COUNTER;
    for (k, _) in labels {
        assert!(
            family
                .get_metric()
                .iter()
                .any(|m| m.get_label().iter().any(|l| l.name() == *k)),
            "metric {name} has no label {k}"
        );
    }
    let sample = family.get_metric().iter().find(|m| {
        labels.iter().all(|(k, v)| {
            m.get_label()
                .iter()
                .any(|l| l.name() == *k && l.value() == *v)
        })
    });
    let Some(m) = sample else {
        panic!("metric {name} has no sample with labels {labels:?}");
    };
    if is_counter {
        m.get_counter().get_value()
    } else {
        m.get_gauge().get_value()
    }
}

/// Records [`send_paced`] sends after the fault is over.
pub const AFTER_FAULT: u64 = 2_000;

/// What [`send_paced`] saw.
#[derive(Debug)]
pub struct SendReport {
    /// Records handed to the producer (payload = the sequence number, little-endian u64).
    pub records: u64,
    /// Deliveries that failed (error texts).
    pub failed: Vec<String>,
    /// The longest time from a send to its delivery report (reports awaited in send order, so a
    /// stall shows on every record behind it).
    pub max_latency: Duration,
    /// Records handed to the producer when the fault closure returned.
    pub sent_when_fault_done: u64,
}

/// Send at least `records` records through `producer` to `topic` at `rate` per second (key
/// `key-<seq % 997>`, payload the sequence number), running `fault` on a blocking thread once
/// `fault_at` records were handed over; sending goes on until `records` were sent and
/// [`AFTER_FAULT`] more after `fault` returned, so production spans the whole fault and goes on
/// after it. Every delivery report is awaited.
pub async fn send_paced<C, R>(
    producer: &DkgProducer<C>,
    topic: &str,
    records: u64,
    rate: f64,
    fault_at: u64,
    fault: impl FnOnce() -> R + Send + 'static,
) -> (SendReport, R)
where
    C: rdkafka::ClientContext + 'static,
    R: Send + 'static,
{
    let sent = Arc::new(AtomicU64::new(0));
    let fault_done = Arc::new(AtomicBool::new(false));
    let done_at = Arc::new(AtomicU64::new(u64::MAX));
    // Bounded: the channel is the in-flight window (and the backpressure).
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(Instant, DeliveryFuture)>(20_000);
    let collector = tokio::spawn(async move {
        let (mut failed, mut max_latency) = (Vec::new(), Duration::ZERO);
        while let Some((at, delivery)) = rx.recv().await {
            match delivery.await {
                Ok(Ok(_)) => {}
                Ok(Err((e, _))) => failed.push(e.to_string()),
                Err(e) => failed.push(format!("canceled: {e:?}")),
            }
            max_latency = max_latency.max(at.elapsed());
        }
        (failed, max_latency)
    });
    let mut fault_task = None;
    let mut fault = Some(fault);
    let start = Instant::now();
    let mut seq = 0_u64;
    while seq < records
        || !fault_done.load(Ordering::SeqCst)
        || seq < done_at.load(Ordering::SeqCst).saturating_add(AFTER_FAULT)
    {
        if seq == fault_at
            && let Some(f) = fault.take()
        {
            let (sent, done, at) = (
                Arc::clone(&sent),
                Arc::clone(&fault_done),
                Arc::clone(&done_at),
            );
            fault_task = Some(tokio::task::spawn_blocking(move || {
                let r = f();
                at.store(sent.load(Ordering::SeqCst), Ordering::SeqCst);
                done.store(true, Ordering::SeqCst);
                r
            }));
        }
        let due = Duration::from_secs_f64(seq as f64 / rate);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        let key = format!("key-{}", seq % 997);
        let payload = seq.to_le_bytes();
        let mut record = FutureRecord::to(topic).key(&key).payload(&payload[..]);
        let delivery = loop {
            match producer.send_result(record) {
                Ok(f) => break f,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err((e, _)) => panic!("send {seq} refused: {e}"),
            }
        };
        tx.send((Instant::now(), delivery))
            .await
            .expect("the delivery collector runs");
        seq += 1;
        sent.store(seq, Ordering::SeqCst);
    }
    drop(tx);
    let (failed, max_latency) = collector.await.expect("delivery collector");
    let outcome = fault_task
        .expect("the fault ran (fault_at < records)")
        .await
        .expect("the fault closure");
    let report = SendReport {
        records: seq,
        failed,
        max_latency,
        sent_when_fault_done: done_at.load(Ordering::SeqCst),
    };
    (report, outcome)
}

impl SendReport {
    /// Asserts every delivery succeeded and records were sent after the fault was over (so it
    /// happened mid-stream); `what` names the fault in the messages.
    pub fn assert_spans_fault(&self, what: &str) {
        assert!(
            self.failed.is_empty(),
            "{what}: {} deliveries failed, first: {}",
            self.failed.len(),
            self.failed[0]
        );
        assert!(
            self.records > self.sent_when_fault_done,
            "{what}: records were sent after the fault, so it happened mid-stream"
        );
    }
}

/// Counts of [`read_back`].
#[derive(Debug, PartialEq, Eq)]
pub struct ReadBack {
    pub lost: u64,
    pub duplicated: u64,
    /// Records not carrying `epoch`'s header or not on the partition `assignment` names.
    pub misplaced: u64,
}

impl ReadBack {
    /// Every record once, on its assignment's partition.
    pub const CLEAN: Self = Self {
        lost: 0,
        duplicated: 0,
        misplaced: 0,
    };
}

/// Read `topic` back and count, for the `records` sequence numbers [`send_paced`] sent, the lost,
/// duplicated and misplaced (not placed by `assignment`, whose epoch the header must name) ones.
pub async fn read_back(
    bootstrap: &str,
    topic: &str,
    partitions: u32,
    records: u64,
    assignment: &Assignment,
) -> ReadBack {
    let seen = Arc::new(Mutex::new((vec![0_u8; records as usize], 0_u64, 0_u64)));
    let sink = Arc::clone(&seen);
    let a = assignment.clone();
    let read = consume_all(
        bootstrap,
        topic,
        partitions,
        records as usize,
        Duration::from_secs(120 + records / 10_000),
        move |m| {
            use rdkafka::Message as _;
            let mut s = sink.lock().expect("read-back state");
            let seq = u64::from_le_bytes(
                m.payload()
                    .and_then(|p| p.try_into().ok())
                    .expect("an 8-byte payload"),
            );
            let n = &mut s.0[usize::try_from(seq).expect("seq fits")];
            *n = n.saturating_add(1);
            if *n > 1 {
                s.1 += 1;
            }
            let placed = m.headers().and_then(epoch_of) == Some(a.epoch())
                && m.key()
                    .is_some_and(|k| a.partition_for(k) as i32 == m.partition());
            if !placed {
                s.2 += 1;
            }
        },
    )
    .await;
    let s = seen.lock().expect("read-back state");
    let lost = s.0.iter().filter(|&&n| n == 0).count() as u64;
    assert_eq!(read as u64, records - lost + s.1, "read count adds up");
    ReadBack {
        lost,
        duplicated: s.1,
        misplaced: s.2,
    }
}
