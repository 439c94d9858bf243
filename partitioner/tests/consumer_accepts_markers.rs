//! `DkgConsumer` reads offset markers by the wire format alone (spec 9.1-9.3): an ordering
//! producer written here by hand (a `lease2/` lease, records through a plain producer, then its
//! marker on the handoff topic) is awaited like a `DkgProducer`. A moved key's record of the new epoch is held until the producer's marker says where its
//! older records end, and that partition has processed them; hostile markers are counted and
//! release nothing. The data topic holds only the application's records.
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::producer::{client_config, metric_value};
use common::scenario::{PARTITIONS, Setup, epoch_assignment, key};
use dkg_kafka::DkgConsumer;
use dkg_kafka::kafka::handoff::{HandoffKey, Lease, Marker, ProducerId};
use dkg_kafka::kafka::handoff::{HandoffWriter, ensure_handoff_topic};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::FutureRecord;

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// Write `value` for `key` to `partition` with `headers`; its offset.
async fn write(
    setup: &Setup,
    partition: u32,
    key: &str,
    value: &str,
    headers: &[(&str, &str)],
) -> i64 {
    let mut h = OwnedHeaders::new();
    for (name, v) in headers {
        h = h.insert(Header {
            key: name,
            value: Some(v.as_bytes()),
        });
    }
    let record = FutureRecord::to(&setup.topic)
        .partition(partition as i32)
        .key(key)
        .payload(value)
        .headers(h);
    let delivery = setup
        .publisher
        .send(record, Duration::from_secs(10))
        .await
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(delivery.partition, partition as i32);
    delivery.offset
}

/// The next record's value, if one comes within `timeout`.
async fn recv(consumer: &mut DkgConsumer, timeout: Duration) -> Option<String> {
    tokio::time::timeout(timeout, consumer.recv())
        .await
        .ok()
        .map(|m| String::from_utf8(m.unwrap().payload().unwrap().to_vec()).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_accepts_markers() {
    let setup = Setup::new("markers").await;
    let config = client_config(&setup.bootstrap);
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
        config.create().unwrap();
    ensure_handoff_topic(&admin, &setup.handoff, 1)
        .await
        .unwrap();
    let writer = HandoffWriter::new(&config, &setup.handoff).unwrap();

    // The hot key of rank 1 lives on `old` in epoch 1 and on `new` in epoch 2.
    let k = key(1);
    let home = |e: u64| epoch_assignment(&setup.topic, e).partition_for(k.as_bytes());
    let (old, new) = (home(1), home(2));
    assert_ne!(old, new);

    let y = ProducerId::parse("0123456789abcdef0123456789abcdef").unwrap();
    let lease = Lease {
        producer: y.clone(),
        topic: setup.topic.clone(),
        first_epoch: 1,
        lease_ms: 30_000,
        expires_at_ms: now_ms() + 60_000,
        closed_at_epoch: None,
    };
    writer.put_lease(&lease).await.unwrap();
    let old_offset = write(&setup, old, &k, "old", &[]).await;
    setup.publish(2).await;
    let stamps = [("dkg-epoch", "2"), ("dkg-producer", y.as_str())];
    write(&setup, new, &k, "new", &stamps).await;

    let registry = prometheus::Registry::new();
    let mut consumer = setup.consumer("c0", &registry, Arc::default()).await;
    assert_eq!(
        recv(&mut consumer, Duration::from_secs(30))
            .await
            .as_deref(),
        Some("old")
    );
    // The producer's lease is live and it has not said where its epoch-1 records end.
    assert_eq!(
        recv(&mut consumer, Duration::from_millis(1000)).await,
        None,
        "held"
    );

    // Hostile markers: one for another partition count, one whose value names another
    // producer, one with a negative end. None releases anything; each is counted.
    let mut ends = vec![0_i64; PARTITIONS as usize];
    ends[old as usize] = old_offset + 1;
    let short = Marker {
        producer: y.clone(),
        topic: setup.topic.clone(),
        epoch: 2,
        ends: ends[..3].to_vec(),
    };
    writer.put_marker(&short).await.unwrap();
    let marker_key = HandoffKey::Marker {
        topic: setup.topic.clone(),
        producer: y.clone(),
    };
    let other = format!(
        r#"{{"producer":"{}","topic":"{}","epoch":2,"ends":{ends:?}}}"#,
        "f".repeat(32),
        setup.topic
    );
    writer.send(&marker_key, Some(other.as_bytes())).unwrap();
    let negative = format!(
        r#"{{"producer":"{y}","topic":"{}","epoch":2,"ends":[-1{}]}}"#,
        setup.topic,
        ",0".repeat(PARTITIONS as usize - 1)
    );
    writer.send(&marker_key, Some(negative.as_bytes())).unwrap();
    let rejected = |reason: &str| {
        metric_value(
            &registry,
            "dkg_consumer_markers_rejected_total",
            &[("reason", reason)],
        )
    };
    // Until the consumer has read all three (the event: each counted), nothing is released.
    let read_all = Instant::now() + Duration::from_secs(60);
    while rejected("partition_count") + rejected("key_mismatch") + rejected("invalid") < 3.0 {
        assert!(
            Instant::now() < read_all,
            "the three hostile markers were not all read within 60 s"
        );
        assert_eq!(
            recv(&mut consumer, Duration::from_millis(200)).await,
            None,
            "still held"
        );
    }
    assert_eq!(
        recv(&mut consumer, Duration::from_millis(200)).await,
        None,
        "still held"
    );
    assert_eq!(
        (
            rejected("partition_count"),
            rejected("key_mismatch"),
            rejected("invalid")
        ),
        (1.0, 1.0, 1.0)
    );

    // The marker: every epoch-1 record of `y` on `old` is below `old_offset + 1`, and the
    // consumer processed it: the epoch-2 record goes.
    let marker = Marker {
        producer: y.clone(),
        topic: setup.topic.clone(),
        epoch: 2,
        ends,
    };
    writer.put_marker(&marker).await.unwrap();
    assert_eq!(
        recv(&mut consumer, Duration::from_secs(60))
            .await
            .as_deref(),
        Some("new")
    );
    consumer.commit().await.unwrap();
    consumer.close().await.unwrap();
}
