//! `ControlTopicReader::catch_up` returns as soon as the reader is at the end of the control topic:
//! also when called again with nothing new (librdkafka emits its end-of-partition event only once), and
//! when the log ends in a transaction marker (the sampler publishes transactionally).
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::producer::{client_config, rotating_assignment};
use dkg_kafka::kafka::control::{
    ControlTopicReader, ensure_control_topic, publish_assignment, publisher_config,
};
use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::producer::{FutureProducer, Producer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catch_up_returns_at_the_end_also_after_transaction_markers() {
    let bootstrap = common::bootstrap();
    let config = client_config(&bootstrap);
    let control = common::unique_topic("control-catch-up");
    let admin: AdminClient<DefaultClientContext> = config.create().unwrap();
    ensure_control_topic(&admin, &control, 1).await.unwrap();

    // Two epochs for one topic, published in a transaction: the log ends in a commit marker.
    let mut tx_config = publisher_config(&config);
    tx_config.set("transactional.id", format!("{control}-publisher"));
    let producer: FutureProducer = tx_config.create().unwrap();
    producer.init_transactions(Duration::from_secs(30)).unwrap();
    publish_in_transaction(&producer, &control, 1..=2).await;

    let mut reader = ControlTopicReader::new(&config, &control).unwrap();
    // With read_committed the end is the last stable offset, which can trail commit_transaction's return
    // by a moment (the coordinator writes the markers after answering): catch up until epoch 2 is in.
    let mut offsets = Vec::new();
    catch_up_until_epoch(&mut reader, 2, &mut offsets).await;
    assert_eq!(offsets, vec![0, 1], "both records read, once each");
    assert_eq!(reader.book().get("orders").unwrap().epoch(), 2);

    // Nothing new: the second catch-up must not wait for an end-of-partition event that never comes.
    let started = Instant::now();
    let again = reader
        .catch_up(Duration::from_secs(120), |_| {
            panic!("no new record expected")
        })
        .await
        .unwrap();
    assert_eq!(again, 0);
    // The fault is waiting for the whole timeout: half of it is far beyond any machine's pace.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "second catch-up took {:?}",
        started.elapsed()
    );

    // Something new, again transactional: the third catch-up reads exactly it.
    publish_in_transaction(&producer, &control, 3..=3).await;
    let mut offsets = Vec::new();
    catch_up_until_epoch(&mut reader, 3, &mut offsets).await;
    // Offset 2 is the first transaction's commit marker: the new record is at 3, read once.
    assert_eq!(offsets, vec![3]);
    assert_eq!(reader.book().get("orders").unwrap().epoch(), 3);
}

/// Publish the `epochs` of "orders" (6 partitions) in one transaction of `producer`: the log ends
/// in its commit marker.
async fn publish_in_transaction(
    producer: &FutureProducer,
    control: &str,
    epochs: std::ops::RangeInclusive<u64>,
) {
    producer.begin_transaction().unwrap();
    for epoch in epochs {
        let a = rotating_assignment("orders", 6, epoch);
        publish_assignment(producer, control, &a, Duration::from_secs(10))
            .await
            .unwrap();
    }
    producer
        .commit_transaction(Duration::from_secs(30))
        .unwrap();
}

/// Call `catch_up` until the book holds `epoch` for "orders" (each call must return within its timeout),
/// collecting the offsets read.
async fn catch_up_until_epoch(reader: &mut ControlTopicReader, epoch: u64, offsets: &mut Vec<i64>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while reader.book().get("orders").map(|a| a.epoch()) != Some(epoch) {
        assert!(Instant::now() < deadline, "epoch {epoch} never read");
        reader
            .catch_up(Duration::from_secs(10), |r| offsets.push(r.offset))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A document naming a generation the reader does not know makes the book drop its state and ask
/// for a re-read (spec 6.4): the reader goes back to the beginning, in the catch-up and live, and
/// the book rejects the same document the second time (one re-read per generation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_generation_makes_the_reader_read_again_from_the_beginning() {
    use common::producer::publish_raw;
    use dkg_kafka::kafka::control::{ControlUpdate, RejectReason};
    use dkg_kafka_core::assignment::{GENERATION_KEY, generation_record};

    const G1: &str = "11111111111111111111111111111111";
    const G2: &str = "22222222222222222222222222222222";
    const G3: &str = "33333333333333333333333333333333";
    let bootstrap = common::bootstrap();
    let config = client_config(&bootstrap);
    let control = common::unique_topic("control-reread");
    let admin: AdminClient<DefaultClientContext> = config.create().unwrap();
    ensure_control_topic(&admin, &control, 1).await.unwrap();
    let producer: FutureProducer = publisher_config(&config).create().unwrap();
    let doc = |epoch, g| {
        rotating_assignment("orders", 6, epoch)
            .with_generation(g)
            .unwrap()
            .to_json()
    };
    // Offset 0: a document of generation G2, which no generation record names.
    publish_raw(&producer, &control, Some(b"orders"), Some(&doc(1, G2))).await;

    let reason = |u: &ControlUpdate| match u {
        ControlUpdate::Rejected { reason, .. } => Some(*reason),
        _ => None,
    };
    let mut reader = ControlTopicReader::new(&config, &control).unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while seen.len() < 2 {
        assert!(Instant::now() < deadline, "read {seen:?}");
        reader
            .catch_up(Duration::from_secs(10), |r| {
                seen.push((r.offset, r.update.clone()))
            })
            .await
            .unwrap();
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].0, 0);
    assert!(
        matches!(seen[0].1, ControlUpdate::Reset { reread: true, .. }),
        "{seen:?}"
    );
    assert_eq!(
        (seen[1].0, reason(&seen[1].1)),
        (0, Some(RejectReason::GenerationMismatch))
    );
    assert!(reader.book().is_empty());

    // Live: the generation record G1 and a document of G3; the reader rewinds after the latter.
    let g1 = generation_record(G1).unwrap();
    publish_raw(
        &producer,
        &control,
        Some(GENERATION_KEY.as_bytes()),
        Some(&g1),
    )
    .await;
    publish_raw(&producer, &control, Some(b"orders"), Some(&doc(2, G3))).await;
    let mut live = Vec::new();
    for _ in 0..5 {
        let r = tokio::time::timeout(Duration::from_secs(20), reader.next_record())
            .await
            .unwrap();
        live.push((r.offset, r.update));
    }
    let offsets: Vec<i64> = live.iter().map(|(o, _)| *o).collect();
    assert_eq!(offsets, [1, 2, 0, 1, 2], "{live:?}");
    assert!(
        matches!(live[1].1, ControlUpdate::Reset { reread: true, .. }),
        "{live:?}"
    );
    assert_eq!(reason(&live[2].1), Some(RejectReason::GenerationMismatch));
    assert_eq!(reason(&live[4].1), Some(RejectReason::GenerationMismatch));
    assert_eq!(reader.book().generation(), Some(G1));
}
