//! Markers (`docs/spec.md` 9.2) on the broker, exactly: an ordering producer whose
//! application drops every delivery future still learns every record's offset (its own producer
//! context sees the reports), so after each epoch switch its marker says precisely where its
//! older-epoch records end: `ends[p]` = the partition's end offset once those records are in
//! (the producer is the topic's only writer, and sent nothing under the new epoch yet). Nothing
//! but the application's records reaches the data topic.
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::producer::{consume_all, metric_value, wait_for_epoch, wait_until};
use common::scenario::{KEYS, PARTITIONS, Setup};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{FutureRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;

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

/// Flush `producer` (id `id`), publish `epoch`: the data log's ends then, and where the producer's
/// marker of `epoch` says its records end (they must be the same).
async fn flush_and_switch(
    setup: &Setup,
    producer: &dkg_partitioner::DkgProducer,
    id: &str,
    epoch: u64,
) -> (Vec<i64>, Vec<i64>) {
    producer.flush(Duration::from_secs(30)).unwrap();
    let ends = log_ends(&setup.bootstrap, &setup.topic);
    setup.publish(epoch).await;
    (ends, marker_of(setup, id, epoch).await)
}

/// Send `n` keyed records and drop every future at once.
fn send_and_forget(producer: &dkg_partitioner::DkgProducer, topic: &str, from: u32, n: u32) {
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
    let id = producer.producer_id().unwrap().as_str().to_owned();

    // Epoch 1 (in effect at build): 6,000 records, futures dropped.
    send_and_forget(&producer, &setup.topic, 0, 6_000);
    let (after_epoch_1, marker) = flush_and_switch(&setup, &producer, &id, 2).await;
    assert_eq!(after_epoch_1.iter().sum::<i64>(), 6_000);
    assert_eq!(
        marker, after_epoch_1,
        "the marker of 2 ends exactly above the epoch-1 records"
    );

    // Epoch 2: more records; the marker of 3 ends above them.
    send_and_forget(&producer, &setup.topic, 6_000, 3_000);
    let (after_epoch_2, marker) = flush_and_switch(&setup, &producer, &id, 3).await;
    assert_eq!(marker, after_epoch_2);

    producer.close().await.unwrap();
    let plain = setup.read_plain(9_000).await;
    assert_eq!(plain.payloads.len(), 9_000);
    assert_eq!(plain.other, 0);
    let (_, leases) = setup.read_markers().await;
    assert!(leases.contains(&id), "a lease2/ lease");
}

/// `(name, value)` of every header.
fn header_list<H: Headers>(headers: Option<&H>) -> Vec<(String, Vec<u8>)> {
    headers.map_or_else(Vec::new, |h| {
        h.iter()
            .map(|h| (h.key.to_owned(), h.value.unwrap_or_default().to_vec()))
            .collect()
    })
}

/// A record librdkafka refuses (its queue is full) comes back from an ordering producer as the
/// application passed it: no partition, only the application's headers (not the `dkg-epoch` and
/// `dkg-producer` the wrapper stamped on a moved key). Re-sent, it is routed and counted again,
/// so the next marker ends above it; before the fix it came back placed, and its re-send
/// bypassed the ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_record_comes_back_unrouted_and_its_resend_counts_before_the_marker() {
    let setup = Setup::new("marker-refused").await;
    // A consumer group that settled epoch 1 and never settles 2: the stamp window of 2 stays
    // open (its bound, 60 s, is beyond this test), so the moved key is stamped throughout.
    setup.announce_group("stuck", 1).await;
    // One record fills the queue; a long linger keeps it there.
    let producer = setup
        .producer_with(
            Duration::from_secs(5),
            // The linger outlasts any stall of the test between the first send and the third.
            &[
                ("queue.buffering.max.messages", "1"),
                ("linger.ms", "10000"),
            ],
        )
        .await;
    let id = producer.producer_id().unwrap().as_str().to_owned();
    // A key epoch 2 moves: the wrapper stamps it.
    setup.publish(2).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while producer
        .router()
        .assignment(&setup.topic)
        .map(|a| a.epoch())
        != Some(2)
    {
        assert!(Instant::now() < deadline, "epoch 2 not adopted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let moved = (0..KEYS)
        .map(common::scenario::key)
        .find(|k| producer.router().route(&setup.topic, k.as_bytes()).moved)
        .expect("epoch 2 moves some key");
    let app_headers = || {
        OwnedHeaders::new().insert(Header {
            key: "app",
            value: Some("1"),
        })
    };
    let first = FutureRecord::to(&setup.topic)
        .key("first")
        .payload("v")
        .headers(app_headers());
    let first = producer.send_result(first).map_err(|(e, _)| e).unwrap();

    let refused = FutureRecord::to(&setup.topic)
        .key(&moved)
        .payload("w")
        .headers(app_headers());
    let (error, back) = producer
        .send_result(refused)
        .expect_err("the queue is full");
    assert_eq!(
        error,
        KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)
    );
    assert_eq!(back.partition, None, "comes back unrouted");
    assert_eq!(
        header_list(back.headers.as_ref()),
        vec![("app".to_owned(), b"1".to_vec())],
        "only the application's headers"
    );

    // `send` gives up on the full queue after its timeout the same way.
    let third = FutureRecord::to(&setup.topic)
        .key(&moved)
        .payload("x")
        .headers(app_headers());
    let (error, owned) = producer
        .send(third, Duration::from_millis(300))
        .await
        .expect_err("the queue stays full for the linger");
    assert_eq!(
        error,
        KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)
    );
    assert_eq!(owned.partition(), -1);
    assert_eq!(
        header_list(owned.headers()),
        vec![("app".to_owned(), b"1".to_vec())]
    );

    first.await.unwrap().unwrap();
    // The re-send is routed again: placed and stamped, and counted under epoch 2.
    let resent = producer.send(back, Duration::from_secs(10)).await.unwrap();
    let placed = producer.router().route(&setup.topic, moved.as_bytes());
    assert_eq!(Some(resent.partition), placed.partition);
    let (ends, marker) = flush_and_switch(&setup, &producer, &id, 3).await;
    assert_eq!(ends.iter().sum::<i64>(), 2);
    assert_eq!(
        marker, ends,
        "the marker of 3 ends above the re-sent record"
    );
    producer.close().await.unwrap();
}

/// The lease stays alive while the ordering task waits for acknowledgements: renewal runs on a
/// task of its own. Here the only epoch-1 record lingers 12 s in librdkafka's queue after epoch 2
/// is published, so the marker of 2 waits that long; the lease is renewed meanwhile (before the
/// fix renewal shared the waiting task's loop, and the lease expired). Checked from the lease's
/// own writes on the handoff topic, between the publication and the record's delivery: renewals
/// happened, and the lease never lapsed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_are_renewed_while_a_marker_waits_for_acknowledgements() {
    let setup = Setup::new("marker-renewal").await;
    let lease_ms = 3_000_u64;
    let producer = setup
        .producer_with(Duration::from_millis(lease_ms), &[("linger.ms", "12000")])
        .await;
    let id = producer.producer_id().unwrap().as_str().to_owned();
    let wall_ms = || {
        u64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis(),
        )
        .unwrap()
    };
    let sent_at = Instant::now();
    let pending = producer
        .send_result(FutureRecord::to(&setup.topic).key("k").payload("v"))
        .map_err(|(e, _)| e)
        .unwrap();
    let published_ms = wall_ms();
    setup.publish(2).await;
    let delivery = pending.await.unwrap().unwrap();
    let delivered_ms = wall_ms();
    assert!(
        sent_at.elapsed() >= Duration::from_secs(11),
        "the record lingered, so the marker of 2 waited for it"
    );
    let ends = marker_of(&setup, &id, 2).await;
    assert_eq!(ends[delivery.partition as usize], delivery.offset + 1);

    // Each lease write: (written at = expiry - duration, expiry), in log order.
    let lease_key = format!("lease2/{}/{id}", setup.topic);
    let writes: Vec<(u64, u64)> = setup
        .handoff_log()
        .await
        .into_iter()
        .filter(|(k, _)| *k == lease_key)
        .filter_map(|(_, v)| v)
        .map(|v| {
            let e = serde_json::from_slice::<serde_json::Value>(&v).unwrap()["expires_at_ms"]
                .as_u64()
                .unwrap();
            (e.saturating_sub(lease_ms), e)
        })
        .collect();
    let during = writes
        .iter()
        .filter(|(at, _)| (published_ms..=delivered_ms).contains(at))
        .count();
    assert!(
        during >= 2,
        "renewals while the marker waited {} ms for the record: {during} (writes {writes:?})",
        delivered_ms - published_ms
    );
    // No lapse: from the publication to the delivery, each write came before the previous one's
    // expiry.
    for pair in writes.windows(2) {
        let ((_, expiry), (next_at, _)) = (pair[0], pair[1]);
        if expiry >= published_ms && next_at <= delivered_ms {
            assert!(
                next_at <= expiry,
                "the lease lapsed for {} ms while the marker waited (writes {writes:?})",
                next_at - expiry
            );
        }
    }
    producer.close().await.unwrap();
}

/// A record as a plain consumer reads it: `(key, headers)`.
type Read = (String, Vec<(String, Vec<u8>)>);

/// Records of `key` carrying `dkg-epoch`, and not, among what a plain consumer reads.
fn stamped_and_not(records: &[Read], key: &str) -> (usize, usize) {
    let of_key = records.iter().filter(|(k, _)| k == key);
    let stamped = of_key
        .clone()
        .filter(|(_, h)| h.iter().any(|(name, _)| name == "dkg-epoch"))
        .count();
    (stamped, of_key.count() - stamped)
}

/// Every record of the data topic: `(key, headers)`.
async fn read_keys_and_headers(setup: &Setup, expected: usize) -> Vec<Read> {
    let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = std::sync::Arc::clone(&out);
    consume_all(
        &setup.bootstrap,
        &setup.topic,
        PARTITIONS,
        expected,
        Duration::from_secs(60),
        move |m| {
            let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
            sink.lock().unwrap().push((key, header_list(m.headers())));
        },
    )
    .await;
    std::sync::Arc::try_unwrap(out)
        .unwrap()
        .into_inner()
        .unwrap()
}

/// An ordering producer of `setup` (5 s lease) whose stamp windows close at `window` at the latest,
/// its metrics in `registry`.
async fn stamping_producer(
    setup: &Setup,
    window: Duration,
    registry: &prometheus::Registry,
) -> dkg_partitioner::DkgProducer {
    setup
        .producer_builder(Duration::from_secs(5), &[])
        .stamp_window(window)
        .metrics(registry)
        .build()
        .await
        .unwrap()
}

/// Stamp windows (`docs/spec.md` 9.2.2) on the broker: after an epoch switch an ordering producer
/// stamps the keys it moved only until every consumer group that follows the topic has settled
/// the switch (read from the groups' progress on the handoff topic), or for its window bound;
/// then its records carry no header at all. Before this rule a moved key stayed stamped for as
/// long as its epoch was current (the header tax, `BENCHMARKS.md`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moved_keys_are_stamped_only_until_the_groups_settle_the_switch() {
    let setup = Setup::new("stamp-window").await;
    // A group that kept up with epoch 1.
    setup.announce_group("live", 1).await;
    let registry = prometheus::Registry::new();
    // Longer than any step below waits: only a settled group closes this producer's windows.
    let producer = stamping_producer(&setup, Duration::from_secs(120), &registry).await;
    let topic = setup.topic.clone();
    // 0 until the first window of that reason closed (the series appears then).
    let closed_in = |registry: &prometheus::Registry, reason: &str| {
        let has = registry.gather().iter().any(|f| {
            f.name() == "dkg_producer_stamp_windows_closed_total"
                && f.get_metric()
                    .iter()
                    .any(|m| m.get_label().iter().any(|l| l.value() == reason))
        });
        if has {
            metric_value(
                registry,
                "dkg_producer_stamp_windows_closed_total",
                &[("topic", &topic), ("reason", reason)],
            )
        } else {
            0.0
        }
    };
    let closed = |reason: &str| closed_in(&registry, reason);
    // The window of epoch 1 (in effect at build, every key counts as moved inside it) closes:
    // "live" settled 1.
    wait_until(
        "the window of epoch 1 closed",
        Duration::from_secs(30),
        || closed("settled") >= 1.0,
    )
    .await;
    let k = common::scenario::key(1);
    assert!(!producer.router().route(&topic, k.as_bytes()).moved);
    // A group left behind long ago (settled 0: it did not keep up with epoch 1, so it is not
    // followed for the window of 2).
    setup.announce_group("gone", 0).await;

    setup.publish(2).await;
    wait_for_epoch(producer.router(), &topic, 2).await;
    let moved = (0..KEYS)
        .map(common::scenario::key)
        .find(|k| producer.router().route(&topic, k.as_bytes()).moved)
        .expect("epoch 2 moves some key");
    let send = |n: usize| {
        for _ in 0..n {
            let record = FutureRecord::to(&topic).key(&moved).payload("v");
            drop(producer.send_result(record).map_err(|(e, _)| e).unwrap());
        }
    };
    // Inside the window: stamped. The marker of 2 is written, but "live" has not settled 2.
    send(50);
    producer.flush(Duration::from_secs(30)).unwrap();
    let id = producer.producer_id().unwrap().as_str().to_owned();
    marker_of(&setup, &id, 2).await;
    // Time for a wrong close to show (the bound, 120 s, is far off: this cannot pass by luck).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        producer.router().route(&topic, moved.as_bytes()).moved,
        "the window stays open while a followed group has not settled the switch"
    );
    // "live" settles 2: the window closes, the key's next records carry nothing.
    setup.announce_group("live", 2).await;
    wait_until(
        "the window of epoch 2 closed",
        Duration::from_secs(30),
        || !producer.router().route(&topic, moved.as_bytes()).moved,
    )
    .await;
    assert_eq!(closed("settled"), 2.0);
    send(30);
    producer.flush(Duration::from_secs(30)).unwrap();

    // Epoch 3, and "live" never settles it: a producer with a short bound (2 s) closes its window
    // at the bound. (It starts with epoch 2 in effect, whose window "live" settled already.)
    let short_registry = prometheus::Registry::new();
    let short = stamping_producer(&setup, Duration::from_secs(2), &short_registry).await;
    wait_until(
        "the short-bound producer's window of epoch 2 closed",
        Duration::from_secs(60),
        || closed_in(&short_registry, "settled") >= 1.0,
    )
    .await;
    setup.publish(3).await;
    wait_for_epoch(short.router(), &topic, 3).await;
    wait_until(
        "the window of epoch 3 timed out",
        Duration::from_secs(60),
        || closed_in(&short_registry, "timed_out") >= 1.0,
    )
    .await;
    assert_eq!(closed_in(&short_registry, "timed_out"), 1.0);
    assert_eq!(closed("timed_out"), 0.0, "the long bound did not run out");
    short.close().await.unwrap();
    producer.close().await.unwrap();

    let records = read_keys_and_headers(&setup, 80).await;
    assert_eq!(records.len(), 80);
    let (stamped, bare) = stamped_and_not(&records, &moved);
    assert_eq!((stamped, bare), (50, 30), "50 inside the window, 30 after");
    assert!(
        records
            .iter()
            .filter(|(k, _)| *k == moved)
            .skip(50)
            .all(|(_, h)| h.is_empty()),
        "after the window: no header at all"
    );
}
