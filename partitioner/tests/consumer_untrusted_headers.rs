//! Records whose `dkg-*` headers the ordering protocol cannot trust, written by a plain producer:
//! a `dkg-epoch` no control topic ever published is delivered after the consumer's bounded wait
//! (other records of its partition, of its key too, do not wait for it); records with the
//! design stage's `dkg-barrier` header are plain data to the consumer, delivered like any other;
//! the partition commits past all of them.
#![cfg(feature = "kafka")]
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::producer::{client_config, metric_value};
use common::scenario::Setup;
use dkg_kafka::DkgConsumer;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::FutureRecord;
use rdkafka::{Offset, TopicPartitionList};

const WAIT: Duration = Duration::from_millis(800);

/// A record to write: key, value, headers (name, value).
type Raw<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);

/// Write the records to partition 0 in this order.
async fn write(setup: &Setup, records: &[Raw<'_>]) {
    for (key, value, headers) in records {
        let mut h = OwnedHeaders::new();
        for (name, v) in *headers {
            h = h.insert(Header {
                key: name,
                value: Some(v.as_bytes()),
            });
        }
        let record = FutureRecord::to(&setup.topic)
            .partition(0)
            .key(*key)
            .payload(*value)
            .headers(h);
        setup
            .publisher
            .send(record, Duration::from_secs(10))
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_untrusted_headers() {
    let setup = Setup::new("untrusted").await;
    write(
        &setup,
        &[
            ("bogus", "stamped-999", &[("dkg-epoch", "999")]),
            ("other", "plain", &[]),
            ("bogus", "after-bogus", &[]),
            ("data1", "barrier-header", &[("dkg-barrier", "5")]),
            (
                "data2",
                "barrier-headers-and-key",
                &[
                    ("dkg-barrier", "5"),
                    ("dkg-producer", "0123456789abcdef0123456789abcdef"),
                ],
            ),
        ],
    )
    .await;

    let mut config = client_config(&setup.bootstrap);
    config.set("auto.offset.reset", "earliest");
    let registry = prometheus::Registry::new();
    let mut consumer = DkgConsumer::builder(config)
        .metrics(&registry)
        .topic(&setup.topic)
        .group(&setup.group)
        .control_topic(&setup.control)
        .handoff_topic(&setup.handoff)
        .unknown_epoch_wait(WAIT)
        .build()
        .await
        .unwrap();

    let mut got: Vec<(String, Instant)> = Vec::new();
    while got.len() < 5 {
        let m = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("every record delivered within 30 s")
            .unwrap();
        let value = String::from_utf8(m.payload().unwrap().to_vec()).unwrap();
        got.push((value, Instant::now()));
    }
    let values: Vec<&str> = got.iter().map(|(v, _)| v.as_str()).collect();
    assert_eq!(
        values,
        [
            "plain",
            "after-bogus",
            "barrier-header",
            "barrier-headers-and-key",
            "stamped-999"
        ],
        "nothing waits for the unknown epoch; no record is lost"
    );
    // Written first, delivered last: the unknown epoch was held while the others passed. How long
    // (the bound) is the pure core's test (`a_record_of_an_unknown_epoch_waits_a_bounded_time`);
    // measured here from the application's side it would be the machine's pace.
    eprintln!(
        "the unknown epoch's record came {:?} after the first record (bound {WAIT:?})",
        got[4].1 - got[0].1
    );
    let untrusted = |reason: &str| {
        metric_value(
            &registry,
            "dkg_consumer_untrusted_records_total",
            &[("reason", reason)],
        )
    };
    assert_eq!(untrusted("unknown_epoch"), 1.0);
    consumer.commit().await.unwrap();

    // The group's committed offset of partition 0 is past every record.
    let mut plain = client_config(&setup.bootstrap);
    plain.set("group.id", &setup.group);
    let reader: BaseConsumer = plain.create().unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(&setup.topic, 0);
    let committed = reader
        .committed_offsets(tpl, Duration::from_secs(10))
        .unwrap();
    assert_eq!(
        committed.find_partition(&setup.topic, 0).unwrap().offset(),
        Offset::Offset(5)
    );
    consumer.close().await.unwrap();
}
