//! The test broker works end to end with plain rdkafka: create a topic, produce one record with the
//! loss-free producer settings, read it back. If this fails, every other broker test is suspect.
#![cfg(feature = "kafka")]

mod common;

use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::Message;
use rdkafka::TopicPartitionList;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};

#[tokio::test]
async fn a_produced_record_is_consumed_back_from_the_real_broker() {
    let bootstrap = common::bootstrap();
    let topic = common::unique_topic("broker-smoke");
    common::create_topic(&bootstrap, &topic, 3, &[("min.insync.replicas", "1")]).await;

    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .create()
        .expect("create producer");
    let record = FutureRecord::to(&topic)
        .key("smoke-key")
        .payload("smoke-value")
        .partition(2)
        .headers(OwnedHeaders::new().insert(Header {
            key: "dkg-test",
            value: Some("1"),
        }));
    let delivery = producer
        .send(record, Duration::from_secs(30))
        .await
        .unwrap_or_else(|(e, _)| panic!("delivery failed: {e}"));
    assert_eq!(delivery.partition, 2, "explicit partition honoured");
    assert_eq!(delivery.offset, 0, "first record of a fresh topic");

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", common::unique_topic("broker-smoke-group"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .expect("create consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 2, rdkafka::Offset::Beginning)
        .expect("add partition");
    consumer.assign(&tpl).expect("assign");

    let consumed = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            match consumer.poll(Duration::from_millis(500)) {
                Some(Ok(m)) => {
                    let header = m
                        .headers()
                        .and_then(|h| h.iter().find(|h| h.key == "dkg-test"))
                        .and_then(|h| h.value.map(<[u8]>::to_vec));
                    return (
                        m.partition(),
                        m.offset(),
                        m.key().map(<[u8]>::to_vec),
                        m.payload().map(<[u8]>::to_vec),
                        header,
                    );
                }
                Some(Err(e)) => panic!("consume error: {e}"),
                None => {}
            }
        }
        panic!("no record consumed within 30 s");
    })
    .await
    .expect("consumer task");

    assert_eq!(consumed.0, 2);
    assert_eq!(consumed.1, delivery.offset);
    assert_eq!(consumed.2.as_deref(), Some(&b"smoke-key"[..]));
    assert_eq!(consumed.3.as_deref(), Some(&b"smoke-value"[..]));
    assert_eq!(consumed.4.as_deref(), Some(&b"1"[..]));
}
